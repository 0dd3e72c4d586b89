//! `codewhale sandbox run -- true` vs the same bwrap argv run directly vs
//! bare `true`, measured in one process, interleaved, medians + ratios.
//!
//! Run: `cargo bench --bench sandbox_spawn` (or `ci/bench`). The target
//! (issue 2) is sandboxed `true` ≤ 1.3× the raw bwrap invocation. The
//! "raw" argv comes from the same planner and policy, minus the helper
//! stage (bwrap runs `true` itself). Speed is reported, never asserted.

#[cfg(target_os = "linux")]
fn main() {
    imp::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("sandbox_spawn: bwrap exists only on Linux");
}

#[cfg(target_os = "linux")]
mod imp {
    use codewhale::host::linux::bwrap::{plan, BwrapOptions};
    use codewhale::host::linux::placeholders;
    use codewhale::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const ITERATIONS: usize = 40;
    const WARMUP: usize = 3;

    fn time(c: &mut Command) -> Duration {
        let t = Instant::now();
        let st = c.status().expect("spawn");
        let d = t.elapsed();
        assert!(st.success(), "{c:?} failed: {st}");
        d
    }

    fn median(mut v: Vec<Duration>) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    pub fn main() {
        let bin = std::env::var("CODEWHALE_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_codewhale").to_string());
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(ws.join(".git/hooks")).expect("ws");
        std::fs::write(ws.join(".git/config"), "").expect("config");
        // Same environment for the planner here and the codewhale child.
        std::env::set_var("HOME", &home);
        std::env::remove_var("CARGO_HOME");
        std::env::remove_var("XDG_CACHE_HOME");

        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let resolved = resolve(&policy, &HostFacts::detect()).expect("resolve");
        let (placeholder_file, placeholder_dir) = placeholders::sources().expect("placeholders");
        let bwrap = which::which("bwrap").expect("bwrap on PATH");
        let opts = BwrapOptions {
            bwrap,
            cwd: resolved.workspace.clone(),
            placeholder_file,
            placeholder_dir,
            helper: None,
            command: vec!["true".into()],
        };
        let raw = plan(&resolved, &opts).expect("plan");
        let cleanup = || {
            for p in &raw.placeholders {
                let top = placeholders::topmost_missing(&p.path);
                let _ = std::fs::remove_file(&top).or_else(|_| std::fs::remove_dir_all(&top));
            }
        };
        let missing: Vec<_> = raw
            .placeholders
            .iter()
            .map(|p| placeholders::topmost_missing(&p.path))
            .collect();

        let mut bare_c = Command::new("true");
        let mut raw_c = Command::new(&raw.argv[0]);
        raw_c.args(&raw.argv[1..]).current_dir(&ws);
        let mut cw_c = Command::new(&bin);
        cw_c.args(["sandbox", "run", "--backend", "bwrap", "-C"])
            .arg(&ws)
            .args(["--", "true"])
            .current_dir(&ws)
            .stdin(Stdio::null());

        let (mut bare, mut rawt, mut cw) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..(WARMUP + ITERATIONS) {
            let b = time(&mut bare_c);
            let r = time(&mut raw_c);
            // Untimed: remove the mount points raw bwrap left (codewhale
            // removes its own inside its timed run).
            for m in &missing {
                let _ = std::fs::remove_file(m).or_else(|_| std::fs::remove_dir_all(m));
            }
            let c = time(&mut cw_c);
            if i >= WARMUP {
                bare.push(b);
                rawt.push(r);
                cw.push(c);
            }
        }
        cleanup();
        let (b, r, c) = (median(bare), median(rawt), median(cw));
        println!(
            "sandbox_spawn ({ITERATIONS} iterations, medians, {} placeholder mounts)",
            raw.placeholders.len()
        );
        println!(
            "  bare true:                     {:>8.2} ms",
            b.as_secs_f64() * 1e3
        );
        println!(
            "  raw bwrap argv, true:          {:>8.2} ms",
            r.as_secs_f64() * 1e3
        );
        println!(
            "  codewhale sandbox run -- true: {:>8.2} ms",
            c.as_secs_f64() * 1e3
        );
        println!(
            "  ratio sandboxed / raw bwrap:   {:>8.2}x (target <= 1.30x)",
            c.as_secs_f64() / r.as_secs_f64()
        );
        println!(
            "  ratio raw bwrap / bare:        {:>8.2}x",
            r.as_secs_f64() / b.as_secs_f64()
        );
        println!(
            "  ratio sandboxed / bare:        {:>8.2}x",
            c.as_secs_f64() / b.as_secs_f64()
        );
    }
}
