//! The provider catalogue: every built-in provider id as one row of data
//! (wire format, base URL, default model, key variable, local or hosted,
//! known models with context window and list prices, and where the row was
//! taken from). The rows live in [`super::catalogue_data`]; this module
//! holds their shape and the lookups.
//!
//! Prices are list prices in USD per million tokens with the date they were
//! read and their source. A model without a confirmed price has `price:
//! None`, which every surface reports as `cost: unknown` (never as 0).

use super::registry::WireFormat;
use serde::Serialize;

/// A list price, USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ListPrice {
    pub input: f64,
    /// Input tokens served from the provider's prompt cache. `None`: not
    /// confirmed from a source, so a turn with cached tokens costs `unknown`.
    pub cached_input: Option<f64>,
    /// Input tokens written to the prompt cache (Anthropic's 5-minute
    /// `ephemeral` writes). `None`: not confirmed, so a turn that wrote
    /// to the cache costs `unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    pub output: f64,
    /// The price holds for requests whose prompt (all input tokens, cached
    /// ones included) is at most this many tokens. Above it the provider
    /// bills a long-context rate the table does not carry, so such a turn
    /// costs `unknown`. `None`: no long-context rate is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up_to_prompt_tokens: Option<u64>,
    /// When the price was read (YYYY-MM-DD).
    pub date: &'static str,
    /// Where it was read.
    pub source: &'static str,
}

/// One model a provider is known to serve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct KnownModel {
    pub id: &'static str,
    /// Tokens; `None` when no source was checked.
    pub context_window: Option<u32>,
    pub price: Option<ListPrice>,
    /// Whether and how the model takes reasoning control (`None`: it does
    /// not, as far as a source says; `reasoning_effort` is not sent).
    pub reasoning: Option<super::effort::ModelReasoning>,
    /// The wire format this model is served on when it differs from the
    /// provider's (OpenAI's reasoning models: `openai-responses`); a
    /// `kind` in `[providers.NAME]` still wins.
    pub wire: Option<WireFormat>,
}

/// One built-in provider.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Entry {
    pub id: &'static str,
    pub name: &'static str,
    pub wire: WireFormat,
    /// For `azure-openai` a placeholder: the real endpoint is the user's
    /// resource (see `base_url_env`).
    pub base_url: &'static str,
    /// Environment variable that overrides `base_url` (Azure's resource
    /// endpoint); config `base_url` wins over it.
    pub base_url_env: Option<&'static str>,
    /// The base URL must come from config or `base_url_env`.
    pub needs_base_url: bool,
    /// Empty for local runtimes: the model is picked from what the server
    /// lists (`/api/tags` for Ollama, `/v1/models` for the others).
    pub default_model: &'static str,
    /// `None`: a local runtime, no key.
    pub key_env: Option<&'static str>,
    pub local: bool,
    /// Whether to ask for a final usage chunk (`stream_options`); a few
    /// compatibility APIs reject the field.
    pub stream_usage: bool,
    pub models: &'static [KnownModel],
    /// The public page this row was checked against (or why it was not).
    pub source: &'static str,
}

impl Entry {
    pub fn model(&self, id: &str) -> Option<&'static KnownModel> {
        self.models.iter().find(|m| m.id == id)
    }
}

/// Every built-in provider.
pub fn all() -> &'static [Entry] {
    super::catalogue_data::ENTRIES
}

pub fn get(id: &str) -> Option<&'static Entry> {
    all().iter().find(|e| e.id == id)
}

/// The list price of `model` at `provider`, if the catalogue has one.
pub fn price(provider: &str, model: &str) -> Option<ListPrice> {
    get(provider)?.model(model)?.price
}

pub fn ids() -> impl Iterator<Item = &'static str> {
    all().iter().map(|e| e.id)
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
