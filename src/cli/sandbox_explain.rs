//! The Landlock parts of `codewhale sandbox explain`: the landlock tier's
//! exact ruleset (`--backend landlock`) and the inside-bwrap ruleset that
//! the helper stage plans (shown for the bwrap tier).
//!
//! The plans are computed exactly as a run computes them, on this machine
//! (kernel ABI, `CODEWHALE_LANDLOCK_MAX_ABI` seam, current directory
//! listings); only the per-run temporary directory is a stand-in name,
//! since a run creates a fresh one.

use crate::policy::{ResolvedPolicy, SandboxPolicy};

#[cfg(target_os = "linux")]
mod imp {
    use crate::host::backends::landlock::tier as landlock_tier;
    use crate::host::backends::landlock::{self, LandlockOptions, LandlockPlan, Tier};
    use crate::host::seccomp;
    use crate::policy::{ResolvedPolicy, SandboxPolicy};

    /// The stand-in for the per-run directory a run creates.
    fn tmp_stand_in() -> std::path::PathBuf {
        std::env::temp_dir().join("codewhale-run-XXXXXX")
    }

    fn print_plan(plan: &LandlockPlan) {
        println!(
            "landlock ({:?}): ABI in use {} (kernel {}, target {})",
            plan.tier, plan.abi, plan.kernel_abi, plan.target_abi
        );
        println!("  handled filesystem rights: {}", plan.handled_fs);
        println!(
            "  handled network rights: {}",
            if plan.handled_net.is_empty() {
                "none (TCP not restricted)".to_string()
            } else {
                format!("{} (no port is allowed)", plan.handled_net)
            }
        );
        println!("  scopes: {}", plan.scopes);
        println!("  rules ({}):", plan.rules.len());
        for r in &plan.rules {
            println!("    {}  {}  {:?}", r.path.display(), r.access, r.why);
        }
        if let Some(t) = &plan.tmpdir {
            println!("  TMPDIR/TMP/TEMP: {} (fresh per run)", t.display());
        }
        for d in &plan.dropped {
            println!("  dropped (kernel lacks it): {d}");
        }
        for p in plan.partial_lines() {
            println!("  partial: {p}");
        }
    }

    pub fn landlock(
        policy: &SandboxPolicy,
        resolved: &ResolvedPolicy,
        json: bool,
    ) -> anyhow::Result<()> {
        let plan = landlock::plan(
            resolved,
            &landlock_tier::options(resolved, Some(tmp_stand_in())),
        )?;
        let seccomp_opts = landlock_tier::seccomp_options(resolved.network);
        let rules = seccomp::rules(&seccomp_opts);
        let available = landlock_tier::available();
        if json {
            let v = serde_json::json!({
                "policy": policy,
                "resolved": resolved,
                "backend": "landlock",
                "available": match &available { Ok(()) => serde_json::Value::Bool(true), Err(e) => serde_json::json!({"unavailable": e}) },
                "landlock": plan,
                "seccomp_options": seccomp_opts,
                "seccomp": rules,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
            return Ok(());
        }
        println!("mode: {}   network: {}", resolved.mode, resolved.network);
        println!("workspace: {}", resolved.workspace.display());
        println!("backend: landlock tier (no namespaces)");
        if let Err(e) = &available {
            println!("UNAVAILABLE here: {e}");
        }
        print_plan(&plan);
        println!(
            "seccomp (on the hardened launcher thread with no_new_privs and no capabilities, inherited by the stage and the command; Landlock is applied after it, in a new session):"
        );
        for r in &rules {
            println!("  {}", seccomp::describe(r));
        }
        Ok(())
    }

    fn inside_bwrap_plan(resolved: &ResolvedPolicy) -> anyhow::Result<LandlockPlan> {
        let mut opts = LandlockOptions::detect(Tier::InsideBwrap);
        opts.max_abi = landlock_tier::max_abi_seam();
        Ok(landlock::plan(resolved, &opts)?)
    }

    pub fn inside_bwrap_json(resolved: &ResolvedPolicy) -> serde_json::Value {
        match inside_bwrap_plan(resolved) {
            Ok(p) => serde_json::to_value(p).unwrap_or_default(),
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        }
    }

    pub fn inside_bwrap_text(resolved: &ResolvedPolicy) {
        println!(
            "landlock inside bwrap (helper stage, before seccomp; paths as seen inside the namespace):"
        );
        match inside_bwrap_plan(resolved) {
            Ok(p) => print_plan(&p),
            Err(e) => println!("  not planned: {e}"),
        }
    }
}

/// The bwrap tier's helper spec as a run builds it (the fd numbers are
/// assigned when a run starts; 3 and 4 are shown).
pub fn helper_spec_json(
    resolved: &ResolvedPolicy,
    seccomp: &crate::host::seccomp::SeccompOptions,
) -> String {
    #[cfg(target_os = "linux")]
    {
        use crate::host::backends::bwrap::helper::{HelperSpec, InsideBwrapLandlock};
        let spec = HelperSpec {
            status_fd: 3,
            lifeline_fd: Some(4),
            seccomp: *seccomp,
            landlock: Some(InsideBwrapLandlock::new(
                resolved,
                crate::host::backends::landlock::tier::max_abi_seam(),
            )),
        };
        serde_json::to_string(&spec).unwrap_or_default()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = resolved;
        serde_json::json!({ "status_fd": 3, "lifeline_fd": 4, "seccomp": seccomp }).to_string()
    }
}

/// `sandbox explain --backend landlock [--json]`.
pub fn landlock(
    policy: &SandboxPolicy,
    resolved: &ResolvedPolicy,
    json: bool,
) -> anyhow::Result<()> {
    #[cfg(target_os = "linux")]
    {
        imp::landlock(policy, resolved, json)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (policy, resolved, json);
        anyhow::bail!("the landlock tier exists only on Linux")
    }
}

/// The inside-bwrap Landlock plan as JSON (`null` off Linux).
pub fn inside_bwrap_json(resolved: &ResolvedPolicy) -> serde_json::Value {
    #[cfg(target_os = "linux")]
    {
        imp::inside_bwrap_json(resolved)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = resolved;
        serde_json::Value::Null
    }
}

/// The inside-bwrap Landlock plan as text.
pub fn inside_bwrap_text(resolved: &ResolvedPolicy) {
    #[cfg(target_os = "linux")]
    imp::inside_bwrap_text(resolved);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = resolved;
        println!("landlock: Linux only");
    }
}
