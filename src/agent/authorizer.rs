//! The seam between the loop and the authorization pipeline.
//!
//! The loop asks an [`Authorizer`] about every admitted tool call and then
//! applies the headless rules itself: in `exec` nobody can answer a
//! question, so an `Ask` becomes "no response" (not run) unless `--auto`,
//! which approves it but keeps the sandbox. The production authorizer is an
//! adapter over `crate::authz` (the nine gates) once that lands; until then
//! the CLI uses [`BaselineAuthorizer`], which applies only the tool baseline
//! (gate 4) and deliberately has no command-danger classifier of its own.

use crate::policy::SandboxMode;
use serde::Serialize;
use std::path::PathBuf;

/// What the gates said. Ordered so "strictest wins" is `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// Who produced a decision (the spec's vocabulary, `AUTHORIZATION.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    You,
    SessionRule,
    Posture,
    Rule,
    Hook,
    Floor,
    Repository,
    Sandbox,
}

impl DecidedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::You => "you",
            DecidedBy::SessionRule => "session rule",
            DecidedBy::Posture => "posture",
            DecidedBy::Rule => "rule",
            DecidedBy::Hook => "hook",
            DecidedBy::Floor => "floor",
            DecidedBy::Repository => "repository",
            DecidedBy::Sandbox => "sandbox",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthDecision {
    pub decision: Decision,
    pub decided_by: DecidedBy,
    /// The gate number (1–9) that produced the decision.
    pub gate: u8,
    pub reason: String,
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
    pub sandbox: SandboxMode,
    /// `--auto`: questions are approved (the sandbox stays).
    pub auto: bool,
    /// Always true in `exec`: nobody can answer a question.
    pub headless: bool,
}

/// Gates 1–8 for one call (gate 9, the sandbox, is the tools and the host).
pub trait Authorizer: Send + Sync {
    fn authorize(&self, call: &ToolCallRequest, ctx: &TurnContext) -> AuthDecision;
}

/// Tools that only read.
pub const READ_TOOLS: &[&str] = &["read_file", "list_dir", "search"];
/// Tools that write files (path checks happen in-process, gate 9).
pub const WRITE_TOOLS: &[&str] = &["write_file", "edit_file", "apply_patch"];

/// The interim authorizer: the tool baseline of the Ask posture only.
/// Reads run; file edits run (the in-process sandbox checks their paths);
/// every shell command asks, because proving a command read-only is the
/// authorization pipeline's job and this stand-in does not guess.
pub struct BaselineAuthorizer;

impl Authorizer for BaselineAuthorizer {
    fn authorize(&self, call: &ToolCallRequest, ctx: &TurnContext) -> AuthDecision {
        let tool = call.tool.as_str();
        let allow = |reason: &str| AuthDecision {
            decision: Decision::Allow,
            decided_by: DecidedBy::Posture,
            gate: 4,
            reason: reason.to_string(),
        };
        if ctx.sandbox == SandboxMode::DangerFullAccess && ctx.auto {
            return allow("full access: nothing asks");
        }
        if READ_TOOLS.contains(&tool) {
            allow("read-only tool")
        } else if WRITE_TOOLS.contains(&tool) {
            allow("file edits apply without asking; the sandbox checks each path")
        } else {
            AuthDecision {
                decision: Decision::Ask,
                decided_by: DecidedBy::Posture,
                gate: 4,
                reason: format!("{tool} needs approval (not proven read-only)"),
            }
        }
    }
}

/// A test authorizer driven by an explicit table of (tool, command
/// substring) → decision; the first match wins, else the fallback.
pub struct TableAuthorizer {
    pub rules: Vec<(String, Option<String>, AuthDecision)>,
    pub fallback: AuthDecision,
}

impl Authorizer for TableAuthorizer {
    fn authorize(&self, call: &ToolCallRequest, _ctx: &TurnContext) -> AuthDecision {
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

/// Apply the headless rules: `Ask` → approved by `--auto` (sandbox kept),
/// otherwise "no response" and not run.
pub fn resolve_headless(d: &AuthDecision, ctx: &TurnContext) -> Resolution {
    match d.decision {
        Decision::Allow => Resolution {
            run: true,
            outcome: "allow",
            decided_by: d.decided_by,
            reason: d.reason.clone(),
        },
        Decision::Deny => Resolution {
            run: false,
            outcome: "deny",
            decided_by: d.decided_by,
            reason: d.reason.clone(),
        },
        Decision::Ask if ctx.auto => Resolution {
            run: true,
            outcome: "allow",
            decided_by: DecidedBy::Posture,
            reason: format!("{} — approved by --auto (sandbox {} kept)", d.reason, ctx.sandbox),
        },
        Decision::Ask => Resolution {
            run: false,
            outcome: "no_response",
            decided_by: d.decided_by,
            reason: format!(
                "{} — nobody can answer in a headless run (no response); rerun with --auto to approve",
                d.reason
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(auto: bool) -> TurnContext {
        TurnContext {
            workspace: "/w".into(),
            sandbox: SandboxMode::WorkspaceWrite,
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
        let d = BaselineAuthorizer.authorize(&call("shell"), &ctx(false));
        assert_eq!(d.decision, Decision::Ask);
        let r = resolve_headless(&d, &ctx(false));
        assert!(!r.run);
        assert_eq!(r.outcome, "no_response");
        let r = resolve_headless(&d, &ctx(true));
        assert!(r.run);
        assert!(r.reason.contains("workspace-write kept"), "{}", r.reason);
    }

    #[test]
    fn deny_is_never_released_by_auto() {
        let d = AuthDecision {
            decision: Decision::Deny,
            decided_by: DecidedBy::Floor,
            gate: 6,
            reason: "credential upload".into(),
        };
        let r = resolve_headless(&d, &ctx(true));
        assert!(!r.run);
        assert_eq!(r.decided_by, DecidedBy::Floor);
    }

    #[test]
    fn reads_and_edits_are_allowed_by_baseline() {
        for t in [
            "read_file",
            "list_dir",
            "search",
            "write_file",
            "edit_file",
            "apply_patch",
        ] {
            assert_eq!(
                BaselineAuthorizer.authorize(&call(t), &ctx(false)).decision,
                Decision::Allow,
                "{t}"
            );
        }
    }

    #[test]
    fn table_authorizer_matches_command_substring() {
        let deny = AuthDecision {
            decision: Decision::Deny,
            decided_by: DecidedBy::Rule,
            gate: 5,
            reason: "r".into(),
        };
        let t = TableAuthorizer {
            rules: vec![("shell".into(), Some("rm -rf".into()), deny.clone())],
            fallback: AuthDecision {
                decision: Decision::Allow,
                decided_by: DecidedBy::Posture,
                gate: 4,
                reason: "ok".into(),
            },
        };
        let mut c = call("shell");
        assert_eq!(t.authorize(&c, &ctx(true)).decision, Decision::Allow);
        c.command = Some("sh -c 'rm -rf /'".into());
        assert_eq!(t.authorize(&c, &ctx(true)), deny);
    }
}
