//! A per-store lock so two codewhale processes on one workspace (two
//! sessions, or `undo` while an agent runs) take turns: the record file is
//! re-read and rewritten under the lock, and git's own `index.lock` is never
//! contended.
//!
//! Unix: an exclusive `flock` on `<store>/lock`, released when the guard
//! drops (or the process dies). Elsewhere: no cross-process lock yet; git's
//! `index.lock` still prevents index corruption, but two concurrent writers
//! could lose a record (documented in docs/UNDO.md).

use super::error::SnapshotError;
use std::path::Path;

/// Held while a store operation runs.
#[derive(Debug)]
pub struct StoreLock {
    #[cfg(unix)]
    _flock: nix::fcntl::Flock<std::fs::File>,
}

impl StoreLock {
    /// Block until the lock on `dir/lock` is ours.
    pub fn acquire(dir: &Path) -> Result<Self, SnapshotError> {
        let path = dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| SnapshotError::io("cannot open lock file", &path, e))?;
        #[cfg(unix)]
        {
            let flock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
                .map_err(|(_, errno)| {
                    SnapshotError::io("cannot lock", &path, std::io::Error::from(errno))
                })?;
            Ok(StoreLock { _flock: flock })
        }
        #[cfg(not(unix))]
        {
            drop(file);
            Ok(StoreLock {})
        }
    }
}
