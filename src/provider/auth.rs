//! The local key store: `$CODEWHALE_HOME/auth.json` (else
//! `~/.codewhale/auth.json`), file mode 0600, written atomically.
//!
//! Keys are never printed or logged: [`ApiKey`]'s `Debug` is redacted and
//! `auth list` shows only presence and source. The whole `~/.codewhale`
//! directory is on the sandbox's deny-read table, so commands the agent runs
//! cannot read this file.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A provider key. `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(s: impl Into<String>) -> Self {
        ApiKey(s.into())
    }
    /// The raw value, for the one place that needs it: the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    #[serde(default)]
    providers: BTreeMap<String, StoredKey>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredKey {
    api_key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid key store: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("empty key: nothing was stored")]
    Empty,
    #[error("--provider {0:?}: use letters, digits, '-' or '_'")]
    BadId(String),
}

/// Check a provider id before it names a stored key: letters, digits,
/// `-` and `_` only.
pub fn valid_id(id: &str) -> Result<(), AuthError> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(AuthError::BadId(id.to_string()));
    }
    Ok(())
}

/// The key store rooted at a codewhale home directory.
#[derive(Clone, Debug)]
pub struct AuthStore {
    path: PathBuf,
}

impl AuthStore {
    pub fn new(home: &Path) -> Self {
        AuthStore {
            path: home.join("auth.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<StoreFile, AuthError> {
        match std::fs::read_to_string(&self.path) {
            Ok(t) => serde_json::from_str(&t).map_err(|source| AuthError::Parse {
                path: self.path.clone(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoreFile::default()),
            Err(source) => Err(AuthError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// The stored key for `provider`, if any.
    pub fn get(&self, provider: &str) -> Result<Option<ApiKey>, AuthError> {
        Ok(self
            .read()?
            .providers
            .get(provider)
            .map(|k| ApiKey::new(k.api_key.clone())))
    }

    /// Provider ids that have a stored key.
    pub fn ids(&self) -> Result<Vec<String>, AuthError> {
        Ok(self.read()?.providers.keys().cloned().collect())
    }

    /// Store (or replace) the key for `provider`.
    pub fn set(&self, provider: &str, key: &str) -> Result<(), AuthError> {
        let key = key.trim();
        if key.is_empty() {
            return Err(AuthError::Empty);
        }
        let mut file = self.read()?;
        file.providers.insert(
            provider.to_string(),
            StoredKey {
                api_key: key.to_string(),
            },
        );
        self.write(&file)
    }

    /// Store `key` for `provider` the one way `auth set` does (the id
    /// checked, the store written 0600 and atomically); the TUI's
    /// `/provider` key field calls this too, so both leave the same file.
    pub fn store_key(&self, provider: &str, key: &str) -> Result<(), AuthError> {
        valid_id(provider)?;
        self.set(provider, key)
    }

    /// Remove the key for `provider`; returns whether one was stored.
    pub fn remove(&self, provider: &str) -> Result<bool, AuthError> {
        let mut file = self.read()?;
        let had = file.providers.remove(provider).is_some();
        if had {
            self.write(&file)?;
        }
        Ok(had)
    }

    /// Write via a 0600 temp file in the same directory, then rename, so a
    /// crash never leaves a half-written or world-readable store.
    fn write(&self, file: &StoreFile) -> Result<(), AuthError> {
        let io = |source| AuthError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let text = serde_json::to_string_pretty(file).map_err(|source| AuthError::Parse {
            path: self.path.clone(),
            source,
        })?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".auth.json.")
            .tempfile_in(dir)
            .map_err(io)?;
        restrict(tmp.as_file()).map_err(io)?;
        tmp.write_all(text.as_bytes()).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

#[cfg(unix)]
fn restrict(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn restrict(_f: &std::fs::File) -> std::io::Result<()> {
    // Windows: the file inherits the profile directory's ACL (owner only).
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn set_get_remove_and_mode_0600() {
        let t = tempfile::tempdir().unwrap();
        let s = AuthStore::new(&t.path().join("home"));
        assert!(s.get("openai").unwrap().is_none());
        s.set("openai", " sk-123\n").unwrap();
        assert_eq!(s.get("openai").unwrap().unwrap().expose(), "sk-123");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(s.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(s.ids().unwrap(), vec!["openai".to_string()]);
        assert!(s.remove("openai").unwrap());
        assert!(s.get("openai").unwrap().is_none());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let k = ApiKey::new("sk-secret");
        assert!(!format!("{k:?}").contains("secret"));
    }

    #[test]
    fn empty_key_is_refused() {
        let t = tempfile::tempdir().unwrap();
        assert!(matches!(
            AuthStore::new(t.path()).set("x", "  "),
            Err(AuthError::Empty)
        ));
    }
}
