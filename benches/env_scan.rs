#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The workspace `.env` scan at monorepo scale (issue #14 part 3).
//!
//! Generates a 200,000-file tree (100 packages × 20 modules × 10
//! directories × 10 files, plus a skipped `node_modules` and `.git`, and a
//! few `.env` files down to depth 6) and measures, in the same run:
//!
//! - warm library path: `policy::resolve` of a `workspace-write` policy
//!   (the per-call work of a long-lived process such as the agent; the
//!   inotify watch is live from the second call) on the big tree, against
//!   the same call on a 10-file workspace, plus the cost of the next call
//!   after one directory changed, and the scan without a watch (stamps);
//! - cold CLI: `codewhale sandbox run -- true` in the big tree against the
//!   same in the small one (the difference is the scan's cost in a fresh
//!   process), against `find` pruned the same way on the big tree.
//!
//! Speed is reported as medians, ranges and ratios, never asserted.
//! Run: `cargo bench --bench env_scan` (a few minutes on 2 busy cores,
//! most of it generating the tree).

use codewhale::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_codewhale");
const PACKAGES: usize = 100;
const MODULES: usize = 20;
const DIRS: usize = 10;
const FILES: usize = 10;
const WARM_ITERATIONS: usize = 30;
const CLI_ITERATIONS: usize = 9;

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(v[v.len() / 2]), ms(v[0]), ms(v[v.len() - 1]))
}

fn line(what: &str, v: Vec<Duration>) -> f64 {
    let (med, lo, hi) = stats(v);
    println!("{what:<58} median {med:>9.3} ms  (range {lo:.3} – {hi:.3})");
    med
}

fn generate(root: &Path) -> usize {
    let mut files = 0;
    for p in 0..PACKAGES {
        for m in 0..MODULES {
            for d in 0..DIRS {
                let dir = root.join(format!("pkg{p}/mod{m}/d{d}"));
                std::fs::create_dir_all(&dir).expect("mkdir");
                for f in 0..FILES {
                    std::fs::File::create(dir.join(format!("f{f}.rs"))).expect("file");
                    files += 1;
                }
            }
        }
        if p % 10 == 0 {
            std::fs::write(root.join(format!("pkg{p}/mod3/d7/.env")), "S=1").expect("env");
        }
    }
    for skipped in ["node_modules/left-pad/lib", ".git/objects/aa"] {
        let d = root.join(skipped);
        std::fs::create_dir_all(&d).expect("mkdir");
        for f in 0..1000 {
            std::fs::File::create(d.join(format!("x{f}"))).expect("file");
        }
    }
    files
}

fn resolve_once(ws: &Path, facts: &HostFacts) -> Duration {
    let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws);
    let t = Instant::now();
    let r = resolve(&p, facts).expect("resolve");
    let d = t.elapsed();
    assert!(r.unmasked.is_empty(), "{:?}", r.unmasked);
    d
}

fn cli(ws: &Path, home: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new(EXE)
        .args(["sandbox", "run", "--sandbox", "workspace-write", "-C"])
        .arg(ws)
        .args(["--", "true"])
        .env("HOME", home)
        .env_remove("CARGO_HOME")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("codewhale");
    let d = t.elapsed();
    assert!(
        out.status.success(),
        "sandbox run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

fn find(ws: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new("find")
        .arg(ws)
        .args(["(", "-type", "d", "("])
        .args([
            "-name",
            ".git",
            "-o",
            "-name",
            "node_modules",
            "-o",
            "-name",
            "target",
            "-o",
            "-name",
            ".venv",
            "-o",
            "-name",
            "venv",
            "-o",
            "-name",
            "__pycache__",
            "-o",
            "-name",
            "dist",
            "-o",
            "-name",
            "build",
            "-o",
            "-name",
            ".cache",
        ])
        .args([
            ")", "-prune", ")", "-o", "(", "-name", ".env", "-o", "-name", ".env.*", ")", "-print",
        ])
        .output()
        .expect("find");
    let d = t.elapsed();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        PACKAGES / 10
    );
    d
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let (big, small, home) = (root.join("big"), root.join("small"), root.join("home"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&small).expect("small");
    for f in 0..10 {
        std::fs::File::create(small.join(format!("f{f}.rs"))).expect("file");
    }
    let t = Instant::now();
    let n = generate(&big);
    println!(
        "generated {n} files in {} directories ({:.1} s); load: {}",
        PACKAGES * MODULES * (DIRS + 1) + PACKAGES,
        t.elapsed().as_secs_f64(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    // Listings made within the racy window are re-read on the next call.
    std::thread::sleep(Duration::from_millis(2500));

    let facts = HostFacts {
        homes: vec![home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    // Warm library path: the first call fills the process's cache.
    let first = resolve_once(&big, &facts);
    resolve_once(&small, &facts);
    println!(
        "first resolve of the big tree (cold cache): {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    let mut warm_big = Vec::new();
    let mut warm_small = Vec::new();
    for _ in 0..WARM_ITERATIONS {
        warm_small.push(resolve_once(&small, &facts));
        warm_big.push(resolve_once(&big, &facts));
    }
    let ws = line("resolve, 10-file workspace (baseline)", warm_small);
    let wb = line("resolve, 200,000-file workspace, warm", warm_big);
    // One directory changed since the last call: a new file in it.
    let mut changed = Vec::new();
    for i in 0..WARM_ITERATIONS {
        std::fs::File::create(big.join(format!("pkg42/mod7/d3/new{i}.rs"))).expect("file");
        changed.push(resolve_once(&big, &facts));
    }
    let wc = line("resolve, 200,000-file workspace, one dir changed", changed);
    // The scan alone without the inotify watch (other systems, or the
    // watch limit reached): every directory `lstat`ed.
    let mut stamps = codewhale::policy::env_scan::EnvScanCache::stamps_only();
    stamps.scan(&big);
    let mut st = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        stamps.scan(&big);
        st.push(t.elapsed());
    }
    line(
        "scan, 200,000-file workspace, warm, stamps only (no watch)",
        st,
    );
    println!(
        "warm per-call overhead of the big tree: {:.3} ms ({:.1}x the 10-file baseline); after one change {:.1}x",
        wb - ws,
        wb / ws.max(1e-9),
        wc / ws.max(1e-9)
    );

    // Cold CLI: a fresh process each time.
    cli(&small, &home);
    cli(&big, &home);
    let (mut cs, mut cb, mut fd) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..CLI_ITERATIONS {
        cs.push(cli(&small, &home));
        cb.push(cli(&big, &home));
        fd.push(find(&big));
    }
    let s = line("codewhale sandbox run -- true, 10-file workspace", cs);
    let b = line("codewhale sandbox run -- true, 200,000-file workspace", cb);
    let f = line("find, pruned the same way, 200,000-file workspace", fd);
    println!(
        "cold CLI overhead of the big tree: {:.1} ms = {:.2}x find's {:.1} ms",
        b - s,
        (b - s) / f.max(1e-9),
        f
    );
}
