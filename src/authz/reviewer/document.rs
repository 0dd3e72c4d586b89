//! The review document: the one user message the reviewer model gets.
//!
//! It holds the proposed call as the call itself carries it (tool, command
//! or paths and the change, arguments of other tools, cwd) and what the
//! deterministic gates observed (why it is a question, the sandbox it
//! would run in, network, posture, whether the workspace is trusted).
//! Built only from the typed call and verdict, it cannot hold the
//! transcript, the model's own text, earlier tool output or file contents:
//! nothing is read from disk and no conversation is passed in, so a
//! prompt-injection string the worker read does not reach the reviewer
//! unless the worker puts it into the call it proposes (which is then what
//! is reviewed).
//!
//! The encoded document is bounded by [`MAX_DOCUMENT_BYTES`] (the whole
//! document, diff included): a larger one is not sent, and the review is
//! [`ReviewVerdict::Unavailable`].

use super::answer::ReviewVerdict;
use crate::authz::call::ToolCall;
use crate::authz::posture::Posture;
use crate::authz::verdict::{DecidedBy, Verdict};
use crate::catalogue::ToolKind;
use crate::net::policy::NetworkMode;
use crate::policy::SandboxMode;
use serde::Serialize;
use std::path::Path;

/// The largest review document sent (64 KiB, the whole encoded JSON).
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// What identifies the document's shape to the reviewer (and to tests).
pub const DOCUMENT_KIND: &str = "codewhale.auto_review.v1";

/// The proposed call, as the call carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProposedCall {
    pub tool: String,
    /// Shell: the command line as the shell would get it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// File tools: the paths written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// File tools: the change the call carries (patch, new content,
    /// replaced → replacement), never the file as it is on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Other tools (MCP, sub-agents): the arguments as the model sent them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    pub cwd: String,
}

/// What the deterministic layer observed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Observations {
    /// Why the gates asked (gate 4's reason: "`cargo run` is not read-only").
    pub why_review: String,
    /// Who asked (`posture`, …).
    pub asked_by: DecidedBy,
    /// The gate that asked.
    pub gate: u8,
    /// The sandbox the call would run in.
    pub sandbox: Option<SandboxMode>,
    /// The network the sandboxed call would have.
    pub network: NetworkMode,
    /// `Work + Auto-Review`.
    pub posture: String,
    /// Whether the workspace's project configuration is trusted.
    pub workspace_trusted: bool,
}

/// The whole document (the user message, encoded by [`ReviewDocument::encode`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReviewDocument {
    pub kind: &'static str,
    pub proposed_call: ProposedCall,
    pub observations: Observations,
}

/// Everything a document is built from: typed values only.
#[derive(Clone, Copy, Debug)]
pub struct ReviewInputs<'a> {
    pub call: &'a ToolCall,
    /// The gates' verdict: an open ordinary question.
    pub verdict: &'a Verdict,
    pub posture: &'a Posture,
    pub network: NetworkMode,
    pub workspace: &'a Path,
    pub workspace_trusted: bool,
}

fn arg<'a>(args: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(|v| v.as_str())
}

/// The change a file tool carries, from its own arguments.
fn change_of(args: &serde_json::Value) -> Option<String> {
    if let Some(p) = arg(args, "patch").or_else(|| arg(args, "input")) {
        return Some(p.to_string());
    }
    if let (Some(old), Some(new)) = (arg(args, "old_string"), arg(args, "new_string")) {
        let minus: Vec<String> = old.lines().map(|l| format!("-{l}")).collect();
        let plus: Vec<String> = new.lines().map(|l| format!("+{l}")).collect();
        return Some(format!("{}\n{}", minus.join("\n"), plus.join("\n")));
    }
    arg(args, "content").map(|c| {
        c.lines()
            .map(|l| format!("+{l}"))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

impl ReviewDocument {
    /// The document for one open question.
    pub fn build(i: &ReviewInputs<'_>) -> ReviewDocument {
        let call = i.call;
        let kind = crate::catalogue::kind(&call.tool);
        let cwd = if call.cwd.as_os_str().is_empty() {
            i.workspace
        } else {
            call.cwd.as_path()
        };
        let mut proposed = ProposedCall {
            tool: call.tool.clone(),
            command: None,
            paths: Vec::new(),
            diff: None,
            arguments: None,
            cwd: cwd.display().to_string(),
        };
        match kind {
            Some(ToolKind::Shell) => proposed.command = call.command_line(),
            Some(ToolKind::Write) => {
                proposed.paths = call.target_paths();
                proposed.diff = change_of(&call.args);
            }
            _ => proposed.arguments = Some(call.args.clone()),
        }
        let v = i.verdict;
        ReviewDocument {
            kind: DOCUMENT_KIND,
            proposed_call: proposed,
            observations: Observations {
                why_review: v.reason.clone(),
                asked_by: v.asked_by().unwrap_or(v.decided_by),
                gate: v.reported_gate().number(),
                sandbox: v.sandbox,
                network: i.network,
                posture: i.posture.label(),
                workspace_trusted: i.workspace_trusted,
            },
        }
    }

    /// The user message: the compact JSON of the document, or the
    /// unavailable verdict when it is over [`MAX_DOCUMENT_BYTES`] (no call
    /// is made).
    pub fn encode(&self) -> Result<String, ReviewVerdict> {
        let text = serde_json::to_string(self)
            .map_err(|e| ReviewVerdict::unavailable(format!("review document: {e}")))?;
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(ReviewVerdict::unavailable(format!(
                "input too large: the review document is {} bytes, over the {} KiB bound (not sent)",
                text.len(),
                MAX_DOCUMENT_BYTES / 1024
            )));
        }
        Ok(text)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::authz::posture::{Approval, Mode};
    use crate::authz::verdict::{Decision, Gate};
    use serde_json::json;

    fn question() -> Verdict {
        let mut v = Verdict::decided(
            Decision::Ask,
            DecidedBy::Posture,
            Gate::Baseline,
            "`cargo run` is not read-only",
        );
        v.sandbox = Some(SandboxMode::WorkspaceWrite);
        v.to_reviewer = true;
        v
    }

    fn doc(call: &ToolCall) -> ReviewDocument {
        let v = question();
        let p = Posture::new(Mode::Work, Approval::AutoReview);
        ReviewDocument::build(&ReviewInputs {
            call,
            verdict: &v,
            posture: &p,
            network: NetworkMode::Off,
            workspace: Path::new("/w"),
            workspace_trusted: false,
        })
    }

    #[test]
    fn a_shell_call_is_its_command_and_the_observations() {
        let d = doc(&ToolCall::shell("cargo run --example x", "/w"));
        let j: serde_json::Value = serde_json::from_str(&d.encode().unwrap()).unwrap();
        assert_eq!(
            j,
            json!({
                "kind": DOCUMENT_KIND,
                "proposed_call": {"tool": "shell", "command": "cargo run --example x", "cwd": "/w"},
                "observations": {
                    "why_review": "`cargo run` is not read-only",
                    "asked_by": "posture",
                    "gate": 4,
                    "sandbox": "workspace-write",
                    "network": "off",
                    "posture": "Work + Auto-Review",
                    "workspace_trusted": false
                }
            })
        );
    }

    #[test]
    fn a_write_is_its_paths_and_the_change_it_carries() {
        let c = ToolCall::new(
            "edit_file",
            json!({"path": "/etc/x", "old_string": "a", "new_string": "b"}),
            "/w",
        );
        let d = doc(&c);
        assert_eq!(d.proposed_call.paths, ["/etc/x"]);
        assert_eq!(d.proposed_call.diff.as_deref(), Some("-a\n+b"));
        assert!(d.proposed_call.arguments.is_none());
        let w = doc(&ToolCall::new(
            "write_file",
            json!({"path": "/tmp/n", "content": "one\ntwo"}),
            "/w",
        ));
        assert_eq!(w.proposed_call.diff.as_deref(), Some("+one\n+two"));
    }

    #[test]
    fn other_tools_carry_their_arguments() {
        let c = ToolCall::new("mcp__gh__create_issue", json!({"title": "t"}), "");
        let d = doc(&c);
        assert_eq!(d.proposed_call.arguments, Some(json!({"title": "t"})));
        assert_eq!(d.proposed_call.cwd, "/w", "an empty cwd is the workspace");
    }

    #[test]
    fn the_bound_counts_the_whole_document() {
        let small = "x".repeat(MAX_DOCUMENT_BYTES - 1024);
        let c = ToolCall::new("write_file", json!({"path": "a", "content": small}), "/w");
        assert!(doc(&c).encode().is_ok(), "positive control");
        let big = "x".repeat(MAX_DOCUMENT_BYTES);
        let c = ToolCall::new("write_file", json!({"path": "a", "content": big}), "/w");
        match doc(&c).encode() {
            Err(ReviewVerdict::Unavailable { reason }) => {
                assert!(reason.contains("64 KiB"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
