//! Model resolution for every run (`exec` and runtime turns alike): one
//! provider (flag > config > default, with the local-Ollama fallback and
//! local model discovery), or the router when the model is `auto`. Notes
//! for the user (which local model was picked, which targets route) go to
//! the caller's `note`.

use super::Models;
use crate::provider::auth::AuthStore;
use crate::provider::config::ExecConfig;
use crate::provider::registry::{self, KeySource, ProviderSettings};
use crate::provider::router::{Plan, Router};
use crate::provider::{discovery, Provider, ProviderError, RetryPolicy};

/// The model that switches the router on.
pub const AUTO: &str = "auto";

/// What `exec` talks to, owned.
pub enum Resolved {
    Single(Provider),
    Routed(Router),
}

impl Resolved {
    pub fn models(&self) -> Models<'_> {
        match self {
            Resolved::Single(p) => Models::Single(p),
            Resolved::Routed(r) => Models::Routed(r),
        }
    }

    /// The provider a run starts with (`router` when routed).
    pub fn provider_label(&self) -> String {
        match self {
            Resolved::Single(p) => p.settings.id.clone(),
            Resolved::Routed(_) => "router".into(),
        }
    }

    /// The model a run starts with (`auto` when routed).
    pub fn model_label(&self) -> String {
        match self {
            Resolved::Single(p) => p.settings.model.clone(),
            Resolved::Routed(_) => AUTO.into(),
        }
    }
}

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;
/// Where notes for the user go (exec: stderr; the runtime: a status item).
pub type Note<'a> = &'a mut dyn FnMut(&str);

pub fn resolve(
    provider: Option<&str>,
    model: Option<&str>,
    cfg: &ExecConfig,
    store: &AuthStore,
    env: Env<'_>,
    rt: &tokio::runtime::Runtime,
    out: Note<'_>,
) -> Result<Resolved, ProviderError> {
    // `--model auto`, or `model = "auto"` when no `--provider` picks one
    // provider explicitly.
    let config_auto = cfg.model.as_deref() == Some(AUTO);
    if model == Some(AUTO) || (model.is_none() && provider.is_none() && config_auto) {
        return routed(cfg, store, env, rt, out).map(Resolved::Routed);
    }
    // `--provider X` with `model = "auto"` in config: X's default model.
    let plain;
    let cfg = if config_auto {
        plain = ExecConfig {
            model: None,
            ..cfg.clone()
        };
        &plain
    } else {
        cfg
    };
    let mut s = registry::select(provider, model, cfg, store, env)?;
    if may_use_local(&s, provider, cfg) {
        if let Some(local) = ollama_fallback(cfg, store, env, rt, out)? {
            s = local;
        }
    }
    let s = finish(s, rt, out)?;
    Ok(Resolved::Single(Provider::new(s, RetryPolicy::default())?))
}

/// Refuse a missing key; pick a local runtime's model when none was named.
fn finish(
    mut s: ProviderSettings,
    rt: &tokio::runtime::Runtime,
    out: Note<'_>,
) -> Result<ProviderSettings, ProviderError> {
    if s.key_source == KeySource::Missing {
        let var = registry::builtin(&s.id)
            .and_then(|b| b.key_env)
            .unwrap_or("the provider's key variable");
        return Err(ProviderError::Setup {
            provider: s.id.clone(),
            message: format!(
                "no API key for model {}: set {var}, run `codewhale auth set --provider {}`, or pick another --provider",
                s.model, s.id
            ),
        });
    }
    if s.model.is_empty() {
        let found = rt
            .block_on(discovery::local_models(&s.id, &s.base_url))
            .map_err(|e| ProviderError::Setup {
                provider: s.id.clone(),
                message: format!("no --model given and the server's model list failed: {e}"),
            })?;
        let Some(first) = found.first() else {
            return Err(ProviderError::Setup {
                provider: s.id.clone(),
                message: format!("no --model given and {} lists no chat model", s.base_url),
            });
        };
        out(&format!(
            "{}: no model named; using {first} (first of {} listed by the server)",
            s.id,
            found.len()
        ));
        s.model = first.clone();
    }
    Ok(s)
}

/// Whether a run may fall back to a local Ollama: no provider asked for or
/// configured, and no key for the default one. The TUI asks first when
/// this holds (docs/TUI.md "First run").
pub fn may_use_local(s: &ProviderSettings, provider: Option<&str>, cfg: &ExecConfig) -> bool {
    s.key_source == KeySource::Missing && provider.is_none() && cfg.provider.is_none()
}

/// No provider configured and no key for the default: a local Ollama
/// serving a chat model, at `OLLAMA_HOST`, `[providers.ollama] base_url`,
/// or its default address (said on stderr).
pub fn ollama_fallback(
    cfg: &ExecConfig,
    store: &AuthStore,
    env: Env<'_>,
    rt: &tokio::runtime::Runtime,
    out: Note<'_>,
) -> Result<Option<ProviderSettings>, ProviderError> {
    let root = env("OLLAMA_HOST")
        .filter(|h| h.starts_with("http://") || h.starts_with("https://"))
        .or_else(|| {
            cfg.providers
                .get("ollama")
                .and_then(|e| e.base_url.as_deref())
                .map(discovery::ollama_root)
        })
        .unwrap_or_else(|| discovery::OLLAMA_DEFAULT_ROOT.to_string());
    let allow_http = cfg
        .providers
        .get("ollama")
        .is_some_and(|e| e.allow_insecure_http);
    if registry::check_base_url("ollama", &root, allow_http).is_err() {
        return Ok(None);
    }
    let Ok(models) = rt.block_on(discovery::ollama_chat_models(&root)) else {
        return Ok(None);
    };
    let Some(model) = models.first() else {
        return Ok(None);
    };
    let mut s = registry::select(Some("ollama"), Some(model), cfg, store, env)?;
    s.base_url = format!("{}/v1", root.trim_end_matches('/'));
    registry::check_base_url("ollama", &s.base_url, allow_http)?;
    out(&format!(
        "no provider is configured; using the local Ollama at {root} with model {model} (first chat model of GET /api/tags)"
    ));
    Ok(Some(s))
}

/// `model = "auto"`: the `[router]` plan with one provider per target.
fn routed(
    cfg: &ExecConfig,
    store: &AuthStore,
    env: Env<'_>,
    rt: &tokio::runtime::Runtime,
    out: Note<'_>,
) -> Result<Router, ProviderError> {
    let Some(rc) = &cfg.router else {
        return Err(ProviderError::Setup {
            provider: "router".into(),
            message:
                "model = \"auto\" needs a [router] table in the user config (see docs/PROVIDERS.md)"
                    .into(),
        });
    };
    let plan = Plan::new(rc).map_err(|e| ProviderError::Setup {
        provider: "router".into(),
        message: e.to_string(),
    })?;
    let retry = RetryPolicy {
        max_retries: plan.retries_per_model,
        ..RetryPolicy::default()
    };
    let mut providers = Vec::new();
    for t in plan.targets() {
        let s = registry::select(Some(&t.provider), Some(&t.model), cfg, store, env)?;
        let s = finish(s, rt, out)?;
        providers.push((t, Provider::new(s, retry.clone())?));
    }
    out(&format!(
        "model auto: routing between {}",
        providers
            .iter()
            .map(|(t, _)| t.label())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(Router::new(plan, providers))
}
