//! The Linux half of a doctor run: scratch directory, temporary HOME,
//! backend selection, and the concurrent probes through `host::run`.

use super::report::{Row, SandboxReport, Status};
use super::{probes, select, skipped, unavailable, Options};
use crate::host::{BackendChoice, BackendKind, HostSettings};
use crate::policy::SandboxMode;
use std::ffi::OsString;

/// Restores `HOME` when dropped.
struct HomeGuard(Option<OsString>);

impl HomeGuard {
    fn set(home: &std::path::Path) -> Self {
        let old = std::env::var_os("HOME");
        std::env::set_var("HOME", home);
        HomeGuard(old)
    }
}

impl Drop for HomeGuard {
    fn drop(&mut self) {
        match self.0.take() {
            Some(h) => std::env::set_var("HOME", h),
            None => std::env::remove_var("HOME"),
        }
    }
}

fn choice(kind: BackendKind) -> BackendChoice {
    match kind {
        BackendKind::Bwrap => BackendChoice::Bwrap,
        BackendKind::Landlock => BackendChoice::Landlock,
        BackendKind::Seatbelt => BackendChoice::Seatbelt,
        BackendKind::Opensandbox => BackendChoice::Opensandbox,
        BackendKind::None => BackendChoice::None,
    }
}

pub(super) fn sandbox(
    opts: &Options,
    section: &crate::config::user::SandboxSection,
    mut host: HostSettings,
    mode: SandboxMode,
) -> SandboxReport {
    let scratch = match probes::Scratch::create() {
        Ok(s) => s,
        Err(e) => {
            let why = format!("could not create the probe workspace: {e}");
            let mut p = vec![
                Row::new("probe.wrapper-starts", "probe", Status::Fail, why.clone())
                    .fix("make /var/tmp or $TMPDIR writable"),
            ];
            p.extend(skipped("no probe workspace"));
            return unavailable(mode, "none", why, p);
        }
    };
    let _home = HomeGuard::set(&scratch.home);
    let policy = section.policy(SandboxMode::WorkspaceWrite, &scratch.workspace);
    let sel = select::configured_backend(&policy, &host);
    let Some(kind) = sel.chosen else {
        let mut wrapper = Row::new(
            "probe.wrapper-starts",
            "probe",
            Status::Fail,
            format!("no sandbox backend started: {}", sel.reason),
        );
        wrapper.details = sel.considered.clone();
        wrapper.remediation = sel.remedy.clone();
        let mut p = vec![wrapper];
        p.extend(skipped("no sandbox backend"));
        return unavailable(mode, "none", sel.reason, p);
    };
    let mut wrapper = Row::new(
        "probe.wrapper-starts",
        "probe",
        Status::Ok,
        format!("{kind} started and ran `true` (read-only policy)"),
    );
    wrapper.details = sel.considered.clone();
    host.backend = choice(kind);
    host.allow_unsandboxed = false;
    let exe = match opts
        .exe
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_exe)
    {
        Ok(e) => e,
        Err(e) => {
            let why = format!("cannot locate the codewhale binary: {e}");
            let mut p = vec![wrapper];
            p.extend(skipped(&why));
            return unavailable(mode, kind.as_str(), why, p);
        }
    };
    let cx = probes::ProbeCtx {
        policy: &policy,
        settings: &host,
        scratch: &scratch,
        exe: &exe,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let (rows, outcome) = match runtime {
        Ok(rt) => rt.block_on(probes::run_all(&cx)),
        Err(e) => {
            let why = format!("could not start the async runtime: {e}");
            let mut p = vec![wrapper];
            p.extend(skipped(&why));
            return unavailable(mode, kind.as_str(), why, p);
        }
    };
    let mut probe_rows = vec![wrapper];
    probe_rows.extend(rows);
    let enforcement = outcome.map(|o| o.enforcement);
    SandboxReport {
        available: true,
        kind: enforcement
            .as_ref()
            .map(|e| e.label.clone())
            .unwrap_or_else(|| kind.to_string()),
        backend: kind.to_string(),
        reason: sel.reason,
        level: enforcement
            .as_ref()
            .and_then(|e| serde_json::to_value(e.level).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "none".into()),
        mode: mode.to_string(),
        enforcement,
        probes: probe_rows,
    }
}
