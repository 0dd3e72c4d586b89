#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench target may panic
// The shared test module is included whole; the bench uses part of it.
#![allow(dead_code)]
//! Monorepo scale (issue 29): what a 100,000-file repository costs per
//! command, per `exec` run and per undo snapshot, against the same work on
//! a 10-file repository and against the user's own git, all in one run
//! (harness = false; medians, ranges and the load average are printed;
//! nothing is asserted; figures go in docs/PERFORMANCE.md).
//!
//! The bench generates both repositories itself under a temporary
//! directory (never committed): 100,000 committed files of 2 KB in 1,110
//! directories, packed as a clone would be (`git gc`), and a 10-file one.
//!
//! 1. `codewhale sandbox run -- true`, bwrap tier and landlock tier
//!    (`--backend landlock`), 100k vs 10 files. Goal: ≤ 1.3×.
//! 2. `codewhale exec --auto` on a fix-and-run scenario (7 tool calls:
//!    read, run, edit, run, read, write, run) against the scripted model
//!    (`tests/common/scripted_model`, real HTTP on loopback), 100k vs 10
//!    files, bwrap and landlock (`[sandbox] backend`). "first": a fresh
//!    `CODEWHALE_HOME` (no snapshot store, no scan cache); "warm": the same
//!    home again. Goals: warm ≤ 1.5×, first ≤ 3×. Beside the runs, per
//!    tier, the floor of a first run at 100k files ([`floor`]) against
//!    what 3× the 10-file first run leaves.
//! 3. Undo snapshots through the library on the 100k repository: the first
//!    snapshot (empty store) and a no-change snapshot, against `git status`
//!    in the user's repository and `git add -A` (no change) in a side
//!    repository by hand, interleaved. Goals: first ≤ 3× `git status`,
//!    no-change ≤ 1.5× `git status`.
//!
//! 4. The first `exec` run of 2. with a model that takes
//!    `MONOREPO_MODEL_MS` (default 500) to answer each request, bwrap:
//!    what 100k files add to a first run a user waits on anyway.
//!
//! Between measurements the bench runs `sync` (one step's writeback must
//! not land in the next one's time) and retires the snapshot keepers of
//! the `exec` homes it is done with (a user has one per store).
//!
//! `CODEWHALE_BIN` picks the binary for 1 and 2 (default: this build's);
//! `CODEWHALE_BEFORE_BIN` adds the same rows for a second binary (an older
//! build), interleaved, for before/after figures in one run.
//! `MONOREPO_FILES` changes the large repository's size (default 100000),
//! `MONOREPO_ONLY=13` runs only the parts named, `MONOREPO_RUNS=N` sets
//! the exec and snapshot repetitions.
//!
//! Run: `cargo bench --bench monorepo`.

#[path = "../tests/common/scripted_model/mod.rs"]
mod scripted_model;

use codewhale::snapshot::{
    Label, Opened, SnapshotMeta, SnapshotOptions, SnapshotStore, SnapshotWay, UserDirs,
};
use scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CMD_RUNS: usize = 15;
const EXEC_RUNS: usize = 5;
const SNAP_RUNS: usize = 7;

fn runs(default: usize) -> usize {
    std::env::var("MONOREPO_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@b.invalid"])
        .args(["-c", "gc.auto=0", "-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `files` committed files in a repository at `ws` (10×11×10 directories
/// for the large one), packed.
fn generate(ws: &Path, files: usize) {
    std::fs::create_dir_all(ws.join("app")).unwrap();
    std::fs::write(
        ws.join("app/check.sh"),
        "grep -q fixed app/main.txt && echo ok || { echo broken; exit 1; }\n",
    )
    .unwrap();
    std::fs::write(ws.join("app/main.txt"), "status = broken\n").unwrap();
    let body = "x".repeat(2000);
    let mut n = 2;
    let leaf_dirs: Vec<PathBuf> = if files <= 100 {
        vec![ws.join("src")]
    } else {
        let mut v = Vec::new();
        for a in 0..10 {
            for b in 0..10 {
                for c in 0..10 {
                    v.push(ws.join(format!("d{a}/e{b}/f{c}")));
                }
            }
        }
        v
    };
    let per = (files - n).div_ceil(leaf_dirs.len());
    'outer: for d in &leaf_dirs {
        std::fs::create_dir_all(d).unwrap();
        for i in 0..per {
            if n >= files {
                break 'outer;
            }
            std::fs::write(d.join(format!("m{i:03}.txt")), format!("{n}\n{body}")).unwrap();
            n += 1;
        }
    }
    git(ws, &["init", "-q"]);
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-qm", "init"]);
    git(ws, &["gc", "-q"]);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `median (min–max)` in ms.
fn stats(v: &[Duration]) -> (f64, f64, f64) {
    let mut v: Vec<f64> = v.iter().map(|d| ms(*d)).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn show(label: &str, v: &[Duration]) -> f64 {
    let (m, lo, hi) = stats(v);
    println!("  {label:<52} median {m:9.1} ms  range {lo:.1}–{hi:.1}");
    m
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

struct Env {
    root: PathBuf,
    home: PathBuf,
}

impl Env {
    fn cmd(&self, bin: &str, cw_home: &Path, ws: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEWHALE_HOME", cw_home)
            .env("TMPDIR", self.root.join("tmp"))
            .env("XDG_RUNTIME_DIR", self.root.join("run"))
            .current_dir(ws)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }
}

fn time_ok(mut c: Command) -> Duration {
    let t = Instant::now();
    let out = c.output().expect("spawn");
    let d = t.elapsed();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

fn bins() -> Vec<(&'static str, String)> {
    let mut v = vec![(
        "after",
        std::env::var("CODEWHALE_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_codewhale").to_string()),
    )];
    if let Ok(b) = std::env::var("CODEWHALE_BEFORE_BIN") {
        v.push(("before", b));
    }
    v
}

fn per_command(env: &Env, small: &Path, big: &Path) {
    println!("\n1. `codewhale sandbox run -- true` (load {})", load());
    for tier in ["bwrap", "landlock"] {
        for (name, bin) in bins() {
            let cw_home = env.root.join(format!("cw-cmd-{tier}-{name}"));
            std::fs::create_dir_all(&cw_home).unwrap();
            let args = ["sandbox", "run", "--backend", tier, "--", "true"];
            let (mut s, mut b) = (Vec::new(), Vec::new());
            // One run each first: the cold start (scan cache, ruleset).
            let cold_b = time_ok(env.cmd(&bin, &cw_home, big, &args));
            let _ = time_ok(env.cmd(&bin, &cw_home, small, &args));
            for _ in 0..CMD_RUNS {
                s.push(time_ok(env.cmd(&bin, &cw_home, small, &args)));
                b.push(time_ok(env.cmd(&bin, &cw_home, big, &args)));
            }
            println!(" {tier}, {name}:");
            let ms_s = show("10 files", &s);
            let ms_b = show("100k files", &b);
            println!(
                "  ratio 100k/10: {:.2}x (goal <= 1.3); first run at 100k {:.1} ms",
                ms_b / ms_s,
                ms(cold_b)
            );
        }
    }
}

/// The fix-and-run scenario: 7 tool calls, then the answer.
fn scenario() -> Vec<scripted_model::Step> {
    vec![
        call("c1", "read_file", json!({"path": "app/main.txt"})),
        call("c2", "shell", json!({"command": "sh app/check.sh || true"})),
        call(
            "c3",
            "edit_file",
            json!({"path": "app/main.txt", "old_string": "broken", "new_string": "fixed"}),
        ),
        call("c4", "shell", json!({"command": "sh app/check.sh"})),
        call("c5", "read_file", json!({"path": "app/check.sh"})),
        call(
            "c6",
            "write_file",
            json!({"path": "app/NOTES.txt", "content": "fixed the status\n"}),
        ),
        call("c7", "shell", json!({"command": "cat app/NOTES.txt"})),
        reply("Fixed: app/main.txt now says fixed and check.sh passes."),
    ]
}

fn reset_scenario(ws: &Path) {
    std::fs::write(ws.join("app/main.txt"), "status = broken\n").unwrap();
    let _ = std::fs::remove_file(ws.join("app/NOTES.txt"));
}

/// Flush what earlier steps wrote (a first snapshot's ~100 MB pack, the
/// old plumbing's ~800 MB of loose objects) before the next measurement,
/// so the kernel's writeback of one step does not land in another's time.
fn settle() {
    let _ = Command::new("sync").status();
}

/// Retire the snapshot keeper of `ws`'s store under `cw_home`: a keeper
/// leaves when its socket is removed (src/snapshot/keeper.rs), checked
/// every 2 s. A user has one keeper per store; without this, every store
/// the bench made kept one watching the same workspace (up to 20, each
/// woken by every later run's writes).
fn retire_keeper(cw_home: &Path, ws: &Path) {
    let ws = std::fs::canonicalize(ws).unwrap();
    let store = codewhale::snapshot::layout::store_dir(cw_home, &ws);
    let _ = std::fs::remove_file(store.join(codewhale::snapshot::keeper::SOCKET));
}

/// How long after each run the seed's blob copy, which a first run leaves
/// running in the background (src/snapshot/blobcopy.rs), still ran.
static COPY_TAILS: std::sync::Mutex<Vec<Duration>> = std::sync::Mutex::new(Vec::new());

/// Wait for the background blob copy of `ws`'s store under `cw_home`, if
/// one is running: it holds a lock on its output file until it ends. The
/// next measurement must not share the machine with it; how long it
/// still ran is reported beside the runs.
fn wait_for_copy(cw_home: &Path, ws: &Path) -> Option<Duration> {
    let ws = std::fs::canonicalize(ws).unwrap();
    let store = codewhale::snapshot::layout::store_dir(cw_home, &ws);
    let t = Instant::now();
    codewhale::snapshot::blobcopy::wait_for_end(&store).then(|| t.elapsed())
}

/// The copy tails gathered since the last call, shown and cleared.
fn show_copy_tails() {
    let v: Vec<Duration> = std::mem::take(&mut *COPY_TAILS.lock().unwrap());
    if !v.is_empty() {
        show("blob copy still running after the run", &v);
    }
}

fn exec_once(env: &Env, bin: &str, cw_home: &Path, ws: &Path, tier: &str) -> Duration {
    exec_once_with(env, bin, cw_home, ws, tier, Duration::ZERO)
}

/// [`exec_once`] with a model that answers each request after `think`.
fn exec_once_with(
    env: &Env,
    bin: &str,
    cw_home: &Path,
    ws: &Path,
    tier: &str,
    think: Duration,
) -> Duration {
    reset_scenario(ws);
    settle();
    let steps = if think.is_zero() {
        scenario()
    } else {
        scenario()
            .into_iter()
            .map(|s| scripted_model::slow(think, s))
            .collect()
    };
    let model = ScriptedModel::start(Wire::OpenAi, steps);
    std::fs::create_dir_all(cw_home).unwrap();
    std::fs::write(
        cw_home.join("config.toml"),
        format!(
            "[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"k\"\nmodel = \"scripted\"\n\n[sandbox]\nbackend = \"{tier}\"\n",
            model.kind(),
            model.base_url()
        ),
    )
    .unwrap();
    let c = env.cmd(
        bin,
        cw_home,
        ws,
        &["exec", "--auto", "--provider", "custom", "fix the check"],
    );
    let d = time_ok(c);
    if let Some(tail) = wait_for_copy(cw_home, ws) {
        COPY_TAILS.lock().unwrap().push(tail);
    }
    assert_eq!(model.steps_left(), 0, "the scenario ran to its end");
    assert_eq!(
        std::fs::read_to_string(ws.join("app/main.txt")).unwrap(),
        "status = fixed\n"
    );
    d
}

fn exec_scenario(env: &Env, small: &Path, big: &Path) {
    println!(
        "\n2. `codewhale exec --auto`, fix-and-run (7 tool calls) (load {})",
        load()
    );
    // With two binaries, each iteration runs both (the machine's state
    // drifts over minutes: one binary's runs all before the other's would
    // compare two machines).
    let bins = bins();
    for tier in ["bwrap", "landlock"] {
        let mut seen: Vec<[Vec<Duration>; 4]> = bins.iter().map(|_| Default::default()).collect();
        let mut tails: Vec<Vec<Duration>> = bins.iter().map(|_| Vec::new()).collect();
        let mut floors: [Vec<Duration>; 2] = Default::default();
        for i in 0..runs(EXEC_RUNS) {
            let (cold, add_u) = floor(env, &bins[0].1, tier, small, big, i);
            floors[0].push(cold);
            floors[1].push(add_u);
            for (k, (name, bin)) in bins.iter().enumerate() {
                let hs = env.root.join(format!("cw-exec-{tier}-{name}-s{i}"));
                let hb = env.root.join(format!("cw-exec-{tier}-{name}-b{i}"));
                let [fs, fb, ws_, wb] = &mut seen[k];
                fs.push(exec_once(env, bin, &hs, small, tier));
                fb.push(exec_once(env, bin, &hb, big, tier));
                ws_.push(exec_once(env, bin, &hs, small, tier));
                wb.push(exec_once(env, bin, &hb, big, tier));
                retire_keeper(&hs, small);
                retire_keeper(&hb, big);
                tails[k].append(&mut COPY_TAILS.lock().unwrap());
                std::thread::sleep(Duration::from_secs(3));
            }
        }
        for (k, (name, _)) in bins.iter().enumerate() {
            println!(" {tier}, {name}:");
            let [fs, fb, ws_, wb] = &seen[k];
            let a = show("10 files, first", fs);
            let b = show("100k files, first", fb);
            let c = show("10 files, warm", ws_);
            let d = show("100k files, warm", wb);
            *COPY_TAILS.lock().unwrap() = std::mem::take(&mut tails[k]);
            show_copy_tails();
            println!(
                "  ratio 100k/10: warm {:.2}x (goal <= 1.5), first {:.2}x (goal <= 3; vs warm 10-file {:.2}x)",
                d / c,
                b / a,
                b / c
            );
            if k == 0 {
                let cold = show("floor: what 100k files add to a cold command", &floors[0]);
                let add_u = show(
                    "floor: `git add -u` on a copy of the user's index",
                    &floors[1],
                );
                println!(
                    "  floor {:.0} ms of the {:.0} ms that 3x the 10-file first run leaves for 100k files ({:.0} %)",
                    cold + add_u,
                    2.0 * a,
                    100.0 * (cold + add_u) / (2.0 * a)
                );
            }
        }
    }
}

/// Part 2's floor, per tier: the least a first run at 100k files
/// must add before its first command, measured beside the runs. A cold
/// `sandbox run -- true` (fresh home: the `.env` scan reads every
/// directory, the ruleset is built) at 100k files minus the same at 10;
/// and `git add -u` on a copy of the user's own index (the one `stat` of
/// every tracked file that finds what changed since git last looked —
/// what a snapshot cannot skip, and what `git status` does too). Neither
/// counts the untracked listing, the tree write or any process start.
fn floor(
    env: &Env,
    bin: &str,
    tier: &str,
    small: &Path,
    big: &Path,
    i: usize,
) -> (Duration, Duration) {
    let args = ["sandbox", "run", "--backend", tier, "--", "true"];
    let hs = env.root.join(format!("cw-floor-{tier}-s{i}"));
    let hb = env.root.join(format!("cw-floor-{tier}-b{i}"));
    settle();
    let s = time_ok(env.cmd(bin, &hs, small, &args));
    let b = time_ok(env.cmd(bin, &hb, big, &args));
    let index = env.root.join(format!("floor-index-{i}"));
    std::fs::copy(big.join(".git/index"), &index).unwrap();
    settle();
    let add_u = time_git(big, &["add", "-u"], Some(&index));
    let _ = std::fs::remove_file(&index);
    (b.saturating_sub(s), add_u)
}

/// Part 4: the first run again, with a model that takes `MONOREPO_MODEL_MS`
/// (default 500) to answer each request, as a hosted model does: what a
/// user waits for beyond the model, at 100k files against 10, in ms (the
/// first full look is taken while the model answers). bwrap tier.
fn exec_with_a_thinking_model(env: &Env, small: &Path, big: &Path) {
    let think = Duration::from_millis(
        std::env::var("MONOREPO_MODEL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500),
    );
    println!(
        "\n4. `codewhale exec --auto`, first run, the model answering after {} ms (load {})",
        think.as_millis(),
        load()
    );
    for (name, bin) in bins() {
        let (mut fs, mut fb) = (Vec::new(), Vec::new());
        for i in 0..runs(EXEC_RUNS) {
            let hs = env.root.join(format!("cw-think-{name}-s{i}"));
            let hb = env.root.join(format!("cw-think-{name}-b{i}"));
            fs.push(exec_once_with(env, &bin, &hs, small, "bwrap", think));
            fb.push(exec_once_with(env, &bin, &hb, big, "bwrap", think));
            retire_keeper(&hs, small);
            retire_keeper(&hb, big);
            std::thread::sleep(Duration::from_secs(3));
        }
        println!(" bwrap, {name}:");
        let a = show("10 files, first", &fs);
        let b = show("100k files, first", &fb);
        show_copy_tails();
        println!(
            "  100k files add {:.0} ms to the first run ({:.2}x)",
            b - a,
            b / a
        );
    }
}

/// The store's plumbing by hand in a side repository: `add -A` only.
fn hand_add(side: &Path, ws: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new("git")
        .arg(format!("--git-dir={}", side.display()))
        .arg(format!("--work-tree={}", ws.display()))
        .args(["-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0"])
        .args(["add", "-A", "--", "."])
        .current_dir(ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_INDEX_FILE", side.join("hand-index"))
        .output()
        .expect("git add");
    let d = t.elapsed();
    assert!(out.status.success());
    d
}

fn hand_write_tree(side: &Path, ws: &Path) {
    let out = Command::new("git")
        .arg(format!("--git-dir={}", side.display()))
        .arg(format!("--work-tree={}", ws.display()))
        .arg("write-tree")
        .current_dir(ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_INDEX_FILE", side.join("hand-index"))
        .output()
        .expect("git write-tree");
    assert!(out.status.success());
}

fn git_status(ws: &Path) -> Duration {
    time_git(ws, &["status", "--porcelain"], None)
}

/// How long the user's own git takes for `args` in `dir` (no user or
/// system configuration; `index`: another index file to work on).
fn time_git(dir: &Path, args: &[&str], index: Option<&Path>) -> Duration {
    let mut c = Command::new("git");
    c.args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    if let Some(i) = index {
        c.env("GIT_INDEX_FILE", i);
    }
    let t = Instant::now();
    let out = c.output().expect("git");
    let d = t.elapsed();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    d
}

fn snapshots(env: &Env, big: &Path) {
    println!(
        "\n3. Undo snapshots on the 100k repository (load {})",
        load()
    );
    let side = env.root.join("hand-side.git");
    git(&env.root, &["init", "-q", "--bare", side.to_str().unwrap()]);
    // The snapshot plumbing before issue 29, by hand: a first snapshot
    // hashes every file into an empty side repository (`add -A`,
    // `write-tree`); a later one refreshes the side index.
    let mut old_first = Vec::new();
    for i in 0..3 {
        let s = env.root.join(format!("old-side-{i}.git"));
        git(&env.root, &["init", "-q", "--bare", s.to_str().unwrap()]);
        let t = Instant::now();
        hand_add(&s, big);
        hand_write_tree(&s, big);
        old_first.push(t.elapsed());
        let _ = std::fs::remove_dir_all(&s);
    }
    hand_add(&side, big);
    settle();
    let (mut first, mut same, mut status, mut add) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut open, mut first_only, mut copied) = (Vec::new(), Vec::new(), Vec::new());
    let (mut warm_open, mut run_first, mut journal_same, mut journal_one) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut turn = 0u64;
    for i in 0..runs(SNAP_RUNS) {
        let home = env.root.join(format!("snap-home-{i}"));
        let mut opts = SnapshotOptions::new(&home);
        opts.homes = vec![env.home.clone()];
        opts.user_dirs = UserDirs::at_home(&env.home);
        // As a run opens its store (src/agent/setup.rs): the seed is made
        // beside the size walk.
        opts.seed_at_open = true;
        settle();
        status.push(git_status(big));
        let t = Instant::now();
        let mut store = match SnapshotStore::open(big, opts).expect("open") {
            Opened::Ready(s) => *s,
            Opened::Disabled(d) => panic!("{d}"),
        };
        open.push(t.elapsed());
        turn += 1;
        let t1 = Instant::now();
        store
            .snapshot(Label::PreTurn(turn), SnapshotMeta::default())
            .expect("first snapshot");
        first_only.push(t1.elapsed());
        // Until its blobs are all in the side store: the copy the snapshot
        // leaves running in the background (src/snapshot/blobcopy.rs).
        store.finish_copy().expect("the blob copy");
        first.push(t.elapsed());
        copied.push(t1.elapsed());
        if i == 0 {
            println!(
                "  (side index seeded from the user's: {:?})",
                store.seeded_from_user_index()
            );
        }
        add.push(hand_add(&side, big));
        status.push(git_status(big));
        for _ in 0..2 {
            turn += 1;
            let t = Instant::now();
            store
                .snapshot(Label::PreTurn(turn), SnapshotMeta::default())
                .expect("no-change snapshot");
            same.push(t.elapsed());
            add.push(hand_add(&side, big));
            status.push(git_status(big));
        }
        // A run's store: the store exists (size walk from its cache), a
        // journal, the first snapshot full, the next ones from the journal.
        drop(store);
        let t = Instant::now();
        let mut opts = SnapshotOptions::new(&home);
        opts.homes = vec![env.home.clone()];
        opts.user_dirs = UserDirs::at_home(&env.home);
        let mut store = match SnapshotStore::open(big, opts).expect("open") {
            Opened::Ready(s) => *s,
            Opened::Disabled(d) => panic!("{d}"),
        };
        warm_open.push(t.elapsed());
        store.enable_journal();
        turn += 1;
        let t = Instant::now();
        store
            .snapshot(Label::PreTurn(turn), SnapshotMeta::default())
            .expect("run's first snapshot");
        run_first.push(t.elapsed());
        status.push(git_status(big));
        for _ in 0..2 {
            turn += 1;
            let t = Instant::now();
            store
                .snapshot(Label::PreTurn(turn), SnapshotMeta::default())
                .expect("journal snapshot");
            journal_same.push(t.elapsed());
            assert!(
                matches!(store.last_way(), Some(SnapshotWay::Journal { .. })),
                "{:?}",
                store.last_way()
            );
            status.push(git_status(big));
        }
        let deep = big.join("d9/e9/f9/m000.txt");
        let was = std::fs::read(&deep).unwrap();
        std::fs::write(&deep, format!("changed {i}\n")).unwrap();
        turn += 1;
        let t = Instant::now();
        store
            .snapshot(Label::PreTurn(turn), SnapshotMeta::default())
            .expect("journal snapshot");
        journal_one.push(t.elapsed());
        assert!(matches!(
            store.last_way(),
            Some(SnapshotWay::Journal {
                paths: 1,
                index: None
            })
        ));
        // Written back in place (a checkout would replace the file and
        // change its directory, and the next open would walk again).
        std::fs::write(&deep, was).unwrap();
        let _ = std::fs::remove_dir_all(&home);
    }
    show(
        "old plumbing, first snapshot (add -A + write-tree, empty side)",
        &old_first,
    );
    let s = show("git status (user's repository)", &status);
    let a = show("git add -A, no change (side repository by hand)", &add);
    let f = show(
        "first snapshot (open + snapshot + its blob copy ended)",
        &first,
    );
    let o = show(
        "  of which open (path checks, size walk beside the seed, git init)",
        &open,
    );
    let fo = show("  of which the snapshot, recorded", &first_only);
    show("  of which the snapshot until its blob copy ended", &copied);
    let n = show("no-change snapshot", &same);
    let wo = show("open, store exists (size walk from its cache)", &warm_open);
    let rf = show("a run's first snapshot (full, journal started)", &run_first);
    let js = show("no-change snapshot within a run (journal)", &journal_same);
    let j1 = show(
        "one file changed at depth 3, within a run (journal)",
        &journal_one,
    );
    println!(
        "  first / git status {:.2}x (goal <= 3; open {:.2}x, snapshot {:.2}x); no-change / git status {:.2}x (goal <= 1.5); no-change / git add -A {:.2}x",
        f / s,
        o / s,
        fo / s,
        n / s,
        n / a
    );
    println!(
        "  warm open / git status {:.2}x; run's first / git status {:.2}x; journal no-change / git status {:.2}x; journal one file / git status {:.2}x",
        wo / s,
        rf / s,
        js / s,
        j1 / s
    );
}

fn main() {
    let files: usize = std::env::var("MONOREPO_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    // Not under /tmp: every CLI run creates its TMPDIR entries there.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let env = Env {
        home: root.join("home"),
        root: root.clone(),
    };
    for d in ["home", "tmp", "run"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let small = root.join("small");
    let big = root.join("big");
    let t = Instant::now();
    generate(&small, 10);
    generate(&big, files);
    println!(
        "generated {files} files in {:.1} s; load {}",
        t.elapsed().as_secs_f64(),
        load()
    );
    let only = std::env::var("MONOREPO_ONLY").unwrap_or_default();
    if only.is_empty() || only.contains('1') {
        per_command(&env, &small, &big);
    }
    if only.is_empty() || only.contains('3') {
        snapshots(&env, &big);
    }
    if only.is_empty() || only.contains('2') {
        exec_scenario(&env, &small, &big);
    }
    if only.is_empty() || only.contains('4') {
        exec_with_a_thinking_model(&env, &small, &big);
    }
    println!("\nload at the end: {}", load());
}
