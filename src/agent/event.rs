//! What the agent loop reports: one typed value per step.
//!
//! The loop builds each [`Event`] once. Everything else is a projection of
//! that value, matched by variant, never by a key read back from JSON:
//!
//! * stream-json is its serde form (`type` plus the fields documented in
//!   docs/EXEC.md), written by [`super::output::Emitter`];
//! * the text format's progress line is [`Event::progress_line`];
//! * the session record is [`Event::record`] (the loop appends it, then
//!   emits the event: [`super::run`]'s `emit`);
//! * the runtime's items and events (and so the TUI, ACP and the web
//!   client) come from [`super::output::EventTap`], which receives the
//!   typed value.
//!
//! The enforcement a command ran under stays typed to the end: the label
//! and the egress proxy's line are separate fields of [`EnforcementLabel`];
//! only the stream-json form joins them into its documented
//! `enforcement` string, and nothing parses that string back.

pub use super::tools::EnforcementLabel;
use super::tools::NetworkConnection;
use crate::host::enforcement::EnforcementSummary;
use crate::provider::cost::Price;
use crate::session::{self, record::McpCall};
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;

/// One step of a run, as the loop reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A streamed piece of the answer (stream-json only; the tap gets it
    /// through `content`).
    Content { text: String },
    /// The run's set-up, first.
    Metadata(Box<Metadata>),
    /// Input steered in while the turn ran, sent with the next request.
    Steered { turn: u32, chars: usize },
    /// The router's choice for a request.
    ModelChoice(ModelChoice),
    /// One request's usage and cost.
    TurnUsage(TurnUsage),
    /// The model asked for a tool.
    ToolUse(ToolUse),
    /// The gates' final verdict on a call.
    Approval(Box<Approval>),
    /// Something the sandbox refused: a path, or a connection the egress
    /// proxy refused.
    SandboxDenied(SandboxEvent),
    /// A connection the egress proxy allowed.
    SandboxAllowed(SandboxEvent),
    /// A call's result.
    ToolResult(Box<ToolResult>),
    /// The model's reasoning for a request, as readable text (shown
    /// collapsed by the TUI; never in receipts). The session keeps the raw
    /// parts in its own `reasoning` record.
    Reasoning {
        turn: u32,
        chars: usize,
        text: String,
    },
    /// The loop compacted the conversation before a request.
    Compaction(Box<Compaction>),
    /// An ordinary question went to Auto-Review's model reviewer.
    AutoReviewRequested(AutoReviewRequested),
    /// The reviewer answered (or gave no usable answer: `unavailable`).
    AutoReviewDecided(Box<AutoReviewDecided>),
    /// The breaker tripped: the turn stops, the posture drops to Ask.
    AutoReviewPaused(AutoReviewPaused),
    /// A sub-agent started (its clamped posture is what it runs under).
    SubagentStarted(Box<SubagentStarted>),
    /// A sub-agent finished; its result went back to the parent's call.
    SubagentCompleted(Box<SubagentCompleted>),
    /// One step of a sub-agent's own run, on its parent's stream: the
    /// child's event as it is, with the child's id (so one stream, one
    /// event log, tells the whole tree).
    Subagent { agent_id: String, event: Box<Event> },
    /// The model replaced its to-do list (the `todo` tool): the whole list
    /// as it now stands (runtime `todo.updated`).
    TodoUpdated(TodoUpdated),
    /// Why the run stopped, when it did not complete.
    Error(ErrorEvent),
    /// The end of the run.
    Done(Done),
}

/// `subagent_started`: a child of the call `parent_call_id`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubagentStarted {
    pub agent_id: String,
    pub parent_call_id: String,
    pub role: crate::agent::subagent::Role,
    /// The request's agent is depth 0.
    pub depth: u32,
    /// The clamp's result: what every call of the child is bounded by.
    pub posture: crate::agent::subagent::EffectivePosture,
}

/// `todo_updated`: the list after a `todo` call (its serde form is the
/// runtime's `todo.updated` payload, docs/RUNTIME_API.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TodoUpdated {
    pub call_id: String,
    pub items: Vec<super::tools::todo::TodoItem>,
}

/// `subagent_completed`: how a child ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubagentCompleted {
    pub agent_id: String,
    pub parent_call_id: String,
    pub role: crate::agent::subagent::Role,
    /// `completed`, `failed`, `denied`, `interrupted` or `limit`.
    pub status: String,
    pub duration_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Files the child's file tools wrote (commands' changes are in the
    /// parent's snapshot of the call, not listed here).
    pub files_changed: Vec<PathBuf>,
    /// Why it did not complete (a refusal, an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The `metadata` event: the run's provider, posture, tools and files.
/// Sub-documents other modules own (instructions, MCP status, snapshots,
/// the config report) are carried as their own serialised form: no
/// projection reads inside them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metadata {
    pub provider: String,
    pub model: String,
    pub wire: Option<crate::provider::registry::WireFormat>,
    pub routing: bool,
    pub instructions: Vec<Value>,
    pub approval: String,
    pub sandbox: String,
    /// The requested posture in words (each tool result names what was
    /// really enforced).
    pub enforcement: String,
    pub tools: Vec<&'static str>,
    pub mcp_tools: Vec<String>,
    pub mcp_servers: Value,
    /// The skills listed in the system prompt (names only; `truncated`
    /// and `omitted` when the cap left some out). `None`: no skill tool.
    pub skills: Option<crate::skills::listing::ListingInfo>,
    /// The memory file in the system prompt (`truncated` when cut).
    /// `None`: memory is off.
    pub memory: Option<crate::memory::Loaded>,
    pub agents_md: Option<PathBuf>,
    pub thread: String,
    pub session_file: PathBuf,
    pub snapshots: Value,
    pub config: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelChoice {
    pub turn: u32,
    pub kind: String,
    pub provider: String,
    pub model: String,
    pub reason: String,
    pub used_provider: String,
    pub used_model: String,
    /// Models that failed first: `[{target: {provider, model}, error}]`.
    pub failed: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnUsage {
    pub turn: u32,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    /// `None`: the wire format does not report them.
    pub reasoning_tokens: Option<u64>,
    /// `false`: the provider reported no usage (the counts are 0, the cost
    /// unknown).
    pub usage_reported: bool,
    pub price: Option<Price>,
    /// `None`: unknown (never 0).
    pub cost_usd: Option<f64>,
    pub cost: String,
    /// Auto-Review's reviewer made this request (not the turn's model:
    /// it counts in the usage, never as the turn's model or context).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reviewer: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolUse {
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpCall>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Approval {
    pub call_id: String,
    pub tool: String,
    /// What the session records: decision, outcome, who decided, the gate
    /// and the reason.
    #[serde(flatten)]
    pub verdict: session::Verdict,
    /// A floor hold: `a` approves this call only.
    pub hold: bool,
    /// The gates' trace, one line per gate.
    pub trace: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SandboxEvent {
    pub call_id: String,
    pub tool: String,
    pub reason: String,
    #[serde(flatten)]
    pub subject: SandboxSubject,
}

/// What a sandbox event is about.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SandboxSubject {
    /// A path the sandbox refused (`inferred`: read from the command's
    /// error output, not known).
    Path {
        path: Option<PathBuf>,
        inferred: bool,
    },
    /// A connection the egress proxy handled (`kind: "network"`; `path`
    /// null and `inferred` false, as documented for stream-json).
    Network {
        kind: NetworkKind,
        #[serde(flatten)]
        connection: Box<NetworkConnection>,
        path: Option<PathBuf>,
        inferred: bool,
    },
}

impl SandboxSubject {
    /// A connection's subject.
    pub fn network(c: &NetworkConnection) -> Self {
        SandboxSubject::Network {
            kind: NetworkKind::Network,
            connection: Box::new(c.clone()),
            path: None,
            inferred: false,
        }
    }
}

/// The `kind` of a connection event (one value, typed so it cannot be
/// misspelt).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkKind {
    Network,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolResult {
    pub call_id: String,
    pub tool: String,
    /// `ok`, `error`, `denied`, `not_run`.
    pub status: String,
    pub duration_ms: u64,
    pub truncated: bool,
    pub error_category: Option<&'static str>,
    pub exit_code: Option<i32>,
    pub enforcement: Option<EnforcementLabel>,
    pub enforced: Option<EnforcementSummary>,
    pub files_touched: Vec<PathBuf>,
    /// What went back to the model (capped).
    pub output: String,
    /// A file edit's real unified diff.
    pub diff: Option<String>,
}

/// An automatic compaction: why, the sizes, what was kept.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Compaction {
    pub turn: u32,
    pub auto: bool,
    /// `threshold` or `context_length`.
    pub reason: String,
    pub window: u64,
    pub threshold: f64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Messages replaced by the summary, and messages kept verbatim.
    pub summarised: u64,
    pub kept: u64,
    pub summary_chars: usize,
    pub summary: String,
    pub provider: String,
    pub model: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorEvent {
    pub message: String,
    pub category: String,
    pub exit_code: i32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Done {
    pub status: String,
    pub exit_code: i32,
    pub turns: u32,
    pub session_file: PathBuf,
    pub cost: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: Option<u64>,
}

/// `auto_review_requested`: the document is the reviewer request's user
/// message (its size here; `permissions check` prints the document).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoReviewRequested {
    pub call_id: String,
    pub tool: String,
    /// The reviewer's provider and model.
    pub provider: String,
    pub model: String,
    /// Bytes of the review document (at most 64 KiB is sent).
    pub document_bytes: usize,
}

/// `auto_review_decided`: the review's verdict and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoReviewDecided {
    pub call_id: String,
    pub tool: String,
    pub decision: crate::authz::reviewer::ReviewDecision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<crate::authz::reviewer::Risk>,
    pub reason: String,
    pub latency_ms: u64,
    pub provider: String,
    pub model: String,
    /// Requests sent for this review (0: the document was never sent).
    pub requests: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// `auto_review_paused`: the breaker's counts when it tripped.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AutoReviewPaused {
    pub call_id: String,
    pub reason: String,
    #[serde(flatten)]
    pub trip: crate::authz::reviewer::Trip,
}

impl Event {
    /// The stream-json `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Content { .. } => "content",
            Event::Metadata(_) => "metadata",
            Event::Steered { .. } => "steered",
            Event::ModelChoice(_) => "model_choice",
            Event::TurnUsage(_) => "turn_usage",
            Event::ToolUse(_) => "tool_use",
            Event::Approval(_) => "approval",
            Event::SandboxDenied(_) => "sandbox_denied",
            Event::SandboxAllowed(_) => "sandbox_allowed",
            Event::ToolResult(_) => "tool_result",
            Event::Reasoning { .. } => "reasoning",
            Event::Compaction(_) => "compaction",
            Event::AutoReviewRequested(_) => "auto_review_requested",
            Event::AutoReviewDecided(_) => "auto_review_decided",
            Event::AutoReviewPaused(_) => "auto_review_paused",
            Event::SubagentStarted(_) => "subagent_started",
            Event::SubagentCompleted(_) => "subagent_completed",
            Event::Subagent { .. } => "subagent",
            Event::TodoUpdated(_) => "todo_updated",
            Event::Error(_) => "error",
            Event::Done(_) => "done",
        }
    }

    /// The session record of this step, when it has one (the loop writes
    /// it before the event: a client that sees the event finds it there).
    pub fn record(&self) -> Option<session::Event> {
        Some(match self {
            Event::ModelChoice(c) => session::Event::ModelChoice {
                event_v: 1,
                kind: c.kind.clone(),
                provider: c.provider.clone(),
                model: c.model.clone(),
                reason: c.reason.clone(),
                used_provider: c.used_provider.clone(),
                used_model: c.used_model.clone(),
                failed: c.failed.clone(),
            },
            Event::TurnUsage(u) => session::Event::TurnUsage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cost_usd: u.cost_usd,
                cached_input_tokens: Some(u.cached_input_tokens),
                cache_write_tokens: Some(u.cache_write_tokens),
                reasoning_tokens: u.reasoning_tokens,
                usage_reported: Some(u.usage_reported),
                provider: Some(u.provider.clone()),
                model: Some(u.model.clone()),
            },
            Event::ToolUse(t) => session::Event::ToolCall {
                call_id: t.call_id.clone(),
                tool: t.tool.clone(),
                args: t.args.clone(),
                mcp: t.mcp.clone(),
            },
            Event::Approval(a) => session::Event::Approval {
                call_id: a.call_id.clone(),
                verdict: a.verdict.clone(),
            },
            Event::ToolResult(r) => session::Event::ToolResult {
                call_id: r.call_id.clone(),
                tool: r.tool.clone(),
                status: r.status.clone(),
                exit_code: r.exit_code,
                duration_ms: r.duration_ms,
                files_touched: r.files_touched.clone(),
                error_category: r.error_category.map(str::to_string),
                enforcement: r.enforcement.as_ref().map(|e| e.label.clone()),
                network: r.enforcement.as_ref().and_then(|e| e.network.clone()),
                enforced: r.enforced.clone(),
                output: r.output.clone(),
                truncated: r.truncated,
            },
            Event::Compaction(c) => session::Event::Compaction {
                event_v: 1,
                auto: c.auto,
                reason: c.reason.clone(),
                window: Some(c.window),
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
                summarised: c.summarised,
                kept: c.kept,
                summary: c.summary.clone(),
            },
            Event::Content { .. }
            | Event::Metadata(_)
            | Event::Steered { .. }
            | Event::Reasoning { .. }
            | Event::SandboxDenied(_)
            | Event::SandboxAllowed(_)
            | Event::AutoReviewRequested(_)
            | Event::AutoReviewDecided(_)
            | Event::AutoReviewPaused(_) => return None,
            Event::SubagentStarted(s) => session::Event::SubagentStarted {
                event_v: 1,
                agent_id: s.agent_id.clone(),
                parent_call_id: s.parent_call_id.clone(),
                role: s.role.as_str().into(),
            },
            Event::Subagent { agent_id, event } => session::Event::Subagent {
                event_v: 1,
                agent_id: agent_id.clone(),
                record: Box::new(event.record()?),
            },
            Event::SubagentCompleted(_)
            | Event::TodoUpdated(_)
            | Event::Error(_)
            | Event::Done(_) => return None,
        })
    }

    /// The text format's progress line on stderr, for the events a person
    /// follows there.
    pub fn progress_line(&self) -> Option<String> {
        Some(match self {
            Event::Metadata(m) => format!(
                "provider {} · model {} · approval {} · sandbox {}",
                m.provider, m.model, m.approval, m.sandbox
            ),
            Event::ToolUse(t) => {
                let short: String = t.args.to_string().chars().take(160).collect();
                format!("→ {} {short}", t.tool)
            }
            Event::Approval(a) if !a.verdict.ran() => format!(
                "  ✗ not run ({}, by {}): {}",
                a.verdict.outcome, a.verdict.decided_by, a.verdict.reason
            ),
            Event::ToolResult(r) => match r.exit_code {
                Some(c) => format!("  ← {} (exit {c}, {} ms)", r.status, r.duration_ms),
                None => format!("  ← {} ({} ms)", r.status, r.duration_ms),
            },
            Event::SandboxDenied(d) => format!("  sandbox denied: {}", d.reason),
            Event::Compaction(c) => format!(
                "context compacted ({}): ~{} → ~{} tokens of a {}-token window",
                c.reason, c.tokens_before, c.tokens_after, c.window
            ),
            Event::TurnUsage(u) => format!(
                "  tokens in {} (cached {}) / out {} (reasoning {}) · cost {}",
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                match u.reasoning_tokens {
                    None => "not reported".to_string(),
                    Some(n) => n.to_string(),
                },
                u.cost
            ),
            Event::ModelChoice(c) => {
                let mut line = format!("model {}/{} ({})", c.provider, c.model, c.reason);
                if c.used_provider != c.provider || c.used_model != c.model {
                    line.push_str(&format!(
                        " → fell back to {}/{}",
                        c.used_provider, c.used_model
                    ));
                }
                line
            }
            Event::Done(d) => format!(
                "done: {} · {} turn(s) · tokens in {} (cached {}) / out {} · cost {}",
                d.status, d.turns, d.input_tokens, d.cached_input_tokens, d.output_tokens, d.cost
            ),
            Event::Error(e) => format!("error: {}", e.message),
            Event::AutoReviewDecided(d) => match d.risk {
                Some(r) => format!("  reviewer: {} ({r}): {}", d.decision, d.reason),
                None => format!("  reviewer unavailable: {}", d.reason),
            },
            Event::AutoReviewPaused(p) => p.reason.clone(),
            Event::AutoReviewRequested(_) => return None,
            Event::SubagentStarted(s) => format!(
                "→ sub-agent {} ({}) · {} · sandbox {}",
                s.agent_id,
                s.role.as_str(),
                s.posture.mode.label(),
                s.posture.sandbox
            ),
            Event::SubagentCompleted(c) => format!(
                "← sub-agent {} ({}): {} ({} ms)",
                c.agent_id,
                c.role.as_str(),
                c.status,
                c.duration_ms
            ),
            Event::Subagent { agent_id, event } => {
                format!("  [{agent_id}] {}", event.progress_line()?)
            }
            Event::TodoUpdated(t) => {
                use super::tools::todo::TodoStatus;
                let done = t
                    .items
                    .iter()
                    .filter(|i| i.status == TodoStatus::Done)
                    .count();
                format!("  to-do list: {done}/{} done", t.items.len())
            }
            Event::Content { .. }
            | Event::Steered { .. }
            | Event::Reasoning { .. }
            | Event::Approval(_)
            | Event::SandboxAllowed(_) => return None,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::net::{Decision, Protocol};

    fn result(enforcement: Option<EnforcementLabel>) -> Event {
        Event::ToolResult(Box::new(ToolResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: "ok".into(),
            duration_ms: 7,
            truncated: false,
            error_category: None,
            exit_code: Some(0),
            enforcement,
            enforced: None,
            files_touched: vec![],
            output: "exit code: 0".into(),
            diff: None,
        }))
    }

    /// stream-json keeps its documented `enforcement` string, while the
    /// session record (and so receipts) gets the label and the network
    /// line as separate fields: nothing has to split the string again.
    #[test]
    fn the_label_and_the_network_line_stay_apart_but_stream_json_joins_them() {
        let e = EnforcementLabel {
            label: "sandboxed: bwrap".into(),
            network: Some("network: 1 refused: evil.test (not in the allow list)".into()),
        };
        let ev = result(Some(e));
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["type"], "tool_result");
        assert_eq!(
            v["enforcement"],
            "sandboxed: bwrap; network: 1 refused: evil.test (not in the allow list)"
        );
        match ev.record() {
            Some(session::Event::ToolResult {
                enforcement,
                network,
                ..
            }) => {
                assert_eq!(enforcement.as_deref(), Some("sandboxed: bwrap"));
                assert_eq!(
                    network.as_deref(),
                    Some("network: 1 refused: evil.test (not in the allow list)")
                );
            }
            other => panic!("{other:?}"),
        }
        let v = serde_json::to_value(result(Some(EnforcementLabel::new("landlock")))).unwrap();
        assert_eq!(v["enforcement"], "landlock");
        let v = serde_json::to_value(result(None)).unwrap();
        assert!(v["enforcement"].is_null());
    }

    /// A connection event has the documented stream-json keys.
    #[test]
    fn a_connection_event_has_the_documented_keys() {
        let c = NetworkConnection {
            host: "evil.test".into(),
            port: 443,
            decision: Decision::Refused,
            rule: "not in the allow list".into(),
            protocol: Protocol::HttpConnect,
            bytes_up: 0,
            bytes_down: 0,
            addr: None,
            error: None,
        };
        let ev = Event::SandboxDenied(SandboxEvent {
            call_id: "c1".into(),
            tool: "shell".into(),
            reason: c.reason(),
            subject: SandboxSubject::network(&c),
        });
        let v = serde_json::to_value(&ev).unwrap();
        for k in [
            "type",
            "call_id",
            "tool",
            "reason",
            "kind",
            "host",
            "port",
            "decision",
            "rule",
            "protocol",
            "bytes_up",
            "bytes_down",
            "path",
            "inferred",
        ] {
            assert!(v.get(k).is_some(), "{k} missing: {v}");
        }
        assert_eq!(v["type"], "sandbox_denied");
        assert_eq!(v["kind"], "network");
        assert_eq!(v["decision"], "refused");
        assert!(v["path"].is_null());
        assert_eq!(v["inferred"], false);
        assert_eq!(ev.kind(), "sandbox_denied");
        assert!(ev.record().is_none());
    }

    /// Every variant's `kind` is its serde tag.
    #[test]
    fn kind_is_the_serde_tag() {
        let evs = [
            Event::Content { text: "x".into() },
            Event::Steered { turn: 1, chars: 2 },
            Event::Error(ErrorEvent {
                message: "m".into(),
                category: "c".into(),
                exit_code: 1,
            }),
            result(None),
        ];
        for ev in evs {
            let v = serde_json::to_value(&ev).unwrap();
            assert_eq!(v["type"], ev.kind());
        }
    }
}
