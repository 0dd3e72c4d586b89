//! The seam between the loop and the authorization pipeline.
//!
//! The loop asks an [`Authorizer`] about every admitted tool call and gets
//! the pipeline's own [`Verdict`] back, already answered the headless way
//! at gate 8 ([`crate::authz::verdict::headless_answer`]): in `exec`
//! nobody can answer a question, so it gets "no response" (not run) unless
//! `--auto`, which approves ordinary and rule questions but keeps the
//! sandbox and never releases a *hold* (safety floor, hook ask, repository
//! question) or a deny. One shape carries the decision from the gates to
//! the stream and the session record; nothing turns an ask into a deny and
//! back. The production authorizer is
//! [`super::authz_adapter::PipelineAuthorizer`] over `crate::authz`;
//! [`TableAuthorizer`] is for tests of the loop.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

/// What the gates said: the pipeline's own ordered decision (strictest
/// wins is `max`).
pub use crate::authz::Decision;

/// Who produced a decision: the pipeline's own vocabulary.
pub use crate::authz::DecidedBy;

/// The pipeline's verdict, the one decision shape of the loop.
pub use crate::authz::{AskKind, Gate, Verdict};

/// One tool call as the gates see it.
#[derive(Clone, Debug)]
pub struct ToolCallRequest {
    pub call_id: String,
    pub tool: String,
    pub args: serde_json::Value,
    /// For `shell`: the command text as the shell would get it.
    pub command: Option<String>,
}

/// The turn's posture.
#[derive(Clone, Debug)]
pub struct TurnContext {
    pub workspace: PathBuf,
    /// `--auto`: questions are approved (the sandbox stays).
    pub auto: bool,
    /// Always true in `exec`: nobody can answer a question.
    pub headless: bool,
    /// The sub-agent making the call (`None`: the request's own agent):
    /// its question is asked on the parent's thread as `agent:<id>`.
    pub agent: Option<crate::agent::subagent::AgentRef>,
}

/// The future an [`Authorizer`] returns (boxed so the trait stays usable as
/// `dyn Authorizer`; hooks run asynchronously before the gates).
pub type AuthFuture<'a> = Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>;

/// Gates 1–8 for one call (gate 9, the sandbox, is the tools and the host).
/// In a headless run the verdict is final: never a pending `Ask`.
pub trait Authorizer: Send + Sync {
    fn authorize<'a>(&'a self, call: &'a ToolCallRequest, ctx: &'a TurnContext) -> AuthFuture<'a>;

    /// The posture the gates decide under (`None`: an authorizer without
    /// one, such as a test table: such a run offers no sub-agents).
    fn posture(&self) -> Option<crate::authz::Posture> {
        None
    }

    /// The same gates (rules, hooks, session grants shared) for a child
    /// under its clamped `posture` and sandbox mode.
    fn for_child(
        &self,
        _posture: crate::authz::Posture,
        _sandbox: crate::policy::SandboxMode,
    ) -> Option<Box<dyn Authorizer>> {
        None
    }
}

/// A test authorizer driven by an explicit table of (tool, command
/// substring) → what gates 1–7 say; the first match wins, else the
/// fallback. A question is then answered by the same headless rule as the
/// pipeline's gate 8.
pub struct TableAuthorizer {
    pub rules: Vec<(String, Option<String>, Verdict)>,
    pub fallback: Verdict,
}

impl TableAuthorizer {
    fn lookup(&self, call: &ToolCallRequest) -> Verdict {
        self.rules
            .iter()
            .find(|(tool, needle, _)| {
                *tool == call.tool
                    && needle.as_ref().is_none_or(|n| {
                        call.command
                            .as_deref()
                            .is_some_and(|c| c.contains(n.as_str()))
                    })
            })
            .map(|(_, _, d)| d.clone())
            .unwrap_or_else(|| self.fallback.clone())
    }
}

impl Authorizer for TableAuthorizer {
    fn authorize<'a>(&'a self, call: &'a ToolCallRequest, ctx: &'a TurnContext) -> AuthFuture<'a> {
        let mut v = self.lookup(call);
        if ctx.headless {
            v = v.answer_headless(ctx.auto);
        }
        Box::pin(async move { v })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ctx(auto: bool) -> TurnContext {
        TurnContext {
            workspace: "/w".into(),
            auto,
            headless: true,
            agent: None,
        }
    }

    fn call(tool: &str) -> ToolCallRequest {
        ToolCallRequest {
            call_id: "c".into(),
            tool: tool.into(),
            args: serde_json::json!({}),
            command: Some("ls".into()),
        }
    }

    #[test]
    fn decisions_are_ordered() {
        assert!(Decision::Allow < Decision::Ask && Decision::Ask < Decision::Deny);
        assert_eq!(Decision::Allow.max(Decision::Deny), Decision::Deny);
    }

    #[test]
    fn headless_ask_is_no_response_unless_auto() {
        let mut d = Verdict::decided(
            Decision::Ask,
            DecidedBy::Posture,
            Gate::Baseline,
            "`touch x` is not read-only",
        );
        d.sandbox = Some(crate::policy::SandboxMode::WorkspaceWrite);
        let r = d.clone().answer_headless(false);
        assert!(!r.is_allowed());
        assert_eq!(r.outcome(), "no_response");
        assert_eq!(r.decided_by, DecidedBy::NoResponse);
        assert!(r.reason.contains("asked by posture"), "{}", r.reason);
        let r = d.answer_headless(true);
        assert!(r.is_allowed());
        assert_eq!(r.decided_by, DecidedBy::Posture);
        assert!(r.reason.contains("workspace-write kept"), "{}", r.reason);
    }

    #[test]
    fn auto_never_releases_a_hold() {
        let mut d = Verdict::decided(
            Decision::Ask,
            DecidedBy::Floor,
            Gate::Floor,
            "credential upload",
        );
        d.ask_kind = Some(AskKind::Hold);
        let r = d.clone().answer_headless(true);
        assert!(!r.is_allowed());
        assert_eq!(r.outcome(), "deny");
        assert_eq!(r.decided_by, DecidedBy::Floor);
        // Positive control: the same question without the hold flag is approved.
        d.ask_kind = Some(AskKind::Ordinary);
        assert!(d.answer_headless(true).is_allowed());
    }

    #[test]
    fn deny_is_never_released_by_auto() {
        let d = Verdict::decided(
            Decision::Deny,
            DecidedBy::Floor,
            Gate::Floor,
            "credential upload",
        );
        let r = d.answer_headless(true);
        assert!(!r.is_allowed());
        assert_eq!(r.decided_by, DecidedBy::Floor);
    }

    #[test]
    fn deciders_use_the_spec_vocabulary() {
        assert_eq!(DecidedBy::NoResponse.as_str(), "no response");
        assert_eq!(DecidedBy::SessionRule.as_str(), "session rule");
    }

    #[tokio::test]
    async fn table_authorizer_matches_command_substring() {
        let deny = Verdict::decided(Decision::Deny, DecidedBy::Rule, Gate::Rules, "r");
        let t = TableAuthorizer {
            rules: vec![("shell".into(), Some("rm -rf".into()), deny.clone())],
            fallback: Verdict::decided(Decision::Allow, DecidedBy::Posture, Gate::Baseline, "ok"),
        };
        let mut c = call("shell");
        assert_eq!(t.authorize(&c, &ctx(true)).await.decision, Decision::Allow);
        c.command = Some("sh -c 'rm -rf /'".into());
        assert_eq!(t.authorize(&c, &ctx(true)).await, deny);
    }
}
