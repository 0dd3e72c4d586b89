//! `model = "auto"`: pick a model per turn from the user's `[router]`
//! rules, and fall back to the next model when one fails before answering.
//!
//! ```toml
//! [router]
//! cheap = "groq/llama-3.3-70b-versatile"    # provider/model
//! strong = "anthropic/claude-sonnet-5-5"
//! fallback = ["openai/gpt-5.6"]             # tried after the pair
//! long_context_tokens = 64000               # estimated prompt size
//! retries_per_model = 2                     # 429/5xx retries before moving on
//! [router.rules]                            # turn kind -> cheap | strong | provider/model
//! plan = "strong"
//! edit = "cheap"
//! ```
//!
//! The planner ([`classify`], [`plan`]) is pure; [`Router`] holds one
//! configured [`Provider`] per target and runs the fallback chain.

use super::{ChatRequest, Completion, Message, Provider, ProviderError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default size (estimated tokens) from which a turn counts as long context.
pub const DEFAULT_LONG_CONTEXT_TOKENS: u64 = 64_000;
/// Default retries per model before the router moves to the next one.
pub const DEFAULT_RETRIES_PER_MODEL: u32 = 2;

/// `[router]` in the user config.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    pub cheap: Option<String>,
    pub strong: Option<String>,
    #[serde(default)]
    pub rules: BTreeMap<TurnKind, String>,
    #[serde(default)]
    pub fallback: Vec<String>,
    pub long_context_tokens: Option<u64>,
    pub retries_per_model: Option<u32>,
}

/// What a turn is about, guessed from the conversation so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// The first turn: the model reads the task and decides what to do.
    Plan,
    /// The previous turn changed files or ran commands: work in progress.
    Edit,
    /// The previous turn only read (files, search): the model looks at
    /// what it found.
    Review,
    /// The prompt so far is at least `long_context_tokens` (estimated at
    /// 4 bytes per token).
    LongContext,
    /// Anything else.
    Default,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Plan => "plan",
            TurnKind::Edit => "edit",
            TurnKind::Review => "review",
            TurnKind::LongContext => "long_context",
            TurnKind::Default => "default",
        }
    }

    /// The side of the pair a kind uses when `[router.rules]` says nothing.
    fn default_side(self) -> &'static str {
        match self {
            TurnKind::Plan | TurnKind::Review | TurnKind::LongContext => "strong",
            TurnKind::Edit | TurnKind::Default => "cheap",
        }
    }
}

/// A `provider/model` target.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Target {
    pub provider: String,
    pub model: String,
}

impl Target {
    /// `provider/model` (the model may itself contain `/`).
    pub fn parse(s: &str) -> Option<Target> {
        let (p, m) = s.split_once('/')?;
        (!p.is_empty() && !m.is_empty()).then(|| Target {
            provider: p.to_string(),
            model: m.to_string(),
        })
    }

    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("[router] {key}: {message}")]
pub struct RouterError {
    pub key: String,
    pub message: String,
}

/// The validated router: every target parsed, at least one model.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub cheap: Option<Target>,
    pub strong: Option<Target>,
    pub rules: BTreeMap<TurnKind, String>,
    pub fallback: Vec<Target>,
    pub long_context_tokens: u64,
    pub retries_per_model: u32,
}

/// The model chosen for one turn, the models to try after it, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    pub kind: TurnKind,
    pub target: Target,
    pub reason: String,
    pub then: Vec<Target>,
}

fn target(key: &str, s: &str) -> Result<Target, RouterError> {
    Target::parse(s).ok_or_else(|| RouterError {
        key: key.into(),
        message: format!("{s:?} is not provider/model"),
    })
}

impl Plan {
    pub fn new(c: &RouterConfig) -> Result<Plan, RouterError> {
        let cheap = c.cheap.as_deref().map(|s| target("cheap", s)).transpose()?;
        let strong = c
            .strong
            .as_deref()
            .map(|s| target("strong", s))
            .transpose()?;
        for (k, v) in &c.rules {
            let key = format!("rules.{}", k.as_str());
            match v.as_str() {
                "cheap" if cheap.is_none() => {
                    return Err(RouterError {
                        key,
                        message: "says cheap but [router] cheap is not set".into(),
                    })
                }
                "strong" if strong.is_none() => {
                    return Err(RouterError {
                        key,
                        message: "says strong but [router] strong is not set".into(),
                    })
                }
                "cheap" | "strong" => {}
                other => {
                    target(&key, other)?;
                }
            }
        }
        let fallback = c
            .fallback
            .iter()
            .enumerate()
            .map(|(i, s)| target(&format!("fallback[{i}]"), s))
            .collect::<Result<Vec<_>, _>>()?;
        if cheap.is_none() && strong.is_none() && c.rules.is_empty() {
            return Err(RouterError {
                key: "cheap / strong".into(),
                message: "model = \"auto\" needs at least one of cheap or strong".into(),
            });
        }
        Ok(Plan {
            cheap,
            strong,
            rules: c.rules.clone(),
            fallback,
            long_context_tokens: c.long_context_tokens.unwrap_or(DEFAULT_LONG_CONTEXT_TOKENS),
            retries_per_model: c.retries_per_model.unwrap_or(DEFAULT_RETRIES_PER_MODEL),
        })
    }

    /// Every distinct target the plan can use.
    pub fn targets(&self) -> Vec<Target> {
        let mut v: Vec<Target> = self
            .cheap
            .iter()
            .chain(self.strong.iter())
            .cloned()
            .chain(self.rules.values().filter_map(|r| Target::parse(r)))
            .chain(self.fallback.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    fn side(&self, side: &str) -> Option<&Target> {
        match side {
            "cheap" => self.cheap.as_ref().or(self.strong.as_ref()),
            _ => self.strong.as_ref().or(self.cheap.as_ref()),
        }
    }

    /// The model for a turn of `kind`, with the reason, and the chain to
    /// try after it (the other side of the pair, then `fallback`).
    pub fn choose(&self, kind: TurnKind) -> Option<Choice> {
        let (first, reason) = match self.rules.get(&kind) {
            Some(r) if r == "cheap" || r == "strong" => (
                self.side(r)?.clone(),
                format!("turn kind {}: rule {} = {r}", kind.as_str(), kind.as_str()),
            ),
            Some(r) => (
                Target::parse(r)?,
                format!("turn kind {}: rule {} = {r}", kind.as_str(), kind.as_str()),
            ),
            None => {
                let side = kind.default_side();
                (
                    self.side(side)?.clone(),
                    format!("turn kind {}: no rule, default side {side}", kind.as_str()),
                )
            }
        };
        let mut then: Vec<Target> = Vec::new();
        for t in self
            .strong
            .iter()
            .chain(self.cheap.iter())
            .chain(self.fallback.iter())
        {
            if *t != first && !then.contains(t) {
                then.push(t.clone());
            }
        }
        Some(Choice {
            kind,
            target: first,
            reason,
            then,
        })
    }
}

/// Estimated tokens of a conversation (4 bytes a token: a cheap, stable
/// guess; the router only needs "long or not").
pub fn estimate_tokens(system: &str, messages: &[Message]) -> u64 {
    let bytes: usize = system.len() + messages.iter().map(Message::approx_bytes).sum::<usize>();
    (bytes / 4) as u64
}

/// Tools that change files or run commands (an "edit" turn follows them).
const WRITING_TOOLS: &[&str] = &["write_file", "edit_file", "apply_patch", "shell"];

/// The kind of turn `turn` (1-based) given the conversation so far.
pub fn classify(
    turn: u32,
    est_tokens: u64,
    long_context_tokens: u64,
    messages: &[Message],
) -> TurnKind {
    if est_tokens >= long_context_tokens {
        return TurnKind::LongContext;
    }
    if turn <= 1 {
        return TurnKind::Plan;
    }
    let last_calls = messages.iter().rev().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some(tool_calls),
        _ => None,
    });
    match last_calls {
        Some(calls)
            if calls
                .iter()
                .any(|c| WRITING_TOOLS.contains(&c.name.as_str())) =>
        {
            TurnKind::Edit
        }
        Some(_) => TurnKind::Review,
        None => TurnKind::Default,
    }
}

/// One model that failed before the one that answered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailedAttempt {
    pub target: Target,
    pub error: String,
}

/// What happened on one routed turn (recorded in the turn record).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Routed {
    pub choice: Choice,
    /// The model that answered (the choice, or a fallback).
    pub used: Target,
    pub failed: Vec<FailedAttempt>,
}

/// The configured router: one provider per target.
pub struct Router {
    pub plan: Plan,
    providers: Vec<(Target, Provider)>,
}

impl Router {
    pub fn new(plan: Plan, providers: Vec<(Target, Provider)>) -> Self {
        Router { plan, providers }
    }

    pub fn provider(&self, t: &Target) -> Option<&Provider> {
        self.providers.iter().find(|(k, _)| k == t).map(|(_, p)| p)
    }

    /// The provider the run starts on (for the thread record).
    pub fn first(&self, kind: TurnKind) -> Option<&Provider> {
        self.plan
            .choose(kind)
            .and_then(|c| self.provider(&c.target))
    }

    /// Complete one turn: the chosen model, then each model of the chain
    /// after a failure that allows it ([`ProviderError::allows_fallback`]:
    /// 429/5xx/connection failures once that model's own retries, which
    /// honour `Retry-After`, are used up). Any other error ends the turn.
    pub async fn complete(
        &self,
        choice: Choice,
        req: ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<(Completion, Routed), (ProviderError, Routed)> {
        let chain: Vec<Target> = std::iter::once(choice.target.clone())
            .chain(choice.then.iter().cloned())
            .collect();
        let mut failed = Vec::new();
        let mut last_err = None;
        for t in &chain {
            let Some(p) = self.provider(t) else { continue };
            match p.complete(req, on_text).await {
                Ok(c) => {
                    return Ok((
                        c,
                        Routed {
                            choice,
                            used: t.clone(),
                            failed,
                        },
                    ))
                }
                Err(e) if e.allows_fallback() => {
                    failed.push(FailedAttempt {
                        target: t.clone(),
                        error: e.to_string(),
                    });
                    last_err = Some(e);
                }
                Err(e) => {
                    return Err((
                        e,
                        Routed {
                            used: t.clone(),
                            choice,
                            failed,
                        },
                    ))
                }
            }
        }
        let used = chain
            .last()
            .cloned()
            .unwrap_or_else(|| choice.target.clone());
        let err = last_err.unwrap_or_else(|| ProviderError::Setup {
            provider: used.provider.clone(),
            message: "router: no configured model for this turn".into(),
        });
        Err((
            err,
            Routed {
                choice,
                used,
                failed,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

    fn cfg(toml_text: &str) -> RouterConfig {
        toml::from_str(toml_text).unwrap()
    }

    fn call(name: &str) -> Message {
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: name.into(),
                arguments: "{}".into(),
            }],
            reasoning: Vec::new(),
        }
    }

    #[test]
    fn classify_by_turn_and_last_tools() {
        let user = Message::User { text: "x".into() };
        assert_eq!(
            classify(1, 10, 100, std::slice::from_ref(&user)),
            TurnKind::Plan
        );
        assert_eq!(
            classify(2, 10, 100, &[user.clone(), call("edit_file")]),
            TurnKind::Edit
        );
        assert_eq!(
            classify(2, 10, 100, &[user.clone(), call("read_file")]),
            TurnKind::Review
        );
        assert_eq!(
            classify(1, 100, 100, std::slice::from_ref(&user)),
            TurnKind::LongContext
        );
        assert_eq!(classify(3, 10, 100, &[user]), TurnKind::Default);
    }

    #[test]
    fn rules_and_default_sides() {
        let p = Plan::new(&cfg(
            "cheap = \"a/m1\"\nstrong = \"b/m2\"\nfallback = [\"c/x/y\"]\n[rules]\nedit = \"strong\"\nreview = \"d/m4\"\n",
        ))
        .unwrap();
        let c = p.choose(TurnKind::Edit).unwrap();
        assert_eq!(c.target.label(), "b/m2");
        assert!(c.reason.contains("rule edit = strong"), "{}", c.reason);
        assert_eq!(
            c.then.iter().map(Target::label).collect::<Vec<_>>(),
            vec!["a/m1", "c/x/y"]
        );
        assert_eq!(p.choose(TurnKind::Default).unwrap().target.label(), "a/m1");
        assert_eq!(p.choose(TurnKind::Plan).unwrap().target.label(), "b/m2");
        assert_eq!(p.choose(TurnKind::Review).unwrap().target.label(), "d/m4");
        assert_eq!(p.targets().len(), 4);
    }

    #[test]
    fn bad_router_config_names_the_key() {
        let e = Plan::new(&cfg("cheap = \"nomodel\"\n")).unwrap_err();
        assert_eq!(e.key, "cheap");
        let e = Plan::new(&cfg("strong = \"a/b\"\n[rules]\nplan = \"cheap\"\n")).unwrap_err();
        assert_eq!(e.key, "rules.plan");
        assert!(Plan::new(&cfg("")).is_err());
        assert!(toml::from_str::<RouterConfig>("[rules]\nlunch = \"a/b\"\n").is_err());
    }
}
