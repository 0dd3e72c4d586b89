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
use std::path::{Path, PathBuf};

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
    walk_size(workspace, max_entries, max_bytes).map(drop)
}

/// A size walk's totals and the stamps that vouch for them (see
/// [`check_size_cached`]).
#[derive(Debug, PartialEq, Eq)]
pub struct SizeSeen {
    entries: u64,
    bytes: u64,
    /// Every directory the walk entered and every `.gitignore` it read.
    stamps: Vec<(PathBuf, Stamp)>,
    /// A stamp too close to the walk to be trusted next time.
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

/// [`check_size`] without walking again while nothing it depends on
/// changed: the totals of the last walk under the limits are kept in
/// `cache` (the store's `size-check` file) with the stamp of every
/// directory it entered and every `.gitignore` it read; when each still
/// has that stamp, no entry was added, removed or renamed anywhere the
/// walk looked and no ignore rule changed, so the totals are reused
/// (1 `lstat` per directory instead of one per file).
///
/// Not seen without a walk: a file that grew or shrank in place (its
/// directory does not change). Such growth is counted at the next walk,
/// which any entry change anywhere in the tree brings; the store's own
/// size cap (`max_store_mb`) bounds the side repository meanwhile.
///
/// `Ok(Some(bytes))`: a fresh walk, to be written to `cache` once the
/// store directory exists; `Ok(None)`: the cached totals were used (or the
/// walk's are not worth keeping).
pub fn check_size_cached(
    workspace: &Path,
    max_entries: u64,
    max_bytes: u64,
    cache: &Path,
) -> Result<Option<Vec<u8>>, Disabled> {
    if let Some((entries, bytes)) = read_cache(cache) {
        limits(workspace, entries, bytes, max_entries, max_bytes)?;
        return Ok(None);
    }
    let seen = walk_size(workspace, max_entries, max_bytes)?;
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

const CACHE_FORMAT: &str = "codewhale-size-check 1";

fn encode(seen: &SizeSeen) -> Vec<u8> {
    let mut out = format!("{CACHE_FORMAT} {} {}\n", seen.entries, seen.bytes).into_bytes();
    for (p, s) in &seen.stamps {
        out.extend_from_slice(p.as_os_str().as_encoded_bytes());
        out.push(0);
        out.extend_from_slice(
            format!(
                "{} {} {} {} {} {} {}",
                s.dev, s.ino, s.mtime.0, s.mtime.1, s.ctime.0, s.ctime.1, s.size
            )
            .as_bytes(),
        );
        out.push(0);
    }
    out
}

/// The cached totals, when the file parses and every stamp in it still
/// holds; `None` otherwise (walk again).
fn read_cache(cache: &Path) -> Option<(u64, u64)> {
    let data = std::fs::read(cache).ok()?;
    let nl = data.iter().position(|b| *b == b'\n')?;
    let head = std::str::from_utf8(&data[..nl]).ok()?;
    let totals = head.strip_prefix(CACHE_FORMAT)?.trim();
    let (e, b) = totals.split_once(' ')?;
    let (entries, bytes) = (e.parse().ok()?, b.parse().ok()?);
    let mut fields = data[nl + 1..].split(|b| *b == 0);
    loop {
        let Some(path) = fields.next() else {
            return Some((entries, bytes));
        };
        if path.is_empty() {
            return Some((entries, bytes));
        }
        let nums: Vec<i64> = std::str::from_utf8(fields.next()?)
            .ok()?
            .split(' ')
            .map(|n| n.parse().ok())
            .collect::<Option<_>>()?;
        let [dev, ino, ms, mns, cs, cns, size] = nums[..] else {
            return None;
        };
        let path = Path::new(os_str(path)?);
        let now = std::fs::symlink_metadata(path).ok()?;
        let want = Stamp {
            dev: dev as u64,
            ino: ino as u64,
            mtime: (ms, mns),
            ctime: (cs, cns),
            size: size as u64,
        };
        if stamp(&now) != want {
            return None;
        }
    }
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

/// The walk itself: totals, and the stamps of what it depended on.
fn walk_size(workspace: &Path, max_entries: u64, max_bytes: u64) -> Result<SizeSeen, Disabled> {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && e.file_name().to_str().is_some_and(skipped_dir))
        })
        .build();
    let mut seen = SizeSeen {
        entries: 0,
        bytes: 0,
        stamps: Vec::new(),
        racy: false,
    };
    let keep = |seen: &mut SizeSeen, path: &Path, m: &std::fs::Metadata| {
        let s = stamp(m);
        seen.racy |= s.mtime.0.max(s.ctime.0) + RACY_SECS >= started;
        seen.stamps.push((path.to_path_buf(), s));
    };
    for entry in walker.flatten() {
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir {
            match entry.metadata() {
                Ok(m) => keep(&mut seen, entry.path(), &m),
                Err(_) => seen.racy = true,
            }
        }
        if entry.depth() == 0 {
            continue;
        }
        seen.entries += 1;
        limits(workspace, seen.entries, 0, max_entries, max_bytes)?;
        if entry.file_type().is_some_and(|t| t.is_file()) {
            match entry.metadata() {
                Ok(m) => {
                    seen.bytes += m.len();
                    if entry.file_name() == ".gitignore" {
                        keep(&mut seen, entry.path(), &m);
                    }
                }
                Err(_) => seen.racy = true,
            }
            limits(workspace, seen.entries, seen.bytes, max_entries, max_bytes)?;
        }
    }
    Ok(seen)
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
        let fresh = check_size_cached(&ws, 100, 10_000, &cache)
            .unwrap()
            .unwrap();
        std::fs::write(&cache, fresh).unwrap();
        assert_eq!(read_cache(&cache), Some((4, 109)));
        assert_eq!(check_size_cached(&ws, 100, 10_000, &cache).unwrap(), None);
        // The cached totals against other limits: the same refusals.
        assert!(matches!(
            check_size_cached(&ws, 3, 10_000, &cache),
            Err(Disabled::TooManyEntries { limit: 3, .. })
        ));
        assert!(matches!(
            check_size_cached(&ws, 100, 50, &cache),
            Err(Disabled::TooLarge { .. })
        ));
        // An entry added deep down: the walk again.
        std::fs::write(ws.join("a/b/g"), "y").unwrap();
        assert_eq!(read_cache(&cache), None);
        assert!(check_size_cached(&ws, 100, 10_000, &cache)
            .unwrap()
            .is_none()); // racy now
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
