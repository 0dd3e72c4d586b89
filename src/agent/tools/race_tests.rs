//! A real process races the file tools: it swaps `notes.txt` for a symlink
//! (and back) with `renameat2(RENAME_EXCHANGE)` as fast as it can while the
//! tool runs thousands of times. Nothing the tool does may land outside the
//! writable root, on a write-protected file, or read a deny-read one.
//!
//! The swapper is this test binary re-run with `CODEWHALE_RACE_SWAPPER` set
//! (see [`swapper_child`]), so it is a separate process, as a sandboxed
//! command or MCP server would be.

use super::*;
use crate::agent::tools::guard::FsGuard;
use crate::agent::tools::ToolStatus;
use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
use nix::fcntl::{renameat2, RenameFlags};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const SWAP_ENV: &str = "CODEWHALE_RACE_SWAPPER";
/// Tool calls per race (reads are quicker, with a smaller window: more).
const ROUNDS: usize = 4000;
const READ_ROUNDS: usize = 20_000;

struct Race {
    _t: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    key: PathBuf,
    guard: FsGuard,
}

fn race_fixture() -> Race {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    let outside = root.join("outside");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    let key = home.join(".ssh/id_rsa");
    fs::write(&key, "PRIVATE KEY").unwrap();
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("victim"), "VICTIM").unwrap();
    fs::write(ws.join(".git/hooks/pre-commit"), "HOOK").unwrap();
    fs::write(ws.join("notes.txt"), "notes").unwrap();
    let facts = HostFacts {
        homes: vec![home],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let r = resolve(
        &SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws),
        &facts,
    )
    .unwrap();
    Race {
        _t: t,
        guard: FsGuard::new(&r),
        ws,
        outside,
        key,
    }
}

/// The swapper process: exchanges `DIR/notes.txt` and `DIR/alt` until
/// `DIR/STOP` exists (or two minutes pass, so a lost parent cannot leave it
/// running). Does nothing when run as an ordinary test.
#[test]
fn swapper_child() {
    let Ok(dir) = std::env::var(SWAP_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let (a, b, stop) = (dir.join("notes.txt"), dir.join("alt"), dir.join("STOP"));
    fs::write(dir.join("READY"), "").unwrap();
    let start = Instant::now();
    let mut n = 0u64;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    while start.elapsed() < Duration::from_secs(120) {
        renameat2(None, &a, None, &b, RenameFlags::RENAME_EXCHANGE).unwrap();
        n += 1;
        if n.is_multiple_of(512) && stop.exists() {
            break;
        }
        // Hold each state for a varying while (0 to about ten µs), so calls
        // meet both states and every phase of a swap.
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        for _ in 0..(seed >> 51) {
            std::hint::spin_loop();
        }
    }
}

struct Swapper {
    child: Child,
    dir: PathBuf,
}

impl Drop for Swapper {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("STOP"), "");
        let _ = self.child.wait();
    }
}

/// Start swapping `ws/notes.txt` with `ws/alt`, a symlink to `target`.
fn swap_with_symlink_to(ws: &Path, target: &Path) -> Swapper {
    std::os::unix::fs::symlink(target, ws.join("alt")).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "agent::tools::files::race_tests::swapper_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SWAP_ENV, ws)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.join("READY").exists() {
        assert!(Instant::now() < deadline, "the swapper did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    Swapper {
        child,
        dir: ws.to_path_buf(),
    }
}

fn unwrap_both(r: Result<ToolOutput, ToolOutput>) -> ToolOutput {
    r.unwrap_or_else(|e| e)
}

/// Tally of a race: how many calls went through, how many were refused.
#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    denied: usize,
    other: usize,
}

impl Tally {
    fn add(&mut self, o: &ToolOutput) {
        match o.status {
            ToolStatus::Ok => self.ok += 1,
            ToolStatus::Denied => self.denied += 1,
            ToolStatus::Error => self.other += 1,
        }
    }

    /// Both outcomes happened: the swapper really raced the tool, and the
    /// tool still worked on the allowed file (the positive control).
    fn raced(&self) {
        eprintln!("race tally: {self:?}");
        assert!(self.ok > 0, "no call went through: {self:?}");
        assert!(self.denied > 0, "the swapper never raced a call: {self:?}");
    }
}

#[test]
fn a_racing_symlink_cannot_redirect_a_write_outside_the_root() {
    write_outside_race();
}

/// The same two races through the `O_NOFOLLOW` walk (the fallback where
/// `openat2` is missing).
#[test]
fn the_fallback_walk_holds_both_races() {
    crate::agent::tools::guard::FORCE_WALK.with(|f| f.set(true));
    write_outside_race();
    read_secret_race();
}

fn write_outside_race() {
    let r = race_fixture();
    let victim = r.outside.join("victim");
    let swapper = swap_with_symlink_to(&r.ws, &victim);
    let mut tally = Tally::default();
    for i in 0..ROUNDS {
        let o = unwrap_both(write_file(
            &json!({"path": "notes.txt", "content": format!("allowed {i}")}),
            &r.guard,
        ));
        tally.add(&o);
        assert_eq!(
            fs::read_to_string(&victim).unwrap(),
            "VICTIM",
            "round {i}: a write went outside the workspace ({tally:?})"
        );
    }
    drop(swapper);
    tally.raced();
}

#[test]
fn a_racing_symlink_cannot_redirect_a_write_onto_a_protected_file() {
    let r = race_fixture();
    let hook = r.ws.join(".git/hooks/pre-commit");
    let swapper = swap_with_symlink_to(&r.ws, &hook);
    let mut tally = Tally::default();
    for i in 0..ROUNDS {
        let o = unwrap_both(edit_file(
            &json!({"path": "notes.txt", "old_string": "o", "new_string": "o"}),
            &r.guard,
        ));
        tally.add(&o);
        let o = unwrap_both(write_file(
            &json!({"path": "notes.txt", "content": "notes"}),
            &r.guard,
        ));
        tally.add(&o);
        assert_eq!(
            fs::read_to_string(&hook).unwrap(),
            "HOOK",
            "round {i}: a write landed on a git hook ({tally:?})"
        );
    }
    drop(swapper);
    tally.raced();
}

#[test]
fn a_racing_symlink_cannot_redirect_a_read_to_a_secret() {
    read_secret_race();
}

fn read_secret_race() {
    let r = race_fixture();
    let swapper = swap_with_symlink_to(&r.ws, &r.key);
    let mut tally = Tally::default();
    for i in 0..READ_ROUNDS {
        let o = unwrap_both(read_file(&json!({"path": "notes.txt"}), &r.guard));
        assert!(
            !o.content.contains("PRIVATE KEY"),
            "round {i}: read_file returned the deny-read key ({tally:?})"
        );
        tally.add(&o);
        if o.status == ToolStatus::Ok {
            assert_eq!(o.content, "notes");
        }
    }
    drop(swapper);
    tally.raced();
}
