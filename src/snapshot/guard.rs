//! Refusals: workspaces that must not be snapshotted.
//!
//! Two checks, both before the store is created: a pure path check (`/`,
//! homes and their ancestors, system directories, codewhale's own state)
//! and a bounded walk that counts entries and bytes with the same ignore
//! rules `git add` will apply (`.gitignore` plus the built-in excludes).
//! The walk stops as soon as a limit is crossed, so a huge tree costs at
//! most `max_entries` directory entries.

use super::error::Disabled;
use super::layout::BUILTIN_EXCLUDES;
use crate::policy::env_scan::{ListedDir, WorkspaceListing};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

mod walk;
use walk::walk_size;

/// System directories refused as workspaces (on top of `/`, homes and
/// their ancestors).
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
    "/private",
    "/private/tmp",
    "/private/var",
    "/Applications",
    "/Library",
    "/System",
    "/Users",
    "/Volumes",
    "/home",
];

/// Refuse `/`, any filesystem root, any home directory or an ancestor of
/// one, the system directories, and anything inside or containing
/// `codewhale_home` (the store must never snapshot itself).
pub fn check_path(
    workspace: &Path,
    homes: &[PathBuf],
    codewhale_home: &Path,
) -> Result<(), Disabled> {
    let refuse = |why: &str| {
        Err(Disabled::RefusedPath {
            path: workspace.to_path_buf(),
            why: why.to_string(),
        })
    };
    if workspace.parent().is_none() {
        return refuse("a filesystem root");
    }
    for home in homes {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.clone());
        if home == workspace {
            return refuse("your home directory");
        }
        if home.starts_with(workspace) {
            return refuse("a directory that contains your home directory");
        }
    }
    if SYSTEM_DIRS.iter().any(|d| Path::new(d) == workspace) {
        return refuse("a system directory");
    }
    let cw = std::fs::canonicalize(codewhale_home).unwrap_or_else(|_| codewhale_home.to_path_buf());
    if workspace.starts_with(&cw) {
        return refuse("inside codewhale's own state directory");
    }
    if cw.starts_with(workspace) {
        return refuse("a directory that contains codewhale's state directory ($CODEWHALE_HOME)");
    }
    Ok(())
}

/// Directory names skipped by the size walk: the built-in excludes that
/// name directories, plus `.git` (never snapshotted).
pub fn skipped_dir(name: &str) -> bool {
    name == ".git"
        || BUILTIN_EXCLUDES
            .iter()
            .any(|(pat, _)| pat.strip_suffix('/') == Some(name))
}

/// Count entries and bytes under `workspace` (respecting `.gitignore` and
/// the built-in excludes) and refuse when either limit is crossed.
pub fn check_size(workspace: &Path, max_entries: u64, max_bytes: u64) -> Result<(), Disabled> {
    walk_size(workspace, max_entries, max_bytes, None, None).map(drop)
}

/// The sizes of the tracked files as the user's git last saw them: the
/// stat data of their index, read with `gix-index`. A whole walk given
/// these counts a tracked file's size from here instead of `stat`ing it
/// (100,000 `fstatat`s were most of a first open's ~0.3 CPU-s at 100k
/// files; reading the index is ~20 ms). What that trusts is what the
/// cache already does between walks: a file changed in place since the
/// user's git looked counts at its old size until its directory changes
/// or the next whole walk; and, as git records it, a tracked file's size
/// modulo 4 GiB.
pub struct TrackedSizes {
    index: gix_index::File,
}

impl TrackedSizes {
    /// The index at `index`; `None` when it cannot be read (the walk then
    /// `stat`s every file).
    pub fn read(index: &Path) -> Option<TrackedSizes> {
        let options = gix_index::decode::Options {
            thread_limit: Some(1),
            ..Default::default()
        };
        // Its checksum is not worth ~20 ms here: a torn or stale index
        // only gives sizes a walk would also take as they are.
        gix_index::File::at(index, gix_index::hash::Kind::Sha1, true, options)
            .ok()
            .map(|index| TrackedSizes { index })
    }

    /// The recorded size of the regular file at `rel` (relative to the
    /// workspace, `/`-separated), if the index tracks one there.
    #[cfg(test)]
    fn size(&self, rel: &[u8]) -> Option<u64> {
        let (dir, name) = match rel.iter().rposition(|b| *b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&b""[..], rel),
        };
        self.size_in(&self.dir(dir), name)
    }

    /// The entries under the directory `rel_dir` (relative, `/`-separated;
    /// empty for the workspace): a walk thread finds a directory's files
    /// among these (one search per directory, not one over the whole
    /// index per file).
    fn dir(&self, rel_dir: &[u8]) -> TrackedDir {
        let (range, prefix) = if rel_dir.is_empty() {
            (Some(0..self.index.entries().len()), 0)
        } else {
            let mut p = rel_dir.to_vec();
            p.push(b'/');
            (
                self.index.prefixed_entries_range(bstr::BStr::new(&p)),
                p.len(),
            )
        };
        TrackedDir {
            range: range.unwrap_or(0..0),
            prefix,
        }
    }

    /// The recorded size of the regular file `name` directly in `dir`.
    fn size_in(&self, dir: &TrackedDir, name: &[u8]) -> Option<u64> {
        use gix_index::entry::{Mode, Stage};
        let entries = self.index.entries().get(dir.range.clone())?;
        let i = entries
            .binary_search_by(|e| {
                let p: &[u8] = e.path(&self.index);
                p.get(dir.prefix..)
                    .unwrap_or_default()
                    .cmp(name)
                    .then_with(|| e.stage().cmp(&Stage::Unconflicted))
            })
            .ok()?;
        let e = &entries[i];
        matches!(e.mode, Mode::FILE | Mode::FILE_EXECUTABLE).then_some(u64::from(e.stat.size))
    }
}

/// A directory's entries in [`TrackedSizes`]: their range in the index,
/// and the length of the directory's path with its `/`.
#[derive(Debug)]
struct TrackedDir {
    range: std::ops::Range<usize>,
    prefix: usize,
}

/// A size walk's totals and the stamps that vouch for them (see
/// [`check_size_cached`]).
#[derive(Debug, PartialEq, Eq)]
pub struct SizeSeen {
    entries: u64,
    bytes: u64,
    /// Every directory the walk entered, with its direct entries and the
    /// bytes of its direct files (what a later look re-counts when only
    /// that directory changed).
    dirs: BTreeMap<PathBuf, DirSeen>,
    /// Every `.gitignore` it read.
    ignores: Vec<(PathBuf, Stamp)>,
    /// Something the cache could not vouch for next time (an ignore
    /// file's stamp too close to the walk, an unreadable stamp): the
    /// totals are not kept. A directory too close is kept, marked
    /// [`DirSeen::racy`].
    racy: bool,
}

/// One directory of a size walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DirSeen {
    stamp: Stamp,
    entries: u64,
    bytes: u64,
    /// Its stamp is too close to the look to be trusted: the cache keeps
    /// it with no stamp, so the next look lists it again (the rest of the
    /// tree is still reused).
    racy: bool,
}

/// Identity and change times of a path, from `lstat` (the ctime moves on
/// every entry change and every `utimes`, so a command cannot hide a
/// change by setting the mtime back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    size: u64,
}

#[cfg(unix)]
fn stamp(m: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp {
        dev: m.dev(),
        ino: m.ino(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
        size: m.len(),
    }
}

/// The stamp of a directory the `.env` scan read: its `lstat`, taken
/// before that read, as [`stamp`] would make it.
fn listed_stamp(l: &ListedDir) -> Stamp {
    Stamp {
        dev: l.stamp.dev,
        ino: l.stamp.ino,
        mtime: l.stamp.mtime,
        ctime: l.stamp.ctime,
        size: l.size,
    }
}

#[cfg(not(unix))]
fn stamp(m: &std::fs::Metadata) -> Stamp {
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| (d.as_secs() as i64, i64::from(d.subsec_nanos())))
        .unwrap_or((0, 0));
    Stamp {
        dev: 0,
        ino: 0,
        mtime,
        ctime: mtime,
        size: m.len(),
    }
}

/// A stamp this close to the walk could hide a later change in the same
/// timestamp tick (git's racy-index rule; covers 1–2 s filesystems).
const RACY_SECS: i64 = 2;

/// [`check_size`] without walking again while little changed. The last
/// walk under the limits is kept in `cache` (the store's `size-check`
/// file): every directory it entered with its stamp and its direct
/// entries and bytes, and the stamp of every `.gitignore` it read. Looking
/// again costs one `lstat` per directory: a directory whose stamp holds
/// keeps its counts; one whose stamp moved (an entry added, removed or
/// renamed in it) is listed again, under the ignore rules of the
/// `.gitignore` files the cache names, and a directory that appeared in it
/// is walked; a directory gone drops out. Any `.gitignore` changed, or a
/// new one found, means a whole walk; so does a re-count over a limit (the
/// whole walk decides every refusal).
///
/// Not seen without listing its directory again: a file that grew or
/// shrank in place (its directory does not change). Such growth is counted
/// when its directory next changes, or at the next whole walk; the store's
/// own size cap (`max_store_mb`) bounds the side repository meanwhile.
///
/// `Ok(Some(bytes))`: new totals, to be written to `cache` once the
/// store directory exists; `Ok(None)`: the cached totals were used (or the
/// new ones are not worth keeping).
///
/// `index`: the user's index, whose sizes a whole walk takes for tracked
/// files (see [`TrackedSizes`]); read only when a whole walk is needed.
/// `listed`: the directories this process's `.env` scan just read whole
/// ([`crate::policy::env_scan::take_listing`]): a whole walk counts those
/// from there instead of reading them again.
pub fn check_size_cached(
    workspace: &Path,
    max_entries: u64,
    max_bytes: u64,
    cache: &Path,
    index: Option<&Path>,
    listed: Option<&WorkspaceListing>,
) -> Result<Option<Vec<u8>>, Disabled> {
    if let Some(old) = read_cache(cache) {
        match refresh(workspace, old) {
            Refreshed::Same(seen) => {
                limits(workspace, seen.entries, seen.bytes, max_entries, max_bytes)?;
                return Ok(None);
            }
            Refreshed::Updated(seen) => {
                if limits(workspace, seen.entries, seen.bytes, max_entries, max_bytes).is_ok() {
                    return Ok((!seen.racy).then(|| encode(&seen)));
                }
            }
            Refreshed::Stale => {}
        }
    }
    let sizes = index.and_then(TrackedSizes::read);
    let seen = walk_size(workspace, max_entries, max_bytes, sizes.as_ref(), listed)?;
    Ok((!seen.racy).then(|| encode(&seen)))
}

fn limits(
    workspace: &Path,
    entries: u64,
    bytes: u64,
    max_entries: u64,
    max_bytes: u64,
) -> Result<(), Disabled> {
    if entries > max_entries {
        return Err(Disabled::TooManyEntries {
            path: workspace.to_path_buf(),
            limit: max_entries,
        });
    }
    if bytes > max_bytes {
        return Err(Disabled::TooLarge {
            path: workspace.to_path_buf(),
            limit_mb: max_bytes / (1024 * 1024),
        });
    }
    Ok(())
}

const CACHE_FORMAT: &str = "codewhale-size-check 2";

fn stamp_fields(s: &Stamp) -> String {
    format!(
        "{} {} {} {} {} {} {}",
        s.dev, s.ino, s.mtime.0, s.mtime.1, s.ctime.0, s.ctime.1, s.size
    )
}

fn encode(seen: &SizeSeen) -> Vec<u8> {
    let mut out = format!("{CACHE_FORMAT} {} {}\n", seen.entries, seen.bytes).into_bytes();
    let record = |out: &mut Vec<u8>, p: &Path, fields: String| {
        out.extend_from_slice(p.as_os_str().as_encoded_bytes());
        out.push(0);
        out.extend_from_slice(fields.as_bytes());
        out.push(0);
    };
    // A stamp no directory has: listed again next time.
    let none = Stamp {
        dev: 0,
        ino: 0,
        mtime: (0, 0),
        ctime: (0, 0),
        size: 0,
    };
    for (p, d) in &seen.dirs {
        let st = if d.racy { &none } else { &d.stamp };
        let fields = format!("d {} {} {}", stamp_fields(st), d.entries, d.bytes);
        record(&mut out, p, fields);
    }
    for (p, s) in &seen.ignores {
        record(&mut out, p, format!("g {}", stamp_fields(s)));
    }
    out
}

/// The last walk as the cache file holds it, if it parses (nothing is
/// checked against the disk here: [`refresh`] does).
fn read_cache(cache: &Path) -> Option<SizeSeen> {
    let data = std::fs::read(cache).ok()?;
    let nl = data.iter().position(|b| *b == b'\n')?;
    let head = std::str::from_utf8(&data[..nl]).ok()?;
    let totals = head.strip_prefix(CACHE_FORMAT)?.trim();
    let (e, b) = totals.split_once(' ')?;
    let mut seen = SizeSeen {
        entries: e.parse().ok()?,
        bytes: b.parse().ok()?,
        dirs: BTreeMap::new(),
        ignores: Vec::new(),
        racy: false,
    };
    let mut fields = data[nl + 1..].split(|b| *b == 0);
    loop {
        let Some(path) = fields.next() else {
            return Some(seen);
        };
        if path.is_empty() {
            return Some(seen);
        }
        let text = std::str::from_utf8(fields.next()?).ok()?;
        let (kind, rest) = text.split_once(' ')?;
        let nums: Vec<i64> = rest
            .split(' ')
            .map(|n| n.parse().ok())
            .collect::<Option<_>>()?;
        let path = Path::new(os_str(path)?).to_path_buf();
        let stamp_of = |n: &[i64]| Stamp {
            dev: n[0] as u64,
            ino: n[1] as u64,
            mtime: (n[2], n[3]),
            ctime: (n[4], n[5]),
            size: n[6] as u64,
        };
        match (kind, nums.len()) {
            ("d", 9) => {
                let d = DirSeen {
                    stamp: stamp_of(&nums),
                    entries: u64::try_from(nums[7]).ok()?,
                    bytes: u64::try_from(nums[8]).ok()?,
                    racy: false,
                };
                seen.dirs.insert(path, d);
            }
            ("g", 7) => seen.ignores.push((path, stamp_of(&nums))),
            _ => return None,
        }
    }
}

/// What looking again at a cached walk found.
#[derive(Debug)]
enum Refreshed {
    /// Every stamp holds: the cached totals stand.
    Same(SizeSeen),
    /// Some directories were counted again: new totals.
    Updated(SizeSeen),
    /// An ignore file changed or appeared, or a listing failed: walk.
    Stale,
}

/// The `.gitignore` rules a cached walk read, by directory: what decides
/// whether an entry of a re-listed directory counts (the deepest file
/// with an opinion wins, as in git and in the walk).
struct Rules {
    root: PathBuf,
    by_dir: HashMap<PathBuf, ignore::gitignore::Gitignore>,
}

impl Rules {
    fn new(root: &Path, ignores: &[(PathBuf, Stamp)]) -> Rules {
        let by_dir = ignores
            .iter()
            .filter_map(|(p, _)| {
                let (gi, _) = ignore::gitignore::Gitignore::new(p);
                Some((p.parent()?.to_path_buf(), gi))
            })
            .collect();
        Rules {
            root: root.to_path_buf(),
            by_dir,
        }
    }

    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut dir = path.parent();
        while let Some(d) = dir {
            if let Some(verdict) = self.by_dir.get(d).and_then(|gi| opinion(gi, path, is_dir)) {
                return verdict;
            }
            if d == self.root {
                break;
            }
            dir = d.parent();
        }
        false
    }
}

/// One `.gitignore`'s opinion on `path`: `Some(true)` ignored,
/// `Some(false)` re-included (`!pattern`), `None` none — the nearest file
/// with one decides, in the walk ([`walk`]) and the re-count ([`Rules`]).
fn opinion(gi: &ignore::gitignore::Gitignore, path: &Path, is_dir: bool) -> Option<bool> {
    match gi.matched(path, is_dir) {
        ignore::Match::Ignore(_) => Some(true),
        ignore::Match::Whitelist(_) => Some(false),
        ignore::Match::None => None,
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn is_racy(s: &Stamp, started: i64) -> bool {
    s.mtime.0.max(s.ctime.0) + RACY_SECS >= started
}

/// Look again at a cached walk (see [`check_size_cached`]).
fn refresh(workspace: &Path, mut seen: SizeSeen) -> Refreshed {
    let started = now_secs();
    for (p, want) in &seen.ignores {
        match std::fs::symlink_metadata(p) {
            Ok(m) if stamp(&m) == *want => {}
            _ => return Refreshed::Stale,
        }
    }
    let mut stack = Vec::new();
    let mut gone = Vec::new();
    for (dir, d) in &seen.dirs {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if stamp(&m) == d.stamp => {}
            Ok(m) if m.is_dir() => stack.push(dir.clone()),
            _ => gone.push(dir.clone()),
        }
    }
    if stack.is_empty() && gone.is_empty() {
        return Refreshed::Same(seen);
    }
    for g in gone {
        seen.dirs.remove(&g);
    }
    let rules = Rules::new(workspace, &seen.ignores);
    let known_ignore = |p: &Path| seen.ignores.iter().any(|(i, _)| i == p);
    let mut counted: BTreeMap<PathBuf, DirSeen> = BTreeMap::new();
    while let Some(dir) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&dir) else {
            // Gone since: its parent, listed again, no longer names it.
            seen.dirs.remove(&dir);
            continue;
        };
        let st = stamp(&m);
        let mut d = DirSeen {
            stamp: st,
            entries: 0,
            bytes: 0,
            racy: is_racy(&st, started),
        };
        let Ok(listing) = std::fs::read_dir(&dir) else {
            return Refreshed::Stale;
        };
        for e in listing {
            let Ok(e) = e else {
                return Refreshed::Stale;
            };
            let path = e.path();
            let Ok(ft) = e.file_type() else {
                return Refreshed::Stale;
            };
            if e.file_name() == ".gitignore" && !known_ignore(&path) {
                return Refreshed::Stale;
            }
            if ft.is_dir() && e.file_name().to_str().is_some_and(skipped_dir) {
                continue;
            }
            if rules.ignored(&path, ft.is_dir()) {
                continue;
            }
            d.entries += 1;
            if ft.is_file() {
                match e.metadata() {
                    Ok(m) => d.bytes += m.len(),
                    Err(_) => return Refreshed::Stale,
                }
            }
            if ft.is_dir() && !seen.dirs.contains_key(&path) && !counted.contains_key(&path) {
                stack.push(path);
            }
        }
        counted.insert(dir, d);
    }
    seen.dirs.extend(counted);
    seen.entries = seen.dirs.values().map(|d| d.entries).sum();
    seen.bytes = seen.dirs.values().map(|d| d.bytes).sum();
    Refreshed::Updated(seen)
}

/// The directory `path` relative to `workspace` in the index's form
/// (`/`-separated bytes), or `None` when it has no such form. On unix the
/// bytes of the relative path as they are (asked once per directory of a
/// walk: no copy). Elsewhere none, and the walk `stat`s every file: the
/// owner of git's path form (`git_path` in the tree builder) sits above
/// this module in the snapshot layers, and a second copy of it is not
/// worth a speed-up on Windows alone.
#[cfg(unix)]
fn relative<'a>(workspace: &Path, path: &'a Path) -> Option<&'a [u8]> {
    use std::os::unix::ffi::OsStrExt;
    let rel = path.strip_prefix(workspace).ok()?;
    Some(rel.as_os_str().as_bytes())
}

#[cfg(not(unix))]
fn relative<'a>(_workspace: &Path, _path: &'a Path) -> Option<&'a [u8]> {
    None
}

/// A file name's bytes in the index's form (see [`relative`]).
#[cfg(unix)]
fn os_bytes(name: &std::ffi::OsStr) -> Option<&[u8]> {
    use std::os::unix::ffi::OsStrExt;
    Some(name.as_bytes())
}

#[cfg(not(unix))]
fn os_bytes(_name: &std::ffi::OsStr) -> Option<&[u8]> {
    None
}

#[cfg(unix)]
fn os_str(b: &[u8]) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    Some(std::ffi::OsStr::from_bytes(b))
}

#[cfg(not(unix))]
fn os_str(b: &[u8]) -> Option<&std::ffi::OsStr> {
    std::str::from_utf8(b).ok().map(std::ffi::OsStr::new)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn refused(ws: &str, homes: &[&str], cw: &str) -> bool {
        let homes: Vec<PathBuf> = homes.iter().map(PathBuf::from).collect();
        check_path(Path::new(ws), &homes, Path::new(cw)).is_err()
    }

    #[test]
    fn path_refusals() {
        let h = ["/nonexistent-home/u"];
        let cw = "/nonexistent-home/u/.codewhale";
        assert!(refused("/", &h, cw));
        assert!(refused("/nonexistent-home/u", &h, cw));
        assert!(refused("/nonexistent-home", &h, cw));
        assert!(refused("/usr", &h, cw));
        assert!(refused("/tmp", &h, cw));
        assert!(refused("/nonexistent-home/u/.codewhale/snapshots", &h, cw));
        assert!(!refused("/nonexistent-home/u/src/project", &h, cw));
        assert!(!refused("/tmp/project", &h, cw));
        // A workspace that contains the store would snapshot the store.
        assert!(refused("/srv/x", &["/elsewhere"], "/srv/x/state"));
    }

    #[test]
    fn the_size_cache_is_used_only_while_every_stamp_holds() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f"), vec![b'x'; 100]).unwrap();
        std::fs::write(ws.join(".gitignore"), "ignored/\n").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        for p in ["", "a", "a/b", ".gitignore"] {
            std::fs::File::open(ws.join(p))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        // ctimes are now: wait out the racy window.
        std::thread::sleep(std::time::Duration::from_millis(
            2100 + 1000 * RACY_SECS as u64,
        ));
        let cache = t.path().join("size-check");
        let fresh = check_size_cached(&ws, 100, 10_000, &cache, None, None)
            .unwrap()
            .unwrap();
        std::fs::write(&cache, fresh).unwrap();
        let cached = read_cache(&cache).unwrap();
        assert_eq!((cached.entries, cached.bytes), (4, 109));
        assert!(matches!(refresh(&ws, cached), Refreshed::Same(_)));
        assert_eq!(
            check_size_cached(&ws, 100, 10_000, &cache, None, None).unwrap(),
            None
        );
        // The cached totals against other limits: the same refusals.
        assert!(matches!(
            check_size_cached(&ws, 3, 10_000, &cache, None, None),
            Err(Disabled::TooManyEntries { limit: 3, .. })
        ));
        assert!(matches!(
            check_size_cached(&ws, 100, 50, &cache, None, None),
            Err(Disabled::TooLarge { .. })
        ));
        // An entry added deep down: that directory is counted again.
        std::fs::write(ws.join("a/b/g"), "y").unwrap();
        match refresh(&ws, read_cache(&cache).unwrap()) {
            Refreshed::Updated(seen) => assert_eq!((seen.entries, seen.bytes), (5, 110)),
            other => panic!("{other:?}"),
        }
        // Over a limit after a re-count: the whole walk decides (and
        // refuses with the same error).
        assert!(matches!(
            check_size_cached(&ws, 4, 10_000, &cache, None, None),
            Err(Disabled::TooManyEntries { limit: 4, .. })
        ));
        // The ignore file changed: a whole walk.
        std::fs::write(ws.join(".gitignore"), "b/\n").unwrap();
        assert!(matches!(
            refresh(&ws, read_cache(&cache).unwrap()),
            Refreshed::Stale
        ));
    }

    /// `n` bytes at `rel` under `ws`, its directories made.
    fn write_bytes(ws: &Path, rel: &str, n: usize) {
        let p = ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, vec![b'x'; n]).unwrap();
    }

    /// `git` in `ws`, with no configuration but the repository's.
    fn git(ws: &Path, home: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(ws)
            .args(args)
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// A whole walk given the index's sizes counts a tracked file at the
    /// size git recorded (no `stat`), an untracked one at its own: the
    /// same totals as a walk that `stat`s everything while git's record
    /// is current; a file grown in place since counts at git's size
    /// (the documented trade), and once git records it, its new size
    /// decides the same refusal.
    #[test]
    fn a_whole_walk_takes_tracked_sizes_from_the_index() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("a.txt"), vec![b'a'; 100]).unwrap();
        std::fs::write(ws.join("sub/b.txt"), vec![b'b'; 50]).unwrap();
        git(&ws, t.path(), &["init", "-q"]);
        git(&ws, t.path(), &["add", "a.txt", "sub/b.txt"]);
        std::fs::write(ws.join("u.txt"), "untracked").unwrap();
        let sizes = TrackedSizes::read(&ws.join(".git/index")).unwrap();
        assert_eq!(sizes.size(b"a.txt"), Some(100));
        assert_eq!(sizes.size(b"sub/b.txt"), Some(50));
        assert_eq!(sizes.size(b"u.txt"), None);
        assert_eq!(sizes.size(b"sub"), None);
        let with = walk_size(&ws, 100, 10_000, Some(&sizes), None).unwrap();
        let without = walk_size(&ws, 100, 10_000, None, None).unwrap();
        assert_eq!((with.entries, with.bytes), (without.entries, without.bytes));
        assert_eq!(with.bytes, 100 + 50 + 9);

        std::fs::write(ws.join("a.txt"), vec![b'a'; 1000]).unwrap();
        let with = walk_size(&ws, 100, 10_000, Some(&sizes), None).unwrap();
        assert_eq!(with.bytes, 100 + 50 + 9, "git's record, not a stat");
        assert!(matches!(
            walk_size(&ws, 100, 500, None, None),
            Err(Disabled::TooLarge { .. })
        ));
        git(&ws, t.path(), &["add", "a.txt"]);
        let sizes = TrackedSizes::read(&ws.join(".git/index")).unwrap();
        assert!(matches!(
            walk_size(&ws, 100, 500, Some(&sizes), None),
            Err(Disabled::TooLarge { .. })
        ));
        // No index: no sizes, and the walk `stat`s everything.
        assert!(TrackedSizes::read(&t.path().join("nowhere/index")).is_none());
    }

    /// A whole walk given the `.env` scan's whole listing counts from it
    /// what it would count reading every directory itself — same totals,
    /// same stamps, same ignore files — and a file added after the scan,
    /// which it does not count, is counted at the next look (the
    /// directory's stamp is the scan's, taken before the file came).
    #[test]
    fn a_whole_walk_counts_from_the_env_scans_listing() {
        use crate::policy::env_scan;
        let t = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap().join("ws");
        let write = |p: &str, n: usize| write_bytes(&ws, p, n);
        write("a/b/f", 100);
        write("a/c.tmp", 10);
        write("logs/x", 1000);
        write("src/m.rs", 3);
        write("src/deep/er/k.rs", 4);
        write("sub/.env", 6);
        write("node_modules/p/i.js", 50);
        write("dist/out.js", 70);
        std::fs::write(ws.join(".gitignore"), "logs/\n*.tmp\n").unwrap();
        git(&ws, t.path(), &["init", "-q"]);
        git(&ws, t.path(), &["add", "a/b/f", "src/m.rs"]);
        let sizes = TrackedSizes::read(&ws.join(".git/index")).unwrap();

        env_scan::keep_listing(&ws);
        env_scan::scan_cached(&ws);
        let listing = env_scan::take_listing(&ws).expect("kept");
        let with = walk_size(&ws, 1000, 1_000_000, Some(&sizes), Some(&listing)).unwrap();
        let without = walk_size(&ws, 1000, 1_000_000, Some(&sizes), None).unwrap();
        assert_eq!(with, without);
        // a, a/b, b/f, src, m.rs, deep, er, k.rs, sub, .env, .gitignore
        assert_eq!((with.entries, with.bytes), (11, 100 + 3 + 4 + 6 + 12));

        write("src/deep/er/new.rs", 1000);
        let with = walk_size(&ws, 1000, 1_000_000, Some(&sizes), Some(&listing)).unwrap();
        assert_eq!(
            (with.entries, with.bytes),
            (11, 125),
            "control: counted from the listing, not from the disk"
        );
        let cache = t.path().join("size-check");
        std::fs::write(&cache, encode(&with)).unwrap();
        let next = match refresh(&ws, read_cache(&cache).unwrap()) {
            Refreshed::Updated(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!((next.entries, next.bytes), (12, 1125));
    }

    /// A directory changed just before the walk is kept with no stamp:
    /// listed again next time, the rest reused; the totals stand.
    #[test]
    fn a_racy_directory_is_kept_and_listed_again() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f"), "12345").unwrap();
        let seen = walk_size(&ws, 100, 10_000, None, None).unwrap();
        assert!(!seen.racy, "only directories are too new here");
        assert!(seen.dirs.values().all(|d| d.racy));
        let cache = t.path().join("size-check");
        std::fs::write(&cache, encode(&seen)).unwrap();
        let cached = read_cache(&cache).unwrap();
        assert!(cached.dirs.values().all(|d| d.stamp.ino == 0));
        match refresh(&ws, cached) {
            Refreshed::Updated(r) => {
                assert_eq!((r.entries, r.bytes), (seen.entries, seen.bytes));
                assert_eq!((r.entries, r.bytes), (3, 5));
            }
            other => panic!("{other:?}"),
        }
    }

    /// Re-counted totals equal a whole walk's, through every kind of
    /// change but an ignore file's.
    #[test]
    fn a_recount_gives_the_walks_totals() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let write = |p: &str, n: usize| write_bytes(&ws, p, n);
        write("a/b/f", 100);
        write("a/c/g", 10);
        write("d/e/h", 7);
        write("logs/x", 1000);
        write("src/.gitignore", "*.tmp\n!keep.tmp\n".len());
        std::fs::write(ws.join("src/.gitignore"), "*.tmp\n!keep.tmp\n").unwrap();
        write("src/m.rs", 3);
        std::fs::write(ws.join(".gitignore"), "logs/\n").unwrap();
        let mut seen = walk_size(&ws, 1000, 1_000_000, None, None).unwrap();
        let steps: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| write("a/b/new", 5)),
            Box::new(|| std::fs::remove_file(ws.join("a/c/g")).unwrap()),
            Box::new(|| write("fresh/deep/er/z", 9)),
            Box::new(|| std::fs::rename(ws.join("d"), ws.join("a/d")).unwrap()),
            Box::new(|| std::fs::remove_dir_all(ws.join("a/b")).unwrap()),
            Box::new(|| write("logs/more/y", 50)),
            Box::new(|| write("src/x.tmp", 50)),
            Box::new(|| write("src/keep.tmp", 4)),
            Box::new(|| write("node_modules/p/i.js", 50)),
            Box::new(|| write("src/deeper/k.tmp", 6)),
        ];
        for (i, step) in steps.iter().enumerate() {
            step();
            let walked = walk_size(&ws, 1000, 1_000_000, None, None).unwrap();
            match refresh(&ws, seen) {
                // (Same: only what the walk never enters changed.)
                Refreshed::Updated(r) | Refreshed::Same(r) => {
                    assert_eq!(
                        (r.entries, r.bytes),
                        (walked.entries, walked.bytes),
                        "step {i}"
                    );
                    assert_eq!(
                        r.dirs.keys().collect::<Vec<_>>(),
                        walked.dirs.keys().collect::<Vec<_>>(),
                        "step {i}"
                    );
                    seen = r;
                }
                other => panic!("step {i}: {other:?}"),
            }
        }
    }

    /// Each directory's direct entries and file bytes, as the cache keeps
    /// them for a later recount, are exact however the walk's threads
    /// shared the directories (entries are counted per directory and
    /// handed to the totals in batches), and a limit one below the totals
    /// refuses.
    #[test]
    fn per_directory_counts_are_exact_in_a_wide_tree() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let (mut entries, mut bytes) = (0u64, 0u64);
        for d in 0..40 {
            let dir = ws.join(format!("d{d}/sub{}", d % 3));
            std::fs::create_dir_all(&dir).unwrap();
            // `d{d}` and its `sub{N}`.
            entries += 2;
            for f in 0..30 {
                let n = (d * 31 + f * 7) % 500;
                std::fs::write(dir.join(format!("f{f}")), vec![b'x'; n]).unwrap();
                entries += 1;
                bytes += n as u64;
            }
        }
        let seen = walk_size(&ws, 1_000_000, 1 << 40, None, None).unwrap();
        assert_eq!((seen.entries, seen.bytes), (entries, bytes));
        for (dir, d) in &seen.dirs {
            let (mut e, mut b) = (0u64, 0u64);
            for x in std::fs::read_dir(dir).unwrap() {
                let m = x.unwrap().metadata().unwrap();
                e += 1;
                if m.is_file() {
                    b += m.len();
                }
            }
            assert_eq!((d.entries, d.bytes), (e, b), "{}", dir.display());
        }
        assert!(matches!(
            walk_size(&ws, entries - 1, 1 << 40, None, None),
            Err(Disabled::TooManyEntries { .. })
        ));
        assert!(matches!(
            walk_size(&ws, 1_000_000, bytes - 1, None, None),
            Err(Disabled::TooLarge { .. })
        ));
    }

    /// The walk's ignore rules against git's own: the files it counts are
    /// exactly those `git ls-files -o --exclude-per-directory=.gitignore`
    /// lists in a fresh repository (plus the directories holding them);
    /// the nearest `.gitignore` with an opinion decides, a directory
    /// ignored is not entered, and a `.gitignore` its own rules ignore
    /// still rules and is kept, so a look again finds nothing changed.
    #[test]
    fn the_walk_counts_what_git_would_add() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let home = t.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        for d in ["sub/deep", "build/out", "node_modules/p"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        let files: &[(&str, &str)] = &[
            (".gitignore", "*.log\n!keep.log\nbuild/\n"),
            ("a.log", "a"),
            ("keep.log", "keep"),
            ("x.txt", "xx"),
            ("sub/.gitignore", ".gitignore\nkeep.log\n"),
            ("sub/keep.log", "no"),
            ("sub/b.log", "no"),
            ("sub/y.txt", "yyy"),
            ("sub/deep/z.txt", "zzzz"),
            ("sub/deep/z.log", "no"),
            ("build/out/o", "no"),
            ("node_modules/p/i", "no"),
        ];
        for (p, body) in files {
            std::fs::write(ws.join(p), body).unwrap();
        }
        git(&ws, &home, &["init", "-q"]);
        let out = std::process::Command::new("git")
            .args(["ls-files", "-z", "-o", "--exclude-per-directory=.gitignore"])
            .current_dir(&ws)
            .env("HOME", &home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        let mut listed: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .split('\0')
            .filter(|p| !p.is_empty() && !p.starts_with("node_modules/"))
            .map(str::to_string)
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            [
                ".gitignore",
                "keep.log",
                "sub/deep/z.txt",
                "sub/y.txt",
                "x.txt"
            ]
        );
        let bytes: u64 = listed
            .iter()
            .map(|p| std::fs::metadata(ws.join(p)).unwrap().len())
            .sum();
        let seen = walk_size(&ws, 100, 10_000, None, None).unwrap();
        // Git's files and the two directories holding some of them.
        assert_eq!((seen.entries, seen.bytes), (listed.len() as u64 + 2, bytes));
        let per_dir: Vec<(String, u64)> = seen
            .dirs
            .iter()
            .map(|(d, s)| {
                let rel = d.strip_prefix(&ws).unwrap().to_string_lossy().into_owned();
                (rel, s.entries)
            })
            .collect();
        assert_eq!(
            per_dir,
            [("".into(), 4), ("sub".into(), 2), ("sub/deep".into(), 1)]
        );
        let kept: Vec<&Path> = seen.ignores.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(kept, [ws.join(".gitignore"), ws.join("sub/.gitignore")]);
        match refresh(&ws, seen) {
            Refreshed::Same(again) => assert_eq!(again.entries, listed.len() as u64 + 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn size_limits_count_after_ignores() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path();
        for i in 0..10 {
            std::fs::write(ws.join(format!("f{i}")), vec![b'x'; 100]).unwrap();
        }
        std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
        for i in 0..50 {
            std::fs::write(ws.join(format!("node_modules/pkg/{i}")), "x").unwrap();
        }
        std::fs::create_dir_all(ws.join("ignored")).unwrap();
        for i in 0..50 {
            std::fs::write(ws.join(format!("ignored/{i}")), "x").unwrap();
        }
        std::fs::write(ws.join(".gitignore"), "ignored/\n").unwrap();
        // 10 files + .gitignore = 11 entries, ~1000 bytes.
        assert!(check_size(ws, 11, 10_000).is_ok());
        assert!(matches!(
            check_size(ws, 10, 10_000),
            Err(Disabled::TooManyEntries { limit: 10, .. })
        ));
        assert!(matches!(
            check_size(ws, 1000, 500),
            Err(Disabled::TooLarge { .. })
        ));
    }
}
