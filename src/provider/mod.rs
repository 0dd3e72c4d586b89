//! Model providers: one neutral conversation type, four wire formats
//! (OpenAI-compatible Chat Completions, Azure OpenAI deployments, OpenAI
//! Responses and Anthropic Messages, all streamed over SSE), reasoning kept
//! and sent back where the provider needs it, the catalogue of built-in ids
//! with list prices, local-runtime discovery, the `model = "auto"` router,
//! a local key store and retries.
//!
//! Invariants: keys never appear in errors, logs or `Debug` output; a plain
//! `http://` base URL is refused unless it is loopback or explicitly allowed;
//! every error names the provider and model.

pub mod anthropic;
pub mod auth;
pub mod catalogue;
mod catalogue_data;
pub mod config;
pub mod context_limit;
pub mod cost;
pub mod discovery;
pub mod effort;
pub mod oneshot;
pub mod openai;
pub mod reasoning;
pub mod registry;
pub mod responses;
pub mod router;
mod stream_parts;
pub mod wire;

pub use effort::{ReasoningControl, ReasoningEffort};
pub use reasoning::ReasoningPart;
pub use registry::{ProviderSettings, WireFormat};

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One message of the neutral conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
        /// The reasoning the provider returned with this message, kept to
        /// be sent back where its API requires it ([`reasoning`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning: Vec<ReasoningPart>,
    },
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

impl Message {
    /// The bytes of what this message carries to the model (text,
    /// reasoning, call names and arguments, results): the size estimates'
    /// unit (bytes / 4 ≈ tokens).
    pub fn approx_bytes(&self) -> usize {
        match self {
            Message::User { text } => text.len(),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                text.len()
                    + reasoning::chars(reasoning)
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Message::ToolResult { content, .. } => content.len(),
        }
    }
}

/// A tool call as the model produced it. `arguments` is the raw JSON text:
/// a malformed one is reported back to the model, never a crash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// What one request sends.
#[derive(Clone, Copy, Debug)]
pub struct ChatRequest<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
}

/// Tokens of one response, normalised across wire formats:
/// `input_tokens` counts every prompt token, cached ones included
/// (Anthropic reports them apart; they are added back), and
/// `output_tokens` includes reasoning tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache (a subset of input).
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the cache (Anthropic `cache_creation_input_tokens`).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Reasoning tokens (a subset of output), when the format reports them
    /// (`None`: not reported, e.g. Anthropic's Messages stream).
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_input_tokens += o.cached_input_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
        self.reasoning_tokens = match (self.reasoning_tokens, o.reasoning_tokens) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// One finished model response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning to keep with the assistant message ([`reasoning`]).
    pub reasoning: Vec<ReasoningPart>,
    pub usage: Option<Usage>,
    pub stop_reason: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("provider {provider}: {message}")]
    Setup { provider: String, message: String },
    #[error("provider {provider}, model {model}: authentication failed (HTTP {status}); set a key with `codewhale auth set --provider {provider}` or the provider's environment variable: {body}")]
    Auth {
        provider: String,
        model: String,
        status: u16,
        body: String,
    },
    #[error("provider {provider}, model {model}: HTTP {status}: {body}")]
    Http {
        provider: String,
        model: String,
        status: u16,
        body: String,
    },
    /// Network failure, timeout, 429/5xx after the retries, or a stream cut
    /// mid-way. Exit code 75: trying again later may work.
    #[error("provider {provider}, model {model}: {detail} (transient; try again)")]
    Transient {
        provider: String,
        model: String,
        detail: String,
        /// The response had started (text may have been shown): another
        /// model must not silently answer in its place.
        mid_stream: bool,
    },
    /// The prompt was longer than the model's context window (HTTP 400 in
    /// the provider's own words, [`context_limit`]); `window` is the limit
    /// the provider named, when it did.
    #[error("provider {provider}, model {model}: the request is longer than the model's context window (HTTP {status}): {body}")]
    ContextLength {
        provider: String,
        model: String,
        status: u16,
        body: String,
        window: Option<u64>,
    },
    #[error("provider {provider}, model {model}: bad response: {detail}")]
    Protocol {
        provider: String,
        model: String,
        detail: String,
    },
}

impl ProviderError {
    /// Whether another model may be tried instead (the router): a
    /// transient failure before any of the response arrived.
    pub fn allows_fallback(&self) -> bool {
        matches!(
            self,
            ProviderError::Transient {
                mid_stream: false,
                ..
            }
        )
    }

    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Transient { .. })
    }

    pub fn exit_code(&self) -> i32 {
        if self.is_transient() {
            crate::exit::TEMPFAIL
        } else {
            crate::exit::FAILURE
        }
    }

    /// Stable category for stream-json `error` events.
    pub fn category(&self) -> &'static str {
        match self {
            ProviderError::Setup { .. } => "provider_setup",
            ProviderError::Auth { .. } => "provider_auth",
            ProviderError::Http { .. } => "provider_http",
            ProviderError::ContextLength { .. } => "provider_context_length",
            ProviderError::Transient { .. } => "provider_transient",
            ProviderError::Protocol { .. } => "provider_protocol",
        }
    }
}

/// Retry and timeout knobs.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Retries after the first attempt, for 429, 5xx and connection failures.
    pub max_retries: u32,
    /// First backoff; doubles each retry.
    pub base_backoff: Duration,
    /// Longest `Retry-After` honoured; a longer one ends the retries.
    pub max_retry_after: Duration,
    pub connect_timeout: Duration,
    /// Longest silence between two chunks of a response.
    pub idle_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_backoff: Duration::from_millis(500),
            max_retry_after: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// A configured client for one provider and model.
pub struct Provider {
    pub settings: ProviderSettings,
    retry: RetryPolicy,
    http: reqwest::Client,
}

/// One failed attempt: retry it, or give up with this error.
enum Attempt {
    Retry {
        detail: String,
        after: Option<Duration>,
    },
    Fail(ProviderError),
}

impl Provider {
    pub fn new(settings: ProviderSettings, retry: RetryPolicy) -> Result<Self, ProviderError> {
        let http = reqwest::Client::builder()
            .connect_timeout(retry.connect_timeout)
            .read_timeout(retry.idle_timeout)
            .build()
            .map_err(|e| ProviderError::Setup {
                provider: settings.id.clone(),
                message: format!("http client: {e}"),
            })?;
        Ok(Provider {
            settings,
            retry,
            http,
        })
    }

    fn transient(&self, detail: String) -> ProviderError {
        ProviderError::Transient {
            provider: self.settings.id.clone(),
            model: self.settings.model.clone(),
            detail,
            mid_stream: false,
        }
    }

    fn cut(&self, detail: String) -> ProviderError {
        ProviderError::Transient {
            provider: self.settings.id.clone(),
            model: self.settings.model.clone(),
            detail,
            mid_stream: true,
        }
    }

    fn protocol(&self, detail: String) -> ProviderError {
        ProviderError::Protocol {
            provider: self.settings.id.clone(),
            model: self.settings.model.clone(),
            detail,
        }
    }

    /// Send `req`, streaming text deltas to `on_text`, retrying 429/5xx and
    /// connection failures with exponential backoff (honouring
    /// `Retry-After`). A stream that breaks after it started is not retried
    /// (its text was already shown); it is a transient error.
    pub async fn complete(
        &self,
        req: ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion, ProviderError> {
        let mut attempt = 0u32;
        loop {
            let (detail, after) = match self.try_once(req, on_text).await {
                Ok(c) => return Ok(c),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Retry { detail, after }) => (detail, after),
            };
            if attempt >= self.retry.max_retries {
                return Err(
                    self.transient(format!("{detail}; gave up after {} attempts", attempt + 1))
                );
            }
            let wait = match after {
                Some(a) if a > self.retry.max_retry_after => {
                    return Err(self.transient(format!(
                        "{detail}; server asked to retry after {}s",
                        a.as_secs()
                    )))
                }
                Some(a) => a,
                None => self.retry.base_backoff * 2u32.saturating_pow(attempt),
            };
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn try_once(
        &self,
        req: ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Completion, Attempt> {
        let s = &self.settings;
        let builder = wire::request(&self.http, s, req);
        let resp = match builder.send().await {
            Ok(r) => r,
            Err(e) => {
                return Err(Attempt::Retry {
                    detail: describe_reqwest(&e),
                    after: None,
                })
            }
        };
        let status = resp.status();
        if !status.is_success() {
            let after = retry_after(resp.headers());
            let full = resp.text().await.unwrap_or_default();
            let body: String = full.chars().take(500).collect();
            let code = status.as_u16();
            if let Some(limit) = context_limit::recognise(code, &full) {
                return Err(Attempt::Fail(ProviderError::ContextLength {
                    provider: s.id.clone(),
                    model: s.model.clone(),
                    status: code,
                    body,
                    window: limit.window,
                }));
            }
            return Err(match code {
                429 | 500..=599 => Attempt::Retry {
                    detail: format!("HTTP {code}: {body}"),
                    after,
                },
                401 | 403 => Attempt::Fail(ProviderError::Auth {
                    provider: s.id.clone(),
                    model: s.model.clone(),
                    status: code,
                    body,
                }),
                _ => Attempt::Fail(ProviderError::Http {
                    provider: s.id.clone(),
                    model: s.model.clone(),
                    status: code,
                    body,
                }),
            });
        }
        let mut events = eventsource_stream::Eventsource::eventsource(resp.bytes_stream());
        let mut oai = openai::Accumulator::default();
        let mut ant = anthropic::Accumulator::default();
        let mut rsp = responses::Accumulator::default();
        while let Some(ev) = events.next().await {
            let ev =
                ev.map_err(|e| Attempt::Fail(self.cut(format!("stream broke mid-way: {e}"))))?;
            let step = match s.wire {
                WireFormat::OpenAiCompatible | WireFormat::AzureOpenAi => {
                    oai.feed(&ev.data, on_text)
                }
                WireFormat::Anthropic => ant.feed(&ev.event, &ev.data, on_text),
                WireFormat::OpenAiResponses => rsp.feed(&ev.event, &ev.data, on_text),
            };
            match step {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => return Err(Attempt::Fail(self.protocol(e))),
            }
        }
        let done = match s.wire {
            WireFormat::OpenAiCompatible | WireFormat::AzureOpenAi => oai.finish(),
            WireFormat::Anthropic => ant.finish(),
            WireFormat::OpenAiResponses => rsp.finish(),
        };
        done.ok_or_else(|| {
            Attempt::Fail(self.cut(
                "stream ended before the response was complete (connection cut mid-way)".into(),
            ))
        })
    }
}

fn describe_reqwest(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        format!("cannot connect: {e}")
    } else {
        format!("request failed: {e}")
    }
}

/// `Retry-After` in seconds (the HTTP-date form is treated as absent).
fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    h.get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}
