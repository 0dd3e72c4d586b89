//! The whole size walk: every directory of the workspace listed once, on
//! one thread per core sharing one stack of directories.
//!
//! Each directory is read whole by one thread: its stamp (`fstat` of the
//! descriptor it is listed through, taken before the listing), its own
//! `.gitignore` (loaded before any of its entries is judged), then its
//! entries counted under the `.gitignore` files above it — the nearest
//! with an opinion decides, as in git and in [`super::Rules`], which
//! re-counts what this walk counted. A directory's counts are its own:
//! nothing is merged between threads but the totals (for the limits) and,
//! at the end, each thread's directories.
//!
//! Why not `ignore`'s parallel walker (which this replaced, keeping its
//! `.gitignore` matcher): it makes a path, a work item and a matcher walk
//! up the parents for every entry; at 100,000 files ~70 % of the walk's
//! ~150 ms of CPU was that machinery, the rest listing and counting.

use super::{
    is_racy, limits, relative, skipped_dir, stamp, DirSeen, Disabled, SizeSeen, Stamp, TrackedDir,
    TrackedSizes,
};
use crate::policy::env_scan::{ListedDir, WorkspaceListing};
use crate::work_stack::WorkStack;
use ignore::gitignore::Gitignore;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// How many entries a thread counts before it adds them to the shared
/// totals and checks the limits (two threads adding to one cache line
/// per file cost more than the limit check needs).
const FLUSH_EVERY: u64 = 64;

/// The `.gitignore` files above a directory, nearest first.
struct Chain {
    rules: Gitignore,
    up: Option<Arc<Chain>>,
}

/// Whether the nearest `.gitignore` with an opinion on `path` ignores it.
fn ignored(mut chain: Option<&Chain>, path: &Path, is_dir: bool) -> bool {
    while let Some(c) = chain {
        if let Some(verdict) = super::opinion(&c.rules, path, is_dir) {
            return verdict;
        }
        chain = c.up.as_deref();
    }
    false
}

/// A directory to count, with the rules above it.
struct Job {
    dir: PathBuf,
    rules: Option<Arc<Chain>>,
}

/// What the threads share.
struct Shared<'a> {
    /// Directories found and not yet counted ([`WorkStack`]).
    jobs: WorkStack<Job>,
    /// A limit was crossed (or a thread panicked): every thread stops
    /// (checked per entry; the stack is stopped too).
    stop: AtomicBool,
    entries: AtomicU64,
    bytes: AtomicU64,
    over: Mutex<Option<Disabled>>,
    workspace: &'a Path,
    tracked: Option<&'a TrackedSizes>,
    /// The directories the `.env` scan already read whole: counted from
    /// there, not read again.
    listed: Option<&'a WorkspaceListing>,
    started: i64,
    max_entries: u64,
    max_bytes: u64,
}

/// What one thread saw.
#[derive(Default)]
struct Part {
    dirs: BTreeMap<PathBuf, DirSeen>,
    ignores: Vec<(PathBuf, Stamp)>,
    racy: bool,
    /// Counted, not yet added to the shared totals.
    pending: (u64, u64),
}

impl Shared<'_> {
    /// Stop every thread: a limit was crossed, or one panicked.
    fn stop(&self) {
        self.stop.store(true, Relaxed);
        self.jobs.stop();
    }
}

/// Stops the walk when the thread counting a directory panics: its totals
/// would be short, so no answer is better than a wrong one.
struct StopOnPanic<'s, 'a>(&'s Shared<'a>);

impl Drop for StopOnPanic<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
        }
    }
}

/// Count everything under `workspace` (see [`super::check_size_cached`]).
pub(super) fn walk_size(
    workspace: &Path,
    max_entries: u64,
    max_bytes: u64,
    tracked: Option<&TrackedSizes>,
    listed: Option<&WorkspaceListing>,
) -> Result<SizeSeen, Disabled> {
    let shared = Shared {
        jobs: WorkStack::new(vec![Job {
            dir: workspace.to_path_buf(),
            rules: None,
        }]),
        stop: AtomicBool::new(false),
        entries: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        over: Mutex::new(None),
        workspace,
        tracked,
        listed,
        started: super::now_secs(),
        max_entries,
        max_bytes,
    };
    // One thread per core, as many as `ignore` used (at most 12).
    let threads = std::thread::available_parallelism()
        .map(|n| n.get().min(12))
        .unwrap_or(1);
    let parts: Vec<Part> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for _ in 1..threads {
            // A thread that cannot start leaves the work to the others.
            if let Ok(h) = std::thread::Builder::new()
                .name("size-walk".into())
                .spawn_scoped(s, || work(&shared))
            {
                handles.push(h);
            }
        }
        let mut parts = vec![work(&shared)];
        for h in handles {
            parts.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        parts
    });
    if let Some(d) = shared.over.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(d);
    }
    // The threads check the limits every few entries; the exact totals
    // are checked here.
    let (entries, bytes) = (shared.entries.into_inner(), shared.bytes.into_inner());
    limits(workspace, entries, bytes, max_entries, max_bytes)?;
    let mut seen = SizeSeen {
        entries,
        bytes,
        dirs: BTreeMap::new(),
        ignores: Vec::new(),
        racy: false,
    };
    for p in parts {
        seen.dirs.extend(p.dirs);
        seen.ignores.extend(p.ignores);
        seen.racy |= p.racy;
    }
    seen.ignores.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(seen)
}

/// One thread: take directories until none is left.
fn work(shared: &Shared<'_>) -> Part {
    let mut part = Part::default();
    while let Some(mut taken) = shared.jobs.take() {
        let Some(job) = taken.item() else { continue };
        let guard = StopOnPanic(shared);
        count_dir(shared, &mut part, job, &mut taken.found);
        drop(guard);
    }
    let (e, b) = std::mem::take(&mut part.pending);
    shared.entries.fetch_add(e, Relaxed);
    shared.bytes.fetch_add(b, Relaxed);
    part
}

/// An entry of a directory being counted.
struct Entry {
    name: std::ffi::OsString,
    kind: Option<std::fs::FileType>,
}

/// Where a directory's entries and stamp come from.
enum Source<'l> {
    /// Opened and read here.
    Read(Opened, Vec<Entry>),
    /// Read whole by the `.env` scan moments before (its `lstat`, taken
    /// before that read, is the stamp).
    Listed(&'l ListedDir),
}

/// Count one directory's entries; its subdirectories go to `found`.
fn count_dir(shared: &Shared<'_>, part: &mut Part, job: Job, found: &mut Vec<Job>) {
    let source = match shared.listed.and_then(|l| l.get(&job.dir)) {
        Some(listed) => Source::Listed(listed),
        None => match read_dir(&job.dir) {
            Some((opened, listing, whole)) => {
                part.racy |= !whole;
                Source::Read(opened, listing)
            }
            None => {
                unreadable(shared, part, job.dir);
                return;
            }
        },
    };
    let (st, entries): (Stamp, Vec<(&std::ffi::OsStr, Option<std::fs::FileType>)>) = match &source {
        Source::Read(opened, listing) => (
            opened.stamp,
            listing
                .iter()
                .map(|e| (e.name.as_os_str(), e.kind))
                .collect(),
        ),
        Source::Listed(l) => {
            part.racy |= l.short;
            (
                super::listed_stamp(l),
                l.entries
                    .iter()
                    .map(|e| (e.name.as_os_str(), e.kind))
                    .collect(),
            )
        }
    };
    let Job { dir, rules } = job;
    // Its own `.gitignore` first: it judges its siblings. Its stamp is
    // kept whether or not it is counted (a `.gitignore` its own rules
    // ignore still rules), so a later look knows every file that ruled.
    let mut here_rules = rules;
    let mut gitignore_len = None;
    if entries
        .iter()
        .any(|(name, kind)| *name == ".gitignore" && kind.is_some_and(|k| !k.is_dir()))
    {
        let path = dir.join(".gitignore");
        match std::fs::symlink_metadata(&path) {
            Ok(m) => {
                let s = stamp(&m);
                part.racy |= is_racy(&s, shared.started);
                part.ignores.push((path.clone(), s));
                gitignore_len = Some(m.len());
                let (gi, _) = Gitignore::new(&path);
                here_rules = Some(Arc::new(Chain {
                    rules: gi,
                    up: here_rules,
                }));
            }
            Err(_) => part.racy = true,
        }
    }
    let tracked = shared
        .tracked
        .and_then(|t| Some((t, t.dir(relative(shared.workspace, &dir)?))));
    let (mut counted, mut bytes) = (0u64, 0u64);
    for (name, kind) in &entries {
        if shared.stop.load(Relaxed) {
            return;
        }
        let is_dir = kind.is_some_and(|k| k.is_dir());
        if is_dir && name.to_str().is_some_and(skipped_dir) {
            continue;
        }
        let path = (here_rules.is_some() || is_dir).then(|| dir.join(name));
        if let Some(p) = &path {
            if ignored(here_rules.as_deref(), p, is_dir) {
                continue;
            }
        }
        let size = match kind {
            None => {
                part.racy = true;
                0
            }
            Some(k) if !k.is_file() => 0,
            Some(_) if *name == ".gitignore" => gitignore_len.unwrap_or(0),
            Some(_) => file_len(&source, &dir, tracked.as_ref(), name).unwrap_or_else(|| {
                part.racy = true;
                0
            }),
        };
        counted += 1;
        bytes += size;
        part.pending.0 += 1;
        part.pending.1 += size;
        if part.pending.0 >= FLUSH_EVERY && !flush(shared, part) {
            return;
        }
        if is_dir {
            if let Some(p) = path {
                found.push(Job {
                    dir: p,
                    rules: here_rules.clone(),
                });
            }
        }
    }
    // A listing the scan read earlier is judged at its own read as well.
    let listed_racy = matches!(source, Source::Listed(l) if l.racy);
    part.dirs.insert(
        dir,
        DirSeen {
            stamp: st,
            entries: counted,
            bytes,
            racy: listed_racy || is_racy(&st, shared.started),
        },
    );
}

/// Open and read `dir`: its stamp (taken before the listing), its
/// entries, and whether the listing is whole (`false`: reading stopped at
/// an error). `None` when it cannot be opened or read.
fn read_dir(dir: &Path) -> Option<(Opened, Vec<Entry>, bool)> {
    let opened = Opened::open(dir)?;
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).ok()? {
        match e {
            Ok(e) => v.push(Entry {
                name: e.file_name(),
                kind: e.file_type().ok(),
            }),
            Err(_) => return Some((opened, v, false)),
        }
    }
    Some((opened, v, true))
}

/// A directory that could not be opened or listed (another user's, say,
/// like a container's data directory): counted empty, as git cannot add
/// from it either, and kept with its stamp, so a later look lists it
/// again only when that moves (then a whole walk decides); one gone since
/// its parent listed it leaves nothing to vouch for.
fn unreadable(shared: &Shared<'_>, part: &mut Part, dir: PathBuf) {
    match empty_seen(std::fs::symlink_metadata(&dir), shared.started) {
        Some(seen) => {
            part.dirs.insert(dir, seen);
        }
        None => part.racy = true,
    }
}

/// What an unreadable directory counts for, from its `lstat`.
fn empty_seen(meta: std::io::Result<std::fs::Metadata>, started: i64) -> Option<DirSeen> {
    let m = meta.ok().filter(std::fs::Metadata::is_dir)?;
    let stamp = stamp(&m);
    Some(DirSeen {
        stamp,
        entries: 0,
        bytes: 0,
        racy: is_racy(&stamp, started),
    })
}

/// Add a thread's pending counts to the totals; `false` (and the walk
/// stops) once a limit is crossed.
fn flush(shared: &Shared<'_>, part: &mut Part) -> bool {
    let (e, b) = std::mem::take(&mut part.pending);
    let entries = shared.entries.fetch_add(e, Relaxed) + e;
    let total = shared.bytes.fetch_add(b, Relaxed) + b;
    match limits(
        shared.workspace,
        entries,
        total,
        shared.max_entries,
        shared.max_bytes,
    ) {
        Ok(()) => true,
        Err(d) => {
            shared
                .over
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(d);
            shared.stop();
            false
        }
    }
}

/// The size of the regular file `name` of `dir`: the index's record when
/// it tracks it, else `stat`ed (through the directory's descriptor when
/// it was opened here); `None` when it cannot be.
fn file_len(
    source: &Source<'_>,
    dir: &Path,
    tracked: Option<&(&TrackedSizes, TrackedDir)>,
    name: &std::ffi::OsStr,
) -> Option<u64> {
    if let Some((t, d)) = tracked {
        if let Some(size) = super::os_bytes(name).and_then(|n| t.size_in(d, n)) {
            return Some(size);
        }
    }
    match source {
        Source::Read(opened, _) => opened.len_of(name),
        Source::Listed(_) => std::fs::symlink_metadata(dir.join(name))
            .ok()
            .map(|m| m.len()),
    }
}

/// A directory opened to be counted: its stamp, taken before it is
/// listed, and (on unix) the descriptor its files are `stat`ed through.
struct Opened {
    stamp: Stamp,
    #[cfg(unix)]
    fd: std::fs::File,
    #[cfg(not(unix))]
    dir: PathBuf,
}

impl Opened {
    #[cfg(unix)]
    fn open(dir: &Path) -> Option<Opened> {
        use std::os::unix::fs::OpenOptionsExt;
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(dir)
            .ok()?;
        let stamp = stamp(&fd.metadata().ok()?);
        Some(Opened { stamp, fd })
    }

    #[cfg(not(unix))]
    fn open(dir: &Path) -> Option<Opened> {
        let m = std::fs::symlink_metadata(dir).ok()?;
        m.is_dir().then(|| Opened {
            stamp: stamp(&m),
            dir: dir.to_path_buf(),
        })
    }

    #[cfg(unix)]
    fn len_of(&self, name: &std::ffi::OsStr) -> Option<u64> {
        use nix::sys::stat::fstatat;
        use std::os::fd::AsRawFd;
        fstatat(
            Some(self.fd.as_raw_fd()),
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .ok()
        .map(|st| u64::try_from(st.st_size).unwrap_or(0))
    }

    #[cfg(not(unix))]
    fn len_of(&self, name: &std::ffi::OsStr) -> Option<u64> {
        std::fs::symlink_metadata(self.dir.join(name))
            .ok()
            .map(|m| m.len())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// An unreadable directory is kept, empty, with its own stamp; a path
    /// that is no directory (or gone) gives nothing to keep.
    #[test]
    fn an_unreadable_directory_counts_empty_with_its_stamp() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        let now = super::super::now_secs();
        let seen = empty_seen(std::fs::symlink_metadata(&d), now).unwrap();
        assert_eq!((seen.entries, seen.bytes), (0, 0));
        assert_eq!(seen.stamp, stamp(&std::fs::symlink_metadata(&d).unwrap()));
        assert!(seen.racy, "made just now");
        assert!(empty_seen(std::fs::symlink_metadata(t.path().join("f")), now).is_none());
        assert!(empty_seen(std::fs::symlink_metadata(t.path().join("gone")), now).is_none());
    }
}
