//! Which process runs a thread's turns: an exclusive `flock` on
//! `<runtime>/owners/<thread>.lock`, held while it does. A start interrupts
//! only the open turns of threads whose lock nobody holds, so a server
//! starting while `exec` runs does not mark that run's turn interrupted.
//!
//! Not on Windows yet (no lock: every open turn counts as abandoned there).

use super::error::RuntimeError;
use std::fs::File;
use std::path::{Path, PathBuf};

pub struct OwnerLock {
    #[cfg(unix)]
    _lock: nix::fcntl::Flock<File>,
    #[cfg(not(unix))]
    _file: File,
}

fn lock_path(dir: &Path, thread: &str) -> PathBuf {
    dir.join("owners").join(format!("{thread}.lock"))
}

fn open(dir: &Path, thread: &str) -> Result<File, RuntimeError> {
    let path = lock_path(dir, thread);
    let err = |source| RuntimeError::Owner {
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)
}

impl OwnerLock {
    /// Take the lock, or fail at once if another process holds it (two
    /// owners of one thread would interleave its turns).
    pub fn acquire(dir: &Path, thread: &str) -> Result<Self, RuntimeError> {
        let f = open(dir, thread)?;
        #[cfg(unix)]
        {
            let lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
                .map_err(|(_, e)| RuntimeError::Owner {
                    path: lock_path(dir, thread),
                    source: std::io::Error::other(format!(
                        "another process runs this thread's turns ({e})"
                    )),
                })?;
            Ok(OwnerLock { _lock: lock })
        }
        #[cfg(not(unix))]
        Ok(OwnerLock { _file: f })
    }

    /// Whether a live process holds `thread`'s lock right now.
    pub fn held_elsewhere(dir: &Path, thread: &str) -> bool {
        if !lock_path(dir, thread).exists() {
            return false;
        }
        #[cfg(unix)]
        {
            let Ok(f) = open(dir, thread) else {
                return false;
            };
            nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
        }
        #[cfg(not(unix))]
        false
    }
}
