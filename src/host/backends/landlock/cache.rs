//! Reusing the landlock tier's planned and prepared ruleset across runs.
//!
//! Planning (the complement walk lists directories) and preparing (one
//! `O_PATH` open and one `landlock_add_rule` per rule, hundreds for a
//! busy home) cost milliseconds, far more than the spawn itself. An agent
//! runs many commands under one policy, so the tier keeps the last
//! prepared rulesets and reuses one when it is still exactly what a fresh
//! plan would produce:
//!
//! - the freshly **resolved** policy equals the cached one (resolution runs
//!   on every call, so a new `.env` or a protected path that appeared
//!   changes the key and forces a new plan), and so do the options;
//! - every directory the complement walk **listed** still has the same
//!   device, inode, mtime and ctime (an entry added, removed, renamed or
//!   replaced by a symlink changes its directory's mtime), and the
//!   workspace and writable roots are still the same inodes;
//! - the per-run `TMPDIR` still exists as the same directory. It is
//!   emptied after every run, so each run starts with an empty one, as
//!   with a fresh directory.
//!
//! A cached entry is checked out for the duration of a run (never shared
//! by two concurrent runs: a second concurrent run plans its own), and
//! returned afterwards. The kernel ruleset is duplicated per run
//! (`PreparedRuleset::try_clone`: one `dup`).

use crate::host::backends::landlock::{self, LandlockOptions, LandlockPlan, PreparedRuleset};
use crate::host::HostError;
use crate::policy::ResolvedPolicy;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How many prepared rulesets are kept (one per recent policy).
const CAPACITY: usize = 4;

/// What identifies a directory's state for the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    /// (mtime, ctime) in ns; `None` when only the identity is checked.
    times: Option<(i128, i128)>,
}

fn stamp(p: &Path, with_times: bool) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if !m.is_dir() {
        return None;
    }
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        times: with_times.then(|| (ns(m.mtime(), m.mtime_nsec()), ns(m.ctime(), m.ctime_nsec()))),
    })
}

/// A planned, prepared ruleset and the state it was planned from.
pub struct Entry {
    policy: ResolvedPolicy,
    opts: LandlockOptions,
    pub plan: LandlockPlan,
    prepared: PreparedRuleset,
    tmp: tempfile::TempDir,
    pub tmp_path: PathBuf,
    stamps: Vec<(PathBuf, Stamp)>,
}

impl Entry {
    /// A second handle on the kernel ruleset for one run.
    pub fn ruleset(&self) -> Result<PreparedRuleset, HostError> {
        self.prepared.try_clone().map_err(|e| {
            HostError::io("duplicating the Landlock ruleset", std::io::Error::other(e))
        })
    }

    /// A report of what the ruleset enforces.
    pub fn report(&self) -> &crate::host::enforcement::LandlockReport {
        self.prepared.report()
    }

    fn fresh(&self) -> bool {
        self.stamps
            .iter()
            .all(|(p, s)| stamp(p, s.times.is_some()).as_ref() == Some(s))
    }

    /// Empty the per-run directory; false if that failed (then the entry
    /// is not kept: the next run gets a new, empty one).
    fn empty_tmp(&self) -> bool {
        let Ok(rd) = std::fs::read_dir(self.tmp.path()) else {
            return false;
        };
        rd.flatten().all(|e| {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p).is_ok(),
                Ok(_) => std::fs::remove_file(&p).is_ok(),
                Err(_) => false,
            }
        })
    }
}

static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn cache() -> &'static Mutex<Vec<Entry>> {
    // Statics are never dropped: without this, every process that ran the
    // tier would leave its cached per-run directories behind at exit.
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain extern "C" function with no captures.
        unsafe { libc::atexit(drop_cached_entries) };
    });
    &CACHE
}

/// At exit: drop the cached entries, which removes their directories.
/// `try_lock`: a thread still inside a run at exit keeps its entry (and
/// its directory) rather than blocking the exit.
extern "C" fn drop_cached_entries() {
    if let Ok(mut c) = CACHE.try_lock() {
        c.clear();
    }
}

/// The options as the cache compares them (the per-run tmp dir is the
/// entry's own).
fn key_opts(opts: &LandlockOptions) -> LandlockOptions {
    LandlockOptions {
        tmp_dir: None,
        ..opts.clone()
    }
}

/// Take a still-valid entry for `policy` + `opts` out of the cache, or plan
/// and prepare a new one (`plan_err` turns planning errors into the tier's
/// error).
pub fn checkout(
    policy: &ResolvedPolicy,
    opts: &LandlockOptions,
    plan_err: impl Fn(String) -> HostError,
) -> Result<Entry, HostError> {
    let key = key_opts(opts);
    if let Ok(mut c) = cache().lock() {
        if let Some(i) = c.iter().position(|e| e.policy == *policy && e.opts == key) {
            let e = c.swap_remove(i);
            if e.fresh() {
                return Ok(e);
            }
        }
    }
    plan_new(policy, key, plan_err)
}

/// The per-run directories' name prefix; the creating process's pid
/// follows, so leftovers of a process that was killed can be recognised.
const RUN_DIR_PREFIX: &str = "codewhale-run-";

/// Once per process: remove the per-run directories that processes of
/// ours left behind when they were killed (SIGKILL runs no exit handler).
/// Only directories we own, whose creating process no longer exists.
fn sweep_leftovers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let tmp = std::env::temp_dir();
        let Ok(rd) = std::fs::read_dir(&tmp) else {
            return;
        };
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(RUN_DIR_PREFIX))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let owned = e
                .metadata()
                .is_ok_and(|m| m.is_dir() && m.uid() == me && !m.file_type().is_symlink());
            // SAFETY: signal 0 only asks whether the pid exists.
            let gone = unsafe { libc::kill(pid, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if owned && gone {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
}

fn plan_new(
    policy: &ResolvedPolicy,
    key: LandlockOptions,
    plan_err: impl Fn(String) -> HostError,
) -> Result<Entry, HostError> {
    sweep_leftovers();
    // A `$TMPDIR` that does not exist yet (fresh machine, cleaned tmp) is
    // created rather than failing the run; private to us, as `mktemp -d` would.
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(std::env::temp_dir());
    }
    let tmp = tempfile::Builder::new()
        .prefix(&format!("{RUN_DIR_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(|e| HostError::io("creating the per-run temporary directory", e))?;
    let tmp_path = std::fs::canonicalize(tmp.path())
        .map_err(|e| HostError::io("resolving the per-run temporary directory", e))?;
    let mut opts = key.clone();
    opts.tmp_dir = Some(tmp_path.clone());
    let plan = landlock::plan(policy, &opts).map_err(|e| plan_err(e.to_string()))?;
    let prepared = landlock::prepare(&plan).map_err(|e| plan_err(e.to_string()))?;
    let mut stamps = Vec::new();
    for d in &plan.stats.listed {
        if let Some(s) = stamp(d, true) {
            stamps.push((d.clone(), s));
        }
    }
    let roots = std::iter::once(&policy.workspace)
        .chain(policy.writable_roots.iter().map(|r| &r.path))
        .chain(std::iter::once(&tmp_path));
    for r in roots {
        if let Some(s) = stamp(r, false) {
            stamps.push((r.clone(), s));
        }
    }
    Ok(Entry {
        policy: policy.clone(),
        opts: key,
        plan,
        prepared,
        tmp,
        tmp_path,
        stamps,
    })
}

/// Give `entry` back after its run (emptying its `TMPDIR` first). The
/// oldest entry goes when the cache is full.
pub fn give_back(entry: Entry) {
    if !entry.empty_tmp() {
        return;
    }
    if let Ok(mut c) = cache().lock() {
        if c.len() >= CAPACITY {
            c.remove(0);
        }
        c.push(entry);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::host::backends::landlock::Tier;
    use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};

    fn setup() -> (tempfile::TempDir, ResolvedPolicy, LandlockOptions) {
        // Not under /tmp: other tests create directories there all the
        // time, and /tmp is on the walk's path to the workspace's .env.
        let target = concat!(env!("CARGO_MANIFEST_DIR"), "/target");
        std::fs::create_dir_all(target).unwrap();
        let t = tempfile::Builder::new()
            .prefix("landlock-cache-test-")
            .tempdir_in(target)
            .unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap();
        std::fs::write(ws.join(".env"), "K=v").unwrap();
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let resolved = resolve(&policy, &HostFacts::detect()).unwrap();
        (t, resolved, LandlockOptions::detect(Tier::NoNamespaces))
    }

    fn err(s: String) -> HostError {
        HostError::io("plan", std::io::Error::other(s))
    }

    #[test]
    fn reused_while_unchanged_replanned_when_a_listed_dir_changes() {
        let (t, resolved, opts) = setup();
        let e = checkout(&resolved, &opts, err).unwrap();
        let first_tmp = e.tmp_path.clone();
        // The .env in the workspace root makes the walk list the workspace.
        assert!(e.plan.stats.listed.iter().any(|d| d == &resolved.workspace));
        std::fs::write(e.tmp_path.join("left-over"), "x").unwrap();
        give_back(e);
        let e = checkout(&resolved, &opts, err).unwrap();
        assert_eq!(e.tmp_path, first_tmp, "same entry reused");
        assert!(
            std::fs::read_dir(&e.tmp_path).unwrap().next().is_none(),
            "TMPDIR emptied between runs"
        );
        give_back(e);
        // A new entry in a listed directory: the cached plan would not
        // grant it, so it is planned again.
        std::fs::write(t.path().join("new-file"), "x").unwrap();
        let e = checkout(&resolved, &opts, err).unwrap();
        assert_ne!(e.tmp_path, first_tmp, "stale entry replanned");
        assert!(e.plan.rules.iter().any(|r| r.path.ends_with("new-file")));
        give_back(e);
    }

    #[test]
    fn a_different_policy_never_gets_the_entry() {
        let (_t, resolved, opts) = setup();
        let e = checkout(&resolved, &opts, err).unwrap();
        let first_tmp = e.tmp_path.clone();
        give_back(e);
        let mut other = resolved.clone();
        other.network = !other.network;
        let e = checkout(&other, &opts, err).unwrap();
        assert_ne!(e.tmp_path, first_tmp);
    }
}
