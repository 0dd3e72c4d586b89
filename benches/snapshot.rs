#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Snapshot cost on a generated 10,000-file workspace, against the same git
//! plumbing run by hand in the same process (`harness = false`).
//!
//! Run: `cargo bench --bench snapshot` (or `--profile dev` to skip a release
//! build: the time is spent in git, not in Rust). Prints medians and ratios;
//! nothing is asserted.

use codewhale::snapshot::{Label, Opened, SnapshotMeta, SnapshotOptions, SnapshotStore, UserDirs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
const RUNS: usize = 15;

fn generate(ws: &Path) {
    for d in 0..DIRS {
        let dir = ws.join(format!("pkg{d:03}"));
        std::fs::create_dir_all(&dir).expect("create dir");
        for i in 0..FILES_PER_DIR {
            let body = format!("// file {d}/{i}\n{}\n", "let x = 1;\n".repeat(25));
            std::fs::write(dir.join(format!("m{i:03}.rs")), body).expect("write file");
        }
    }
}

/// The same plumbing the store runs, by hand: add -A, write-tree,
/// commit-tree, update-ref, always committing.
struct Hand {
    git_dir: PathBuf,
    ws: PathBuf,
    index: PathBuf,
    n: u32,
}

impl Hand {
    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg(format!("--git-dir={}", self.git_dir.display()))
            .arg(format!("--work-tree={}", self.ws.display()))
            .args(["-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0"])
            .args(args)
            .current_dir(&self.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_INDEX_FILE", &self.index)
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@b.invalid")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@b.invalid")
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn snapshot(&mut self) {
        self.git(&["add", "-A", "--", "."]);
        let tree = self.git(&["write-tree"]);
        let commit = self.git(&["commit-tree", &tree, "-m", "s"]);
        self.n += 1;
        self.git(&["update-ref", &format!("refs/hand/{}", self.n), &commit]);
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn time<F: FnMut()>(mut f: F) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&ws).expect("ws");
    generate(&ws);
    let ws = std::fs::canonicalize(&ws).expect("canonical ws");

    // --- codewhale's store ---
    let mut opts = SnapshotOptions::new(&home);
    opts.homes = vec![tmp.path().join("nohome")];
    opts.user_dirs = UserDirs::at_home(tmp.path().join("nohome"));
    let mut open_time = Duration::ZERO;
    let mut store = None;
    open_time += time(|| {
        store = match SnapshotStore::open(&ws, opts.clone()).expect("open") {
            Opened::Ready(s) => Some(*s),
            Opened::Disabled(d) => panic!("{d}"),
        }
    });
    let mut store = store.expect("store");
    let mut turn = 0u64;
    let mut snap = |store: &mut SnapshotStore| {
        turn += 1;
        store
            .snapshot(Label::PreTurn(turn), SnapshotMeta::default())
            .expect("snapshot");
    };

    // --- the same plumbing by hand, in a second side repo ---
    let side = tmp.path().join("hand");
    std::fs::create_dir_all(&side).expect("hand dir");
    let mut hand = Hand {
        git_dir: side.join(".git"),
        ws: ws.clone(),
        index: side.join("index"),
        n: 0,
    };
    hand.git(&["init", "-q", "--template="]);

    // The machine is shared, so store and hand runs are interleaved (and
    // their order alternated) to expose both to the same load.
    let store_cold = time(|| snap(&mut store));
    let hand_cold = time(|| hand.snapshot());
    let touched = ws.join("pkg050/m050.rs");
    let (mut s_nc, mut h_nc, mut s_ch, mut h_ch) = (vec![], vec![], vec![], vec![]);
    for i in 0..RUNS {
        if i % 2 == 0 {
            s_nc.push(time(|| snap(&mut store)));
            h_nc.push(time(|| hand.snapshot()));
        } else {
            h_nc.push(time(|| hand.snapshot()));
            s_nc.push(time(|| snap(&mut store)));
        }
        // One-file change: each side sees exactly one changed file.
        std::fs::write(&touched, format!("changed {i}\n")).expect("write");
        if i % 2 == 0 {
            s_ch.push(time(|| snap(&mut store)));
            h_ch.push(time(|| hand.snapshot()));
        } else {
            h_ch.push(time(|| hand.snapshot()));
            s_ch.push(time(|| snap(&mut store)));
        }
    }
    let (store_nochange, hand_nochange) = (median(s_nc), median(h_nc));
    let (store_change, hand_change) = (median(s_ch), median(h_ch));
    // Without the stat cache: a fresh index every time (what not keeping
    // the side index between snapshots would cost).
    let hand_fresh_index = median(
        (0..5)
            .map(|_| {
                let _ = std::fs::remove_file(&hand.index);
                time(|| hand.snapshot())
            })
            .collect(),
    );

    println!(
        "snapshot bench: {} files in {DIRS} dirs, median of {RUNS} runs",
        DIRS * FILES_PER_DIR
    );
    println!(
        "  open (path checks + size walk):       {:8.2} ms",
        ms(open_time)
    );
    println!(
        "  store first snapshot (cold index):     {:8.2} ms   hand {:8.2} ms   ratio {:.2}",
        ms(store_cold),
        ms(hand_cold),
        ms(store_cold) / ms(hand_cold)
    );
    println!(
        "  store no-change snapshot:              {:8.2} ms   hand {:8.2} ms   ratio {:.2}",
        ms(store_nochange),
        ms(hand_nochange),
        ms(store_nochange) / ms(hand_nochange)
    );
    println!(
        "  store one-file-change snapshot:        {:8.2} ms   hand {:8.2} ms   ratio {:.2}",
        ms(store_change),
        ms(hand_change),
        ms(store_change) / ms(hand_change)
    );
    println!("  hand, fresh index each time (no stat cache): {:8.2} ms   (no-change store / this = {:.2})",
        ms(hand_fresh_index), ms(store_nochange) / ms(hand_fresh_index));
}
