//! Facts about the host that resolution depends on: the home directories
//! and the toolchain cache locations. Read once per call from the
//! environment and the password database; injectable for tests.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Facts about the host that resolution depends on (injectable for tests).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Home directory candidates: `$HOME` first, then the passwd entry if it differs.
    pub homes: Vec<PathBuf>,
    /// `$CARGO_HOME`, when set.
    pub cargo_home: Option<PathBuf>,
    /// `$XDG_CACHE_HOME`, when set.
    pub xdg_cache_home: Option<PathBuf>,
}

impl HostFacts {
    /// Read the facts from this process's environment and the password database.
    pub fn detect() -> Self {
        let mut homes = Vec::new();
        if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            homes.push(PathBuf::from(h));
        }
        if let Some(h) = passwd_home() {
            if !homes.contains(&h) {
                homes.push(h);
            }
        }
        HostFacts {
            homes,
            cargo_home: std::env::var_os("CARGO_HOME").map(PathBuf::from),
            xdg_cache_home: std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
        }
    }

    pub(super) fn primary_home(&self) -> Option<&Path> {
        self.homes.first().map(PathBuf::as_path)
    }
}

#[cfg(unix)]
fn passwd_home() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
}

#[cfg(not(unix))]
fn passwd_home() -> Option<PathBuf> {
    None
}
