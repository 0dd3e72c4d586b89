#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench may panic
//! Skill discovery at scale (issue #33, "Speed"): 200 skills spread over
//! the workspace's skill folders, in a 100,000-file tree, discovered warm
//! (what every turn, `GET /v1/skills` and `skills list` do). Only the
//! named folders are read, so the tree's size should not matter: the same
//! discovery on a workspace with the skills and no tree is the control.
//!
//! Speed is reported as medians and ranges, and against the 20 ms target,
//! never asserted. Run: `cargo bench --bench skills` (most of it is
//! generating the tree).

use codewhale::config::ConfigPaths;
use codewhale::skills::Skills;
use std::path::Path;
use std::time::{Duration, Instant};

const ITERATIONS: usize = 30;
const TARGET_MS: f64 = 20.0;

fn skills(ws: &Path) {
    // 200 skills: 80 + 60 + 40 + 20 over four workspace roots, each with a
    // script beside it; 20 names repeat across roots (shadowed).
    for (root, n) in [
        (".claude/skills", 80),
        ("skills", 60),
        (".agents/skills", 40),
        (".codewhale/skills", 20),
    ] {
        for i in 0..n {
            let d = ws.join(root).join(format!("skill-{i:03}"));
            std::fs::create_dir_all(d.join("scripts")).unwrap();
            std::fs::write(
                d.join("SKILL.md"),
                format!("---\nname: skill-{i:03}\ndescription: Skill number {i}, for benchmarking discovery.\n---\nBody.\n"),
            )
            .unwrap();
            std::fs::write(d.join("scripts/run.sh"), "true\n").unwrap();
        }
    }
}

fn tree(ws: &Path) -> usize {
    let mut n = 0;
    for p in 0..100 {
        for m in 0..10 {
            for d in 0..10 {
                let dir = ws.join(format!("pkg{p}/mod{m}/d{d}"));
                std::fs::create_dir_all(&dir).unwrap();
                for f in 0..10 {
                    std::fs::File::create(dir.join(format!("f{f}.rs"))).unwrap();
                    n += 1;
                }
            }
        }
    }
    n
}

fn measure(paths: &ConfigPaths, ws: &Path) -> (f64, f64, f64, usize) {
    let mut found = 0;
    let mut v: Vec<Duration> = (0..ITERATIONS + 1)
        .map(|_| {
            let t = Instant::now();
            let s = Skills::load(paths, ws).unwrap();
            let d = t.elapsed();
            found = s.listed().len();
            d
        })
        .skip(1) // the first is the cold one
        .collect();
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(v[v.len() / 2]), ms(v[0]), ms(v[v.len() - 1]), found)
}

fn main() {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let (big, small, home) = (base.join("big"), base.join("small"), base.join("home"));
    for d in [&big, &small, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let paths = ConfigPaths::from_parts(Some(home.clone()), Some(home.join(".codewhale")), None);
    skills(&small);
    skills(&big);
    let started = Instant::now();
    let files = tree(&big);
    println!(
        "generated {files} files in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for (what, ws) in [
        ("200 skills, 100k-file tree", &big),
        ("200 skills, no tree (control)", &small),
    ] {
        let (med, lo, hi, found) = measure(&paths, ws);
        println!(
            "{what:<34} median {med:>7.3} ms (range {lo:.3} – {hi:.3}); {found} skills listed; target {TARGET_MS} ms: {}",
            if med <= TARGET_MS { "met" } else { "NOT met" }
        );
    }
}
