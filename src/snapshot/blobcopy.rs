//! The seed's blob copy, finished after the snapshot that needs it.
//!
//! A seeded first snapshot names blobs that, at first, only the user's
//! object store holds (see [`super::seed`]). They are copied into one pack
//! of the side store, so that a later `git gc --prune=now` in the user's
//! repository cannot break a restore. That copy is `pack-objects` over
//! ~100,000 ids at 100k files, ~0.3 s of one core: beside the first look's
//! `add -u` and `ls-files -o` it was the longest of the three, and on two
//! cores it slowed both. So the look no longer waits for it: the copy is
//! a process of its own that outlives the run (in its own process group,
//! no terminal signals), and the snapshot is committed while it runs.
//!
//! Its state is the store's `blob-copy/` directory, made whole by a rename:
//! `ids` (its input, one id a line), `from` (the user's objects directory)
//! and `out` (its output: the new pack's name). The copy holds an
//! exclusive `flock` on `out` for as long as it runs — the lock is on the
//! open file its standard output is, so it ends when the process does,
//! however it ends. Whoever needs the blobs settles the copy first, under
//! the store lock ([`settle`]): a copy still running is waited for (or
//! left, when the caller only tidies up); one that ended with its pack in
//! place is done and its directory goes; one that ended any other way
//! (killed, the machine stopped) is taken again at once, from the same
//! list. When the user's store no longer has a blob by then (an amend or a
//! reset, then `git gc --prune=now`, within that window), the error names
//! the objects directory and the failure, and `blob-copy/` stays, so every
//! later restore says so again rather than write a partial tree.
//!
//! Until it is settled, the store's own commands treat those blobs as
//! present: `write-tree --missing-ok`, `mktree --missing`, and `diff-tree`
//! reading the user's objects as an alternate (a read-only command: git
//! writes nothing to an alternate it only reads from).

use super::git::Git;
use super::SnapshotError;
#[cfg(unix)]
use std::fs::{File, OpenOptions};
#[cfg(unix)]
use std::io::Read;
#[cfg(unix)]
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::Stdio;

/// The copy's directory in the store.
pub const DIR: &str = "blob-copy";

/// Where a copy not settled yet reads from: the user's objects directory.
/// `None` when no copy is pending.
#[cfg(unix)]
pub fn pending(store_dir: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let from = std::fs::read(store_dir.join(DIR).join("from")).ok()?;
    Some(PathBuf::from(std::ffi::OsString::from_vec(from)))
}

/// The arguments of the copy (and of the seed's copy of trees): one pack
/// of the side store, no deltas searched (git reuses the user's
/// compressed data), no reverse index.
pub(super) fn pack_args(git: &Git) -> Vec<std::ffi::OsString> {
    let pack = git.git_dir().join("objects/pack/pack");
    [
        "-c",
        "pack.writeReverseIndex=false",
        "pack-objects",
        "-q",
        "--window=0",
    ]
    .iter()
    .map(std::ffi::OsString::from)
    .chain(std::iter::once(pack.into_os_string()))
    .collect()
}

/// `flock(2)` on `f`; `false` when it would block (`nonblocking`) or failed.
#[cfg(unix)]
fn lock(f: &File, op: libc::c_int) -> bool {
    // SAFETY: flock on a descriptor this function borrows for the call;
    // no memory is passed.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

/// Wait until the store's background copy, if one is running, has ended,
/// without settling it (its directory stays for [`settle`]): for a caller
/// that looks at the side store from outside (the monorepo bench, which
/// times it; a test that cuts a copy short). `false` when no copy was
/// ever started or it is settled already.
#[cfg(unix)]
pub fn wait_for_end(store_dir: &Path) -> bool {
    match File::open(store_dir.join(DIR).join("out")) {
        Ok(out) => lock(&out, libc::LOCK_SH),
        Err(_) => false,
    }
}

/// Start copying `ids` (one id a line) from the user's `objects` into a
/// pack of the store at `store_dir`, in a process that outlives this
/// one. The caller holds the store lock. `Err` when it could not be
/// started — among other reasons, an earlier copy not settled yet still
/// has its directory — and the caller then copies in process.
#[cfg(unix)]
pub fn start(git: &Git, store_dir: &Path, objects: &Path, ids: &[u8]) -> Result<(), SnapshotError> {
    let io = |what: &'static str, p: &Path, e| SnapshotError::io(what, p, e);
    let dir = store_dir.join(DIR);
    let tmp = store_dir.join("blob-copy.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp).map_err(|e| io("cannot create", &tmp, e))?;
    std::fs::write(tmp.join("ids"), ids).map_err(|e| io("cannot write", &tmp, e))?;
    std::fs::write(
        tmp.join("from"),
        std::os::unix::ffi::OsStrExt::as_bytes(objects.as_os_str()),
    )
    .map_err(|e| io("cannot write", &tmp, e))?;
    let out = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(tmp.join("out"))
        .map_err(|e| io("cannot create", &tmp, e))?;
    if !lock(&out, libc::LOCK_EX | libc::LOCK_NB) {
        return Err(io(
            "cannot lock",
            &tmp,
            std::io::Error::from(std::io::ErrorKind::WouldBlock),
        ));
    }
    std::fs::rename(&tmp, &dir).map_err(|e| io("cannot rename into place", &dir, e))?;
    let input = File::open(dir.join("ids")).map_err(|e| io("cannot open", &dir, e))?;
    let mut cmd = git.with_alternate(objects).command();
    cmd.args(pack_args(git))
        .stdin(Stdio::from(input))
        .stdout(Stdio::from(out))
        .stderr(Stdio::null());
    {
        use std::os::unix::process::CommandExt;
        // Its own group: a Ctrl-C meant for the run does not stop it.
        cmd.process_group(0);
    }
    match cmd.spawn() {
        Ok(mut child) => {
            // Background work: the run's own commands and the user's come
            // first (niceness 10; lowering one's own child's priority is
            // always allowed; best effort).
            // SAFETY: setpriority on the pid of a child this process has
            // not reaped yet (so the pid is still ours); no memory passed.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, child.id(), 10);
            }
            // Reaped when it ends, if this process is still there then.
            let _ = std::thread::Builder::new()
                .name("blob-copy-reaper".into())
                .spawn(move || child.wait());
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(io("cannot run git at", git.bin(), e))
        }
    }
}

/// Settle the store's pending copy, if any (see the module docs); the
/// caller holds the store lock. `wait`: wait for a running copy (a
/// restore, a `gc` of the store); else leave it running.
#[cfg(unix)]
pub fn settle(git: &Git, store_dir: &Path, wait: bool) -> Result<(), SnapshotError> {
    let dir = store_dir.join(DIR);
    let Ok(out) = File::open(dir.join("out")) else {
        if !dir.exists() {
            return Ok(());
        }
        // Made by a process that stopped before its copy started.
        return redo(git, &dir);
    };
    let op = if wait {
        libc::LOCK_SH
    } else {
        libc::LOCK_SH | libc::LOCK_NB
    };
    if !lock(&out, op) {
        // Still running, and this caller does not wait.
        return Ok(());
    }
    let mut name = String::new();
    let _ = (&out).read_to_string(&mut name);
    let name = name.trim();
    let packs = git.git_dir().join("objects/pack");
    let whole = super::git::is_sha1_id(name.as_bytes())
        && packs.join(format!("pack-{name}.pack")).is_file()
        && packs.join(format!("pack-{name}.idx")).is_file();
    if whole {
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    redo(git, &dir)
}

/// Take a copy that ended without its pack again, in this process.
#[cfg(unix)]
fn redo(git: &Git, dir: &Path) -> Result<(), SnapshotError> {
    let from = pending(dir.parent().unwrap_or(dir));
    let ids = std::fs::read(dir.join("ids"));
    let (Some(from), Ok(ids)) = (from, ids) else {
        // Nothing left to say what to copy: its directory was made whole
        // by a rename, so this is someone's hand; nothing can be redone.
        let _ = std::fs::remove_dir_all(dir);
        return Ok(());
    };
    if !ids.is_empty() {
        let args = pack_args(git);
        git.with_alternate(&from)
            .run_stdin(&args, &ids)
            .map_err(|e| SnapshotError::BlobCopy {
                from: from.clone(),
                detail: e.to_string(),
            })?;
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// Elsewhere the copy is taken in process (no `flock` on a descriptor
/// another process holds): nothing is ever pending.
#[cfg(not(unix))]
pub fn pending(_store_dir: &Path) -> Option<PathBuf> {
    None
}

#[cfg(not(unix))]
pub fn start(
    _git: &Git,
    store_dir: &Path,
    _objects: &Path,
    _ids: &[u8],
) -> Result<(), SnapshotError> {
    Err(SnapshotError::io(
        "no background copy on this system for",
        store_dir,
        std::io::Error::from(std::io::ErrorKind::Unsupported),
    ))
}

#[cfg(not(unix))]
pub fn settle(_git: &Git, _store_dir: &Path, _wait: bool) -> Result<(), SnapshotError> {
    Ok(())
}

#[cfg(not(unix))]
pub fn wait_for_end(_store_dir: &Path) -> bool {
    false
}
