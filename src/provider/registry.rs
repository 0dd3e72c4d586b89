//! Built-in provider ids, model aliases, list prices, and the selection of
//! one provider for a run (CLI flag > user config > default), including where
//! its key comes from.

use super::auth::{ApiKey, AuthStore};
use super::config::{ExecConfig, ProviderEntry};
use super::ProviderError;
use serde::Serialize;

/// The two wire formats codewhale speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireFormat {
    /// `POST {base}/chat/completions`, SSE, `tools` / `tool_calls`.
    OpenAiCompatible,
    /// `POST {base}/v1/messages`, SSE, `tool_use` / `tool_result` blocks.
    Anthropic,
}

/// One built-in provider.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    pub id: &'static str,
    pub wire: WireFormat,
    pub base_url: &'static str,
    pub default_model: &'static str,
    /// Environment variable holding the key (`None`: a local runtime, no key).
    pub key_env: Option<&'static str>,
}

/// The default provider when nothing else is configured.
pub const DEFAULT_PROVIDER: &str = "deepseek";

const fn b(
    id: &'static str,
    wire: WireFormat,
    base_url: &'static str,
    default_model: &'static str,
    key_env: Option<&'static str>,
) -> Builtin {
    Builtin {
        id,
        wire,
        base_url,
        default_model,
        key_env,
    }
}

use WireFormat::{Anthropic, OpenAiCompatible as Oai};

pub const BUILTINS: &[Builtin] = &[
    b(
        "deepseek",
        Oai,
        "https://api.deepseek.com/v1",
        "deepseek-flash",
        Some("DEEPSEEK_API_KEY"),
    ),
    b(
        "openai",
        Oai,
        "https://api.openai.com/v1",
        "gpt-4o-mini",
        Some("OPENAI_API_KEY"),
    ),
    b(
        "openrouter",
        Oai,
        "https://openrouter.ai/api/v1",
        "openai/gpt-4o-mini",
        Some("OPENROUTER_API_KEY"),
    ),
    b(
        "xai",
        Oai,
        "https://api.x.ai/v1",
        "grok-3-mini",
        Some("XAI_API_KEY"),
    ),
    b(
        "mistral",
        Oai,
        "https://api.mistral.ai/v1",
        "mistral-small-latest",
        Some("MISTRAL_API_KEY"),
    ),
    b(
        "moonshot",
        Oai,
        "https://api.moonshot.ai/v1",
        "kimi-k2-0711-preview",
        Some("MOONSHOT_API_KEY"),
    ),
    b("ollama", Oai, "http://localhost:11434/v1", "llama3.1", None),
    b("vllm", Oai, "http://localhost:8000/v1", "default", None),
    b("sglang", Oai, "http://localhost:30000/v1", "default", None),
    b(
        "anthropic",
        Anthropic,
        "https://api.anthropic.com",
        "claude-sonnet-4-5",
        Some("ANTHROPIC_API_KEY"),
    ),
];

/// Short names accepted for `--model` and rewritten before the request.
pub const MODEL_ALIASES: &[(&str, &str)] = &[("deepseek-flash", "deepseek-chat")];

/// List prices in USD per million tokens (input, output) for models whose
/// price is published and stable. Anything else reports `cost: unknown`.
/// Config `price_*_per_mtok` overrides these.
pub const PRICES: &[(&str, f64, f64)] = &[
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("claude-sonnet-4-5", 3.00, 15.00),
];

pub fn builtin(id: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.id == id)
}

pub fn resolve_alias(model: &str) -> &str {
    MODEL_ALIASES
        .iter()
        .find(|(a, _)| *a == model)
        .map(|(_, m)| *m)
        .unwrap_or(model)
}

/// Price per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_per_mtok + output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
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
    /// The model as sent on the wire (aliases resolved).
    pub model: String,
    pub api_key: Option<ApiKey>,
    pub key_source: KeySource,
    pub price: Option<Price>,
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
    let needed = match builtin(id) {
        Some(b) => b.key_env.is_some(),
        None => false,
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

/// Choose the provider and model for a run.
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
    let unknown = || ProviderError::Setup {
        provider: id.clone(),
        message: format!(
            "unknown provider; built-in ids: {}; or declare [providers.{id}] in the user config",
            BUILTINS.iter().map(|b| b.id).collect::<Vec<_>>().join(", ")
        ),
    };
    let (wire, base_url, default_model) = match (builtin(&id), entry) {
        (_, Some(e)) if e.kind.is_some() || e.base_url.is_some() => {
            let wire = match e.kind.as_deref() {
                Some("openai-compatible") | None => WireFormat::OpenAiCompatible,
                Some("anthropic") => WireFormat::Anthropic,
                Some(other) => {
                    return Err(ProviderError::Setup {
                        provider: id.clone(),
                        message: format!(
                            "[providers.{id}] kind = \"{other}\": expected \"openai-compatible\" or \"anthropic\""
                        ),
                    })
                }
            };
            let base = e
                .base_url
                .clone()
                .or_else(|| builtin(&id).map(|b| b.base_url.to_string()))
                .ok_or_else(|| ProviderError::Setup {
                    provider: id.clone(),
                    message: format!("[providers.{id}] needs base_url"),
                })?;
            let m = e
                .model
                .clone()
                .or_else(|| builtin(&id).map(|b| b.default_model.to_string()));
            (wire, base, m)
        }
        (Some(b), _) => (
            b.wire,
            b.base_url.to_string(),
            Some(
                entry
                    .and_then(|e| e.model.clone())
                    .unwrap_or_else(|| b.default_model.to_string()),
            ),
        ),
        (None, _) => return Err(unknown()),
    };
    let model = model
        .map(str::to_string)
        .or_else(|| {
            if provider.is_none() || cfg.provider.as_deref() == Some(id.as_str()) {
                cfg.model.clone()
            } else {
                None
            }
        })
        .or(default_model)
        .ok_or_else(|| ProviderError::Setup {
            provider: id.clone(),
            message: "no model: pass --model or set model in [providers.NAME]".into(),
        })?;
    let allow_http = entry.map(|e| e.allow_insecure_http).unwrap_or(false);
    check_base_url(&id, &base_url, allow_http)?;
    let (api_key, key_source) = find_key(&id, entry, store, env)?;
    let wire_model = resolve_alias(&model).to_string();
    let price = match entry.and_then(|e| e.price_input_per_mtok.zip(e.price_output_per_mtok)) {
        Some((i, o)) => Some(Price {
            input_per_mtok: i,
            output_per_mtok: o,
        }),
        None => PRICES
            .iter()
            .find(|(m, _, _)| *m == wire_model)
            .map(|(_, i, o)| Price {
                input_per_mtok: *i,
                output_per_mtok: *o,
            }),
    };
    Ok(ProviderSettings {
        id,
        wire,
        base_url,
        model: wire_model,
        api_key,
        key_source,
        price,
    })
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
