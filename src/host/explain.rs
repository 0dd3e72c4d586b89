//! `sandbox explain`: the resolved policy, the selection and the exact plan
//! of the backend (bwrap argv, Landlock rulesets, seccomp table, Seatbelt
//! profile and parameters), computed by the same functions a run uses and
//! without running anything. The CLI only prints what [`explain`] returns.
//!
//! The plans are computed on this machine (kernel ABI, the
//! `CODEWHALE_LANDLOCK_MAX_ABI` seam, current directory listings); only
//! per-run values are stand-ins: the status and lifeline fds (3 and 4),
//! the per-run temporary directory and the command (`CMD ARGS…`).

use super::{BackendChoice, HostError, HostSettings};
use crate::policy::{resolve, HostFacts, SandboxPolicy};

/// Text or JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// The explanation of `policy` under `settings`, rendered in `format`.
pub fn explain(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    format: Format,
) -> Result<String, HostError> {
    let selection = super::dispatch::selection(policy, settings);
    if settings.backend == BackendChoice::Seatbelt {
        // The Seatbelt planner is pure: its profile can be read on any OS.
        let e = super::seatbelt::explain_policy(policy)?;
        return Ok(match format {
            Format::Json => to_json(&e),
            Format::Text => e.render_text(),
        });
    }
    let resolved = resolve(policy, &HostFacts::detect())?;
    if settings.backend == BackendChoice::Landlock {
        return imp::landlock(policy, &resolved, format);
    }
    imp::bwrap(policy, &resolved, settings, selection, format)
}

fn to_json(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{to_json, Format};
    use crate::host::backends::bwrap::{self, helper, spawn, BwrapOptions};
    use crate::host::backends::landlock::{self, tier, LandlockOptions, LandlockPlan, Tier};
    use crate::host::seccomp::{self, SeccompOptions};
    use crate::host::{HostError, HostSettings, Selection};
    use crate::policy::{ResolvedPolicy, SandboxPolicy};
    use std::fmt::Write as _;
    use std::path::PathBuf;

    /// The stand-in for the per-run directory a run creates.
    fn tmp_stand_in() -> PathBuf {
        std::env::temp_dir().join("codewhale-run-XXXXXX")
    }

    fn plan_text(out: &mut String, plan: &LandlockPlan) {
        let _ = writeln!(
            out,
            "landlock ({:?}): ABI in use {} (kernel {}, target {})",
            plan.tier, plan.abi, plan.kernel_abi, plan.target_abi
        );
        let _ = writeln!(out, "  handled filesystem rights: {}", plan.handled_fs);
        let _ = writeln!(
            out,
            "  handled network rights: {}",
            if plan.handled_net.is_empty() {
                "none (TCP not restricted)".to_string()
            } else {
                format!("{} (no port is allowed)", plan.handled_net)
            }
        );
        let _ = writeln!(out, "  scopes: {}", plan.scopes);
        let _ = writeln!(out, "  rules ({}):", plan.rules.len());
        for r in &plan.rules {
            let _ = writeln!(out, "    {}  {}  {:?}", r.path.display(), r.access, r.why);
        }
        let _ = writeln!(
            out,
            "  deny-read items inside writable roots: strategy {}",
            plan.deny_read_strategy.as_str()
        );
        for m in &plan.masks {
            let _ = writeln!(
                out,
                "    mask: {} (an empty read-only {} mounted over it in the command's own mount namespace{}; held during the run, nothing changes on the host)",
                m.path.display(),
                if m.is_dir { "directory" } else { "file" },
                match plan.mask_via {
                    Some(landlock::mask::MaskVia::UserNs) => ", made in a user namespace with the identity map",
                    _ => "",
                }
            );
        }
        if let Some(t) = &plan.tmpdir {
            let _ = writeln!(out, "  TMPDIR/TMP/TEMP: {} (fresh per run)", t.display());
        }
        for d in &plan.dropped {
            let _ = writeln!(out, "  dropped (kernel lacks it): {d}");
        }
        for p in plan.partial_lines() {
            let _ = writeln!(out, "  partial: {p}");
        }
    }

    fn plan_error(e: impl std::fmt::Display) -> HostError {
        HostError::Unavailable {
            backend: crate::host::BackendKind::Landlock,
            reason: format!("planning the ruleset: {e}"),
            remedy: None,
        }
    }

    pub fn landlock(
        policy: &SandboxPolicy,
        resolved: &ResolvedPolicy,
        format: Format,
    ) -> Result<String, HostError> {
        let plan = landlock::plan(resolved, &tier::options(resolved, Some(tmp_stand_in())))
            .map_err(plan_error)?;
        let seccomp_opts = if resolved.egress.is_some() && !resolved.network {
            SeccompOptions::for_allowlist()
        } else {
            tier::seccomp_options(resolved.network, plan.private_net.is_some())
        };
        let rules = seccomp::rules(&seccomp_opts);
        let available = tier::available();
        if format == Format::Json {
            return Ok(to_json(&serde_json::json!({
                "policy": policy,
                "resolved": resolved,
                "backend": "landlock",
                "available": match &available { Ok(()) => serde_json::Value::Bool(true), Err(e) => serde_json::json!({"unavailable": e}) },
                "landlock": plan,
                "protected_during_run": [],
                "protected_after_run": crate::host::integrity::targets(resolved, &resolved.protected.iter().map(|e| e.path.clone()).collect::<Vec<_>>()).into_iter().map(|t| t.path).collect::<Vec<_>>(),
                "seccomp_options": seccomp_opts,
                "seccomp": rules,
            })));
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "mode: {}   network: {}",
            resolved.mode, resolved.network
        );
        let _ = writeln!(out, "workspace: {}", resolved.workspace.display());
        let _ = writeln!(out, "backend: landlock tier (no namespaces)");
        if let Err(e) = &available {
            let _ = writeln!(out, "UNAVAILABLE here: {e}");
        }
        plan_text(&mut out, &plan);
        let after: Vec<PathBuf> = resolved.protected.iter().map(|e| e.path.clone()).collect();
        protection_text(&mut out, resolved, &[], &after);
        let _ = writeln!(
            out,
            "seccomp (on the hardened launcher thread with no_new_privs and no capabilities, inherited by the stage and the command; Landlock is applied after it, in a new session):"
        );
        for r in &rules {
            let _ = writeln!(out, "  {}", seccomp::describe(r));
        }
        Ok(out)
    }

    /// What holds while the command runs and what only once it ended.
    fn protection_text(
        out: &mut String,
        resolved: &ResolvedPolicy,
        during: &[PathBuf],
        after: &[PathBuf],
    ) {
        let after = crate::host::integrity::targets(resolved, after);
        let _ = writeln!(
            out,
            "write-protection held during the run (read-only mounts):"
        );
        if during.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        for p in during {
            let _ = writeln!(out, "  {}", p.display());
        }
        let _ = writeln!(
            out,
            "write-protection held only after the run (writable while the command runs; \
             the integrity check then moves what it created or changed to {} and puts the \
             previous version back; the run is partial):",
            crate::host::integrity::quarantine_dir().display()
        );
        if after.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        for t in &after {
            let _ = writeln!(out, "  {}", t.path.display());
        }
        let _ = writeln!(
            out,
            "repositories nested in a writable root (submodule and worktree gitdirs under \
             .git, gitlinked repositories) are checked only after the run: a config, \
             commondir, hook or .git pointer written during it that would run code on the \
             host is moved to the quarantine (nothing to put back)"
        );
    }

    fn inside_bwrap_plan(resolved: &ResolvedPolicy) -> Result<LandlockPlan, HostError> {
        let mut opts = LandlockOptions::detect(Tier::InsideBwrap);
        opts.max_abi = tier::max_abi_seam();
        if !resolved.network {
            opts.private_net = Some(landlock::PrivateNet::Bwrap);
        }
        landlock::plan(resolved, &opts).map_err(plan_error)
    }

    pub fn bwrap(
        policy: &SandboxPolicy,
        resolved: &ResolvedPolicy,
        settings: &HostSettings,
        selection: Result<Selection, HostError>,
        format: Format,
    ) -> Result<String, HostError> {
        let seccomp_opts = if resolved.egress.is_some() && !resolved.network {
            SeccompOptions::for_allowlist()
        } else {
            SeccompOptions::for_bwrap(resolved.network)
        };
        // The helper spec exactly as a run builds it (fds assigned at run time).
        let spec = helper::HelperSpec {
            status_fd: 3,
            lifeline_fd: Some(4),
            go_fd: Some(5),
            seccomp: seccomp_opts,
            landlock: Some(helper::InsideBwrapLandlock::new(
                resolved,
                tier::max_abi_seam(),
            )),
            // The socket's directory is created per run; shown as a pattern.
            egress: resolved.egress.as_ref().map(|_| helper::EgressBridge {
                socket: PathBuf::from("$XDG_RUNTIME_DIR/codewhale-egress-XXXXXX/proxy.sock"),
                port: crate::host::egress::BRIDGE_PORT,
            }),
        };
        let bwrap_bin = settings
            .bwrap_path
            .clone()
            .or_else(|| which::which("bwrap").ok())
            .unwrap_or_else(|| PathBuf::from("bwrap"));
        let opts = BwrapOptions {
            bwrap: bwrap_bin,
            cwd: resolved.workspace.clone(),
            helper: Some(spawn::helper_argv(&spec, settings.helper_exe.as_deref())?),
            command: vec!["CMD".into(), "ARGS…".into()],
            egress_dir: None,
        };
        let plan = bwrap::plan(resolved, &opts);
        let rules = seccomp::rules(&seccomp_opts);
        let inside = inside_bwrap_plan(resolved);
        if format == Format::Json {
            return Ok(to_json(&serde_json::json!({
                "policy": policy,
                "resolved": resolved,
                "backend": settings.backend,
                "selection": match &selection { Ok(s) => serde_json::to_value(s).unwrap_or_default(), Err(e) => serde_json::json!({"error": e.to_string()}) },
                "bwrap": match &plan { Ok(p) => serde_json::to_value(p).unwrap_or_default(), Err(e) => serde_json::json!({"error": e.to_string()}) },
                "seccomp": rules,
                "protected_during_run": plan.as_ref().map(|p| p.protected.clone()).unwrap_or_default(),
                "protected_after_run": plan.as_ref().map(|p| p.guarded_after.clone()).unwrap_or_default(),
                "landlock": match &inside { Ok(p) => serde_json::to_value(p).unwrap_or_default(), Err(e) => serde_json::json!({"error": e.to_string()}) },
            })));
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "mode: {}   network: {}",
            resolved.mode, resolved.network
        );
        let _ = writeln!(out, "workspace: {}", resolved.workspace.display());
        match &selection {
            Ok(s) => {
                let _ = writeln!(
                    out,
                    "selection: {} ({}){}",
                    s.backend,
                    s.why,
                    s.fallback
                        .map(|f| format!("; falls back to {f} if its set-up fails"))
                        .unwrap_or_default()
                );
            }
            Err(e) => {
                let _ = writeln!(out, "selection: none: {e}");
            }
        }
        let _ = writeln!(out, "writable roots:");
        for r in &resolved.writable_roots {
            let _ = writeln!(out, "  {}  ({})", r.path.display(), r.reason);
        }
        let _ = writeln!(out, "write-protected:");
        for r in &resolved.protected {
            let _ = writeln!(out, "  {} [{:?}]  ({})", r.path.display(), r.kind, r.reason);
        }
        let _ = writeln!(out, "deny-read:");
        for r in resolved.existing_deny_read() {
            let _ = writeln!(out, "  {}  ({})", r.path.display(), r.reason);
        }
        for n in &resolved.notes {
            let _ = writeln!(out, "note: {n}");
        }
        match &plan {
            Ok(p) => {
                let _ = writeln!(out, "bwrap argv (status fd assigned at run time):");
                let _ = writeln!(out, "  {}", p.display());
                protection_text(&mut out, resolved, &p.protected, &p.guarded_after);
            }
            Err(e) => {
                let _ = writeln!(out, "bwrap: refuses to run: {e}");
            }
        }
        let _ = writeln!(
            out,
            "seccomp (helper stage, after no_new_privs and dropping all capabilities):"
        );
        for r in &rules {
            let _ = writeln!(out, "  {}", seccomp::describe(r));
        }
        let _ = writeln!(
            out,
            "landlock inside bwrap (helper stage, before seccomp; paths as seen inside the namespace):"
        );
        match &inside {
            Ok(p) => plan_text(&mut out, p),
            Err(e) => {
                let _ = writeln!(out, "  not planned: {e}");
            }
        }
        Ok(out)
    }
}

/// Off Linux: the pure bwrap planner and the seccomp table can still be
/// read; the Landlock plans need the kernel's answers and are not shown.
#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{to_json, Format};
    use crate::host::{BackendKind, HostError, HostSettings, Selection};
    use crate::policy::{ResolvedPolicy, SandboxPolicy};
    use std::fmt::Write as _;

    pub fn landlock(
        _policy: &SandboxPolicy,
        _resolved: &ResolvedPolicy,
        _format: Format,
    ) -> Result<String, HostError> {
        Err(HostError::Unavailable {
            backend: BackendKind::Landlock,
            reason: "the landlock tier exists only on Linux".into(),
            remedy: None,
        })
    }

    pub fn bwrap(
        policy: &SandboxPolicy,
        resolved: &ResolvedPolicy,
        settings: &HostSettings,
        selection: Result<Selection, HostError>,
        format: Format,
    ) -> Result<String, HostError> {
        let sel = match &selection {
            Ok(s) => serde_json::to_value(s).unwrap_or_default(),
            Err(e) => serde_json::json!({"error": e.to_string()}),
        };
        if format == Format::Json {
            return Ok(to_json(&serde_json::json!({
                "policy": policy, "resolved": resolved, "backend": settings.backend,
                "selection": sel, "bwrap": null, "note": "bwrap exists only on Linux",
            })));
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "mode: {}   network: {}",
            resolved.mode, resolved.network
        );
        let _ = writeln!(out, "selection: {sel}");
        let _ = writeln!(out, "bwrap: exists only on Linux");
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::policy::SandboxMode;

    #[test]
    fn explain_names_the_selection_and_the_plan_without_running() {
        let d = tempfile::tempdir().unwrap();
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, d.path());
        let text = explain(&policy, &HostSettings::default(), Format::Text).unwrap();
        assert!(text.contains("mode: workspace-write"), "{text}");
        assert!(text.contains("selection:"), "{text}");
        let json = explain(&policy, &HostSettings::default(), Format::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["policy"]["mode"], "workspace-write");
    }
}
