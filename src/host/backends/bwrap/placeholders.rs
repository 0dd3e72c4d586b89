//! Placeholder mount points for protected paths that do not exist yet.
//!
//! A bind mount needs a directory entry to mount on, so for a missing
//! protected path (`.envrc`, `.git/hooks`…) bwrap creates an empty file or
//! directory on the host, inside the writable root, and mounts a read-only
//! empty placeholder over it for the run. Afterwards the entry is removed
//! if it is still empty.
//!
//! Concurrency: removing a mount point that *another* running sandbox uses
//! would detach that sandbox's protection. So every run holds a shared
//! lock per writable root and records what it created in a per-root
//! registry; only a run that can take the root's lock exclusively (no other
//! run in that root) cleans up, and then cleans everything the registry
//! lists. A crash of codewhale can leave empty placeholder files behind;
//! they are empty and inert, and the next exclusive run removes them.

use crate::host::HostError;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The per-user base directory (see [`crate::host::backends::bwrap::placeholder_base`]),
/// created when missing and checked to be ours and private.
///
/// Every entry point of this module goes through here first: on a fresh
/// machine (first run, a tmpfs `/tmp` after a reboot, a tmp cleaner) the
/// directory does not exist, and the root locks live in it.
fn ensure_base() -> Result<PathBuf, HostError> {
    use std::os::unix::fs::DirBuilderExt;
    let uid = nix::unistd::getuid().as_raw();
    let base = crate::host::backends::bwrap::placeholder_base();
    let io = |what: &str, e| HostError::io(format!("{what} {}", base.display()), e);
    // Recursive: a `$TMPDIR` that does not exist yet is created too (0700
    // for every component created here; existing ones are left alone).
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("creating", e)),
    }
    let meta = std::fs::symlink_metadata(&base).map_err(|e| io("checking", e))?;
    if !meta.is_dir() || meta.uid() != uid {
        return Err(HostError::Unavailable {
            backend: crate::host::BackendKind::Bwrap,
            reason: format!("{} is not a directory owned by uid {uid}", base.display()),
            remedy: Some(format!("remove {} and retry", base.display())),
        });
    }
    // Each mode is set only when it differs: a `chmod` to the same mode
    // still writes the inode (ctime), and this runs on every spawn.
    set_mode(&base, &meta, 0o700).map_err(|e| io("securing", e))?;
    Ok(base)
}

/// Read-only, empty sources for placeholder mounts, in a per-user
/// directory only we can write (checked, since the temp dir is shared).
pub fn sources() -> Result<(PathBuf, PathBuf), HostError> {
    let base = ensure_base()?;
    let io = |what: &str, e| HostError::io(format!("{what} {}", base.display()), e);
    let (file, dir) = crate::host::backends::bwrap::placeholder_sources();
    if !file.is_file() {
        match std::fs::write(&file, b"") {
            Ok(()) => {}
            // A concurrent first run made it (and may have made it 0444).
            Err(_) if file.is_file() => {}
            Err(e) => return Err(io("creating placeholder in", e)),
        }
    }
    if !dir.is_dir() {
        // Concurrent first runs (MCP servers start together) race here:
        // the one that loses finds the directory made by the other.
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(io("creating placeholder in", e)),
        }
    }
    for (p, mode) in [(&file, 0o444), (&dir, 0o555)] {
        std::fs::metadata(p)
            .and_then(|m| set_mode(p, &m, mode))
            .map_err(|e| io("securing placeholder in", e))?;
    }
    Ok((file, dir))
}

/// `chmod p mode` unless `meta` (of `p`) already has exactly that mode.
fn set_mode(p: &Path, meta: &std::fs::Metadata, mode: u32) -> std::io::Result<()> {
    if meta.mode() & 0o7777 == mode {
        return Ok(());
    }
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

/// The topmost ancestor of `p` (or `p`) that does not exist yet: what bwrap
/// will create on the host as a mount point.
pub fn topmost_missing(p: &Path) -> PathBuf {
    let mut top = p.to_path_buf();
    let mut cur = p.parent();
    while let Some(c) = cur {
        if c.symlink_metadata().is_ok() {
            break;
        }
        top = c.to_path_buf();
        cur = c.parent();
    }
    top
}

/// Remove `p` if it is an empty file or a tree of empty directories.
fn remove_if_empty(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_file() && m.len() == 0 => {
            let _ = std::fs::remove_file(p);
        }
        Ok(m) if m.is_dir() => {
            // Usually an empty mount-point directory: one `rmdir`. Only a
            // non-empty one (nested mount points) is walked.
            if std::fs::remove_dir(p).is_ok() {
                return;
            }
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    remove_if_empty(&e.path());
                }
            }
            let _ = std::fs::remove_dir(p);
        }
        _ => {}
    }
}

struct RootLock {
    root: PathBuf,
    lock: File,
    lock_path: PathBuf,
    registry: PathBuf,
}

/// Open and share-lock `path`, retrying if the file was unlinked (by an
/// exclusive holder finishing its cleanup) between our open and our lock.
fn lock_shared(path: &Path) -> Result<File, HostError> {
    loop {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| HostError::io(format!("opening {}", path.display()), e))?;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_SH) } != 0 {
            return Err(HostError::io(
                format!("locking {}", path.display()),
                std::io::Error::last_os_error(),
            ));
        }
        let held = lock.metadata().map(|m| m.ino()).ok();
        let current = std::fs::metadata(path).map(|m| m.ino()).ok();
        if held.is_some() && held == current {
            return Ok(lock);
        }
    }
}

/// Shared locks on every writable root a run uses, plus the registry of
/// placeholders created there.
pub struct Guard {
    roots: Vec<RootLock>,
}

fn key(root: &Path) -> String {
    let digest = Sha256::digest(root.as_os_str().as_bytes());
    hex::encode(&digest[..8])
}

impl Guard {
    /// Lock `roots` (shared): from now on no other run removes
    /// placeholders there, so what resolution saw stays true.
    pub fn enter(roots: &[PathBuf]) -> Result<Guard, HostError> {
        if roots.is_empty() {
            return Ok(Guard { roots: Vec::new() });
        }
        let base = ensure_base()?;
        let mut sorted: Vec<&PathBuf> = roots.iter().collect();
        sorted.sort();
        sorted.dedup();
        let mut out = Vec::new();
        for root in sorted {
            let k = key(root);
            let lock_path = base.join(format!("root-{k}.lock"));
            let lock = lock_shared(&lock_path)?;
            out.push(RootLock {
                root: root.clone(),
                lock,
                lock_path,
                registry: base.join(format!("root-{k}.created")),
            });
        }
        Ok(Guard { roots: out })
    }

    /// Record the mount points bwrap is about to create (each under its root).
    pub fn record(&self, created: &[PathBuf]) -> Result<(), HostError> {
        for r in &self.roots {
            let mine: Vec<&PathBuf> = created.iter().filter(|c| c.starts_with(&r.root)).collect();
            if mine.is_empty() {
                continue;
            }
            let mut buf = Vec::new();
            for c in mine {
                buf.extend_from_slice(c.as_os_str().as_bytes());
                buf.push(0);
            }
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&r.registry)
                .and_then(|mut f| f.write_all(&buf))
                .map_err(|e| HostError::io(format!("writing {}", r.registry.display()), e))?;
        }
        Ok(())
    }

    /// Clean up every root no other run is using, then release the locks.
    pub fn leave(self) {
        for r in self.roots {
            // SAFETY: flock on an fd we own; non-blocking.
            let exclusive =
                unsafe { libc::flock(r.lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
            if !exclusive {
                continue;
            }
            let mut bytes = Vec::new();
            let _ = File::open(&r.registry).and_then(|mut f| f.read_to_end(&mut bytes));
            for raw in bytes.split(|b| *b == 0).filter(|s| !s.is_empty()) {
                remove_if_empty(&PathBuf::from(std::ffi::OsString::from_vec(raw.to_vec())));
            }
            let _ = std::fs::remove_file(&r.registry);
            // Still holding the exclusive lock: waiting runs re-open.
            let _ = std::fs::remove_file(&r.lock_path);
        }
    }
}
