//! The after-run integrity check of write-protected paths.
//!
//! Mounts (bwrap tier) and Landlock rules protect what they can *during* a
//! run: an existing `.git/config` is a read-only mount under bwrap. Some
//! protection cannot be expressed without littering the workspace or
//! breaking ordinary tools: a mount needs an entry to mount on, so a
//! protected path that does not exist yet (`.envrc`, `.vscode/`) could only
//! be held by creating it on the host; Landlock cannot withhold one name in
//! a directory the command may create files in. Those paths are guarded
//! here instead, and hold only *after* the run:
//!
//! 1. before the command starts, the state of each guarded path (its
//!    bytes, or a protected directory's small tree) is recorded in a
//!    baseline in codewhale's state directory, contents in a
//!    content-addressed object store;
//! 2. after the command (and its whole process tree) ended, each guarded
//!    path is compared with the baseline; whatever differs is moved into
//!    the quarantine directory (never deleted: it may be the user's) and
//!    the baseline is put back;
//! 3. every revert is returned by path for the run's report.
//!
//! Concurrency and crashes: runs in the same workspace share one baseline
//! (taken by the first of them, so a later run never adopts what an earlier
//! one wrote), each run holds a shared lock on `active` for its duration,
//! and the baseline is dropped by the last run to leave. A baseline nobody
//! holds belongs to a run that died (SIGKILL); the next codewhale command
//! ([`recover_all`], called at start-up by every command) checks and
//! reverts against it before anything else.
//!
//! Only the protected paths are read, never the trees around them (the
//! nested-repository audit adds the nested gitdirs' few files, and the
//! index's gitlinks, listed by git only when the index changed).

pub mod nested;
#[cfg(target_os = "linux")]
pub mod sandboxes;
pub mod state;

use crate::host::enforcement::{Revert, RevertAction};
use crate::host::HostError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use state::{capture, restore, same, Objects, State};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const BASELINE: &str = "baseline.json";

/// How long the check of a dead run waits for the sandboxes it recorded to
/// be gone ([`sandboxes::wait_dead`]); the kernel takes milliseconds, so
/// only a process stuck in the kernel (a hung network filesystem) gets near.
#[cfg(target_os = "linux")]
const DEAD_SANDBOX_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// One guarded path and the writable root it lies in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub root: PathBuf,
    pub path: PathBuf,
}

/// `paths` paired with the innermost writable root of `policy` holding
/// each (paths outside every writable root cannot be written: dropped).
pub fn targets(policy: &crate::policy::ResolvedPolicy, paths: &[PathBuf]) -> Vec<Target> {
    paths
        .iter()
        .filter_map(|p| {
            let root = policy
                .writable_roots
                .iter()
                .map(|r| &r.path)
                .filter(|r| p.starts_with(r) && p != *r)
                .max_by_key(|r| r.as_os_str().len())?;
            Some(Target {
                root: root.clone(),
                path: p.clone(),
            })
        })
        .collect()
}

/// The `partial` items and report lines of a guarded run: each path held
/// only after the run, each revert, each path that could not be guarded.
pub fn report_items(
    guarded: &[Target],
    unguarded: &[(PathBuf, String)],
    reverts: &[Revert],
    during: &str,
) -> Vec<crate::host::enforcement::PartialItem> {
    use crate::host::enforcement::{PartialItem, Shortfall};
    let mut out = Vec::new();
    if !guarded.is_empty() {
        let names: Vec<String> = guarded
            .iter()
            .map(|t| t.path.display().to_string())
            .collect();
        out.push(PartialItem::new(
            Shortfall::WriteProtect,
            format!(
                "held only after the run: {during}; when the command ends, whatever it created \
                 or changed there is moved to codewhale's quarantine and the previous version \
                 put back: {}",
                names.join(", ")
            ),
        ));
    }
    for (p, why) in unguarded {
        out.push(PartialItem::at(
            Shortfall::WriteProtect,
            p.clone(),
            format!("not guarded by the after-run check: {why}"),
        ));
    }
    out.extend(reverts.iter().map(Revert::partial));
    out
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    root: PathBuf,
    path: PathBuf,
    state: State,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Baseline {
    workspace: PathBuf,
    entries: Vec<Entry>,
    /// When the first run sharing this baseline took it (ms since the
    /// epoch): nested repositories' files written since are audited
    /// ([`nested`]). Absent in baselines of older versions: not audited.
    #[serde(default)]
    started_ms: Option<u64>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// codewhale's integrity directory: `$CODEWHALE_HOME/integrity` (deny-read
/// and outside every writable root, so a sandboxed command can neither
/// read the copies nor forge the baseline), else the per-user runtime dir.
pub fn state_dir() -> PathBuf {
    match crate::snapshot::layout::codewhale_home() {
        Some(h) => h.join("integrity"),
        None => crate::host::backends::bwrap::placeholder_base().join("integrity"),
    }
}

/// Fill the cache of `workspace`'s gitlinks (the after-run check's list
/// of nested repositories, kept with its index's identity) ahead of the
/// first sandboxed command, on a thread of its own: at 100,000 files the
/// listing is a `git ls-files` of ~40 ms that the first command's check
/// would otherwise wait for, and a run starts with a single-core phase
/// (the `.env` scan) beside which it costs nothing. Best effort: the
/// check computes the list itself when the cache is not there yet.
pub fn warm_gitlinks(workspace: &Path) {
    let root = workspace.to_path_buf();
    let cache = state_dir().join("gitlinks");
    let _ = std::thread::Builder::new()
        .name("gitlinks-ahead".into())
        .spawn(move || nested::warm(&root, &cache));
}

/// The quarantine directory (inside [`state_dir`]).
pub fn quarantine_dir() -> PathBuf {
    state_dir().join("quarantine")
}

fn io(what: &str, p: &Path, e: std::io::Error) -> HostError {
    HostError::io(format!("integrity check: {what} {}", p.display()), e)
}

fn mkdir_private(p: &Path) -> Result<(), HostError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| io("creating", p, e))
}

fn key(workspace: &Path) -> String {
    hex::encode(&Sha256::digest(workspace.as_os_str().as_bytes())[..8])
}

fn flock(f: &File, op: libc::c_int) -> bool {
    // SAFETY: flock on an fd we own.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

fn open_lock(p: &Path) -> Result<File, HostError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(p)
        .map_err(|e| io("opening", p, e))
}

fn load(dir: &Path) -> Option<Baseline> {
    let bytes = std::fs::read(dir.join(BASELINE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn save(dir: &Path, b: &Baseline) -> Result<(), HostError> {
    let p = dir.join(BASELINE);
    let tmp = dir.join(format!(".{BASELINE}.{}", std::process::id()));
    let bytes = serde_json::to_vec(b).map_err(|e| io("encoding", &p, e.into()))?;
    std::fs::write(&tmp, bytes).map_err(|e| io("writing", &tmp, e))?;
    std::fs::rename(&tmp, &p).map_err(|e| io("writing", &p, e))
}

/// The guard of one run: holds the shared `active` lock until [`RunGuard::leave`].
pub struct RunGuard {
    base: PathBuf,
    dir: PathBuf,
    active: File,
    /// Targets that could not be guarded (too big, unreadable), with why.
    pub unguarded: Vec<(PathBuf, String)>,
    /// Reverts made on entry for an earlier run that died.
    pub recovered: Vec<Revert>,
}

impl RunGuard {
    /// Record the baseline of `targets` (or join the one a concurrent run
    /// in the same workspace recorded) before the command starts.
    pub fn enter(workspace: &Path, targets: &[Target]) -> Result<RunGuard, HostError> {
        Self::enter_in(&state_dir(), workspace, targets)
    }

    /// [`RunGuard::enter`] with the state directory given (tests).
    pub fn enter_in(
        base: &Path,
        workspace: &Path,
        targets: &[Target],
    ) -> Result<RunGuard, HostError> {
        let base = base.to_path_buf();
        let dir = base.join("runs").join(key(workspace));
        let objects = Objects {
            dir: base.join("objects"),
        };
        mkdir_private(&dir)?;
        mkdir_private(&objects.dir)?;
        let mutex = open_lock(&dir.join("lock"))?;
        if !flock(&mutex, libc::LOCK_EX) {
            return Err(io("locking", &dir, std::io::Error::last_os_error()));
        }
        let active = open_lock(&dir.join("active"))?;
        let mut recovered = Vec::new();
        let mut baseline = if flock(&active, libc::LOCK_EX | libc::LOCK_NB) {
            // Nobody else is running here: a baseline still present is
            // a dead run's, checked before this run takes a fresh one.
            if let Some(old) = load(&dir) {
                #[cfg(target_os = "linux")]
                for n in sandboxes::wait_dead(&dir, DEAD_SANDBOX_WAIT) {
                    eprintln!("codewhale: {n}");
                }
                recovered = check(&base, &old, &objects, true);
            }
            #[cfg(target_os = "linux")]
            recovered.extend(crate::host::backends::landlock::renamed::recover(&dir));
            Baseline {
                workspace: workspace.to_path_buf(),
                entries: Vec::new(),
                started_ms: Some(now_ms()),
            }
        } else {
            load(&dir).unwrap_or_else(|| Baseline {
                workspace: workspace.to_path_buf(),
                entries: Vec::new(),
                started_ms: Some(now_ms()),
            })
        };
        if !flock(&active, libc::LOCK_SH) {
            return Err(io("locking", &dir, std::io::Error::last_os_error()));
        }
        let mut unguarded = Vec::new();
        for t in targets {
            let existing = baseline.entries.iter().find(|e| e.path == t.path);
            let st = match existing {
                Some(e) => e.state.clone(),
                None => {
                    let st = capture(&t.root, &t.path, Some(&objects));
                    baseline.entries.push(Entry {
                        root: t.root.clone(),
                        path: t.path.clone(),
                        state: st.clone(),
                    });
                    st
                }
            };
            match st {
                State::Unguardable { why } => unguarded.push((t.path.clone(), why)),
                State::AncestorReplaced { ancestor } => unguarded.push((
                    t.path.clone(),
                    format!("{} is not a directory before the run", ancestor.display()),
                )),
                _ => {}
            }
        }
        save(&dir, &baseline)?;
        drop(mutex);
        Ok(RunGuard {
            base,
            dir,
            active,
            unguarded,
            recovered,
        })
    }

    /// The shared lock's fd, for a process that must keep the run live
    /// as long as it lives (the landlock tier's stage). Valid while the
    /// guard is.
    #[cfg(target_os = "linux")]
    pub fn lock_fd(&self) -> std::os::fd::RawFd {
        self.active.as_raw_fd()
    }

    /// This run's directory in the integrity state (its baseline, locks
    /// and the records of what the crash recovery must know).
    pub fn run_dir(&self) -> &Path {
        &self.dir
    }

    /// Record a sandbox's pid-namespace init for this run before the
    /// command may start (see [`sandboxes`]).
    #[cfg(target_os = "linux")]
    pub fn record_sandbox(&self, pid: libc::pid_t) -> Result<sandboxes::Recorded, HostError> {
        sandboxes::record(&self.dir, pid)
    }

    /// After the command's process tree ended: revert what changed, and
    /// drop the baseline if no other run in this workspace is active.
    pub fn leave(self) -> Vec<Revert> {
        let objects = Objects {
            dir: self.base.join("objects"),
        };
        let Ok(mutex) = open_lock(&self.dir.join("lock")) else {
            return Vec::new();
        };
        flock(&mutex, libc::LOCK_EX);
        let reverts = load(&self.dir)
            .map(|b| check(&self.base, &b, &objects, false))
            .unwrap_or_default();
        if flock(&self.active, libc::LOCK_EX | libc::LOCK_NB) {
            let _ = std::fs::remove_file(self.dir.join(BASELINE));
        }
        drop(mutex);
        reverts
    }
}

/// Check every baseline no live run holds (runs that died) and revert
/// against it. Called at the start of every codewhale command; cheap when
/// there is nothing to do (a listing of the runs, and of the small
/// directory of each workspace that has no baseline, for a dead fallback
/// run's list of renamed files).
pub fn recover_all() -> Vec<(PathBuf, Vec<Revert>)> {
    let r = recover_in(&state_dir());
    if let Ok(mut seen) = recovered_log().lock() {
        seen.extend(r.iter().flat_map(|(_, v)| v.iter().cloned()));
    }
    r
}

/// Everything [`recover_all`] undid in this process (doctor reports what
/// the start-up check of its own command repaired).
pub fn recovered_so_far() -> Vec<Revert> {
    recovered_log()
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default()
}

fn recovered_log() -> &'static std::sync::Mutex<Vec<Revert>> {
    static LOG: std::sync::OnceLock<std::sync::Mutex<Vec<Revert>>> = std::sync::OnceLock::new();
    LOG.get_or_init(Default::default)
}

/// [`recover_all`] with the state directory given (tests).
pub fn recover_in(base: &Path) -> Vec<(PathBuf, Vec<Revert>)> {
    let Ok(rd) = std::fs::read_dir(base.join("runs")) else {
        return Vec::new();
    };
    let objects = Objects {
        dir: base.join("objects"),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let dir = e.path();
        if !dir.join(BASELINE).exists() && !has_renamed_lists(&dir) {
            continue;
        }
        let (Ok(mutex), Ok(active)) =
            (open_lock(&dir.join("lock")), open_lock(&dir.join("active")))
        else {
            continue;
        };
        flock(&mutex, libc::LOCK_EX);
        if !flock(&active, libc::LOCK_EX | libc::LOCK_NB) {
            continue; // a live run: it checks when it leaves
        }
        #[cfg(target_os = "linux")]
        for n in sandboxes::wait_dead(&dir, DEAD_SANDBOX_WAIT) {
            eprintln!("codewhale: {n}");
        }
        let mut r = Vec::new();
        let mut workspace = None;
        if let Some(b) = load(&dir) {
            r = check(base, &b, &objects, true);
            let _ = std::fs::remove_file(dir.join(BASELINE));
            workspace = Some(b.workspace);
        }
        // Deny-read files a dead carve+opener run renamed (its list can
        // outlive the baseline when a concurrent run left last).
        #[cfg(target_os = "linux")]
        r.extend(crate::host::backends::landlock::renamed::recover(&dir));
        if let Some(ws) = workspace.or_else(|| (!r.is_empty()).then(|| dir.clone())) {
            out.push((ws, r));
        }
    }
    out
}

/// Whether `dir` holds a carve+opener run's list of watched deny-read
/// files (`landlock::renamed::persist`).
fn has_renamed_lists(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("renamed-"))
    })
}

/// Whether a baseline of a dead run is waiting (for `doctor`).
pub fn pending() -> Vec<PathBuf> {
    pending_in(&state_dir())
}

/// [`pending`] with the state directory given (tests).
pub fn pending_in(base: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(base.join("runs")) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|d| d.join(BASELINE).exists())
        .filter(|d| {
            open_lock(&d.join("active"))
                .map(|a| flock(&a, libc::LOCK_EX | libc::LOCK_NB))
                .unwrap_or(false)
        })
        .filter_map(|d| load(&d).map(|b| b.workspace))
        .collect()
}

/// Compare each entry with the disk now and revert what differs.
fn check(base: &Path, b: &Baseline, objects: &Objects, earlier_run: bool) -> Vec<Revert> {
    let mut out = Vec::new();
    let stamp = format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0),
        std::process::id()
    );
    let qdir = base.join("quarantine").join(stamp);
    for e in &b.entries {
        if matches!(
            e.state,
            State::Unguardable { .. } | State::AncestorReplaced { .. }
        ) {
            continue;
        }
        let now = capture(&e.root, &e.path, None);
        if same(&e.state, &now) {
            continue;
        }
        let mut revert =
            |path: &Path, action: RevertAction, q: Option<PathBuf>, err: Option<String>| {
                out.push(Revert {
                    path: path.to_path_buf(),
                    action,
                    quarantined_to: q,
                    error: err,
                    earlier_run,
                    why: None,
                })
            };
        let mut now = now;
        if let State::AncestorReplaced { ancestor } = &now {
            match quarantine(&qdir, ancestor) {
                Ok(q) => revert(ancestor, RevertAction::Removed, Some(q), None),
                Err(err) => {
                    revert(ancestor, RevertAction::Failed, None, Some(err));
                    continue;
                }
            }
            now = State::Missing;
        }
        let mut moved = None;
        if now != State::Missing {
            match quarantine(&qdir, &e.path) {
                Ok(q) => moved = Some(q),
                Err(err) => {
                    revert(&e.path, RevertAction::Failed, None, Some(err));
                    continue;
                }
            }
        }
        if e.state == State::Missing {
            revert(&e.path, RevertAction::Removed, moved, None);
            continue;
        }
        let parent_ok = e
            .path
            .parent()
            .is_some_and(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()));
        if !parent_ok {
            // The directory holding it is gone (`rm -rf .git`): nothing
            // runs from a path that does not exist; no skeleton is made.
            revert(&e.path, RevertAction::LeftDeleted, moved, None);
            continue;
        }
        let action = if moved.is_some() {
            RevertAction::Restored
        } else {
            RevertAction::Recreated
        };
        match restore(objects, &e.state, &e.path) {
            Ok(()) => revert(&e.path, action, moved, None),
            Err(err) => revert(&e.path, RevertAction::Failed, moved, Some(err.to_string())),
        }
    }
    if let Some(ms) = b.started_ms {
        let since = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        let since = since.checked_sub(nested::SLACK).unwrap_or(since);
        let skip: Vec<PathBuf> = b.entries.iter().map(|e| e.path.clone()).collect();
        let mut roots: Vec<&Path> = vec![b.workspace.as_path()];
        for e in &b.entries {
            if !roots.contains(&e.root.as_path()) {
                roots.push(&e.root);
            }
        }
        for root in roots {
            let cache = base.join("gitlinks");
            out.extend(nested::audit(
                root,
                Some(&cache),
                since,
                &skip,
                earlier_run,
                &mut |p| quarantine(&qdir, p),
            ));
        }
    }
    out
}

/// Move `p` into `qdir`, mirroring its absolute path; across filesystems
/// copy then remove. Returns where it went.
fn quarantine(qdir: &Path, p: &Path) -> Result<PathBuf, String> {
    let rel = p.strip_prefix("/").unwrap_or(p);
    let dst = qdir.join(rel);
    if let Some(parent) = dst.parent() {
        mkdir_private(parent).map_err(|e| e.to_string())?;
    }
    match std::fs::rename(p, &dst) {
        Ok(()) => Ok(dst),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy_tree(p, &dst).map_err(|e| format!("copying {}: {e}", p.display()))?;
            remove_tree(p).map_err(|e| format!("removing {}: {e}", p.display()))?;
            Ok(dst)
        }
        Err(e) => Err(format!("moving {} to {}: {e}", p.display(), dst.display())),
    }
}

fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    let m = std::fs::symlink_metadata(src)?;
    if m.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(src)?, dst)
    } else if m.is_dir() {
        std::fs::create_dir(dst)?;
        for e in std::fs::read_dir(src)? {
            let e = e?;
            copy_tree(&e.path(), &dst.join(e.file_name()))?;
        }
        Ok(())
    } else if m.is_file() {
        std::fs::copy(src, dst).map(|_| ())
    } else {
        Ok(()) // sockets, fifos: removed, not kept
    }
}

fn remove_tree(p: &Path) -> std::io::Result<()> {
    let m = std::fs::symlink_metadata(p)?;
    if m.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
