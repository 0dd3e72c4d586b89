//! macOS spawn step: `/usr/bin/sandbox-exec -p PROFILE -DK=V … -- CMD`.
//!
//! Thin on purpose: the profile and parameters come from the pure planner
//! ([`crate::host::seatbelt`]), supervision from the host's one Unix
//! supervisor ([`crate::host::process::supervise`]: new session, fd sweep,
//! group kill at exit, timeout and cancel, capped output). This file is compiled
//! only on macOS (`cfg` on its `mod` line) and cannot be exercised on the
//! Linux CI; `ci/macos-escape` is the test a maintainer with a Mac runs.
//!
//! What this step adds to the plan:
//! - a fresh private temp dir per run (`TMP` parameter, `TMPDIR` for the
//!   command), removed afterwards; `/tmp` itself stays read-only;
//! - the scrubbed environment the dispatcher built ([`ChildEnv`]), never
//!   this process's secrets;
//! - under `network = "allowlist"`, codewhale's egress proxy on a free
//!   127.0.0.1 port for the run (the profile allows `localhost:<port>`
//!   only; the proxy variables point there), stopped when the run ends;
//! - Seatbelt's own failures (`sandbox-exec: …` first stderr line) become
//!   typed errors instead of a command exit code.

use crate::host::child_env::ChildEnv;
use crate::host::egress::{self, EgressRun};
use crate::host::enforcement::{policy_items, NetworkEnforcer, PartialItem, Shortfall};
use crate::host::process::supervise;
use crate::host::seatbelt::{self, DarwinHost, SeatbeltProfile, SeatbeltSignal, SANDBOX_EXEC};
use crate::host::{
    BackendKind, Enforcement, EnforcementLevel, ExecOutcome, ExecRequest, HostError,
};
use crate::policy::ResolvedPolicy;
use std::path::Path;

/// Run `req` under a Seatbelt profile planned from `policy`.
pub fn run(
    resolved: &ResolvedPolicy,
    req: &ExecRequest,
    mut env: ChildEnv,
) -> Result<ExecOutcome, HostError> {
    if !Path::new(SANDBOX_EXEC).is_file() {
        return Err(HostError::Unavailable {
            backend: crate::host::BackendKind::Seatbelt,
            reason: format!("{SANDBOX_EXEC} is missing"),
            remedy: Some("sandbox-exec ships with macOS; check the system installation".into()),
        });
    }
    if req.argv.is_empty() {
        return Err(HostError::NotFound("(empty command line)".into()));
    }
    let tmp = tempfile::Builder::new()
        .prefix("codewhale-run-")
        .tempdir()
        .map_err(|e| HostError::io("creating the private temp dir", e))?;
    let tmp_path = std::fs::canonicalize(tmp.path())
        .map_err(|e| HostError::io("resolving the private temp dir", e))?;
    // network = "allowlist": the proxy on a free 127.0.0.1 port; the
    // profile then allows connecting to `localhost:<port>` and nothing else.
    let egress = match &resolved.egress {
        Some(spec) if !resolved.network => {
            Some(EgressRun::start_loopback(spec, BackendKind::Seatbelt)?)
        }
        _ => None,
    };
    let mut host = DarwinHost::detect();
    host.private_tmp = resolved.private_tmp.then(|| tmp_path.clone());
    host.egress_port = egress.as_ref().and_then(EgressRun::tcp_port);
    let plan = seatbelt::profile_with(resolved, &host)?;

    if resolved.private_tmp {
        env.insert("TMPDIR", tmp_path.to_string_lossy().into_owned());
    }
    if let Some(port) = host.egress_port {
        env.extend(crate::net::proxy_env(port));
        env.extend(egress::ssh_env(None));
    }
    let mut cmd = std::process::Command::new(SANDBOX_EXEC);
    cmd.args(plan.sandbox_exec_args(&req.argv));
    cmd.env_clear().envs(env.vars());
    cmd.current_dir(
        req.cwd
            .clone()
            .unwrap_or_else(|| resolved.workspace.clone()),
    );
    let mut enforcement = enforcement(resolved, &plan, env.removed().to_vec());
    let sup = supervise::run(cmd, Vec::new(), req);
    if let Some(e) = egress {
        // Stopped whatever the run's fate, so no proxy outlives it.
        let report = e.finish();
        enforcement
            .network_enforced_by
            .push(NetworkEnforcer::EgressProxy);
        enforcement.partial.extend(egress::partial_lines(&report));
        enforcement.egress = Some(report);
    }
    let sup = sup?;
    let outcome = sup.into_outcome(enforcement);
    match seatbelt::classify(&outcome.stderr.text(), None) {
        Some(SeatbeltSignal::SetupFailed { message }) => Err(HostError::Unavailable {
            backend: crate::host::BackendKind::Seatbelt,
            reason: format!("sandbox-exec could not apply the profile: {message}"),
            remedy: Some(
                "run `codewhale sandbox explain --backend seatbelt` and report the profile; nested sandboxes are not supported".into(),
            ),
        }),
        Some(SeatbeltSignal::ExecFailed { program, reason }) => {
            if reason.contains("No such file") {
                Err(HostError::NotFound(program))
            } else {
                Err(HostError::NotExecutable {
                    path: program.into(),
                    reason,
                })
            }
        }
        _ => Ok(outcome),
    }
}

/// The report for a Seatbelt run: what the profile enforces and what it
/// does not.
fn enforcement(
    resolved: &ResolvedPolicy,
    plan: &SeatbeltProfile,
    env_removed: Vec<String>,
) -> Enforcement {
    let mut partial: Vec<PartialItem> = plan
        .notes
        .iter()
        .map(|n| PartialItem::new(Shortfall::SeatbeltProfile, n.clone()))
        .collect();
    partial.extend(policy_items(&resolved.notes));
    partial.extend(
        resolved
            .unmasked
            .iter()
            .map(|n| PartialItem::new(Shortfall::DenyRead, n.clone())),
    );
    partial.extend(
        resolved
            .git
            .unapplied("Seatbelt cannot lay a file over a path")
            .into_iter()
            .map(|n| PartialItem::new(Shortfall::DenyRead, n)),
    );
    partial.push(PartialItem::new(
        Shortfall::Supervision,
        "no parent-death signal on macOS: if codewhale is killed, the command (and a descendant that called setsid itself) can outlive the run",
    ));
    Enforcement {
        level: EnforcementLevel::Partial,
        network_allowed: resolved.network,
        network_enforced_by: if resolved.network {
            Vec::new()
        } else {
            vec![NetworkEnforcer::Seatbelt]
        },
        masked_paths: resolved.deny_read.iter().map(|e| e.path.clone()).collect(),
        protected_paths: resolved.protected.iter().map(|e| e.path.clone()).collect(),
        env_removed,
        partial,
        ..Enforcement::base(BackendKind::Seatbelt, resolved.mode, "sandboxed: seatbelt")
    }
}
