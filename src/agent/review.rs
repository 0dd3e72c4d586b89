//! Auto-Review's model reviewer: the one request per open ordinary
//! question, and what its answer means.
//!
//! The document, the system prompt, the answer parser and the breaker are
//! pure values in [`crate::authz::reviewer`]; this module sends the one
//! request: non-streaming, no tools, temperature 0 (retried once without
//! it when the provider refuses the field), reasoning off where the
//! provider allows it ([`crate::provider::oneshot`]). A clipped answer gets
//! one retry with twice the output budget. The whole review is bounded by
//! `[auto_review] timeout_s`. Every failure — timeout, HTTP error, a cut
//! stream, an answer that is not the one JSON object, a document over
//! 64 KiB (never sent) — is [`ReviewVerdict::Unavailable`], and the call
//! does not run. Identical calls are reviewed again: nothing is cached.

use crate::authz::reviewer::{parse_answer, ReviewDocument, ReviewVerdict, SYSTEM_PROMPT};
use crate::config::auto_review::AutoReviewSection;
use crate::provider::auth::AuthStore;
use crate::provider::config::ExecConfig;
use crate::provider::cost::Price;
use crate::provider::oneshot::{self, OneShotOptions};
use crate::provider::registry::{self, ProviderSettings};
use crate::provider::{Provider, ProviderError, RetryPolicy, Usage};
use std::time::{Duration, Instant};

/// The reviewer's first output budget (tokens); a clipped answer is
/// retried once with twice this.
pub const OUTPUT_BUDGET: u32 = 512;

/// The reviewer of one agent: its model and timeout.
pub struct Reviewer {
    provider: Provider,
    timeout: Duration,
}

/// What one review produced (the payload of `auto_review.decided`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReviewOutcome {
    pub verdict: ReviewVerdict,
    /// Tokens of every request of this review (none when nothing was sent).
    pub usage: Option<Usage>,
    pub provider: String,
    pub model: String,
    pub price: Option<Price>,
    pub latency_ms: u64,
    /// Requests sent (0 for an oversized document).
    pub requests: u32,
}

impl ReviewOutcome {
    /// The review's cost, when its usage and price are known.
    pub fn cost_usd(&self) -> Option<f64> {
        match (&self.usage, &self.price) {
            (Some(u), Some(p)) => p.cost(u),
            _ => None,
        }
    }
}

fn request_options(max_tokens: u32) -> OneShotOptions {
    OneShotOptions {
        max_tokens,
        temperature: Some(0.0),
    }
}

/// Why a provider error leaves the review without an answer, in a few words.
fn unavailable_reason(e: &ProviderError) -> String {
    match e {
        ProviderError::Http { status, .. }
        | ProviderError::Auth { status, .. }
        | ProviderError::ContextLength { status, .. } => format!("HTTP {status}"),
        ProviderError::Transient {
            mid_stream: true,
            detail,
            ..
        } => format!("cut stream ({detail})"),
        ProviderError::Transient { detail, .. } if detail.contains("timed out") => {
            format!("timeout ({detail})")
        }
        ProviderError::Transient { detail, .. } => format!("unreachable ({detail})"),
        ProviderError::Protocol { detail, .. } => format!("bad response ({detail})"),
        ProviderError::Setup { message, .. } => format!("setup ({message})"),
    }
}

/// The provider and model `[auto_review]` names: its own, or the
/// session's (`session`) where it names none (the key is not checked).
pub fn reviewer_settings(
    section: &AutoReviewSection,
    session: &ProviderSettings,
    cfg: &ExecConfig,
    store: &AuthStore,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderSettings, ProviderError> {
    Ok(match (&section.provider, &section.model) {
        (None, None) => session.clone(),
        // The session's provider with another model: its own catalogue
        // data (price, reasoning) where the provider is a known one; else
        // the session's settings with no price (cost unknown, never the
        // session model's).
        (None, Some(m)) => registry::select(Some(&session.id), Some(m), cfg, store, env)
            .unwrap_or_else(|_| {
                let mut s = session.clone();
                s.model = m.clone();
                s.price = None;
                s.reasoning = None;
                s.effort = None;
                s.context_window = None;
                s
            }),
        (Some(p), m) => registry::select(Some(p), m.as_deref(), cfg, store, env)?,
    })
}

/// The exact body the first request for `doc` to `s` would send (printed
/// by `codewhale permissions check`, never sent), or the unavailable
/// verdict of an oversized document.
pub fn request_body(
    s: &ProviderSettings,
    doc: &ReviewDocument,
) -> Result<serde_json::Value, ReviewVerdict> {
    let text = doc.encode()?;
    Ok(oneshot::body(
        s,
        SYSTEM_PROMPT,
        &text,
        request_options(OUTPUT_BUDGET),
    ))
}

impl Reviewer {
    /// A reviewer on `settings` (its own HTTP client: no retries, no
    /// fallback — a failure is an unavailable review).
    pub fn new(settings: ProviderSettings, timeout: Duration) -> Result<Self, ProviderError> {
        // The review's own deadline (`timeout`) ends it first; the
        // client's read timeout is only a backstop.
        let retry = RetryPolicy {
            max_retries: 0,
            idle_timeout: timeout + Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        Ok(Reviewer {
            provider: Provider::new(settings, retry)?,
            timeout,
        })
    }

    /// The reviewer `[auto_review]` names: its provider and model, or the
    /// session's (`session`) where it names none.
    pub fn configured(
        section: &AutoReviewSection,
        session: &ProviderSettings,
        cfg: &ExecConfig,
        store: &AuthStore,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderError> {
        let settings = reviewer_settings(section, session, cfg, store, env)?;
        if settings.key_source == registry::KeySource::Missing && !settings.local {
            return Err(ProviderError::Setup {
                provider: settings.id.clone(),
                message: format!(
                    "[auto_review]: no API key for the reviewer model {}; set one with `codewhale auth set --provider {}` or choose another [auto_review] provider",
                    settings.model, settings.id
                ),
            });
        }
        if settings.model.is_empty() {
            return Err(ProviderError::Setup {
                provider: settings.id.clone(),
                message: "[auto_review]: no reviewer model; set [auto_review] model".into(),
            });
        }
        Self::new(settings, section.timeout())
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.provider.settings
    }

    /// Review one open question.
    pub async fn review(&self, doc: &ReviewDocument) -> ReviewOutcome {
        let started = Instant::now();
        let s = &self.provider.settings;
        let mut out = ReviewOutcome {
            verdict: ReviewVerdict::unavailable("not reviewed"),
            usage: None,
            provider: s.id.clone(),
            model: s.model.clone(),
            price: s.price.clone(),
            latency_ms: 0,
            requests: 0,
        };
        let text = match doc.encode() {
            Ok(t) => t,
            Err(v) => {
                out.verdict = v;
                return out;
            }
        };
        let timeout = self.timeout;
        let verdict = match tokio::time::timeout(timeout, self.ask(&text, &mut out)).await {
            Ok(v) => v,
            Err(_) => ReviewVerdict::unavailable(format!("timeout after {}s", timeout.as_secs())),
        };
        out.verdict = verdict;
        out.latency_ms = started.elapsed().as_millis() as u64;
        out
    }

    /// The requests of one review: a clipped answer once more with twice
    /// the budget.
    async fn ask(&self, text: &str, out: &mut ReviewOutcome) -> ReviewVerdict {
        let mut budget = OUTPUT_BUDGET;
        for attempt in 0..2 {
            out.requests += 1;
            let r = self
                .provider
                .complete_once(SYSTEM_PROMPT, text, request_options(budget))
                .await;
            let a = match r {
                Ok(a) => a,
                Err(e) => return ReviewVerdict::unavailable(unavailable_reason(&e)),
            };
            if let Some(u) = a.usage {
                out.usage.get_or_insert_with(Usage::default).add(&u);
            }
            if !a.clipped {
                return parse_answer(&a.text);
            }
            if attempt == 0 {
                budget *= 2;
            }
        }
        ReviewVerdict::unavailable(format!(
            "clipped answer (cut at the output budget of {budget} tokens, after one retry)"
        ))
    }
}

/// One agent's breaker, shared by its turns: owned by whatever runs one
/// agent loop (a runtime thread, a sub-agent), so each has its own counts.
pub type SharedBreaker = std::sync::Arc<std::sync::Mutex<crate::authz::reviewer::Breaker>>;

/// One agent's Auto-Review for a turn: its reviewer, its breaker and the
/// facts each review document states.
pub struct AutoReview {
    pub reviewer: Reviewer,
    breaker: SharedBreaker,
    /// The network the sandboxed call would have.
    pub network: crate::net::policy::NetworkMode,
    /// Whether the workspace's project configuration is trusted.
    pub workspace_trusted: bool,
}

impl AutoReview {
    pub fn new(
        reviewer: Reviewer,
        breaker: SharedBreaker,
        network: crate::net::policy::NetworkMode,
        workspace_trusted: bool,
    ) -> Self {
        AutoReview {
            reviewer,
            breaker,
            network,
            workspace_trusted,
        }
    }

    /// The Auto-Review of a child of this agent: the same reviewer model
    /// and timeout, a breaker of its own (each sub-agent is counted
    /// alone, and its pause stops only it) and the child's clamped
    /// network. `None` when the reviewer's client cannot be built again;
    /// the child's questions then go to a person, never allowed unasked.
    pub fn for_child(&self, network: crate::net::policy::NetworkMode) -> Option<AutoReview> {
        let reviewer =
            Reviewer::new(self.reviewer.settings().clone(), self.reviewer.timeout).ok()?;
        Some(AutoReview::new(
            reviewer,
            SharedBreaker::default(),
            network,
            self.workspace_trusted,
        ))
    }

    /// Count one review; the trip, when it tripped the breaker.
    pub fn record(&self, v: &ReviewVerdict) -> Option<crate::authz::reviewer::Trip> {
        self.breaker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn session() -> ProviderSettings {
        let mut s = ProviderSettings::openai_compatible("mine", "http://127.0.0.1:1/v1", "worker");
        s.price = Some(Price {
            input_per_mtok: 1.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            output_per_mtok: 2.0,
            up_to_prompt_tokens: None,
            source: "config".into(),
            date: None,
        });
        s
    }

    #[test]
    fn the_default_reviewer_is_the_session_and_another_model_drops_its_price() {
        let dir = tempfile::tempdir().unwrap();
        let store = AuthStore::new(dir.path());
        let env = |_: &str| None;
        let cfg = ExecConfig::default();
        let s = reviewer_settings(
            &AutoReviewSection::default(),
            &session(),
            &cfg,
            &store,
            &env,
        )
        .unwrap();
        assert_eq!(s.model, "worker");
        assert!(s.price.is_some());
        let section = AutoReviewSection {
            model: Some("small".into()),
            ..Default::default()
        };
        let s = reviewer_settings(&section, &session(), &cfg, &store, &env).unwrap();
        assert_eq!((s.id.as_str(), s.model.as_str()), ("mine", "small"));
        assert!(
            s.price.is_none(),
            "the worker's price is not the reviewer's"
        );
        let section = AutoReviewSection {
            provider: Some("nowhere".into()),
            ..Default::default()
        };
        assert!(reviewer_settings(&section, &session(), &cfg, &store, &env).is_err());
    }
}
