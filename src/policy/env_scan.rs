//! Finding every workspace `.env` / `.env.*` file, at any depth, in any
//! repository size — and saying so when one could not be looked for.
//!
//! There is no depth or entry bound: a bound would leave a secret readable
//! while the report said `full`. Whatever the walk cannot read (a
//! directory it may not list, an entry whose type it cannot learn) is
//! returned in [`EnvScan::unmasked`], which every backend adds to the
//! run's `partial` list.
//!
//! Cost: a one-shot call walks the tree once (`readdir` per directory,
//! entry types from `d_type`, no `stat` per file), like `find` pruned the
//! same way; a first call, with nothing saved to reuse, reads the
//! directories ahead on two threads ([`list_ahead`]). A long-lived
//! process (the agent loop) keeps an [`EnvScanCache`] per workspace: on
//! the next call each directory is
//! `lstat`ed and, when its identity and mtime are unchanged, its listing
//! is reused without reading it. A directory's mtime changes whenever an
//! entry is created, removed or renamed in it — exactly the events that
//! can add a `.env` or a subdirectory. File contents do not matter here.
//! A one-shot command whose saved scan still holds everywhere takes the
//! file's answer without building the listings
//! ([`EnvScanCache::scan_with_file`]).
//!
//! Racy timestamps: a directory changed within [`RACY_WINDOW`] of the scan
//! that listed it could change again within the same timestamp tick
//! without its mtime moving, so such a listing is never trusted and is
//! read again next time (git's racy-index rule).

use super::env_scan_disk::{Listing, Stamp};
use super::tables;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Directories never descended into when looking for workspace `.env`
/// files: large, generated, and not where secrets are kept.
pub const ENV_SCAN_SKIP: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    "dist",
    "build",
    ".cache",
];

/// Below this many cached directories the stamps are taken on the
/// walking thread alone ([`lstat_all`]).
const LOOK_AHEAD_MIN_DIRS: usize = 256;

/// A listing made this close to a directory's last change is re-read on
/// the next call (covers filesystems with 1–2 s timestamp granularity).
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The result of one scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvScan {
    /// Every `.env`/`.env.*` entry found (sorted), as paths under the root.
    pub files: Vec<PathBuf>,
    /// What could not be scanned, one line each, naming the path and the
    /// reason: `.env` files there are not masked.
    pub unmasked: Vec<String>,
}

/// What changed between two cached scans (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Directories whose listing was read (`readdir`).
    pub listed: usize,
    /// Directories whose cached listing was reused after one `lstat`.
    pub reused: usize,
}

impl Listing {
    #[cfg(target_os = "linux")]
    fn failed(dir: &Path, stamp: Stamp, e: std::io::Error) -> Listing {
        Listing {
            stamp,
            racy: true,
            subdirs: Vec::new(),
            env_files: Vec::new(),
            problems: Vec::new(),
            failed: Some(format!(
                "could not list {} for .env files ({e}); a .env file there is not masked",
                dir.display()
            )),
        }
    }
}

/// What a caller of [`EnvScanCache::scan_with_file`]'s ways wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// The scan: a first call may be answered from the saved scan without
    /// building its listings ([`EnvScanCache::quick_from_file`]), and the
    /// second sets the inotify watch up.
    Scan,
    /// The directories (the undo journal, which watches them itself): the
    /// listings are built, and no watch is set up for a caller that never
    /// scans again (a second watch on every directory).
    Dirs,
}

/// Listings of one workspace's directories, keyed by path.
#[derive(Debug, Default)]
pub struct EnvScanCache {
    dirs: HashMap<PathBuf, Listing>,
    /// Scans done with this cache (the watch starts on the second: a
    /// one-shot process never pays for it).
    calls: u32,
    /// Linux: an inotify watch on every listed directory, once the cache
    /// is reused; then a call with no events costs one `read`.
    #[cfg(target_os = "linux")]
    watch: Option<watch::Watch>,
    /// The watch could not be set up (watch limit, …): stamps only.
    #[cfg(target_os = "linux")]
    watch_failed: bool,
    /// The last result (served as is while the watch reports nothing).
    last: Option<EnvScan>,
    /// The first call was answered from the saved scan without reading
    /// its listings: the next call reads them.
    unloaded: bool,
    /// Stamps the quick check took, for the walk that follows it.
    looked: Option<HashMap<PathBuf, std::io::Result<DirLook>>>,
    /// The next scan that reads every directory keeps each whole
    /// ([`keep_listing`]).
    keep_listing: bool,
    /// What that scan kept, until taken ([`take_listing`]).
    listing: Option<WorkspaceListing>,
    /// Tests shorten [`RACY_WINDOW`] (they cannot move a ctime back).
    #[cfg(test)]
    racy_window: Option<Duration>,
}

#[cfg(unix)]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    }
}

#[cfg(not(unix))]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| (d.as_secs() as i64, i64::from(d.subsec_nanos())))
        .unwrap_or((0, 0));
    Stamp {
        dev: 0,
        ino: 0,
        mtime,
        ctime: mtime,
    }
}

/// Whether a listing made at `now` could miss a change that leaves the
/// stamp as it is: the directory changed (mtime or ctime) within
/// [`RACY_WINDOW`] of `now` (or a time that cannot be read: racy).
fn is_racy(st: &Stamp, now: SystemTime, window: Duration) -> bool {
    let at = |(secs, nanos): (i64, i64)| -> Option<SystemTime> {
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            u64::try_from(secs).ok()?,
            u32::try_from(nanos).ok()?,
        ))
    };
    match (at(st.mtime), at(st.ctime)) {
        (Some(m), Some(c)) => m.max(c) + window > now,
        _ => true,
    }
}

/// What the walk needs of a directory's `lstat`.
#[derive(Clone, Copy, Debug)]
struct DirLook {
    stamp: Stamp,
    is_dir: bool,
    /// Its size (kept with a whole listing: the snapshot size walk's
    /// stamps include it).
    size: u64,
}

/// A directory's `lstat`, by its whole path.
fn look_at(path: &Path) -> std::io::Result<DirLook> {
    std::fs::symlink_metadata(path).map(|m| DirLook {
        stamp: stamp(&m),
        is_dir: m.is_dir(),
        size: m.len(),
    })
}

/// One directory as a workspace's first scan read it, every entry kept
/// (not only the subdirectories and `.env` names the scan itself keeps):
/// what the undo snapshot's size walk counts instead of reading the
/// directory a second time ([`take_listing`]).
#[derive(Debug)]
pub struct ListedDir {
    /// The `lstat` taken before the directory was read.
    pub stamp: Stamp,
    /// The directory's own size from that `lstat`.
    pub size: u64,
    /// Every entry, with its type from `d_type` (`None`: not learnt).
    pub entries: Vec<ListedEntry>,
    /// Reading stopped at an error: `entries` may be short.
    pub short: bool,
    /// The directory changed too close to the read to be vouched for by
    /// its stamp later (the scan's own racy rule, [`RACY_WINDOW`], judged
    /// at the time of the read).
    pub racy: bool,
}

/// An entry of a [`ListedDir`].
#[derive(Debug)]
pub struct ListedEntry {
    pub name: std::ffi::OsString,
    pub kind: Option<std::fs::FileType>,
}

/// Every directory a workspace's first `.env` scan read, whole (the
/// directories the scan skips, [`ENV_SCAN_SKIP`], are not in it), keyed by
/// path. Kept only when asked for ([`keep_listing`]) and handed over once.
#[derive(Debug, Default)]
pub struct WorkspaceListing {
    dirs: HashMap<PathBuf, ListedDir>,
}

impl WorkspaceListing {
    /// The listing of `dir`, when the scan read it.
    pub fn get(&self, dir: &Path) -> Option<&ListedDir> {
        self.dirs.get(dir)
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

/// What a saved listing depends on besides its directory: a file written
/// under other rules is not read.
fn disk_rules() -> String {
    format!("skip={}", ENV_SCAN_SKIP.join(","))
}

fn skipped(name: &std::ffi::OsStr) -> bool {
    ENV_SCAN_SKIP.iter().any(|s| name == *s)
}

/// `lstat` every path, on two threads when there are many (a one-shot
/// command at 100,000 files spends most of its scan in ~1,100 of these
/// path lookups, one core idle; for a handful the thread costs more than
/// it saves). In the order given. The threads take the paths in chunks
/// from one counter, not half each: the spawned one starts late, and a
/// fixed half left this thread waiting for it.
fn lstat_all(root: &Path, paths: &[&Path]) -> Vec<std::io::Result<DirLook>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const CHUNK: usize = 32;
    if paths.len() < LOOK_AHEAD_MIN_DIRS {
        return paths.iter().map(|p| look_at(p)).collect();
    }
    let from_root = FromRoot::open(root);
    let look = |p: &Path| match &from_root {
        Some(r) => r.look(p),
        None => look_at(p),
    };
    let next = AtomicUsize::new(0);
    let take = || -> Vec<(usize, std::io::Result<DirLook>)> {
        let mut out = Vec::new();
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= paths.len() {
                return out;
            }
            let end = (start + CHUNK).min(paths.len());
            out.extend((start..end).map(|i| (i, look(paths[i]))));
        }
    };
    let mut all: Vec<Option<std::io::Result<DirLook>>> =
        std::iter::repeat_with(|| None).take(paths.len()).collect();
    std::thread::scope(|s| {
        let other = std::thread::Builder::new().spawn_scoped(s, take);
        let mine = take();
        // A thread that could not start or finish: its chunks are taken
        // below.
        let theirs = other.ok().and_then(|t| t.join().ok()).unwrap_or_default();
        for (i, r) in mine.into_iter().chain(theirs) {
            all[i] = Some(r);
        }
    });
    let all: Vec<std::io::Result<DirLook>> = all
        .into_iter()
        .zip(paths)
        .map(|(r, p)| r.unwrap_or_else(|| look(p)))
        .collect();
    match from_root {
        Some(r) if !r.still_there() => paths.iter().map(|p| look_at(p)).collect(),
        _ => all,
    }
}

/// The workspace root, opened, so that each directory below it is
/// `lstat`ed by its path from there: the kernel resolves three names for
/// `d1/e2/f3`, not every name of the root's path again (most of a stamp's
/// cost at 100,000 files). The root's identity is checked by its path
/// once the stamps are taken: a root renamed or replaced meanwhile has
/// every stamp taken again by path.
#[cfg(target_os = "linux")]
struct FromRoot<'a> {
    root: &'a Path,
    dir: std::fs::File,
}

#[cfg(target_os = "linux")]
impl<'a> FromRoot<'a> {
    fn open(root: &'a Path) -> Option<FromRoot<'a>> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(root)
            .ok()?;
        Some(FromRoot { root, dir })
    }

    fn look(&self, path: &Path) -> std::io::Result<DirLook> {
        use nix::sys::stat::{fstatat, SFlag};
        use std::os::fd::AsRawFd;
        let rel = match path.strip_prefix(self.root) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel,
            _ => return look_at(path),
        };
        let st = fstatat(
            Some(self.dir.as_raw_fd()),
            rel,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(std::io::Error::from)?;
        Ok(DirLook {
            stamp: Stamp {
                dev: st.st_dev,
                ino: st.st_ino,
                mtime: (st.st_mtime, st.st_mtime_nsec),
                ctime: (st.st_ctime, st.st_ctime_nsec),
            },
            is_dir: SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR,
            size: u64::try_from(st.st_size).unwrap_or(0),
        })
    }

    /// The root's path still names the directory opened.
    fn still_there(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::symlink_metadata(self.root), self.dir.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
}

/// Elsewhere every stamp is taken by its whole path.
#[cfg(not(target_os = "linux"))]
struct FromRoot;

#[cfg(not(target_os = "linux"))]
impl FromRoot {
    fn open(_root: &Path) -> Option<FromRoot> {
        None
    }

    fn look(&self, path: &Path) -> std::io::Result<DirLook> {
        look_at(path)
    }

    fn still_there(&self) -> bool {
        true
    }
}

/// Read one directory's listing; with `whole`, every entry is kept there
/// too (see [`WorkspaceListing`]).
fn list(
    dir: &Path,
    stamp: Stamp,
    racy: bool,
    mut whole: Option<&mut ListedDir>,
) -> Result<Listing, std::io::Error> {
    let mut l = Listing {
        stamp,
        racy,
        subdirs: Vec::new(),
        env_files: Vec::new(),
        problems: Vec::new(),
        failed: None,
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                l.problems.push(format!(
                    "could not finish listing {} for .env files ({e}); a .env file there may not be masked",
                    dir.display()
                ));
                if let Some(w) = whole.as_deref_mut() {
                    w.short = true;
                }
                break;
            }
        };
        let name = entry.file_name();
        // `d_type`: no `stat` per entry on Linux.
        let kind = entry.file_type();
        if let Some(w) = whole.as_deref_mut() {
            w.entries.push(ListedEntry {
                name: name.clone(),
                kind: kind.as_ref().ok().copied(),
            });
        }
        let ft = match kind {
            Ok(ft) => ft,
            Err(e) => {
                l.problems.push(format!(
                    "could not learn the type of {} ({e}); if it is a .env file or a directory holding one, it is not masked",
                    entry.path().display()
                ));
                continue;
            }
        };
        if ft.is_dir() {
            if !skipped(&name) {
                l.subdirs.push(name);
            }
        } else if name.to_str().is_some_and(tables::is_env_file_name) {
            l.env_files.push(name);
        }
    }
    l.subdirs.sort();
    l.env_files.sort();
    Ok(l)
}

/// A directory's stamp and, when it is a directory, its listing: what the
/// walk would take of it, taken ahead ([`list_ahead`]); and, when asked
/// for, the whole listing.
type Ahead = (
    std::io::Result<DirLook>,
    Option<Result<Listing, std::io::Error>>,
    Option<ListedDir>,
);

/// A first scan's stamps and listings (nothing saved to reuse: every
/// directory is read), taken on two threads sharing one stack of
/// directories — the walk then finds each here instead of reading it,
/// in its own order. At 100,000 files that first listing was ~60 ms on
/// one core, with the other idle. Each directory is `lstat`ed before it is
/// read, as the walk would; what a thread could not hand in is read by
/// the walk itself.
fn list_ahead(
    root: &Path,
    now: SystemTime,
    window: Duration,
    whole: bool,
) -> HashMap<PathBuf, Ahead> {
    // A reader that panicked hands its directory back (`Taken`): the other
    // finishes the stack instead of waiting for it, and the walk reads
    // what it did not hand in.
    let stack = crate::work_stack::WorkStack::new(vec![root.to_path_buf()]);
    let work = || -> HashMap<PathBuf, Ahead> {
        let mut out = HashMap::new();
        while let Some(mut reading) = stack.take() {
            let Some(dir) = reading.item() else { continue };
            let look = look_at(&dir);
            let mut kept = None;
            let listing = match &look {
                Ok(l) if l.is_dir => {
                    let racy = is_racy(&l.stamp, now, window);
                    kept = whole.then(|| ListedDir {
                        stamp: l.stamp,
                        size: l.size,
                        entries: Vec::new(),
                        short: false,
                        racy,
                    });
                    Some(list(&dir, l.stamp, racy, kept.as_mut()))
                }
                _ => None,
            };
            if let Some(Ok(l)) = &listing {
                reading.found = l.subdirs.iter().map(|n| dir.join(n)).collect();
            } else {
                kept = None;
            }
            drop(reading);
            out.insert(dir, (look, listing, kept));
        }
        out
    };
    std::thread::scope(|s| {
        let other = std::thread::Builder::new().spawn_scoped(s, work);
        let mut all = work();
        if let Some(theirs) = other.ok().and_then(|t| t.join().ok()) {
            all.extend(theirs);
        }
        all
    })
}

impl EnvScanCache {
    /// Scan `root`, reusing every listing whose directory did not change
    /// since the previous call on this cache.
    pub fn scan(&mut self, root: &Path) -> (EnvScan, ScanStats) {
        self.scan_as(root, true)
    }

    /// [`Self::scan`]; `may_watch`: this call may set the watch up (not
    /// for a caller that only wants the directories: the undo journal
    /// watches them itself, and a second watch of every directory would
    /// cost as much again and count twice against the user's inotify
    /// limit).
    fn scan_as(&mut self, root: &Path, may_watch: bool) -> (EnvScan, ScanStats) {
        self.calls += 1;
        #[cfg(target_os = "linux")]
        {
            if let Some(r) = self.scan_watched(root) {
                return r;
            }
            if may_watch && self.calls >= 2 && self.watch.is_none() && !self.watch_failed {
                match watch::Watch::new() {
                    Ok(w) => self.watch = Some(w),
                    Err(_) => self.watch_failed = true,
                }
            }
        }
        let r = self.scan_stamps(root);
        self.last = Some(r.0.clone());
        r
    }

    /// [`EnvScanCache::scan`], with the listings kept in `file` between
    /// processes: read on this cache's first call, written whenever a
    /// call listed or dropped a directory (not while an inotify watch
    /// serves the calls: a long-lived process writes once, then the next
    /// process's first call brings the file up to date itself).
    pub fn scan_with_file(&mut self, root: &Path, file: Option<&Path>) -> (EnvScan, ScanStats) {
        self.scan_with_file_as(root, file, Want::Scan)
    }

    /// [`Self::scan_with_file`] for what `want` needs.
    fn scan_with_file_as(
        &mut self,
        root: &Path,
        file: Option<&Path>,
        want: Want,
    ) -> (EnvScan, ScanStats) {
        if self.calls == 0 || self.unloaded {
            self.unloaded = false;
            if let Some(f) = file {
                match std::fs::read(f) {
                    Ok(data) => {
                        if want == Want::Scan && self.calls == 0 {
                            if let Some(r) = self.quick_from_file(root, &data) {
                                return r;
                            }
                        }
                        self.dirs =
                            super::env_scan_disk::decode(&data, &disk_rules()).unwrap_or_default();
                    }
                    Err(_) => self.dirs.clear(),
                }
            }
        }
        let before = self.dirs.len();
        let r = self.scan_as(root, want == Want::Scan);
        if let Some(f) = file {
            if r.1.listed > 0 || self.dirs.len() != before {
                super::env_scan_disk::save(f, &self.dirs, &disk_rules());
            }
        }
        r
    }

    /// A first call answered from the saved scan `data` when every
    /// directory it names still has its stamp and none is racy (see
    /// [`super::env_scan_disk::read_saved`]): the walk would reuse every
    /// listing and return what the file says, so it is returned without
    /// building them (one-shot commands: `sandbox run`, each `exec`).
    /// The listings are read at the next call, if any. Otherwise `None`,
    /// with the stamps taken kept for the walk ([`Self::look_ahead`]).
    #[cfg(unix)]
    fn quick_from_file(&mut self, root: &Path, data: &[u8]) -> Option<(EnvScan, ScanStats)> {
        use std::os::unix::ffi::OsStrExt;
        let saved = super::env_scan_disk::read_saved(data, &disk_rules(), root)?;
        let paths: Vec<&Path> = saved
            .dirs
            .iter()
            .map(|d| Path::new(std::ffi::OsStr::from_bytes(d.path)))
            .collect();
        let looked = lstat_all(root, &paths);
        let same = saved
            .dirs
            .iter()
            .zip(&looked)
            .all(|(d, l)| l.as_ref().is_ok_and(|l| l.is_dir && l.stamp == d.stamp));
        if !same {
            self.looked = Some(
                paths
                    .into_iter()
                    .map(Path::to_path_buf)
                    .zip(looked)
                    .collect(),
            );
            return None;
        }
        let scan = EnvScan {
            files: saved.files,
            unmasked: saved.problems,
        };
        let stats = ScanStats {
            listed: 0,
            reused: saved.dirs.len(),
        };
        self.calls += 1;
        self.unloaded = true;
        self.last = Some(scan.clone());
        Some((scan, stats))
    }

    #[cfg(not(unix))]
    fn quick_from_file(&mut self, _root: &Path, _data: &[u8]) -> Option<(EnvScan, ScanStats)> {
        None
    }

    /// Every directory `lstat`ed; a listing reused when its stamp is unchanged.
    fn scan_stamps(&mut self, root: &Path) -> (EnvScan, ScanStats) {
        let now = SystemTime::now();
        let mut out = EnvScan::default();
        let mut stats = ScanStats::default();
        let mut next: HashMap<PathBuf, Listing> = HashMap::with_capacity(self.dirs.len());
        let mut looked = self.look_ahead(root);
        // Nothing to reuse (and no watch, which must be in place before a
        // directory is looked at): every listing is read ahead.
        #[cfg(target_os = "linux")]
        let ahead_ok = self.watch.is_none();
        #[cfg(not(target_os = "linux"))]
        let ahead_ok = true;
        let mut ahead = if self.dirs.is_empty() && looked.is_empty() && ahead_ok {
            list_ahead(root, now, self.racy_window(), self.keep_listing)
        } else {
            HashMap::new()
        };
        let mut whole = WorkspaceListing::default();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            // Watch first, then look: a change after this point is reported.
            #[cfg(target_os = "linux")]
            self.watch_dir(&dir);
            let (look, read) = match ahead.remove(dir.as_path()) {
                Some((look, read, kept)) => {
                    if let Some(k) = kept {
                        whole.dirs.insert(dir.clone(), k);
                    }
                    (look, read)
                }
                None => (
                    looked
                        .remove(dir.as_path())
                        .unwrap_or_else(|| look_at(&dir)),
                    None,
                ),
            };
            let look = match look {
                Ok(l) if l.is_dir => l,
                // Replaced by a file or a symlink since the parent was
                // listed: nothing to descend into (a `.env` named so is
                // found through the parent's next listing).
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir != root => continue,
                Err(e) => {
                    out.unmasked.push(format!(
                        "could not scan {} for .env files ({e}); a .env file there is not masked",
                        dir.display()
                    ));
                    continue;
                }
            };
            let st = look.stamp;
            let listing = match self.dirs.remove(&dir) {
                Some(old) if old.stamp == st && !old.racy => {
                    stats.reused += 1;
                    old
                }
                _ => match read
                    .unwrap_or_else(|| list(&dir, st, is_racy(&st, now, self.racy_window()), None))
                {
                    Ok(l) => {
                        stats.listed += 1;
                        l
                    }
                    Err(e) => {
                        out.unmasked.push(format!(
                            "could not list {} for .env files ({e}); a .env file there is not masked",
                            dir.display()
                        ));
                        // Kept (racy, so re-read next time) for watch mode,
                        // which retries failed listings on every call.
                        #[cfg(target_os = "linux")]
                        next.insert(dir.clone(), Listing::failed(&dir, st, e));
                        continue;
                    }
                },
            };
            out.files
                .extend(listing.env_files.iter().map(|n| dir.join(n)));
            out.unmasked.extend(listing.problems.iter().cloned());
            stack.extend(listing.subdirs.iter().rev().map(|n| dir.join(n)));
            next.insert(dir, listing);
        }
        self.dirs = next;
        if self.keep_listing && !whole.is_empty() {
            self.keep_listing = false;
            self.listing = Some(whole);
        }
        out.files.sort();
        (out, stats)
    }

    /// The `lstat` of every cached directory, taken before the walk uses
    /// them ([`lstat_all`]; or those the quick check took): the walk then
    /// finds each stamp here instead of asking the kernel. Not with a
    /// watch, which must be in place before its directory is looked at.
    /// Each stamp is still taken after this call began, as the walk's
    /// own would be: a change after it moves the stamp the next call
    /// compares.
    fn look_ahead(&mut self, root: &Path) -> HashMap<PathBuf, std::io::Result<DirLook>> {
        let taken = self.looked.take();
        #[cfg(target_os = "linux")]
        if self.watch.is_some() {
            return HashMap::new();
        }
        if let Some(taken) = taken {
            return taken;
        }
        let dirs: Vec<&Path> = self.dirs.keys().map(PathBuf::as_path).collect();
        let looked = lstat_all(root, &dirs);
        dirs.into_iter()
            .map(Path::to_path_buf)
            .zip(looked)
            .collect()
    }

    #[cfg(target_os = "linux")]
    fn watch_dir(&mut self, dir: &Path) {
        if let Some(w) = self.watch.as_mut() {
            if w.add(dir).is_err() {
                // Out of watches (or not allowed): fall back to stamps for
                // good; a directory we cannot watch must not be trusted.
                self.watch = None;
                self.watch_failed = true;
            }
        }
    }

    /// With a live watch: apply what changed since the last call and
    /// return the result, or `None` to do a full stamp scan instead.
    #[cfg(target_os = "linux")]
    fn scan_watched(&mut self, root: &Path) -> Option<(EnvScan, ScanStats)> {
        let w = self.watch.as_mut()?;
        let last = self.last.clone()?;
        let changes = match w.drain() {
            Some(c) => c,
            None => {
                // Queue overflow or the root itself went away: start over.
                self.watch = None;
                self.dirs.clear();
                return None;
            }
        };
        if changes.dirty.is_empty() && last.unmasked.is_empty() {
            let stats = ScanStats {
                listed: 0,
                reused: self.dirs.len(),
            };
            return Some((last, stats));
        }
        let mut stats = ScanStats::default();
        // Directories that changed, and those that could not be listed
        // last time (a mode change on them is reported on their parent).
        let mut todo: Vec<PathBuf> = changes.dirty.into_iter().collect();
        todo.extend(self.failed_dirs());
        todo.sort();
        todo.dedup();
        for dir in todo {
            if !dir.starts_with(root) {
                continue;
            }
            self.relist(&dir, &mut stats);
        }
        let out = self.collect();
        self.last = Some(out.clone());
        stats.reused = self.dirs.len().saturating_sub(stats.listed);
        Some((out, stats))
    }

    #[cfg(target_os = "linux")]
    fn failed_dirs(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .filter(|(_, l)| l.failed.is_some())
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// List `dir` again and walk any subdirectory that is new.
    #[cfg(target_os = "linux")]
    fn relist(&mut self, dir: &Path, stats: &mut ScanStats) {
        let mut stack = vec![dir.to_path_buf()];
        let mut first = true;
        while let Some(d) = stack.pop() {
            if !first && self.dirs.get(&d).is_some_and(|l| l.failed.is_none()) {
                continue;
            }
            first = false;
            self.watch_dir(&d);
            stats.listed += 1;
            let listing = match std::fs::symlink_metadata(&d) {
                Ok(m) if m.is_dir() => match list(&d, stamp(&m), true, None) {
                    Ok(l) => l,
                    Err(e) => Listing::failed(&d, stamp(&m), e),
                },
                // Gone or replaced: the parent's listing no longer names it.
                Ok(_) => {
                    self.drop_subtree(&d);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.drop_subtree(&d);
                    continue;
                }
                Err(e) => Listing::failed(
                    &d,
                    Stamp {
                        dev: 0,
                        ino: 0,
                        mtime: (0, 0),
                        ctime: (0, 0),
                    },
                    e,
                ),
            };
            // Subdirectories gone from this listing (removed, renamed
            // away): forget what was cached below them.
            if let Some(old) = self.dirs.get(&d) {
                let removed: Vec<PathBuf> = old
                    .subdirs
                    .iter()
                    .filter(|n| listing.subdirs.binary_search(n).is_err())
                    .map(|n| d.join(n))
                    .collect();
                for r in removed {
                    self.drop_subtree(&r);
                }
            }
            stack.extend(listing.subdirs.iter().map(|n| d.join(n)));
            self.dirs.insert(d, listing);
        }
    }

    /// Forget (and stop watching) `top` and everything cached below it.
    #[cfg(target_os = "linux")]
    fn drop_subtree(&mut self, top: &Path) {
        let gone: Vec<PathBuf> = self
            .dirs
            .keys()
            .filter(|k| k.starts_with(top))
            .cloned()
            .collect();
        for g in gone {
            if let Some(w) = self.watch.as_mut() {
                w.remove(&g);
            }
            self.dirs.remove(&g);
        }
    }

    /// The result from the cached listings (memory only).
    #[cfg(target_os = "linux")]
    fn collect(&self) -> EnvScan {
        let mut out = EnvScan::default();
        for (dir, l) in &self.dirs {
            out.files.extend(l.env_files.iter().map(|n| dir.join(n)));
            out.unmasked.extend(l.problems.iter().cloned());
            out.unmasked.extend(l.failed.iter().cloned());
        }
        out.files.sort();
        out.unmasked.sort();
        out
    }

    /// A cache that never sets up a watch (stamps only, as on other
    /// systems or when the watch limit is reached).
    pub fn stamps_only() -> EnvScanCache {
        EnvScanCache {
            #[cfg(target_os = "linux")]
            watch_failed: true,
            ..EnvScanCache::default()
        }
    }

    fn racy_window(&self) -> Duration {
        #[cfg(test)]
        if let Some(w) = self.racy_window {
            return w;
        }
        RACY_WINDOW
    }

    /// Directories currently cached.
    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

#[cfg(target_os = "linux")]
mod watch {
    //! inotify on every cached directory: entries created, removed or
    //! renamed in it, its own metadata (a mode change can make it
    //! listable), and it disappearing.
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
    use std::collections::{BTreeSet, HashMap};
    use std::path::{Path, PathBuf};

    pub struct Watch {
        ino: Inotify,
        by_wd: HashMap<WatchDescriptor, PathBuf>,
        by_path: HashMap<PathBuf, WatchDescriptor>,
    }

    impl std::fmt::Debug for Watch {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Watch({} dirs)", self.by_path.len())
        }
    }

    /// What happened since the last drain.
    pub struct Changes {
        pub dirty: BTreeSet<PathBuf>,
    }

    impl Watch {
        pub fn new() -> nix::Result<Watch> {
            Ok(Watch {
                ino: Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?,
                by_wd: HashMap::new(),
                by_path: HashMap::new(),
            })
        }

        pub fn add(&mut self, dir: &Path) -> nix::Result<()> {
            if self.by_path.contains_key(dir) {
                return Ok(());
            }
            let mask = AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_ATTRIB
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF
                | AddWatchFlags::IN_ONLYDIR
                | AddWatchFlags::IN_DONT_FOLLOW;
            match self.ino.add_watch(dir, mask) {
                Ok(wd) => {
                    self.by_wd.insert(wd, dir.to_path_buf());
                    self.by_path.insert(dir.to_path_buf(), wd);
                    Ok(())
                }
                // Not a directory any more, or gone: nothing to watch; its
                // parent's events cover it.
                Err(nix::errno::Errno::ENOTDIR | nix::errno::Errno::ENOENT) => Ok(()),
                // Unreadable: listing it fails too and it is retried.
                Err(nix::errno::Errno::EACCES) => Ok(()),
                Err(e) => Err(e),
            }
        }

        pub fn remove(&mut self, dir: &Path) {
            if let Some(wd) = self.by_path.remove(dir) {
                // A moved directory keeps its watch (one per inode): when
                // the wd now belongs to the new path, only forget the old.
                if self.by_wd.get(&wd).map(PathBuf::as_path) == Some(dir) {
                    self.by_wd.remove(&wd);
                    let _ = self.ino.rm_watch(wd);
                }
            }
        }

        /// Directories to list again; `None` when the queue overflowed
        /// (events were lost: everything must be looked at again).
        pub fn drain(&mut self) -> Option<Changes> {
            let mut dirty = BTreeSet::new();
            loop {
                let events = match self.ino.read_events() {
                    Ok(ev) => ev,
                    Err(nix::errno::Errno::EAGAIN) => break,
                    Err(_) => return None,
                };
                if events.is_empty() {
                    break;
                }
                for ev in events {
                    if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        return None;
                    }
                    let Some(dir) = self.by_wd.get(&ev.wd).cloned() else {
                        continue;
                    };
                    if ev.mask.contains(AddWatchFlags::IN_IGNORED) {
                        self.by_wd.remove(&ev.wd);
                        self.by_path.remove(&dir);
                    }
                    // Changes of the directory itself concern its parent's
                    // listing too (moved, deleted, mode changed).
                    if ev.name.is_none() {
                        if let Some(parent) = dir.parent() {
                            dirty.insert(parent.to_path_buf());
                        }
                    }
                    dirty.insert(dir);
                }
            }
            Some(Changes { dirty })
        }
    }
}

/// One cache per workspace root for this process: the agent, the TUI and
/// the server resolve the same workspace on every call.
static CACHES: Mutex<Option<HashMap<PathBuf, EnvScanCache>>> = Mutex::new(None);

/// Scan `root` with this process's cache for it (see the module docs).
/// The first call of a process starts from the listings the last command
/// left on disk ([`super::env_scan_disk`]) and leaves its own there.
pub fn scan_cached(root: &Path) -> EnvScan {
    let file = trusted_cache(super::env_scan_disk::cache_file(root), root);
    with_cache(root, |cache| cache.scan_with_file(root, file.as_deref()).0)
}

/// `f` on this process's cache for `root` (made empty if there is none),
/// under the one lock every caller takes.
fn with_cache<R>(root: &Path, f: impl FnOnce(&mut EnvScanCache) -> R) -> R {
    let mut guard = CACHES.lock().unwrap_or_else(|p| p.into_inner());
    let caches = guard.get_or_insert_with(HashMap::new);
    f(caches.entry(root.to_path_buf()).or_default())
}

/// Every directory the `.env` scan of `root` walks (all but the
/// [`ENV_SCAN_SKIP`] names, at any depth), brought up to date with this
/// process's cache first, as [`scan_cached`] does: for the undo journal
/// (`snapshot::journal`), which watches exactly these without a walk of
/// its own. `None` when any directory could not be listed or any entry's
/// type could not be read (the set would not be the whole tree).
pub fn known_dirs(root: &Path) -> Option<Vec<PathBuf>> {
    let file = trusted_cache(super::env_scan_disk::cache_file(root), root);
    with_cache(root, |cache| {
        let (scan, _) = cache.scan_with_file_as(root, file.as_deref(), Want::Dirs);
        let whole = scan.unmasked.is_empty()
            && cache
                .dirs
                .values()
                .all(|l| l.failed.is_none() && l.problems.is_empty());
        whole.then(|| cache.dirs.keys().cloned().collect())
    })
}

/// Ask the next scan of `root` that reads every directory (a process's
/// first, with no saved listings to start from) to keep each directory's
/// whole listing for [`take_listing`]: the undo snapshot's first size
/// walk then counts from it instead of reading ~1,100 directories of a
/// 100,000-file workspace a second time. Asked for only where a snapshot
/// store is opened next (the listing is ~40 bytes an entry, and is
/// dropped at [`take_listing`]).
pub fn keep_listing(root: &Path) {
    with_cache(root, |cache| cache.keep_listing = true);
}

/// The whole listing [`keep_listing`] asked for, once: `None` when no
/// scan read every directory since (the saved listings were reused).
/// Stops the keeping either way.
pub fn take_listing(root: &Path) -> Option<WorkspaceListing> {
    with_cache(root, |cache| {
        cache.keep_listing = false;
        cache.listing.take()
    })
}

/// The saved listings are trusted only where a sandboxed command of this
/// workspace cannot write them: `~/.codewhale` is deny-read for every
/// command, but a `$CODEWHALE_HOME` inside the workspace would let a
/// command forge the listing the next command trusts (and hide a new
/// `.env`). There the scan keeps no file and lists as without one.
fn trusted_cache(file: Option<PathBuf>, root: &Path) -> Option<PathBuf> {
    file.filter(|f| !f.starts_with(root))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_cache_inside_the_workspace_is_not_trusted() {
        let root = Path::new("/w/project");
        assert_eq!(
            trusted_cache(Some("/home/u/.codewhale/cache/env-scan/x".into()), root),
            Some(PathBuf::from("/home/u/.codewhale/cache/env-scan/x"))
        );
        assert_eq!(
            trusted_cache(Some("/w/project/.state/cache/env-scan/x".into()), root),
            None
        );
        assert_eq!(trusted_cache(None, root), None);
    }

    fn write(p: &Path) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "S=1").unwrap();
    }

    /// The racy window of the caches in these tests.
    const WINDOW: Duration = Duration::from_millis(100);

    fn stamps_only() -> EnvScanCache {
        EnvScanCache {
            racy_window: Some(WINDOW),
            ..EnvScanCache::stamps_only()
        }
    }

    /// Set a directory's mtime into the past and wait out the (short)
    /// racy window its ctime is still in, so its listing is not racy.
    fn age(p: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        fs::File::open(p).unwrap().set_modified(old).unwrap();
        std::thread::sleep(WINDOW + Duration::from_millis(20));
    }

    fn age_tree(root: &Path) {
        for e in walkdir::WalkDir::new(root) {
            let e = e.unwrap();
            if e.file_type().is_dir() {
                let old = SystemTime::now() - Duration::from_secs(60);
                fs::File::open(e.path()).unwrap().set_modified(old).unwrap();
            }
        }
        std::thread::sleep(WINDOW + Duration::from_millis(20));
    }

    #[test]
    fn finds_env_files_at_any_depth_and_skips_dependency_dirs() {
        let t = tempfile::tempdir().unwrap();
        let mut deep = t.path().to_path_buf();
        for i in 0..20 {
            deep.push(format!("d{i}"));
        }
        write(&deep.join(".env"));
        write(&t.path().join(".env.local"));
        write(&t.path().join(".env.example"));
        write(&t.path().join("node_modules/x/.env"));
        write(&t.path().join("a/target/.env"));
        let (s, _) = EnvScanCache::default().scan(t.path());
        assert_eq!(
            s.files,
            vec![t.path().join(".env.local"), deep.join(".env")]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        assert!(s.unmasked.is_empty(), "{:?}", s.unmasked);
    }

    #[test]
    fn a_warm_scan_lists_only_what_changed_and_sees_new_files() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..10 {
            write(&t.path().join(format!("pkg{i}/src/main.rs")));
        }
        age_tree(t.path());
        let mut c = stamps_only();
        let (s, st) = c.scan(t.path());
        assert!(s.files.is_empty());
        assert_eq!(st.listed, 21);
        let (_, st) = c.scan(t.path());
        assert_eq!((st.listed, st.reused), (0, 21), "nothing changed");

        // A new .env deep inside: only its directory is listed again.
        write(&t.path().join("pkg3/src/.env"));
        let (s, st) = c.scan(t.path());
        assert_eq!(s.files, vec![t.path().join("pkg3/src/.env")]);
        assert_eq!(st.listed, 1, "{st:?}");
        // Just changed: racy, so listed once more, then trusted.
        let (s, st) = c.scan(t.path());
        assert_eq!(st.listed, 1);
        assert_eq!(s.files.len(), 1);
        age(&t.path().join("pkg3/src"));
        let (_, st) = c.scan(t.path());
        assert_eq!(st.listed, 1, "the aged dir's stamp changed: read once");
        let (s, st) = c.scan(t.path());
        assert_eq!((st.listed, s.files.len()), (0, 1));

        // A new subdirectory holding a .env (made in one step, with an
        // aged parent stamp): found through the parent's new mtime.
        write(&t.path().join("pkg5/new/deeper/.env.production"));
        let (s, _) = c.scan(t.path());
        assert!(s
            .files
            .contains(&t.path().join("pkg5/new/deeper/.env.production")));
        // Removed: gone from the result and from the cache.
        fs::remove_dir_all(t.path().join("pkg5/new")).unwrap();
        let (s, _) = c.scan(t.path());
        assert_eq!(s.files, vec![t.path().join("pkg3/src/.env")]);
    }

    #[test]
    fn a_renamed_directory_is_not_served_from_its_old_listing() {
        let t = tempfile::tempdir().unwrap();
        write(&t.path().join("a/x.txt"));
        write(&t.path().join("b/.env"));
        age_tree(t.path());
        let mut c = stamps_only();
        c.scan(t.path());
        // Swap a and b: same names, other inodes.
        fs::rename(t.path().join("a"), t.path().join("tmp")).unwrap();
        fs::rename(t.path().join("b"), t.path().join("a")).unwrap();
        fs::rename(t.path().join("tmp"), t.path().join("b")).unwrap();
        age(t.path());
        let (s, _) = c.scan(t.path());
        assert_eq!(s.files, vec![t.path().join("a/.env")]);
    }

    #[cfg(unix)]
    #[test]
    fn an_unreadable_directory_is_named_as_not_masked() {
        use std::os::unix::fs::PermissionsExt;
        // Root reads every directory regardless of its mode.
        if nix::unistd::geteuid().is_root() {
            let t = tempfile::tempdir().unwrap();
            // A path that cannot be listed as root either: a file posing
            // as the root of the scan fails with ENOTDIR.
            write(&t.path().join("f"));
            let (s, _) = EnvScanCache::default().scan(&t.path().join("f/sub"));
            assert_eq!(s.unmasked.len(), 1, "{:?}", s.unmasked);
            assert!(s.unmasked[0].contains("f/sub"), "{:?}", s.unmasked);
            return;
        }
        let t = tempfile::tempdir().unwrap();
        write(&t.path().join("locked/.env"));
        fs::set_permissions(t.path().join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        let (s, _) = EnvScanCache::default().scan(t.path());
        fs::set_permissions(t.path().join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
        assert!(s.files.is_empty());
        assert_eq!(s.unmasked.len(), 1, "{:?}", s.unmasked);
        assert!(s.unmasked[0].contains("locked"), "{:?}", s.unmasked);
        assert!(s.unmasked[0].contains("not masked"), "{:?}", s.unmasked);
    }

    /// The undo journal's way in (`known_dirs`): it watches the
    /// directories itself, so its calls never set the scan's own watch up
    /// (a second inotify watch on every directory); a scan then still does.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_caller_that_only_reads_the_listings_never_sets_the_watch_up() {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        write(&root.join("a/b/.env"));
        let mut c = EnvScanCache::default();
        for _ in 0..3 {
            let (s, _) = c.scan_with_file_as(&root, None, Want::Dirs);
            assert_eq!(s.files, vec![root.join("a/b/.env")]);
        }
        assert!(
            c.watch.is_none(),
            "set up for a caller that never scans again"
        );
        c.scan_with_file(&root, None);
        assert!(c.watch.is_some(), "control: a scan sets it up");
    }

    /// Asked for, a scan that reads every directory keeps each whole —
    /// every entry, `.env` or not, with the directory's `lstat` — and
    /// hands it over once; a scan that reuses what it had keeps nothing,
    /// and nothing is kept unasked.
    #[cfg(unix)]
    #[test]
    fn a_whole_listing_is_kept_when_asked_and_handed_over_once() {
        let tree = |t: &tempfile::TempDir| {
            let root = fs::canonicalize(t.path()).unwrap();
            write(&root.join("a/b/.env"));
            write(&root.join("a/b/main.rs"));
            write(&root.join("a/notes.txt"));
            write(&root.join("node_modules/p/.env"));
            std::os::unix::fs::symlink("a", root.join("link")).unwrap();
            root
        };
        let t = tempfile::tempdir().unwrap();
        let root = tree(&t);
        scan_cached(&root);
        assert!(take_listing(&root).is_none(), "kept unasked");

        let fresh = tempfile::tempdir().unwrap();
        let root = tree(&fresh);
        keep_listing(&root);
        let scan = scan_cached(&root);
        assert_eq!(scan.files, vec![root.join("a/b/.env")]);
        let listing = take_listing(&root).expect("kept");
        let mut dirs: Vec<&Path> = listing.dirs.keys().map(PathBuf::as_path).collect();
        dirs.sort();
        assert_eq!(dirs, [root.as_path(), &root.join("a"), &root.join("a/b")]);
        let names = |d: &Path| {
            let mut v: Vec<(String, bool, bool)> = listing
                .get(d)
                .unwrap()
                .entries
                .iter()
                .map(|e| {
                    let k = e.kind.unwrap();
                    (
                        e.name.to_string_lossy().into_owned(),
                        k.is_dir(),
                        k.is_symlink(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            names(&root),
            [
                ("a".to_string(), true, false),
                ("link".to_string(), false, true),
                ("node_modules".to_string(), true, false)
            ]
        );
        assert_eq!(
            names(&root.join("a/b")),
            [
                (".env".to_string(), false, false),
                ("main.rs".to_string(), false, false)
            ]
        );
        let meta = fs::symlink_metadata(root.join("a")).unwrap();
        let a = listing.get(&root.join("a")).unwrap();
        // Made a moment ago: too new for its stamp to vouch for it later.
        assert_eq!(
            (a.stamp, a.size, a.short, a.racy),
            (stamp(&meta), meta.len(), false, true)
        );
        assert!(take_listing(&root).is_none(), "handed over once");

        // The same process again: the listings are reused, none kept.
        keep_listing(&root);
        scan_cached(&root);
        assert!(take_listing(&root).is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_watch_serves_unchanged_calls_and_follows_every_change() {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        for i in 0..5 {
            write(&root.join(format!("p{i}/src/lib.rs")));
        }
        let mut c = EnvScanCache::default();
        c.scan(&root); // one-shot: no watch yet
        let (_, st) = c.scan(&root); // second call sets the watch up
        assert!(st.listed + st.reused > 0);
        assert!(c.watch.is_some(), "no inotify watch");
        let (s, st) = c.scan(&root);
        assert_eq!(st.listed, 0, "nothing changed: {st:?}");
        assert!(s.files.is_empty());

        // New .env deep inside: only its directory is listed.
        write(&root.join("p2/src/.env"));
        let (s, st) = c.scan(&root);
        assert_eq!(s.files, vec![root.join("p2/src/.env")]);
        assert_eq!(st.listed, 1, "{st:?}");
        // A new subtree in one step.
        fs::create_dir_all(root.join("p3/a/b/c")).unwrap();
        write(&root.join("p3/a/b/c/.env.local"));
        let (s, _) = c.scan(&root);
        assert!(s.files.contains(&root.join("p3/a/b/c/.env.local")), "{s:?}");
        // A file renamed to .env.
        write(&root.join("p4/src/notes"));
        c.scan(&root);
        fs::rename(
            root.join("p4/src/notes"),
            root.join("p4/src/.env.production"),
        )
        .unwrap();
        let (s, _) = c.scan(&root);
        assert!(s.files.contains(&root.join("p4/src/.env.production")));
        // A directory moved elsewhere in the tree keeps being followed.
        fs::rename(root.join("p3/a"), root.join("p0/moved")).unwrap();
        let (s, _) = c.scan(&root);
        assert!(
            s.files.contains(&root.join("p0/moved/b/c/.env.local")),
            "{s:?}"
        );
        assert!(!s.files.contains(&root.join("p3/a/b/c/.env.local")));
        write(&root.join("p0/moved/b/.env"));
        let (s, _) = c.scan(&root);
        assert!(s.files.contains(&root.join("p0/moved/b/.env")), "{s:?}");
        // Removed: gone.
        fs::remove_dir_all(root.join("p0/moved")).unwrap();
        let (s, _) = c.scan(&root);
        assert!(
            !s.files.iter().any(|f| f.starts_with(root.join("p0"))),
            "{s:?}"
        );
        // Every answer equals a fresh scan's.
        let (fresh, _) = EnvScanCache::default().scan(&root);
        assert_eq!(c.scan(&root).0, fresh);
    }

    /// A workspace `ws` under `dir` with a chain ten directories deep and
    /// `packages` directories of two levels, aged: its root, the saved
    /// scan's file, and the deepest directory.
    fn deep_tree(dir: &Path, packages: usize) -> (PathBuf, PathBuf, PathBuf) {
        let root = fs::canonicalize(dir).unwrap().join("ws");
        let file = dir.join("cache/env-scan/ws");
        let mut deep = root.clone();
        for i in 0..10 {
            deep.push(format!("l{i}"));
            write(&deep.join("keep.txt"));
        }
        for i in 0..packages {
            write(&root.join(format!("pkg{i}/src/lib.rs")));
        }
        age_tree(&root);
        (root, file, deep)
    }

    /// A first scan reads every directory ahead on two threads: exactly
    /// the directories the walk reads (not a skipped one, not through a
    /// symlink), each listing what the walk's own would be, and the scan
    /// finds every `.env` through them, ten levels down too.
    #[test]
    fn listings_read_ahead_are_the_walks_own() {
        let t = tempfile::tempdir().unwrap();
        let (root, _, deep) = deep_tree(t.path(), 120);
        write(&deep.join(".env"));
        write(&root.join("pkg7/src/.env.local"));
        write(&root.join("node_modules/x/.env"));
        std::os::unix::fs::symlink(root.join("pkg3"), root.join("link")).unwrap();
        let ahead = list_ahead(&root, SystemTime::now(), WINDOW, false);
        assert!(ahead.len() > 250, "control: {}", ahead.len());
        for (dir, (look, read, _)) in &ahead {
            let look = look.as_ref().unwrap();
            assert!(look.is_dir, "{}", dir.display());
            let read = read.as_ref().unwrap().as_ref().unwrap();
            let again = list(dir, look.stamp, false, None).unwrap();
            assert_eq!(read.subdirs, again.subdirs, "{}", dir.display());
            assert_eq!(read.env_files, again.env_files, "{}", dir.display());
        }
        for not in ["node_modules", "node_modules/x", "link"] {
            assert!(!ahead.contains_key(&root.join(not)), "{not}");
        }
        let mut c = stamps_only();
        let (scan, stats) = c.scan(&root);
        assert_eq!(stats.listed, ahead.len());
        assert_eq!(
            scan.files,
            vec![deep.join(".env"), root.join("pkg7/src/.env.local")]
        );
    }

    /// A new process (a fresh cache reading the file the last one left)
    /// lists only the directories that changed, and still finds a `.env`
    /// made ten levels down since.
    #[test]
    fn a_new_process_starts_from_the_saved_listings() {
        let t = tempfile::tempdir().unwrap();
        let (root, file, deep) = deep_tree(t.path(), 30);
        let (s, st) = stamps_only().scan_with_file(&root, Some(&file));
        assert!(s.files.is_empty());
        let all = st.listed;
        assert_eq!(all, 1 + 10 + 60);
        let (_, st) = stamps_only().scan_with_file(&root, Some(&file));
        assert_eq!((st.listed, st.reused), (0, all), "nothing changed");

        write(&deep.join(".env"));
        let (s, st) = stamps_only().scan_with_file(&root, Some(&file));
        assert_eq!(s.files, vec![deep.join(".env")]);
        assert_eq!(st.listed, 1, "{st:?}");
        // Still racy (changed a moment ago): listed again, found again.
        let (s, st) = stamps_only().scan_with_file(&root, Some(&file));
        assert_eq!((s.files.len(), st.listed), (1, 1));
        // A file cut short is not trusted: everything is listed again.
        let data = fs::read(&file).unwrap();
        fs::write(&file, &data[..data.len() / 2]).unwrap();
        let (s, st) = stamps_only().scan_with_file(&root, Some(&file));
        assert_eq!((s.files.len(), st.listed), (1, all));
    }

    /// A process's first call is answered from the saved scan when no
    /// directory changed, without building its listings; that process's
    /// next call reads them, and a caller that needs them (the journal's
    /// [`known_dirs`]) has them at once. A `.env` made at depth 10 since
    /// is found by the next process. Enough directories for the stamps to
    /// be taken on two threads.
    #[cfg(unix)]
    #[test]
    fn a_first_call_from_the_saved_scan_still_finds_a_new_env_at_depth_ten() {
        let t = tempfile::tempdir().unwrap();
        let (root, file, deep) = deep_tree(t.path(), 300);
        let (_, st) = stamps_only().scan_with_file(&root, Some(&file));
        let all = st.listed;
        assert_eq!(all, 1 + 10 + 600);
        assert!(all >= LOOK_AHEAD_MIN_DIRS);

        let mut quick = stamps_only();
        let (s, st) = quick.scan_with_file(&root, Some(&file));
        assert!(s.files.is_empty() && s.unmasked.is_empty());
        assert_eq!((st.listed, st.reused), (0, all));
        assert!(quick.dirs.is_empty(), "answered without the listings");
        let (_, st) = quick.scan_with_file(&root, Some(&file));
        assert_eq!((st.listed, st.reused), (0, all), "the next call reads them");
        assert_eq!(quick.dirs.len(), all);
        let mut needs = stamps_only();
        needs.scan_with_file_as(&root, Some(&file), Want::Dirs);
        assert_eq!(needs.dirs.len(), all, "a caller that reads the listings");

        write(&deep.join(".env"));
        let (s, st) = stamps_only().scan_with_file(&root, Some(&file));
        assert_eq!(s.files, vec![deep.join(".env")]);
        assert_eq!(st.listed, 1, "{st:?}");
        // Racy now (changed a moment ago): never answered from the file.
        let mut again = stamps_only();
        let (s, st) = again.scan_with_file(&root, Some(&file));
        assert_eq!((s.files.len(), st.listed), (1, 1));
        assert_eq!(again.dirs.len(), all);
    }

    /// The stamps taken on two threads from the opened root are the ones
    /// taken by whole path; and a root replaced after it was opened is
    /// caught: the opened one still answers for the old tree (why the
    /// check exists), its path no longer names it, while a root opened
    /// afresh does.
    #[cfg(target_os = "linux")]
    #[test]
    fn stamps_from_the_opened_root_are_the_paths_and_a_replaced_root_is_caught() {
        let t = tempfile::tempdir().unwrap();
        let (root, _, _) = deep_tree(t.path(), 150);
        let dirs: Vec<PathBuf> = walkdir::WalkDir::new(&root)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_dir())
            .map(|e| e.into_path())
            .collect();
        let paths: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        assert!(paths.len() >= LOOK_AHEAD_MIN_DIRS);
        let by_path: Vec<Stamp> = paths.iter().map(|p| look_at(p).unwrap().stamp).collect();
        let fast: Vec<Stamp> = lstat_all(&root, &paths)
            .into_iter()
            .map(|l| l.unwrap().stamp)
            .collect();
        assert_eq!(fast, by_path);

        let opened = FromRoot::open(&root).unwrap();
        assert!(opened.still_there());
        let deep = paths.iter().find(|p| p.ends_with("l0/l1")).unwrap();
        let old = opened.look(deep).unwrap().stamp;
        fs::rename(&root, t.path().join("old")).unwrap();
        write(&deep.join("keep.txt"));
        assert!(!opened.still_there(), "a root replaced is caught");
        assert_eq!(opened.look(deep).unwrap().stamp, old, "the old tree's");
        assert_ne!(look_at(deep).unwrap().stamp, old);
        assert!(FromRoot::open(&root).unwrap().still_there());
    }

    /// A command that makes a `.env` and sets its directory's mtime back
    /// cannot hide it: the ctime moved.
    #[cfg(unix)]
    #[test]
    fn an_mtime_set_back_does_not_hide_a_new_env_file() {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap().join("ws");
        let file = t.path().join("cache");
        write(&root.join("a/b/x.txt"));
        age_tree(&root);
        let mtime = fs::metadata(root.join("a/b")).unwrap().modified().unwrap();
        stamps_only().scan_with_file(&root, Some(&file));
        write(&root.join("a/b/.env"));
        fs::File::open(root.join("a/b"))
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(
            fs::metadata(root.join("a/b")).unwrap().modified().unwrap(),
            mtime
        );
        let (s, _) = stamps_only().scan_with_file(&root, Some(&file));
        assert_eq!(s.files, vec![root.join("a/b/.env")]);
    }

    /// A directory that became unreadable since the last command is named
    /// as not scanned, however the cache remembers it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_made_unreadable_since_is_still_reported() {
        // In a thread of its own without the capabilities that let root
        // list any directory (capabilities are per thread on Linux).
        std::thread::spawn(unreadable_since_body).join().unwrap();
    }

    #[cfg(target_os = "linux")]
    fn unreadable_since_body() {
        use caps::{CapSet, Capability};
        use std::os::unix::fs::PermissionsExt;
        for c in [
            Capability::CAP_DAC_OVERRIDE,
            Capability::CAP_DAC_READ_SEARCH,
        ] {
            caps::drop(None, CapSet::Effective, c).unwrap();
        }
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap().join("ws");
        let file = t.path().join("cache");
        write(&root.join("locked/x.txt"));
        age_tree(&root);
        stamps_only().scan_with_file(&root, Some(&file));
        fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        let (s, _) = stamps_only().scan_with_file(&root, Some(&file));
        fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(s.unmasked.len(), 1, "{:?}", s.unmasked);
        assert!(s.unmasked[0].contains("locked"), "{:?}", s.unmasked);
    }
}
