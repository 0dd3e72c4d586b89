#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench may panic
//! `codewhale review` of a 300-file change prepares its request in
//! ≤ 200 ms (issue #33, "Speed"): from the diff as fetched (or as `git`
//! gives it) to the reviewer's first message — parse the diff, list its
//! files and lines, build the prompt. The model call and the network are
//! not part of it.
//!
//! Rows: a PR's diff media type (300 files), a PR read through the files
//! API (301 files, GitHub's listing turned into the diff), and a local
//! working tree with 300 modified tracked files (two `git` runs) and with
//! 300 untracked files (one `git diff --no-index` each).
//!
//! Reported as medians and ranges against the target, never asserted.
//! Run: `cargo bench --bench review`.

use codewhale::review::diff::{text_of_files, Diff, FileEntry};
use codewhale::review::{local, prompt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ITERATIONS: usize = 15;
const TARGET_MS: f64 = 200.0;

fn patch(i: usize) -> String {
    let mut p = String::from("@@ -10,12 +10,15 @@ fn context()\n");
    for k in 0..12 {
        if k % 4 == 1 {
            p.push_str(&format!(
                "-    old_{i}_{k}();\n+    new_{i}_{k}();\n+    extra_{i}_{k}();\n"
            ));
        } else {
            p.push_str(&format!("     same_{i}_{k}();\n"));
        }
    }
    p
}

fn entries(n: usize) -> Vec<FileEntry> {
    (0..n)
        .map(|i| FileEntry {
            filename: format!("src/module_{i:03}/file.rs"),
            status: "modified".into(),
            previous_filename: None,
            patch: Some(patch(i)),
        })
        .collect()
}

fn measure(mut f: impl FnMut() -> usize) -> (f64, f64, f64, usize) {
    let mut files = 0;
    let mut v: Vec<Duration> = (0..ITERATIONS + 1)
        .map(|_| {
            let t = Instant::now();
            files = f();
            t.elapsed()
        })
        .skip(1)
        .collect();
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(v[v.len() / 2]), ms(v[0]), ms(v[v.len() - 1]), files)
}

fn git(ws: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(["-c", "user.name=b", "-c", "user.email=b@example.com"])
        .args(args)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn main() {
    let diff_text = text_of_files(&entries(300));
    let media = measure(|| {
        let d = Diff::parse(diff_text.clone()).unwrap();
        let p = prompt::task("octo/demo#1", &d);
        assert!(p.len() > diff_text.len());
        d.files.len()
    });
    let listing = entries(301);
    let files_api = measure(|| {
        let d = Diff::parse(text_of_files(&listing)).unwrap();
        prompt::task("octo/demo#1", &d);
        d.files.len()
    });

    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("tracked");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    for i in 0..300 {
        let body: String = (0..40).map(|k| format!("line {k}\n")).collect();
        std::fs::write(ws.join(format!("f{i:03}.txt")), body).unwrap();
    }
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "base"]);
    for i in 0..300 {
        let body: String = (0..40)
            .map(|k| {
                if k % 10 == 3 {
                    format!("changed {k}\n")
                } else {
                    format!("line {k}\n")
                }
            })
            .collect();
        std::fs::write(ws.join(format!("f{i:03}.txt")), body).unwrap();
    }
    let tracked = measure(|| {
        let d = local::working_tree(&ws).unwrap();
        prompt::task("working tree", &d);
        d.files.len()
    });

    let ws2 = t.path().join("untracked");
    std::fs::create_dir_all(&ws2).unwrap();
    git(&ws2, &["init", "-q"]);
    for i in 0..300 {
        std::fs::write(ws2.join(format!("n{i:03}.txt")), "new\nfile\n").unwrap();
    }
    let untracked = measure(|| {
        let d = local::working_tree(&ws2).unwrap();
        prompt::task("working tree", &d);
        d.files.len()
    });

    println!("review: preparing the reviewer's request (median, min – max of {ITERATIONS} warm runs; target ≤ {TARGET_MS} ms)");
    for (name, (med, lo, hi, n)) in [
        ("PR, diff media type", media),
        ("PR, files API", files_api),
        ("working tree, tracked", tracked),
        ("working tree, untracked", untracked),
    ] {
        let verdict = if med <= TARGET_MS { "within" } else { "OVER" };
        println!("  {name:<26} {n:>3} files  {med:>8.1} ms  ({lo:.1} – {hi:.1})  {verdict} target");
    }
}
