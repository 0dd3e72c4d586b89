//! The seam between the loop and the authorization pipeline.
//!
//! The loop asks an [`Authorizer`] about every admitted tool call and then
//! applies the headless rules itself ([`resolve_headless`]): in `exec`
//! nobody can answer a question, so an `Ask` becomes "no response" (not
//! run) unless `--auto`, which approves ordinary and rule questions but
//! keeps the sandbox and never releases a *hold* (safety floor, hook ask,
//! repository question) or a deny. The production authorizer is
//! [`super::authz_adapter::PipelineAuthorizer`] over `crate::authz`;
//! [`TableAuthorizer`] is for tests of the loop.

use crate::policy::SandboxMode;
use serde::Serialize;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

/// What the gates said: the pipeline's own ordered decision (strictest
/// wins is `max`).
pub use crate::authz::Decision;

/// Who produced a decision: the pipeline's own vocabulary (with
/// `NoResponse`, which only this loop sets).
pub use crate::authz::DecidedBy;

/// What the gates said about one call, before the headless rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthDecision {
    pub decision: Decision,
    /// For an `Ask`: who asked (the question is still open).
    pub decided_by: DecidedBy,
    /// The gate number (1–9) that produced the decision.
    pub gate: u8,
    pub reason: String,
    /// For an `Ask`: a hold, released only by a person (never by `--auto`).
    pub hold: bool,
    /// The sandbox mode gate 9 must apply if the call runs (`None`: the
    /// run's own mode; the loop refuses to run a call whose required mode
    /// differs from the one its tools were built with).
    pub sandbox: Option<SandboxMode>,
    /// The gate-by-gate trace, one line per gate (empty when not kept).
    pub trace: Vec<String>,
}

impl AuthDecision {
    /// A decision with no hold, no sandbox requirement and no trace.
    pub fn new(decision: Decision, decided_by: DecidedBy, gate: u8, reason: &str) -> Self {
        AuthDecision {
            decision,
            decided_by,
            gate,
            reason: reason.to_string(),
            hold: false,
            sandbox: None,
            trace: Vec::new(),
        }
    }
}

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
}

/// The future an [`Authorizer`] returns (boxed so the trait stays usable as
/// `dyn Authorizer`; hooks run asynchronously before the gates).
pub type AuthFuture<'a> = Pin<Box<dyn Future<Output = AuthDecision> + Send + 'a>>;

/// Gates 1–8 for one call (gate 9, the sandbox, is the tools and the host).
pub trait Authorizer: Send + Sync {
    fn authorize<'a>(&'a self, call: &'a ToolCallRequest, ctx: &'a TurnContext) -> AuthFuture<'a>;
}

/// A test authorizer driven by an explicit table of (tool, command
/// substring) → decision; the first match wins, else the fallback.
pub struct TableAuthorizer {
    pub rules: Vec<(String, Option<String>, AuthDecision)>,
    pub fallback: AuthDecision,
}

impl TableAuthorizer {
    fn lookup(&self, call: &ToolCallRequest) -> AuthDecision {
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
    fn authorize<'a>(&'a self, call: &'a ToolCallRequest, _ctx: &'a TurnContext) -> AuthFuture<'a> {
        let d = self.lookup(call);
        Box::pin(async move { d })
    }
}

/// What the loop does with a decision in a headless run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// Whether the call runs.
    pub run: bool,
    /// `allow`, `deny` or `no_response`.
    pub outcome: &'static str,
    pub decided_by: DecidedBy,
    pub reason: String,
}

/// Apply the headless rules: `Ask` → approved by `--auto` (sandbox kept)
/// unless it is a hold, which `--auto` never releases (not run, decided by
/// whoever held it); without `--auto` every question gets "no response".
pub fn resolve_headless(d: &AuthDecision, ctx: &TurnContext) -> Resolution {
    let r = |run, outcome, decided_by, reason: String| Resolution {
        run,
        outcome,
        decided_by,
        reason,
    };
    match d.decision {
        Decision::Allow => r(true, "allow", d.decided_by, d.reason.clone()),
        Decision::Deny => r(false, "deny", d.decided_by, d.reason.clone()),
        Decision::Ask if ctx.auto && d.hold => r(
            false,
            "deny",
            d.decided_by,
            format!(
                "{} — held by {}; --auto never releases a hold (only a person can)",
                d.reason,
                d.decided_by.as_str()
            ),
        ),
        Decision::Ask if ctx.auto => r(
            true,
            "allow",
            DecidedBy::Posture,
            match d.sandbox {
                Some(m) => format!("{} — approved by --auto (sandbox {m} kept)", d.reason),
                None => format!("{} — approved by --auto", d.reason),
            },
        ),
        Decision::Ask => r(
            false,
            "no_response",
            DecidedBy::NoResponse,
            format!(
                "{} (asked by {}) — nobody can answer in a headless run (no response); rerun with --auto to approve",
                d.reason,
                d.decided_by.as_str()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(auto: bool) -> TurnContext {
        TurnContext {
            workspace: "/w".into(),
            auto,
            headless: true,
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
        let d = AuthDecision::new(
            Decision::Ask,
            DecidedBy::Posture,
            4,
            "`touch x` is not read-only",
        );
        // Gate 9 named the policy's mode; the note repeats it.
        let mut d = d;
        d.sandbox = Some(SandboxMode::WorkspaceWrite);
        let r = resolve_headless(&d, &ctx(false));
        assert!(!r.run);
        assert_eq!(r.outcome, "no_response");
        assert_eq!(r.decided_by, DecidedBy::NoResponse);
        assert!(r.reason.contains("asked by posture"), "{}", r.reason);
        let r = resolve_headless(&d, &ctx(true));
        assert!(r.run);
        assert_eq!(r.decided_by, DecidedBy::Posture);
        assert!(r.reason.contains("workspace-write kept"), "{}", r.reason);
    }

    #[test]
    fn auto_never_releases_a_hold() {
        let mut d = AuthDecision::new(Decision::Ask, DecidedBy::Floor, 6, "credential upload");
        d.hold = true;
        let r = resolve_headless(&d, &ctx(true));
        assert!(!r.run);
        assert_eq!(r.outcome, "deny");
        assert_eq!(r.decided_by, DecidedBy::Floor);
        // Positive control: the same question without the hold flag is approved.
        d.hold = false;
        assert!(resolve_headless(&d, &ctx(true)).run);
    }

    #[test]
    fn deny_is_never_released_by_auto() {
        let d = AuthDecision::new(Decision::Deny, DecidedBy::Floor, 6, "credential upload");
        let r = resolve_headless(&d, &ctx(true));
        assert!(!r.run);
        assert_eq!(r.decided_by, DecidedBy::Floor);
    }

    #[test]
    fn deciders_use_the_spec_vocabulary() {
        assert_eq!(DecidedBy::NoResponse.as_str(), "no response");
        assert_eq!(DecidedBy::SessionRule.as_str(), "session rule");
    }

    #[tokio::test]
    async fn table_authorizer_matches_command_substring() {
        let deny = AuthDecision::new(Decision::Deny, DecidedBy::Rule, 5, "r");
        let t = TableAuthorizer {
            rules: vec![("shell".into(), Some("rm -rf".into()), deny.clone())],
            fallback: AuthDecision::new(Decision::Allow, DecidedBy::Posture, 4, "ok"),
        };
        let mut c = call("shell");
        assert_eq!(t.authorize(&c, &ctx(true)).await.decision, Decision::Allow);
        c.command = Some("sh -c 'rm -rf /'".into());
        assert_eq!(t.authorize(&c, &ctx(true)).await, deny);
    }
}
