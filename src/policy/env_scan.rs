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
//! same way. A long-lived process (the agent loop) keeps an
//! [`EnvScanCache`] per workspace: on the next call each directory is
//! `lstat`ed and, when its identity and mtime are unchanged, its listing
//! is reused without reading it. A directory's mtime changes whenever an
//! entry is created, removed or renamed in it — exactly the events that
//! can add a `.env` or a subdirectory. File contents do not matter here.
//!
//! Racy timestamps: a directory changed within [`RACY_WINDOW`] of the scan
//! that listed it could change again within the same timestamp tick
//! without its mtime moving, so such a listing is never trusted and is
//! read again next time (git's racy-index rule).

use super::tables;
use std::collections::HashMap;
use std::ffi::OsString;
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

/// Identity and change time of a directory, from `lstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
}

#[derive(Clone, Debug)]
struct Listing {
    stamp: Stamp,
    /// Whether the listing was made too close to the directory's mtime.
    racy: bool,
    subdirs: Vec<OsString>,
    env_files: Vec<OsString>,
    /// Entries whose type could not be read (named in `unmasked`).
    problems: Vec<String>,
}

/// Listings of one workspace's directories, keyed by path.
#[derive(Debug, Default)]
pub struct EnvScanCache {
    dirs: HashMap<PathBuf, Listing>,
}

#[cfg(unix)]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
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
    }
}

fn is_racy(meta: &std::fs::Metadata, now: SystemTime) -> bool {
    match meta.modified() {
        Ok(m) => m + RACY_WINDOW > now,
        Err(_) => true,
    }
}

fn skipped(name: &std::ffi::OsStr) -> bool {
    ENV_SCAN_SKIP.iter().any(|s| name == *s)
}

/// Read one directory's listing.
fn list(dir: &Path, stamp: Stamp, racy: bool) -> Result<Listing, std::io::Error> {
    let mut l = Listing {
        stamp,
        racy,
        subdirs: Vec::new(),
        env_files: Vec::new(),
        problems: Vec::new(),
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                l.problems.push(format!(
                    "could not finish listing {} for .env files ({e}); a .env file there may not be masked",
                    dir.display()
                ));
                break;
            }
        };
        let name = entry.file_name();
        // `d_type`: no `stat` per entry on Linux.
        let ft = match entry.file_type() {
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

impl EnvScanCache {
    /// Scan `root`, reusing every listing whose directory did not change
    /// since the previous call on this cache.
    pub fn scan(&mut self, root: &Path) -> (EnvScan, ScanStats) {
        let now = SystemTime::now();
        let mut out = EnvScan::default();
        let mut stats = ScanStats::default();
        let mut next: HashMap<PathBuf, Listing> = HashMap::with_capacity(self.dirs.len());
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let meta = match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => m,
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
            let st = stamp(&meta);
            let listing = match self.dirs.remove(&dir) {
                Some(old) if old.stamp == st && !old.racy => {
                    stats.reused += 1;
                    old
                }
                _ => match list(&dir, st, is_racy(&meta, now)) {
                    Ok(l) => {
                        stats.listed += 1;
                        l
                    }
                    Err(e) => {
                        out.unmasked.push(format!(
                            "could not list {} for .env files ({e}); a .env file there is not masked",
                            dir.display()
                        ));
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
        out.files.sort();
        (out, stats)
    }

    /// Directories currently cached.
    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

/// One cache per workspace root for this process: the agent, the TUI and
/// the server resolve the same workspace on every call.
static CACHES: Mutex<Option<HashMap<PathBuf, EnvScanCache>>> = Mutex::new(None);

/// Scan `root` with this process's cache for it (see the module docs).
pub fn scan_cached(root: &Path) -> EnvScan {
    let mut guard = CACHES.lock().unwrap_or_else(|p| p.into_inner());
    let caches = guard.get_or_insert_with(HashMap::new);
    let cache = caches.entry(root.to_path_buf()).or_default();
    cache.scan(root).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(p: &Path) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "S=1").unwrap();
    }

    /// Set a directory's mtime into the past so its listing is not racy.
    fn age(p: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        fs::File::open(p).unwrap().set_modified(old).unwrap();
    }

    fn age_tree(root: &Path) {
        for e in walkdir::WalkDir::new(root) {
            let e = e.unwrap();
            if e.file_type().is_dir() {
                age(e.path());
            }
        }
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
        let mut c = EnvScanCache::default();
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
        let mut c = EnvScanCache::default();
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
}
