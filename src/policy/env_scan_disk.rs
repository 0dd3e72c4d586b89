//! The `.env` scan's listings kept on disk between processes, so a
//! one-shot command (`codewhale sandbox run`, each `exec`) lists only the
//! directories whose entries changed since the last command, not the whole
//! workspace (issue 29).
//!
//! Where: `$CODEWHALE_HOME/cache/env-scan/<hash of the workspace>` (the
//! same home as `config::paths`, which the sandbox makes unreadable and
//! unwritable: a sandboxed command cannot edit the listings the next
//! command trusts; a `$CODEWHALE_HOME` inside the workspace is not used
//! for them, see `env_scan::trusted_cache`). One file per workspace, replaced whole by a rename, so
//! a reader sees an old or a new file, never a torn one; two processes
//! writing at once leave one of two valid files (every listing is checked
//! against its directory's stamp before it is used).
//!
//! Format (bytes, fields split by NUL): a header line naming the format
//! and the scan's rules (its skip list), then per directory `D path dev ino mtime mtime_ns
//! ctime ctime_ns racy`, followed by its `S name` (subdirectories), `E
//! name` (`.env` files) and `P text` (entries whose type could not be
//! read) records. A file that does not parse is ignored whole (the scan
//! then lists everything, as without a cache).

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Bumped whenever what a listing holds or means changes (the `.env` name
/// rule, the format).
#[cfg(unix)]
const FORMAT: &str = "codewhale-env-scan 1";

#[cfg(unix)]
fn header(rules: &str) -> String {
    format!("{FORMAT} {rules}\n")
}

/// Identity and change times of a directory, from `lstat`. The ctime is
/// part of it because a command can set a directory's mtime back after
/// creating a `.env` in it (`touch -d`), but not its ctime: that moves on
/// every entry change and on every `utimes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

#[derive(Clone, Debug)]
pub struct Listing {
    pub stamp: Stamp,
    /// Whether the listing was made too close to the directory's mtime.
    pub racy: bool,
    pub subdirs: Vec<OsString>,
    pub env_files: Vec<OsString>,
    /// Entries whose type could not be read (named in `unmasked`).
    pub problems: Vec<String>,
    /// The directory itself could not be listed (watch mode keeps it to
    /// retry on every call; named in `unmasked`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub failed: Option<String>,
}

/// The cache file for `root`, or `None` without a home to keep it in.
pub fn cache_file(root: &Path) -> Option<PathBuf> {
    // The library's own unit tests keep no file in the runner's home
    // (theirs name a file of their own where they test one).
    if cfg!(test) {
        return None;
    }
    // Same rule as `config::paths::ConfigPaths::from_env`.
    let home = std::env::var_os("CODEWHALE_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".codewhale"))
        })?;
    let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
    Some(
        home.join("cache")
            .join("env-scan")
            .join(hex::encode(&digest[..12])),
    )
}

#[cfg(unix)]
fn bytes(s: &std::ffi::OsStr) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    s.as_bytes()
}

#[cfg(unix)]
fn os(b: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b).to_os_string()
}

/// Serialise the listings (failed ones are left out: they are retried).
#[cfg(unix)]
pub fn encode(dirs: &HashMap<PathBuf, Listing>, rules: &str) -> Vec<u8> {
    let mut out = header(rules).into_bytes();
    for (path, l) in dirs {
        if l.failed.is_some() {
            continue;
        }
        let s = l.stamp;
        out.extend_from_slice(b"D\0");
        out.extend_from_slice(bytes(path.as_os_str()));
        out.extend_from_slice(
            format!(
                "\0{} {} {} {} {} {} {}\0",
                s.dev,
                s.ino,
                s.mtime.0,
                s.mtime.1,
                s.ctime.0,
                s.ctime.1,
                u8::from(l.racy)
            )
            .as_bytes(),
        );
        for (tag, names) in [(b'S', &l.subdirs), (b'E', &l.env_files)] {
            for n in names {
                out.extend_from_slice(&[tag, 0]);
                out.extend_from_slice(bytes(n));
                out.push(0);
            }
        }
        for p in &l.problems {
            out.extend_from_slice(b"P\0");
            out.extend_from_slice(p.replace('\0', " ").as_bytes());
            out.push(0);
        }
    }
    // The end, with the count: a file cut short (a full disk) is refused
    // rather than read as a directory with fewer entries than it has.
    out.extend_from_slice(format!("Z\0{}\0", dirs.len() - skipped_failed(dirs)).as_bytes());
    out
}

#[cfg(unix)]
fn skipped_failed(dirs: &HashMap<PathBuf, Listing>) -> usize {
    dirs.values().filter(|l| l.failed.is_some()).count()
}

/// Parse what [`encode`] wrote; `None` for anything else.
#[cfg(unix)]
pub fn decode(data: &[u8], rules: &str) -> Option<HashMap<PathBuf, Listing>> {
    let head = header(rules);
    let mut rest = data.strip_prefix(head.as_bytes())?;
    let mut dirs: HashMap<PathBuf, Listing> = HashMap::new();
    let mut current: Option<(PathBuf, Listing)> = None;
    let next_field = |rest: &mut &[u8]| -> Option<Vec<u8>> {
        let end = rest.iter().position(|b| *b == 0)?;
        let field = rest[..end].to_vec();
        *rest = &rest[end + 1..];
        Some(field)
    };
    loop {
        let tag = next_field(&mut rest)?;
        let value = next_field(&mut rest)?;
        match tag.as_slice() {
            b"Z" => {
                if let Some((p, l)) = current.take() {
                    dirs.insert(p, l);
                }
                let n: usize = std::str::from_utf8(&value).ok()?.parse().ok()?;
                return (rest.is_empty() && n == dirs.len()).then_some(dirs);
            }
            b"D" => {
                let nums = next_field(&mut rest)?;
                let nums = std::str::from_utf8(&nums).ok()?;
                let n: Vec<i64> = nums
                    .split(' ')
                    .map(|x| x.parse::<i64>().ok())
                    .collect::<Option<_>>()?;
                let [dev, ino, ms, mns, cs, cns, racy] = n.as_slice() else {
                    return None;
                };
                if let Some((p, l)) = current.take() {
                    dirs.insert(p, l);
                }
                current = Some((
                    PathBuf::from(os(&value)),
                    Listing {
                        stamp: Stamp {
                            dev: u64::try_from(*dev).ok()?,
                            ino: u64::try_from(*ino).ok()?,
                            mtime: (*ms, *mns),
                            ctime: (*cs, *cns),
                        },
                        racy: *racy != 0,
                        subdirs: Vec::new(),
                        env_files: Vec::new(),
                        problems: Vec::new(),
                        failed: None,
                    },
                ));
            }
            b"S" => current.as_mut()?.1.subdirs.push(os(&value)),
            b"E" => current.as_mut()?.1.env_files.push(os(&value)),
            b"P" => current
                .as_mut()?
                .1
                .problems
                .push(String::from_utf8_lossy(&value).into_owned()),
            _ => return None,
        }
    }
}

/// One directory of a saved scan, borrowed from the file's bytes.
#[cfg(unix)]
#[derive(Debug, PartialEq, Eq)]
pub struct SavedDir<'a> {
    pub path: &'a [u8],
    pub stamp: Stamp,
}

/// A saved scan as the quick check reads it ([`read_saved`]): every
/// directory and its stamp, and the scan's result, with none of the
/// listings built (a one-shot command at 100,000 files spent more on
/// those ~1,100 listings and their map than on the `lstat`s).
#[cfg(unix)]
#[derive(Debug, PartialEq, Eq)]
pub struct Saved<'a> {
    pub dirs: Vec<SavedDir<'a>>,
    /// Every `.env` file the listings name, as the scan returns them.
    pub files: Vec<PathBuf>,
    /// Every entry whose type could not be read.
    pub problems: Vec<String>,
}

/// What [`encode`] wrote, read for the quick check: `Some` only when it
/// parses, no listing is racy (a racy one must be read again), and its
/// directories are exactly one tree under `root` — the root and, once
/// each, every directory another names as a subdirectory (what the
/// scan's walk from `root` would reach while every stamp holds, no more:
/// a file two processes wrote, each whole, could not hold more).
#[cfg(unix)]
pub fn read_saved<'a>(data: &'a [u8], rules: &str, root: &Path) -> Option<Saved<'a>> {
    use std::os::unix::ffi::OsStrExt;
    let head = header(rules);
    let mut rest = data.strip_prefix(head.as_bytes())?;
    let mut next_field = || -> Option<&'a [u8]> {
        let end = rest.iter().position(|b| *b == 0)?;
        let field = &rest[..end];
        rest = &rest[end + 1..];
        Some(field)
    };
    let mut saved = Saved {
        dirs: Vec::new(),
        files: Vec::new(),
        problems: Vec::new(),
    };
    // Each subdirectory named, by the index of the directory naming it.
    let mut named: Vec<(usize, &'a [u8])> = Vec::new();
    let count = loop {
        let tag = next_field()?;
        let value = next_field()?;
        let current = saved.dirs.len().checked_sub(1);
        match tag {
            b"Z" => break std::str::from_utf8(value).ok()?.parse::<usize>().ok()?,
            b"D" => {
                let nums = std::str::from_utf8(next_field()?).ok()?;
                let mut n = nums.split(' ').map(|x| x.parse::<i64>().ok());
                let mut take = || n.next().flatten();
                let (dev, ino) = (take()?, take()?);
                let mtime = (take()?, take()?);
                let ctime = (take()?, take()?);
                if take()? != 0 || n.next().is_some() {
                    return None;
                }
                saved.dirs.push(SavedDir {
                    path: value,
                    stamp: Stamp {
                        dev: u64::try_from(dev).ok()?,
                        ino: u64::try_from(ino).ok()?,
                        mtime,
                        ctime,
                    },
                });
            }
            b"S" => named.push((current?, value)),
            b"E" => {
                let dir = Path::new(std::ffi::OsStr::from_bytes(saved.dirs[current?].path));
                saved
                    .files
                    .push(dir.join(std::ffi::OsStr::from_bytes(value)));
            }
            b"P" => {
                current?;
                saved
                    .problems
                    .push(String::from_utf8_lossy(value).into_owned());
            }
            _ => return None,
        }
    };
    if !rest.is_empty() || count != saved.dirs.len() {
        return None;
    }
    let paths: std::collections::HashSet<&[u8]> = saved.dirs.iter().map(|d| d.path).collect();
    let root = root.as_os_str().as_bytes();
    if paths.len() != saved.dirs.len() || !paths.contains(root) {
        return None;
    }
    let mut child: Vec<u8> = Vec::new();
    for (parent, name) in &named {
        let parent = saved.dirs[*parent].path;
        child.clear();
        child.extend_from_slice(parent);
        if !parent.ends_with(b"/") {
            child.push(b'/');
        }
        child.extend_from_slice(name);
        if !paths.contains(child.as_slice()) {
            return None;
        }
    }
    // Names are unique within a directory and paths are unique: every
    // other directory named exactly once.
    if named.len() + 1 != saved.dirs.len() {
        return None;
    }
    saved.files.sort();
    saved.problems.sort();
    Some(saved)
}

/// Replace the saved listings. Best effort: a cache that cannot be
/// written only costs the next command a full walk.
#[cfg(unix)]
pub fn save(file: &Path, dirs: &HashMap<PathBuf, Listing>, rules: &str) {
    let Some(parent) = file.parent() else {
        return;
    };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let data = encode(dirs, rules);
    let Ok(mut tmp) = tempfile::NamedTempFile::new_in(parent) else {
        return;
    };
    if std::io::Write::write_all(&mut tmp, &data).is_ok() {
        let _ = tmp.persist(file);
    }
}

#[cfg(not(unix))]
pub fn decode(_data: &[u8], _rules: &str) -> Option<HashMap<PathBuf, Listing>> {
    None
}

#[cfg(not(unix))]
pub fn save(_file: &Path, _dirs: &HashMap<PathBuf, Listing>, _rules: &str) {}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn listings_round_trip_and_garbage_is_refused() {
        let mut dirs = HashMap::new();
        let mut a = listing(&["x"], &[".env"], true);
        a.subdirs.push(os(b"\xff"));
        a.problems.push("could not".into());
        dirs.insert(PathBuf::from("/w/a b"), a);
        let mut w = listing(&["a b"], &[], false);
        w.stamp.ino = 9;
        dirs.insert(PathBuf::from("/w"), w);
        let back = decode(&encode(&dirs, "r"), "r").unwrap();
        assert_eq!(back.len(), 2);
        let a = &back[Path::new("/w/a b")];
        assert_eq!(a.stamp, dirs[Path::new("/w/a b")].stamp);
        assert!(a.racy);
        assert_eq!(a.subdirs, vec![OsString::from("x"), os(b"\xff")]);
        assert_eq!(a.env_files, vec![OsString::from(".env")]);
        assert_eq!(a.problems, vec!["could not".to_string()]);
        assert!(!back[Path::new("/w")].racy);
        assert!(decode(b"codewhale-env-scan 0 r\n", "r").is_none());
        assert!(decode(&encode(&dirs, "r"), "other rules").is_none());
        let good = encode(&dirs, "r");
        for cut in [3, good.len() / 2] {
            assert!(
                decode(&good[..good.len() - cut], "r").is_none(),
                "cut {cut}"
            );
        }
        // Cut at a record boundary (after the first directory's records):
        // still refused, the end marker is missing.
        let z = good.windows(2).rposition(|w| w == b"Z\0").unwrap();
        assert!(decode(&good[..z], "r").is_none());
    }

    fn listing(subdirs: &[&str], env_files: &[&str], racy: bool) -> Listing {
        Listing {
            stamp: Stamp {
                dev: 1,
                ino: 2,
                mtime: (3, 4),
                ctime: (5, 6),
            },
            racy,
            subdirs: subdirs.iter().map(OsString::from).collect(),
            env_files: env_files.iter().map(OsString::from).collect(),
            problems: Vec::new(),
            failed: None,
        }
    }

    #[test]
    fn a_saved_scan_is_read_quick_only_as_one_tree_with_no_racy_listing() {
        let mut dirs = HashMap::new();
        dirs.insert(PathBuf::from("/w"), listing(&["a", "b"], &[".env"], false));
        dirs.insert(PathBuf::from("/w/a"), listing(&[], &[".env.local"], false));
        let mut b = listing(&[], &[], false);
        b.problems.push("could not learn".into());
        dirs.insert(PathBuf::from("/w/b"), b);
        let data = encode(&dirs, "r");
        let saved = read_saved(&data, "r", Path::new("/w")).unwrap();
        assert_eq!(saved.dirs.len(), 3);
        assert_eq!(
            saved.files,
            vec![PathBuf::from("/w/.env"), PathBuf::from("/w/a/.env.local")]
        );
        assert_eq!(saved.problems, vec!["could not learn".to_string()]);
        let a = saved.dirs.iter().find(|d| d.path == b"/w/a").unwrap();
        assert_eq!(a.stamp, dirs[Path::new("/w/a")].stamp);

        // Another root, other rules, a file cut short: not read.
        assert!(read_saved(&data, "r", Path::new("/x")).is_none());
        assert!(read_saved(&data, "other", Path::new("/w")).is_none());
        assert!(read_saved(&data[..data.len() - 3], "r", Path::new("/w")).is_none());
        // A directory nobody names (more than the walk would reach).
        let mut extra = dirs.clone();
        extra.insert(PathBuf::from("/w/z"), listing(&[], &[".env"], false));
        assert!(read_saved(&encode(&extra, "r"), "r", Path::new("/w")).is_none());
        // A directory named but not there (a failed listing is not saved).
        let mut missing = dirs.clone();
        missing.remove(Path::new("/w/b"));
        assert!(read_saved(&encode(&missing, "r"), "r", Path::new("/w")).is_none());
        // A racy listing must be read again.
        let mut racy = dirs.clone();
        racy.insert(PathBuf::from("/w/a"), listing(&[], &[], true));
        assert!(read_saved(&encode(&racy, "r"), "r", Path::new("/w")).is_none());
        // The full reader agrees with the quick one on what is there.
        assert_eq!(decode(&data, "r").unwrap().len(), saved.dirs.len());
    }
}
