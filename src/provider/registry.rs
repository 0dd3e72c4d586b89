//! The selection of one provider for a run (CLI flag > user config >
//! default) from the catalogue and the user's `[providers.*]` tables,
//! including where its key comes from and its price.

use super::auth::{ApiKey, AuthStore};
use super::catalogue::{self, Entry};
use super::config::{ExecConfig, ProviderEntry};
use super::cost::Price;
use super::ProviderError;
use serde::Serialize;

/// The wire formats codewhale speaks.
/// Serialised as the config's `kind` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WireFormat {
    /// `POST {base}/chat/completions`, SSE, `tools` / `tool_calls`, bearer key.
    #[serde(rename = "openai-compatible")]
    OpenAiCompatible,
    /// `POST {base}/v1/messages`, SSE, `tool_use` / `tool_result` blocks.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Azure OpenAI: the OpenAI stream at
    /// `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=V`
    /// with an `api-key` header; the "model" is the deployment name.
    #[serde(rename = "azure-openai")]
    AzureOpenAi,
    /// OpenAI's Responses API: `POST {base}/responses`, SSE, `store: false`
    /// with encrypted reasoning carried between requests (`responses.rs`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
}

impl WireFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiCompatible => "openai-compatible",
            WireFormat::Anthropic => "anthropic",
            WireFormat::AzureOpenAi => "azure-openai",
            WireFormat::OpenAiResponses => "openai-responses",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "openai-compatible" => Some(WireFormat::OpenAiCompatible),
            "anthropic" => Some(WireFormat::Anthropic),
            "azure-openai" => Some(WireFormat::AzureOpenAi),
            "openai-responses" => Some(WireFormat::OpenAiResponses),
            _ => None,
        }
    }
}

/// The Azure OpenAI data-plane version used when config sets none (the
/// latest GA inference release listed in Azure's REST reference).
pub const AZURE_API_VERSION: &str = "2024-10-21";

/// The default provider when nothing else is configured.
pub const DEFAULT_PROVIDER: &str = "deepseek";

/// Short names accepted for `--model` and rewritten before the request.
/// Empty today: `deepseek-flash` used to be sent as `deepseek-chat`, but
/// DeepSeek's models-and-pricing page now names `deepseek-flash` as the
/// model to send, and `deepseek-chat` was one of the legacy names retired
/// on 2026-07-24 (see the `deepseek` row in `catalogue_data`).
pub const MODEL_ALIASES: &[(&str, &str)] = &[];

/// The catalogue row of a built-in id.
pub fn builtin(id: &str) -> Option<&'static Entry> {
    catalogue::get(id)
}

pub fn resolve_alias(model: &str) -> &str {
    MODEL_ALIASES
        .iter()
        .find(|(a, _)| *a == model)
        .map(|(_, m)| *m)
        .unwrap_or(model)
}

/// Where a key came from (shown by `auth list`; the value never is).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "detail")]
pub enum KeySource {
    Env(String),
    AuthStore,
    Config,
    /// Local runtimes need none.
    NotNeeded,
    Missing,
}

/// Everything needed to talk to one provider for a run.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    pub id: String,
    pub wire: WireFormat,
    pub base_url: String,
    /// The model as sent on the wire (aliases resolved; for Azure the
    /// deployment name).
    pub model: String,
    pub api_key: Option<ApiKey>,
    pub key_source: KeySource,
    pub price: Option<Price>,
    /// Azure's `api-version` query parameter.
    pub api_version: Option<String>,
    /// Ask for the final usage chunk (`stream_options.include_usage`).
    pub stream_usage: bool,
    /// A local runtime (no key; the model may be discovered).
    pub local: bool,
    /// How the model takes reasoning control (catalogue data, or a custom
    /// provider's `thinking = true`); `None`: no effort is sent.
    pub reasoning: Option<super::ReasoningControl>,
    /// The configured `reasoning_effort` (`None`: the provider's default).
    pub effort: Option<super::ReasoningEffort>,
    /// The model's context window in tokens: `[providers.NAME]
    /// context_window`, else the catalogue's figure; `None`: unknown.
    pub context_window: Option<u64>,
}

impl ProviderSettings {
    /// Settings for an OpenAI-compatible endpoint with no key and no price
    /// (tests and embedders).
    pub fn openai_compatible(id: &str, base_url: &str, model: &str) -> Self {
        ProviderSettings {
            id: id.into(),
            wire: WireFormat::OpenAiCompatible,
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            key_source: KeySource::NotNeeded,
            price: None,
            api_version: None,
            stream_usage: true,
            local: false,
            reasoning: None,
            effort: None,
            context_window: None,
        }
    }

    /// What this run's requests carry for reasoning.
    pub fn wire_reasoning(&self) -> super::effort::WireReasoning {
        super::effort::map(self.reasoning, self.effort)
    }
}

/// Look up the key for `id`: environment, then `auth set` store, then config.
pub fn find_key(
    id: &str,
    entry: Option<&ProviderEntry>,
    store: &AuthStore,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Option<ApiKey>, KeySource), ProviderError> {
    let env_name = entry
        .and_then(|e| e.api_key_env.clone())
        .or_else(|| builtin(id).and_then(|b| b.key_env.map(str::to_string)));
    if let Some(name) = &env_name {
        if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
            return Ok((Some(ApiKey::new(v.trim())), KeySource::Env(name.clone())));
        }
    }
    if let Some(k) = store.get(id).map_err(|e| ProviderError::Setup {
        provider: id.to_string(),
        message: e.to_string(),
    })? {
        return Ok((Some(k), KeySource::AuthStore));
    }
    if let Some(k) = entry.and_then(|e| e.api_key.clone()) {
        return Ok((Some(ApiKey::new(k)), KeySource::Config));
    }
    // A custom provider with an `api_key_env` expects a key; a custom one
    // without any key setting (a local gateway) does not.
    let needed = match builtin(id) {
        Some(b) => b.key_env.is_some(),
        None => entry.is_some_and(|e| e.api_key_env.is_some()),
    };
    Ok((
        None,
        if needed {
            KeySource::Missing
        } else {
            KeySource::NotNeeded
        },
    ))
}

/// Choose the provider and model for a run. A local runtime's model may be
/// empty here (no `--model`, no config): the caller discovers it.
pub fn select(
    provider: Option<&str>,
    model: Option<&str>,
    cfg: &ExecConfig,
    store: &AuthStore,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderSettings, ProviderError> {
    let id = provider
        .map(str::to_string)
        .or_else(|| cfg.provider.clone())
        .unwrap_or_else(|| DEFAULT_PROVIDER.to_string());
    let entry = cfg.providers.get(&id);
    let row = builtin(&id);
    let setup = |message: String| ProviderError::Setup {
        provider: id.clone(),
        message,
    };
    if row.is_none() && entry.is_none_or(|e| e.base_url.is_none()) {
        return Err(setup(format!(
            "unknown provider; built-in ids: {} (`codewhale models list`); or declare [providers.{id}] with base_url in the user config",
            catalogue::ids().collect::<Vec<_>>().join(", ")
        )));
    }
    let wire = match entry.and_then(|e| e.kind.as_deref()) {
        Some(k) => WireFormat::parse(k).ok_or_else(|| {
            setup(format!(
                "[providers.{id}] kind = \"{k}\": expected \"openai-compatible\", \"openai-responses\", \"anthropic\" or \"azure-openai\""
            ))
        })?,
        // The catalogue may name a better wire for the model (OpenAI's
        // reasoning models: Responses).
        None => row
            .map(|r| {
                let m = model.or(entry.and_then(|e| e.model.as_deref())).unwrap_or(r.default_model);
                r.model(m).and_then(|k| k.wire).unwrap_or(r.wire)
            })
            .unwrap_or(WireFormat::OpenAiCompatible),
    };
    let base_url = match (entry.and_then(|e| e.base_url.clone()), row) {
        (Some(b), _) => b,
        (None, Some(r)) => match r
            .base_url_env
            .and_then(env)
            .filter(|v| !v.trim().is_empty())
        {
            Some(b) => b.trim().to_string(),
            None if r.needs_base_url => {
                return Err(setup(format!(
                    "needs your resource's endpoint: set base_url in [providers.{id}]{}",
                    r.base_url_env
                        .map(|v| format!(" or the {v} environment variable"))
                        .unwrap_or_default()
                )))
            }
            None => r.base_url.to_string(),
        },
        (None, None) => return Err(setup(format!("[providers.{id}] needs base_url"))),
    };
    let default_model = entry
        .and_then(|e| e.model.clone())
        .or_else(|| row.map(|r| r.default_model.to_string()))
        .filter(|m| !m.is_empty());
    let model = model
        .map(str::to_string)
        .or_else(|| {
            if provider.is_none() || cfg.provider.as_deref() == Some(id.as_str()) {
                cfg.model.clone()
            } else {
                None
            }
        })
        .or(default_model);
    let local = row.is_some_and(|r| r.local);
    let model = match model {
        Some(m) => m,
        None if local => String::new(),
        None => {
            return Err(setup(
                "no model: pass --model or set model in [providers.NAME]".into(),
            ))
        }
    };
    let allow_http = entry.map(|e| e.allow_insecure_http).unwrap_or(false);
    check_base_url(&id, &base_url, allow_http)?;
    let (api_key, key_source) = find_key(&id, entry, store, env)?;
    let wire_model = resolve_alias(&model).to_string();
    Ok(ProviderSettings {
        price: price_for(&id, &model, &wire_model, entry),
        api_version: (wire == WireFormat::AzureOpenAi).then(|| {
            entry
                .and_then(|e| e.api_version.clone())
                .unwrap_or_else(|| AZURE_API_VERSION.to_string())
        }),
        stream_usage: row.map(|r| r.stream_usage).unwrap_or(true),
        local,
        reasoning: reasoning_control(row, entry, wire, &model, &wire_model),
        effort: cfg.reasoning_effort,
        context_window: entry.and_then(|e| e.context_window).or_else(|| {
            row.and_then(|r| r.model(&model).or_else(|| r.model(&wire_model)))
                .and_then(|m| m.context_window)
                .map(u64::from)
        }),
        id,
        wire,
        base_url,
        model: wire_model,
        api_key,
        key_source,
    })
}

/// A custom provider's `thinking` wins (true: the wire format's own
/// control, Anthropic's budgets or OpenAI's `reasoning_effort`; false:
/// none); then the catalogue's data for the model.
fn reasoning_control(
    row: Option<&Entry>,
    entry: Option<&ProviderEntry>,
    wire: WireFormat,
    model: &str,
    wire_model: &str,
) -> Option<super::ReasoningControl> {
    use super::ReasoningControl as C;
    match entry.and_then(|e| e.thinking) {
        Some(true) => Some(match wire {
            WireFormat::Anthropic => C::AnthropicThinking {
                budgets: super::effort::ANTHROPIC_BUDGETS,
            },
            WireFormat::OpenAiCompatible
            | WireFormat::AzureOpenAi
            | WireFormat::OpenAiResponses => C::OpenAiEffort,
        }),
        Some(false) => None,
        None => row
            .and_then(|r| r.model(model).or_else(|| r.model(wire_model)))
            .and_then(|m| m.reasoning)
            .map(|r| r.control),
    }
}

/// Config prices win; then the catalogue's list price for the model as the
/// user named it or as it goes on the wire.
fn price_for(
    id: &str,
    model: &str,
    wire_model: &str,
    entry: Option<&ProviderEntry>,
) -> Option<Price> {
    if let Some((i, o)) = entry.and_then(|e| e.price_input_per_mtok.zip(e.price_output_per_mtok)) {
        return Some(Price {
            input_per_mtok: i,
            cached_input_per_mtok: entry.and_then(|e| e.price_cached_input_per_mtok),
            cache_write_per_mtok: entry.and_then(|e| e.price_cache_write_per_mtok),
            output_per_mtok: o,
            up_to_prompt_tokens: None,
            source: format!("config [providers.{id}]"),
            date: None,
        });
    }
    catalogue::price(id, model)
        .or_else(|| catalogue::price(id, wire_model))
        .map(|p| Price::from_list(&p))
}

/// Refuse plain `http://` to anything but loopback unless explicitly allowed:
/// the key and the whole conversation would cross the network in clear.
pub fn check_base_url(provider: &str, base: &str, allow_http: bool) -> Result<(), ProviderError> {
    let url = reqwest::Url::parse(base).map_err(|e| ProviderError::Setup {
        provider: provider.to_string(),
        message: format!("base_url {base:?}: {e}"),
    })?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if allow_http || is_loopback(&url) => Ok(()),
        "http" => Err(ProviderError::Setup {
            provider: provider.to_string(),
            message: format!(
                "refusing plain http:// to a non-loopback host ({base}); use https, or set allow_insecure_http = true in [providers.{provider}]"
            ),
        }),
        other => Err(ProviderError::Setup {
            provider: provider.to_string(),
            message: format!("base_url scheme {other:?} is not http or https"),
        }),
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "registry_tests.rs"]
mod tests;
