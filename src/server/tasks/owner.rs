//! One process at a time runs a state home's tasks and automations: an
//! exclusive `flock` on `<state home>/tasks.lock`, held for the process's
//! life. Two servers on one home would otherwise both run the queued tasks
//! and both fire each slot (their records are read once, at start). A
//! second server still serves threads and turns; its task and automation
//! routes answer 503 naming the lock.
//!
//! Not on Windows yet (no lock there: run one server per state home).

use std::fs::File;
use std::path::{Path, PathBuf};

pub struct HubLock {
    #[cfg(unix)]
    _lock: nix::fcntl::Flock<File>,
    #[cfg(not(unix))]
    _file: File,
}

pub fn lock_path(home: &Path) -> PathBuf {
    home.join("tasks.lock")
}

impl HubLock {
    /// Take the lock, or say why not (another process holds it, or the
    /// file cannot be opened).
    pub fn acquire(home: &Path) -> Result<HubLock, String> {
        let path = lock_path(home);
        std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        #[cfg(unix)]
        {
            let lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
                .map_err(|(_, e)| {
                    format!(
                        "another codewhale process runs this state home's tasks and automations ({} is locked: {e})",
                        path.display()
                    )
                })?;
            Ok(HubLock { _lock: lock })
        }
        #[cfg(not(unix))]
        Ok(HubLock { _file: f })
    }
}
