//! The change journal of a workspace while one run lives (issue 29): so
//! a snapshot adds only the paths that changed since the last one instead
//! of a `git add -A` over every file.
//!
//! Linux: one inotify instance watching every directory the `.env` scan
//! already knows ([`crate::policy::env_scan::known_dirs`]: every directory
//! but the [`ENV_SCAN_SKIP`] names, which the side repository's
//! `info/exclude` leaves out too), so starting it lists nothing. The
//! watches are set up *before* the full snapshot that the journal then
//! continues from, and the scan is asked again once they are all in place,
//! so a directory made in between is watched as well: every change after
//! that full snapshot's look at a file is an event in the queue. Changes
//! made inside the sandbox are the same inodes (bind mounts under bwrap,
//! the host's own tree under Landlock), so host-side inotify sees them
//! (`tests/real_snapshot_journal.rs` checks both tiers).
//!
//! Whatever the journal cannot be sure of makes the next snapshot a full
//! one (never a wrong one) and the journal starts over with it: a queue
//! overflow, the watch limit, a directory moved (the watches below it would
//! name old paths), a `.gitignore` or a `.git` created, changed or removed
//! anywhere (what `git add -A` would pick up then changes), a nested
//! repository or a `.gitignore` negation (`!` — it could re-include a
//! directory the journal does not watch), a directory the scan could not
//! list, the workspace root itself going away.
//!
//! Not seen by inotify at all: writes through a shared `mmap` that are
//! never followed by the writer's `close` (the kernel reports
//! `IN_CLOSE_WRITE` at the close, which is watched). A full snapshot
//! (the next run's first) still takes such a file.
//!
//! Other systems: there is no journal; every snapshot is a full one.

#[cfg(target_os = "linux")]
use crate::policy::env_scan::ENV_SCAN_SKIP;
use std::path::{Path, PathBuf};

/// What changed since the last [`Journal::take`]: paths relative to the
/// workspace (a directory stands for everything below it).
pub type Changed = Vec<PathBuf>;

/// The paths of `set` with everything below a listed directory dropped:
/// a directory stands for what is below it (sorted order puts a directory
/// right before what is below it). Also the keeper's, over its
/// unacknowledged paths.
pub fn collapse<'a>(set: impl IntoIterator<Item = &'a PathBuf>) -> Changed {
    let mut out: Changed = Vec::new();
    for p in set {
        if !out.last().is_some_and(|l: &PathBuf| p.starts_with(l)) {
            out.push(p.clone());
        }
    }
    out
}

/// The journal of one workspace (see the module docs).
pub struct Journal {
    #[cfg(target_os = "linux")]
    inner: linux::Inner,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Journal")
    }
}

impl Journal {
    /// Start watching `root` (canonical). `Err(reason)` when the journal
    /// cannot be trusted from the start: snapshots are then full ones.
    pub fn start(root: &Path) -> Result<Journal, String> {
        #[cfg(target_os = "linux")]
        {
            if let Some(fs) = linux::network_fs(root) {
                return Err(format!(
                    "the workspace is on {fs}: another machine's writes there are no inotify events"
                ));
            }
            linux::Inner::start(root).map(|inner| Journal { inner })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = root;
            Err("no change journal on this system".into())
        }
    }

    /// Read the queued events into the journal without taking them, so a
    /// long-lived holder (the [`super::keeper`]) never lets the kernel's
    /// queue overflow; `Err(reason)` as for [`Self::take`].
    #[cfg(target_os = "linux")]
    pub fn pump(&mut self) -> Result<(), String> {
        self.inner.pump()
    }

    /// How many paths are waiting to be taken.
    #[cfg(target_os = "linux")]
    pub fn pending(&self) -> usize {
        self.inner.pending()
    }

    /// The inotify descriptor, readable when events are queued (to wait
    /// on with `poll`).
    #[cfg(target_os = "linux")]
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.fd()
    }

    /// The paths changed since the start or the last call, emptying the
    /// journal; `Err(reason)` when it lost track (take a full snapshot and
    /// start a new journal).
    pub fn take(&mut self) -> Result<Changed, String> {
        #[cfg(target_os = "linux")]
        {
            self.inner.take()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err("no change journal on this system".into())
        }
    }
}

/// Why a directory makes the journal untrustworthy, if it does: a nested
/// repository (`git add` records its HEAD, which lives under its `.git`,
/// which is not watched) or a `.gitignore` with a negation (it could
/// re-include a directory the `.env` scan skips and the journal does not
/// watch).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn untrusted_dir(dir: &Path, is_root: bool) -> Option<String> {
    if !is_root && std::fs::symlink_metadata(dir.join(".git")).is_ok() {
        return Some(format!("a nested repository at {}", dir.display()));
    }
    let ignore = dir.join(".gitignore");
    match std::fs::read(&ignore) {
        Ok(text) => text
            .split(|b| *b == b'\n')
            .any(|l| l.first() == Some(&b'!'))
            .then(|| format!("a negation in {}", ignore.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("cannot read {} ({e})", ignore.display())),
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{untrusted_dir, Changed, ENV_SCAN_SKIP};
    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
    use std::collections::{BTreeSet, HashMap};
    use std::ffi::OsStr;
    use std::path::{Path, PathBuf};

    pub struct Inner {
        ino: Inotify,
        root: PathBuf,
        /// Each watch's directory, relative to the root ("" is the root).
        by_wd: HashMap<WatchDescriptor, PathBuf>,
        watched: BTreeSet<PathBuf>,
        changed: BTreeSet<PathBuf>,
        /// Set once the journal lost track: the reason.
        doubt: Option<String>,
    }

    fn mask() -> AddWatchFlags {
        AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW
    }

    /// Never entered: the `.env` scan's skipped names (not in its
    /// listings) and every directory name the side repository's
    /// `info/exclude` leaves out (`guard::skipped_dir`).
    fn skipped(name: &OsStr) -> bool {
        ENV_SCAN_SKIP.iter().any(|s| name == *s)
            || name
                .to_str()
                .is_some_and(crate::snapshot::guard::skipped_dir)
    }

    /// The kind of file system `root` is on, when other machines (or a
    /// FUSE server's backend) can change it behind inotify's back: the
    /// `statfs` magic numbers of NFS, SMB/CIFS, FUSE, 9p, Ceph, AFS, Coda
    /// and GlusterFS-over-FUSE (`linux/magic.h`).
    pub fn network_fs(root: &Path) -> Option<&'static str> {
        // `f_type` is a `long` on some targets, an `int` on others.
        #[allow(clippy::unnecessary_cast)]
        let t = nix::sys::statfs::statfs(root).ok()?.filesystem_type().0 as i64;
        network_fs_name(t)
    }

    pub fn network_fs_name(magic: i64) -> Option<&'static str> {
        Some(match magic {
            0x6969 => "NFS",
            0x517B => "SMB",
            0xFF53_4D42 => "CIFS",
            0xFE53_4D42 => "SMB2",
            0x6573_5546 => "a FUSE file system",
            0x0102_1997 => "9p",
            0x00C3_6400 => "Ceph",
            0x5346_414F => "AFS",
            0x7375_7245 => "Coda",
            _ => return None,
        })
    }

    impl Inner {
        pub fn start(root: &Path) -> Result<Inner, String> {
            let whole = || "the .env scan could not list every directory".to_string();
            let dirs = crate::policy::env_scan::known_dirs(root).ok_or_else(whole)?;
            let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
                .map_err(|e| format!("inotify: {e}"))?;
            let mut j = Inner {
                ino,
                root: root.to_path_buf(),
                by_wd: HashMap::new(),
                watched: BTreeSet::new(),
                changed: BTreeSet::new(),
                doubt: None,
            };
            j.watch_all(dirs)?;
            // Directories made while the watches went in: their parents'
            // listings are read again now that every parent is watched.
            let again = crate::policy::env_scan::known_dirs(root).ok_or_else(whole)?;
            j.watch_all(again)?;
            Ok(j)
        }

        fn watch_all(&mut self, mut dirs: Vec<PathBuf>) -> Result<(), String> {
            // Parents first: a directory made later in a watched parent is
            // an event there.
            dirs.sort();
            for d in dirs {
                let Ok(rel) = d.strip_prefix(&self.root) else {
                    continue;
                };
                // Never watched when made later either (`watch_new_tree`):
                // what the store never records is no reason for a full
                // snapshot, nor worth an inotify watch.
                if self.watched.contains(rel) || rel.components().any(|c| skipped(c.as_os_str())) {
                    continue;
                }
                let rel = rel.to_path_buf();
                self.watch(&rel)?;
            }
            Ok(())
        }

        /// Watch one directory (relative); `Err` when it must not be trusted.
        fn watch(&mut self, rel: &Path) -> Result<(), String> {
            let abs = self.root.join(rel);
            if let Some(why) = untrusted_dir(&abs, rel.as_os_str().is_empty()) {
                return Err(why);
            }
            match self.ino.add_watch(&abs, mask()) {
                Ok(wd) => {
                    self.by_wd.insert(wd, rel.to_path_buf());
                    self.watched.insert(rel.to_path_buf());
                    Ok(())
                }
                // Gone or replaced since it was listed: its parent's
                // events (or the full snapshot after this) cover it.
                Err(Errno::ENOENT | Errno::ENOTDIR) => Ok(()),
                Err(Errno::ENOSPC) => Err("the inotify watch limit is reached".into()),
                Err(e) => Err(format!("cannot watch {}: {e}", abs.display())),
            }
        }

        /// Watch a directory that appeared, and everything below it.
        fn watch_new_tree(&mut self, rel: &Path) -> Result<(), String> {
            let mut stack = vec![rel.to_path_buf()];
            while let Some(d) = stack.pop() {
                // Watch first, then list: an entry made after the listing
                // is an event.
                self.watch(&d)?;
                let entries = match std::fs::read_dir(self.root.join(&d)) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(format!("cannot list {}: {e}", d.display())),
                };
                for e in entries {
                    let e = e.map_err(|e| format!("cannot list {}: {e}", d.display()))?;
                    let ft = e
                        .file_type()
                        .map_err(|err| format!("{}: {err}", e.path().display()))?;
                    if ft.is_dir() && !skipped(&e.file_name()) {
                        stack.push(d.join(e.file_name()));
                    }
                }
            }
            Ok(())
        }

        fn drain(&mut self) -> Result<(), String> {
            loop {
                let events = match self.ino.read_events() {
                    Ok(ev) => ev,
                    Err(Errno::EAGAIN) => return Ok(()),
                    Err(e) => return Err(format!("reading inotify events: {e}")),
                };
                if events.is_empty() {
                    return Ok(());
                }
                for ev in events {
                    if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        return Err("the inotify queue overflowed".into());
                    }
                    if ev.mask.contains(AddWatchFlags::IN_UNMOUNT) {
                        return Err("a watched file system was unmounted".into());
                    }
                    let Some(dir) = self.by_wd.get(&ev.wd).cloned() else {
                        continue;
                    };
                    if ev.mask.contains(AddWatchFlags::IN_IGNORED) {
                        self.by_wd.remove(&ev.wd);
                        self.watched.remove(&dir);
                    }
                    let Some(name) = ev.name else {
                        // The directory itself: its parent reports it,
                        // except for the root.
                        if dir.as_os_str().is_empty()
                            && ev.mask.intersects(
                                AddWatchFlags::IN_DELETE_SELF
                                    | AddWatchFlags::IN_MOVE_SELF
                                    | AddWatchFlags::IN_IGNORED,
                            )
                        {
                            return Err("the workspace itself was moved or removed".into());
                        }
                        continue;
                    };
                    if name == ".gitignore" || name == ".git" {
                        return Err(format!("{} changed", dir.join(&name).display()));
                    }
                    let path = dir.join(&name);
                    if ev.mask.contains(AddWatchFlags::IN_ISDIR) {
                        if skipped(&name) {
                            // Left out by the side repository's info/exclude.
                            continue;
                        }
                        if ev.mask.contains(AddWatchFlags::IN_MOVED_FROM) {
                            return Err(format!("directory {} was moved", path.display()));
                        }
                        if ev
                            .mask
                            .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                        {
                            self.watch_new_tree(&path)?;
                        }
                        if ev.mask.intersects(
                            AddWatchFlags::IN_CREATE
                                | AddWatchFlags::IN_MOVED_TO
                                | AddWatchFlags::IN_DELETE,
                        ) {
                            self.changed.insert(path);
                        }
                        continue;
                    }
                    self.changed.insert(path);
                }
            }
        }

        pub fn pump(&mut self) -> Result<(), String> {
            if let Some(why) = &self.doubt {
                return Err(why.clone());
            }
            if let Err(why) = self.drain() {
                self.doubt = Some(why.clone());
                return Err(why);
            }
            Ok(())
        }

        pub fn pending(&self) -> usize {
            self.changed.len()
        }

        pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
            use std::os::fd::AsFd;
            self.ino.as_fd()
        }

        pub fn take(&mut self) -> Result<Changed, String> {
            self.pump()?;
            Ok(super::collapse(&std::mem::take(&mut self.changed)))
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::fs;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap().join("ws");
        for d in ["a/b/c", "node_modules/x", "e"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("a/b/c/f.txt"), "1").unwrap();
        (t, root)
    }

    #[test]
    fn reports_changed_files_and_new_directories_below_known_ones() {
        let (_t, root) = tree();
        let mut j = Journal::start(&root).unwrap();
        assert_eq!(j.take().unwrap(), Vec::<PathBuf>::new());
        fs::write(root.join("a/b/c/f.txt"), "2").unwrap();
        fs::create_dir_all(root.join("e/new/deeper")).unwrap();
        fs::write(root.join("e/new/deeper/g"), "x").unwrap();
        fs::write(root.join("node_modules/x/ignored"), "x").unwrap();
        assert_eq!(
            j.take().unwrap(),
            vec![PathBuf::from("a/b/c/f.txt"), PathBuf::from("e/new")]
        );
        // The new directory is watched from now on.
        fs::write(root.join("e/new/deeper/g"), "y").unwrap();
        fs::remove_file(root.join("a/b/c/f.txt")).unwrap();
        assert_eq!(
            j.take().unwrap(),
            vec![
                PathBuf::from("a/b/c/f.txt"),
                PathBuf::from("e/new/deeper/g")
            ]
        );
    }

    #[test]
    fn loses_trust_on_moves_and_ignore_files() {
        let (_t, root) = tree();
        let mut j = Journal::start(&root).unwrap();
        fs::rename(root.join("a/b"), root.join("e/b")).unwrap();
        assert!(j.take().unwrap_err().contains("moved"));
        // And stays so.
        assert!(j.take().is_err());
        let mut j = Journal::start(&root).unwrap();
        fs::write(root.join("e/.gitignore"), "x\n").unwrap();
        assert!(j.take().unwrap_err().contains(".gitignore"));
    }

    #[test]
    fn network_file_systems_get_no_journal() {
        assert_eq!(linux::network_fs_name(0x6969), Some("NFS"));
        assert_eq!(
            linux::network_fs_name(0x6573_5546),
            Some("a FUSE file system")
        );
        assert_eq!(linux::network_fs_name(0xFF53_4D42), Some("CIFS"));
        // ext4, btrfs, xfs, tmpfs, overlayfs: local.
        for local in [0xEF53, 0x9123_683E, 0x5846_5342, 0x0102_1994, 0x794C_7630] {
            assert_eq!(linux::network_fs_name(local), None, "{local:#x}");
        }
        let (_t, root) = tree();
        assert_eq!(linux::network_fs(&root), None, "the test's tmp is local");
    }

    #[test]
    fn refuses_negations_and_nested_repositories() {
        let (_t, root) = tree();
        fs::write(root.join("a/.gitignore"), "*.o\n!keep.o\n").unwrap();
        assert!(Journal::start(&root).unwrap_err().contains("negation"));
        fs::remove_file(root.join("a/.gitignore")).unwrap();
        fs::create_dir_all(root.join("e/.git")).unwrap();
        assert!(Journal::start(&root).unwrap_err().contains("nested"));
    }
}
