//! The slice of the user config that providers need, read through a small
//! local struct until `src/config/` (owned elsewhere) is merged and can hand
//! these values over from `config::load`.
//!
//! Only the *user* config is read (`$CODEWHALE_HOME/config.toml`, else
//! `~/.codewhale/config.toml`): provider settings (base URLs, keys) are never
//! taken from a repository. Keys this reader does not know are ignored here
//! because other subsystems own them.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `$CODEWHALE_HOME`, else `~/.codewhale`.
pub fn codewhale_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("CODEWHALE_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".codewhale"))
}

/// `[providers.NAME]` in the user config.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// `openai-compatible` or `anthropic`.
    pub kind: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub model: Option<String>,
    /// Environment variable holding the key (overrides the built-in one).
    pub api_key_env: Option<String>,
    /// Allow a plain `http://` base URL that is not loopback.
    #[serde(default)]
    pub allow_insecure_http: bool,
    /// USD per million input tokens (enables cost reporting).
    pub price_input_per_mtok: Option<f64>,
    /// USD per million output tokens.
    pub price_output_per_mtok: Option<f64>,
}

/// What `exec` reads from the user config today.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ExecConfig {
    /// Default provider id.
    pub provider: Option<String>,
    /// Default model.
    pub model: Option<String>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// toml's message names the line, column and key.
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
}

impl ExecConfig {
    /// Read `home/config.toml`; a missing file is an empty config.
    pub fn load_from(home: &Path) -> Result<(Self, Option<PathBuf>), ConfigError> {
        let path = home.join("config.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let cfg = toml::from_str(&text).map_err(|source| ConfigError::Parse {
                    path: path.clone(),
                    source,
                })?;
                Ok((cfg, Some(path)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((ExecConfig::default(), None)),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_custom_provider_and_ignores_foreign_top_level_keys() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("config.toml"),
            "provider = \"mine\"\napproval_policy = \"ask\"\n[sandbox]\ndeny_read = []\n\
             [providers.mine]\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        )
        .unwrap();
        let (cfg, path) = ExecConfig::load_from(t.path()).unwrap();
        assert!(path.is_some());
        assert_eq!(cfg.provider.as_deref(), Some("mine"));
        assert_eq!(cfg.providers["mine"].model.as_deref(), Some("m"));
    }

    #[test]
    fn bad_provider_key_names_file_line_and_key() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("config.toml"),
            "[providers.mine]\nkind = \"openai-compatible\"\nbase_ur = \"x\"\n",
        )
        .unwrap();
        let err = ExecConfig::load_from(t.path()).unwrap_err().to_string();
        assert!(err.contains("config.toml"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("base_ur"), "{err}");
    }

    #[test]
    fn missing_file_is_empty() {
        let t = tempfile::tempdir().unwrap();
        let (cfg, path) = ExecConfig::load_from(t.path()).unwrap();
        assert_eq!(cfg, ExecConfig::default());
        assert!(path.is_none());
    }
}
