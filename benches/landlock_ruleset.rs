#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Cost of the Landlock layer, measured against baselines in the same process:
//! - planning + preparing the complement ruleset for a home with 200 entries
//!   and a workspace with 1,000 entries, vs. a trivial ruleset (the
//!   inside-bwrap tier: no walk);
//! - applying it: spawning `true` with `restrict_self` in `pre_exec` vs. a
//!   bare spawn of `true`.
//!
//! Prints medians and ratios; asserts nothing about speed.

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("landlock_ruleset: Linux only");
}

#[cfg(target_os = "linux")]
mod linux {
    use codewhale::host::backends::landlock::{plan, prepare, LandlockOptions, Tier};
    use codewhale::policy::{resolve, HostFacts, ResolvedPolicy, SandboxMode, SandboxPolicy};
    use std::fs;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};

    const RUNS: usize = 41;

    fn median(mut v: Vec<Duration>) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    fn time<F: FnMut()>(mut f: F) -> Duration {
        f(); // warm-up
        median(
            (0..RUNS)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed()
                })
                .collect(),
        )
    }

    fn resolved(home: &Path, ws: &Path, mode: SandboxMode) -> ResolvedPolicy {
        let facts = HostFacts {
            homes: vec![home.to_path_buf()],
            cargo_home: None,
            xdg_cache_home: None,
        };
        resolve(&SandboxPolicy::new(mode, ws), &facts).expect("resolve")
    }

    pub fn main() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(t.path()).expect("canonicalize");
        let home = root.join("home");
        let ws = root.join("ws");
        let empty_ws = root.join("empty-ws");
        fs::create_dir_all(&empty_ws).expect("mkdir");
        fs::create_dir_all(home.join(".ssh")).expect("mkdir");
        fs::write(home.join(".ssh/id_rsa"), "decoy").expect("write");
        for i in 0..199 {
            let p = home.join(format!("entry{i:03}"));
            if i % 2 == 0 {
                fs::create_dir(&p).expect("mkdir");
            } else {
                fs::write(&p, "x").expect("write");
            }
        }
        fs::create_dir_all(&ws).expect("mkdir");
        fs::write(ws.join(".env"), "TOKEN=decoy").expect("write");
        for i in 0..999 {
            fs::write(ws.join(format!("f{i:04}.rs")), "x").expect("write");
        }
        let ro = resolved(&home, &empty_ws, SandboxMode::ReadOnly);
        let ww = resolved(&home, &ws, SandboxMode::WorkspaceWrite);
        let nons = LandlockOptions::detect(Tier::NoNamespaces);
        let bwrap = LandlockOptions::detect(Tier::InsideBwrap);

        let trivial = time(|| {
            let p = plan(&ro, &bwrap).expect("plan");
            drop(prepare(&p).expect("prepare"));
        });
        let home_plan = plan(&ro, &nons).expect("plan");
        let home_only = time(|| {
            drop(plan(&ro, &nons).expect("plan"));
        });
        let home_full = time(|| {
            let p = plan(&ro, &nons).expect("plan");
            drop(prepare(&p).expect("prepare"));
        });
        let ws_plan = plan(&ww, &nons).expect("plan");
        let ws_full = time(|| {
            let p = plan(&ww, &nons).expect("plan");
            drop(prepare(&p).expect("prepare"));
        });
        println!("landlock ruleset build (median of {RUNS}):");
        println!(
            "  trivial (inside-bwrap tier, {} rules): {:?}",
            plan(&ro, &bwrap).expect("plan").rules.len(),
            trivial
        );
        println!(
            "  home with 200 entries, plan only ({} rules, {} dirs listed): {:?}  ({:.1}x trivial build)",
            home_plan.rules.len(),
            home_plan.stats.dirs_listed,
            home_only,
            ratio(home_only, trivial)
        );
        println!(
            "  home with 200 entries, plan + prepare: {:?}  ({:.1}x trivial)",
            home_full,
            ratio(home_full, trivial)
        );
        println!(
            "  + workspace with 1,000 entries and a root .env, plan + prepare ({} rules): {:?}  ({:.1}x trivial)",
            ws_plan.rules.len(),
            ws_full,
            ratio(ws_full, trivial)
        );

        let bare = time(|| {
            let s = Command::new("true").status().expect("spawn true");
            assert!(s.success());
        });
        let noop_hook = time(|| {
            let mut cmd = Command::new("true");
            // SAFETY: the hook does nothing.
            unsafe {
                cmd.pre_exec(|| Ok(()));
            }
            assert!(cmd.status().expect("spawn true").success());
        });
        // Rulesets prepared ahead, so only restrict_self is timed with the spawn.
        let mut ready: Vec<_> = (0..RUNS + 1)
            .map(|_| prepare(&ws_plan).expect("prepare"))
            .collect();
        let applied = time(|| {
            let mut prepared = ready.pop();
            let mut cmd = Command::new("true");
            // SAFETY: only prctl + landlock_restrict_self run after fork.
            unsafe {
                cmd.pre_exec(move || match prepared.as_mut() {
                    Some(p) => p.pre_exec_hook(),
                    None => Ok(()),
                });
            }
            assert!(cmd.status().expect("spawn true").success());
        });
        let mut ready_home: Vec<_> = (0..RUNS + 1)
            .map(|_| prepare(&home_plan).expect("prepare"))
            .collect();
        let applied_home = time(|| {
            let mut prepared = ready_home.pop();
            let mut cmd = Command::new("true");
            // SAFETY: only prctl + landlock_restrict_self run after fork.
            unsafe {
                cmd.pre_exec(move || match prepared.as_mut() {
                    Some(p) => p.pre_exec_hook(),
                    None => Ok(()),
                });
            }
            assert!(cmd.status().expect("spawn true").success());
        });
        let trivial_plan = plan(&ro, &bwrap).expect("plan");
        let mut ready_trivial: Vec<_> = (0..RUNS + 1)
            .map(|_| prepare(&trivial_plan).expect("prepare"))
            .collect();
        let applied_trivial = time(|| {
            let mut prepared = ready_trivial.pop();
            let mut cmd = Command::new("true");
            // SAFETY: only prctl + landlock_restrict_self run after fork.
            unsafe {
                cmd.pre_exec(move || match prepared.as_mut() {
                    Some(p) => p.pre_exec_hook(),
                    None => Ok(()),
                });
            }
            assert!(cmd.status().expect("spawn true").success());
        });
        let prep = time(|| drop(prepare(&ws_plan).expect("prepare")));
        println!("applying (median of {RUNS}):");
        println!("  bare spawn of true: {bare:?}");
        println!(
            "  spawn with a no-op pre_exec (fork+exec path): {:?}  ({:.2}x bare)",
            noop_hook,
            ratio(noop_hook, bare)
        );
        println!(
            "  spawn with restrict_self ({} rules, prepared before): {:?}  ({:.2}x bare, {:.2}x no-op pre_exec)",
            ws_plan.rules.len(),
            applied,
            ratio(applied, bare),
            ratio(applied, noop_hook)
        );
        println!(
            "  spawn with restrict_self ({} rules: the home carve, prepared before): {:?}  ({:.2}x bare)",
            home_plan.rules.len(),
            applied_home,
            ratio(applied_home, bare)
        );
        println!(
            "  spawn with restrict_self ({} rules: trivial, prepared before): {:?}  ({:.2}x bare)",
            trivial_plan.rules.len(),
            applied_trivial,
            ratio(applied_trivial, bare)
        );
        println!("  prepare alone ({} rules): {prep:?}", ws_plan.rules.len());
    }

    fn ratio(a: Duration, b: Duration) -> f64 {
        a.as_secs_f64() / b.as_secs_f64().max(1e-9)
    }
}
