//! Which skills are switched off: `skills.json` in codewhale's home.
//!
//! Every change takes an exclusive `flock` on `skills.lock` beside it,
//! reloads the file, merges this one name's state and replaces the file
//! atomically (a temporary file renamed over it), so two processes (the
//! CLI and a running app-server) never lose each other's toggles. Readers
//! load the file on every listing: a running server sees another
//! process's toggle without a restart. Windows has no lock here yet
//! (the write is still atomic; reported `partial` in docs/SKILLS.md).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File name of the state, in codewhale's home.
pub const STATE_FILE: &str = "skills.json";
/// File name of the cross-process lock, in codewhale's home.
pub const LOCK_FILE: &str = "skills.lock";

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a skills state file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One skill's stored state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub enabled: bool,
}

/// The whole file: `{"version": 1, "skills": {"NAME": {"enabled": false}}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillState {
    #[serde(default = "one")]
    pub version: u32,
    #[serde(default)]
    pub skills: BTreeMap<String, Entry>,
}

fn one() -> u32 {
    1
}

impl SkillState {
    /// Whether `name` is on (a skill nobody switched is on).
    pub fn enabled(&self, name: &str) -> bool {
        self.skills.get(name).is_none_or(|e| e.enabled)
    }
}

/// The state file of one codewhale home.
#[derive(Clone, Debug)]
pub struct StateStore {
    home: PathBuf,
}

impl StateStore {
    pub fn new(codewhale_home: &Path) -> Self {
        StateStore {
            home: codewhale_home.to_path_buf(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.home.join(STATE_FILE)
    }

    /// The stored state (a missing file: everything on).
    pub fn load(&self) -> Result<SkillState, StateError> {
        let path = self.path();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StateError::Parse {
                path: path.clone(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SkillState {
                version: 1,
                ..SkillState::default()
            }),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Switch `name` on or off under the lock; the state after.
    pub fn set(&self, name: &str, enabled: bool) -> Result<SkillState, StateError> {
        std::fs::create_dir_all(&self.home).map_err(io(&self.home))?;
        let _lock = self.lock()?;
        let mut state = self.load()?;
        state.version = 1;
        if enabled {
            // On is the default: drop the entry rather than store it.
            state.skills.remove(name);
        } else {
            state.skills.insert(name.to_string(), Entry { enabled });
        }
        let path = self.path();
        let mut tmp = tempfile::NamedTempFile::new_in(&self.home).map_err(io(&self.home))?;
        let bytes = serde_json::to_vec_pretty(&state).map_err(|source| StateError::Parse {
            path: path.clone(),
            source,
        })?;
        std::io::Write::write_all(&mut tmp, &bytes).map_err(io(&path))?;
        tmp.as_file().sync_all().map_err(io(&path))?;
        tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
        Ok(state)
    }

    #[cfg(unix)]
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, StateError> {
        let path = self.home.join(LOCK_FILE);
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| io(&path)(std::io::Error::from(errno)))
    }

    #[cfg(not(unix))]
    fn lock(&self) -> Result<(), StateError> {
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_means_all_on_and_toggles_persist() {
        let t = tempfile::tempdir().unwrap();
        let s = StateStore::new(t.path());
        assert!(s.load().unwrap().enabled("x"));
        s.set("x", false).unwrap();
        let other = StateStore::new(t.path());
        assert!(
            !other.load().unwrap().enabled("x"),
            "another handle sees it"
        );
        other.set("y", false).unwrap();
        let st = s.load().unwrap();
        assert!(!st.enabled("x") && !st.enabled("y"), "merged, not lost");
        s.set("x", true).unwrap();
        assert!(s.load().unwrap().enabled("x"));
        assert!(t.path().join(LOCK_FILE).exists());
    }

    #[test]
    fn a_bad_file_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(STATE_FILE), "{\"skills\": 3}").unwrap();
        let e = StateStore::new(t.path()).load().unwrap_err().to_string();
        assert!(e.contains("skills.json"), "{e}");
    }

    #[test]
    fn concurrent_toggles_from_threads_all_land() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().to_path_buf();
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let home = home.clone();
                std::thread::spawn(move || {
                    StateStore::new(&home).set(&format!("s{i}"), false).unwrap();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let st = StateStore::new(&home).load().unwrap();
        assert_eq!(st.skills.len(), 8);
    }
}
