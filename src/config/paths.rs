//! Where configuration lives.
//!
//! `$CODEWHALE_HOME` when set (tests point it at a temp dir), else
//! `~/.codewhale`. The legacy `~/.deepseek/` (or `$DEEPSEEK_HOME`) is read
//! only when the codewhale file does not exist and the legacy one does.

use std::path::{Path, PathBuf};

/// Resolved configuration locations (injectable for tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigPaths {
    /// The user's home directory, when known.
    pub home: Option<PathBuf>,
    /// `$CODEWHALE_HOME` or `~/.codewhale`.
    pub codewhale_home: PathBuf,
    /// `$DEEPSEEK_HOME` or `~/.deepseek` (legacy).
    pub legacy_home: Option<PathBuf>,
}

impl ConfigPaths {
    /// From the environment: `CODEWHALE_HOME`, `DEEPSEEK_HOME`, `HOME`.
    pub fn from_env() -> Self {
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        Self::from_parts(
            home,
            std::env::var_os("CODEWHALE_HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            std::env::var_os("DEEPSEEK_HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        )
    }

    /// From explicit values (tests).
    pub fn from_parts(
        home: Option<PathBuf>,
        codewhale_home: Option<PathBuf>,
        legacy_home: Option<PathBuf>,
    ) -> Self {
        let base = home.clone().unwrap_or_else(|| PathBuf::from("."));
        ConfigPaths {
            codewhale_home: codewhale_home.unwrap_or_else(|| base.join(".codewhale")),
            legacy_home: legacy_home.or_else(|| home.as_ref().map(|h| h.join(".deepseek"))),
            home,
        }
    }

    /// codewhale's home when it is not `~/.codewhale` (set by
    /// `$CODEWHALE_HOME`): the deny-read table holds `~/.codewhale` for every
    /// command, so only another place needs adding to a sandbox policy.
    pub fn state_home_outside_home(&self) -> Option<PathBuf> {
        let default = self.home.as_ref().map(|h| h.join(".codewhale"));
        (default.as_ref() != Some(&self.codewhale_home)).then(|| self.codewhale_home.clone())
    }

    /// The directory holding the files in use: codewhale's, or the legacy
    /// one when only it has a `config.toml`.
    pub fn active_dir(&self) -> (PathBuf, bool) {
        let primary = self.codewhale_home.join("config.toml");
        if primary.exists() {
            return (self.codewhale_home.clone(), false);
        }
        if let Some(legacy) = &self.legacy_home {
            if legacy.join("config.toml").exists() {
                return (legacy.clone(), true);
            }
        }
        (self.codewhale_home.clone(), false)
    }

    /// The user config file in use (it may not exist) and whether it is legacy.
    pub fn user_config(&self) -> (PathBuf, bool) {
        let (dir, legacy) = self.active_dir();
        (dir.join("config.toml"), legacy)
    }

    /// The user's `permissions.toml` (next to the config in use).
    pub fn permissions(&self) -> PathBuf {
        self.active_dir().0.join("permissions.toml")
    }
}

/// The repository root for `workspace`: the nearest ancestor with `.git`,
/// else the workspace itself.
pub fn repo_root(workspace: &Path) -> PathBuf {
    let mut cur = Some(workspace);
    while let Some(dir) = cur {
        if dir.join(".git").exists() {
            return dir.to_path_buf();
        }
        cur = dir.parent();
    }
    workspace.to_path_buf()
}

/// The project override file for `workspace`.
pub fn project_override(workspace: &Path) -> PathBuf {
    repo_root(workspace).join(".codewhale").join("config.toml")
}
