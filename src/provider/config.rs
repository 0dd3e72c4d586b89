//! The provider slice of the user config, typed.
//!
//! `config::load` resolves every layer once and keeps the `[providers.*]`
//! tables raw (this module owns their shape); [`ExecConfig::from_settings`]
//! types them, taking `provider` from the user config and `model` from the
//! merged settings (CLI `--model`, user config, a project override's
//! `model`). Provider definitions (base URLs, keys) only ever come from the
//! *user* config: a project override's `providers` key is ignored and
//! reported by `config::load`.

use crate::config::{ConfigError, Settings};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// `[providers.NAME]` in the user config.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// `openai-compatible`, `anthropic` or `azure-openai` (default: the
    /// built-in id's wire format, else `openai-compatible`).
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
    /// USD per million cached input tokens (without it, a turn with cached
    /// tokens costs `unknown`).
    pub price_cached_input_per_mtok: Option<f64>,
    /// USD per million input tokens written to the prompt cache (Anthropic
    /// cache writes; without it, a turn that wrote to the cache costs
    /// `unknown`).
    pub price_cache_write_per_mtok: Option<f64>,
    /// Azure OpenAI `api-version` (default: the latest GA data-plane one).
    pub api_version: Option<String>,
    /// The model reasons and takes `reasoning_effort`: `true` sends
    /// Anthropic's `thinking` with a budget (kind `anthropic`) or OpenAI's
    /// `reasoning_effort`; `false` sends neither. Default: the catalogue's
    /// data for the model (none for a model it does not list).
    pub thinking: Option<bool>,
    /// The model's context window in tokens (default: the catalogue's
    /// figure for the model; unknown for a model it does not list, which
    /// then compacts on the provider's context-length error).
    pub context_window: Option<u64>,
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
    /// `[router]`, for `model = "auto"`.
    #[serde(default)]
    pub router: Option<crate::provider::router::RouterConfig>,
    /// The effective `reasoning_effort` (user config, project override,
    /// command line), typed at load.
    #[serde(skip)]
    pub reasoning_effort: Option<crate::provider::ReasoningEffort>,
}

/// Only the tables this module types, for re-reading them with spans.
#[derive(Deserialize)]
struct ProvidersOnly {
    #[serde(default)]
    providers: BTreeMap<String, ProviderEntry>,
    #[serde(default)]
    router: Option<crate::provider::router::RouterConfig>,
}

impl ExecConfig {
    /// The provider settings of the resolved configuration. The user config
    /// file is re-read for the `[providers]` tables so a bad key is reported
    /// with its file, line and dotted key.
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let typed = match &settings.user_file {
            Some(file) if !settings.user.providers.is_empty() || settings.user.router.is_some() => {
                parse_providers(file)?
            }
            _ => ProvidersOnly {
                providers: BTreeMap::new(),
                router: None,
            },
        };
        Ok(ExecConfig {
            provider: settings.user.provider.clone(),
            model: settings.model.clone(),
            providers: typed.providers,
            router: typed.router,
            reasoning_effort: settings.reasoning_effort,
        })
    }
}

fn parse_providers(file: &Path) -> Result<ProvidersOnly, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| crate::config::error::from_toml(file, &text, &e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::{load, ConfigPaths, LoadOptions};

    fn settings_with(config: &str) -> (tempfile::TempDir, Result<Settings, ConfigError>) {
        let t = tempfile::tempdir().unwrap();
        let cw = t.path().join("cw");
        std::fs::create_dir_all(&cw).unwrap();
        std::fs::write(cw.join("config.toml"), config).unwrap();
        let mut o = LoadOptions::new(t.path());
        o.paths = ConfigPaths::from_parts(Some(t.path().to_path_buf()), Some(cw), None);
        o.no_project_config = true;
        let s = load(&o);
        (t, s)
    }

    #[test]
    fn reads_custom_provider_next_to_other_sections() {
        let (_t, s) = settings_with(
            "provider = \"mine\"\napproval_policy = \"ask\"\n[sandbox]\ndeny_read = []\n\
             [providers.mine]\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        );
        let cfg = ExecConfig::from_settings(&s.unwrap()).unwrap();
        assert_eq!(cfg.provider.as_deref(), Some("mine"));
        assert_eq!(cfg.providers["mine"].model.as_deref(), Some("m"));
    }

    #[test]
    fn bad_provider_key_names_file_line_and_key() {
        let (_t, s) =
            settings_with("[providers.mine]\nkind = \"openai-compatible\"\nbase_ur = \"x\"\n");
        let err = ExecConfig::from_settings(&s.unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.toml"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("base_ur"), "{err}");
    }

    #[test]
    fn missing_file_is_empty() {
        let t = tempfile::tempdir().unwrap();
        let mut o = LoadOptions::new(t.path());
        o.paths = ConfigPaths::from_parts(Some(t.path().to_path_buf()), None, None);
        let cfg = ExecConfig::from_settings(&load(&o).unwrap()).unwrap();
        assert_eq!(cfg, ExecConfig::default());
    }
}
