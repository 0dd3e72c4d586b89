#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The whole `codewhale doctor --json` run, as a user would start it
//! (subprocess, fresh process each time so the per-process probe cache is
//! cold), against a baseline measured in the same process: `codewhale
//! --version` (process start-up alone). Target (issue 4): under one
//! second. Speed is reported, never asserted.
//!
//! Run: `cargo bench --bench doctor`.

use std::process::Command;
use std::time::{Duration, Instant};

const ITERATIONS: usize = 10;
const EXE: &str = env!("CARGO_BIN_EXE_codewhale");

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(args: &[&str], home: &std::path::Path) -> Duration {
    let t = Instant::now();
    let out = Command::new(EXE)
        .args(args)
        .env("HOME", home)
        .env("CODEWHALE_HOME", home.join(".codewhale"))
        .output()
        .expect("run codewhale");
    let d = t.elapsed();
    // doctor exits 1 when a row fails; the time still counts, say so.
    if !out.status.success() {
        eprintln!(
            "note: `codewhale {}` exited {:?}",
            args.join(" "),
            out.status.code()
        );
    }
    d
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let mut base = Vec::new();
    let mut doc = Vec::new();
    time(&["doctor", "--json"], home);
    for _ in 0..ITERATIONS {
        base.push(time(&["--version"], home));
        doc.push(time(&["doctor", "--json"], home));
    }
    let worst = doc.iter().max().copied().unwrap_or_default();
    let (b, d) = (median(base), median(doc));
    println!(
        "codewhale --version (baseline): median {:>8.2} ms",
        b.as_secs_f64() * 1e3
    );
    println!(
        "codewhale doctor --json:        median {:>8.2} ms, worst {:.2} ms ({:.1}x the baseline)",
        d.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3,
        d.as_secs_f64() / b.as_secs_f64().max(1e-9)
    );
    println!(
        "target < 1000 ms: {}",
        if worst < Duration::from_secs(1) {
            "met"
        } else {
            "NOT met"
        }
    );
}
