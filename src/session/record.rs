//! The session record format (`codewhale.session`, version 2): one JSON
//! object per line. Receipts and undo read these; every field here is part
//! of the documented format (`docs/EXEC.md`), so changes bump [`VERSION`].
//!
//! Versions: 1 had only the enforcement label on a `tool_result`; 2 adds
//! `enforced` (backend, level, partial items). Files written by version 1
//! still read (a missing `enforced` is `None`), and one file may hold both
//! (recovery appends version-2 records to an old file).

use crate::host::EnforcementSummary;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const SCHEMA: &str = "codewhale.session";
pub const VERSION: u32 = 2;

/// One committed line: envelope + event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub schema: String,
    pub v: u32,
    /// Global, gap-free, strictly increasing within the file (starts at 1).
    pub seq: u64,
    /// RFC 3339 UTC.
    pub ts: String,
    pub thread: String,
    /// The turn this event belongs to (0 = thread level).
    pub turn: u32,
    #[serde(flatten)]
    pub event: Event,
}

/// Who answered an authorization question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `allow`, `ask`, `deny` (what the gates said).
    pub decision: String,
    /// `allow` (ran) or `deny` / `no_response` (did not run).
    pub outcome: String,
    pub decided_by: String,
    /// For a question: who asked (`floor`, `posture`, …); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<String>,
    pub gate: Option<u8>,
    pub reason: String,
}

impl Verdict {
    /// Whether the call ran: the recorded outcome, never the gates'
    /// `decision` (which stays `ask` for a question someone answered).
    pub fn ran(&self) -> bool {
        self.outcome == "allow"
    }

    /// Who decided, as a front end shows it next to the call: `approved by
    /// you` (a question answered yes), `allowed by posture`, `denied by you`,
    /// `denied by floor`, `no response`. One function, so the TUI cell and
    /// any other client say what the runtime recorded.
    pub fn decided_phrase(&self) -> String {
        match (self.outcome.as_str(), self.decision.as_str()) {
            ("allow", "ask") => format!("approved by {}", self.decided_by),
            ("allow", _) => format!("allowed by {}", self.decided_by),
            ("no_response", _) => "no response".into(),
            _ => format!("denied by {}", self.decided_by),
        }
    }
}

/// The record of a pipeline verdict: what the gates said, what happened,
/// who decided (the documented strings, so the format does not follow the
/// authorization types).
impl From<&crate::authz::Verdict> for Verdict {
    fn from(v: &crate::authz::Verdict) -> Self {
        Verdict {
            decision: v.gates_said().as_str().into(),
            outcome: v.outcome().into(),
            decided_by: v.decided_by.as_str().into(),
            asked_by: v.asked_by().map(|b| b.as_str().into()),
            gate: Some(v.reported_gate().number()),
            reason: v.reason.clone(),
        }
    }
}

/// Which MCP server and tool a call went to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpCall {
    pub server: String,
    /// The name the server knows the tool by.
    pub tool: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    ThreadStarted {
        cwd: PathBuf,
        provider: String,
        model: String,
        approval: String,
        sandbox: String,
        codewhale_version: String,
    },
    TurnStarted,
    UserMessage {
        text: String,
    },
    AssistantMessage {
        text: String,
    },
    /// The reasoning a model response carried, verbatim, kept because some
    /// providers require it back in later requests (DeepSeek's
    /// `reasoning_content` of a tool-call turn; Anthropic's signed thinking
    /// blocks). Read back by the thread history; never exported into a
    /// receipt. Added after v2; its own format is `event_v`.
    Reasoning {
        event_v: u32,
        parts: Vec<crate::provider::ReasoningPart>,
    },
    /// The model asked for a tool. `args` is the parsed object, or the raw
    /// text under `{"_raw": …}` when it was not valid JSON.
    ToolCall {
        call_id: String,
        tool: String,
        args: serde_json::Value,
        /// For an MCP tool (`mcp__…`): the server and the tool's own name,
        /// resolved when the call was made (the offered name alone cannot
        /// be split back reliably once sanitised).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp: Option<McpCall>,
    },
    Approval {
        call_id: String,
        #[serde(flatten)]
        verdict: Verdict,
    },
    ToolResult {
        call_id: String,
        tool: String,
        /// `ok`, `error`, `denied`, `not_run`.
        status: String,
        exit_code: Option<i32>,
        duration_ms: u64,
        /// Files a file tool wrote (absolute); undo reads these.
        files_touched: Vec<PathBuf>,
        error_category: Option<String>,
        /// The enforcement label of a command run (`unsandboxed` when none).
        /// Records written before the `network` field carried the egress
        /// line here too (`label; network: …`); they are shown as written.
        enforcement: Option<String>,
        /// Under `network = "allowlist"`: the egress proxy's one-line
        /// account of the command's connections (`network: …`), kept apart
        /// from the label so no reader has to split a string.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<String>,
        /// What the host enforced for a command run (version 2; absent in
        /// version-1 records).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enforced: Option<EnforcementSummary>,
        /// What went back to the model (capped).
        output: String,
        truncated: bool,
    },
    TurnUsage {
        input_tokens: u64,
        output_tokens: u64,
        /// `None` = the price is unknown (never reported as 0).
        cost_usd: Option<f64>,
        /// Added after v1 (absent in older files): cached input tokens (a
        /// subset of `input_tokens`), cache writes, reasoning tokens (a
        /// subset of `output_tokens`; `None` = not reported by the wire
        /// format), whether the provider reported usage at all, and the
        /// provider/model that answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cached_input_tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_write_tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage_reported: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// The project instruction files that went into the system prompt
    /// (thread level). Added after v1; its own format is `event_v`.
    Instructions {
        event_v: u32,
        /// `[{path, kind, bytes, file_bytes, truncated}]`.
        files: Vec<serde_json::Value>,
        /// Whether `project_instruction_imports` was on (user config).
        imports: bool,
    },
    /// `model = "auto"`: which model the router chose for this turn and
    /// why, and which one answered (after fallbacks). Added after v1.
    ModelChoice {
        event_v: u32,
        /// `plan`, `edit`, `review`, `long_context`, `default`.
        kind: String,
        provider: String,
        model: String,
        reason: String,
        used_provider: String,
        used_model: String,
        /// Models that failed first: `[{target: {provider, model}, error}]`.
        failed: Vec<serde_json::Value>,
    },
    /// A sub-agent started for the `agent` call `parent_call_id` (of this
    /// agent; of the agent named by an enclosing [`Event::Subagent`] for
    /// a grandchild). Added after v2; its own format is `event_v`.
    SubagentStarted {
        event_v: u32,
        agent_id: String,
        parent_call_id: String,
        role: String,
    },
    /// One record of a sub-agent's own run, kept in its parent's session
    /// (so one session file tells the whole tree, and receipts nest the
    /// child's actions under the parent's `agent` call). Added after v2.
    Subagent {
        event_v: u32,
        agent_id: String,
        record: Box<Event>,
    },
    /// The conversation was compacted before a model request: what came
    /// before (except the latest user request and the tool calls still
    /// pending) is replaced by `summary` from then on (the thread history
    /// replays it so). Added after v2; its own format is `event_v`.
    Compaction {
        event_v: u32,
        /// `true`: the loop compacted on its own (threshold or the
        /// provider's context-length error); the manual route is a runtime
        /// turn of its own.
        auto: bool,
        /// `threshold` or `context_length`.
        reason: String,
        /// The window in tokens the decision used (configured, catalogued
        /// or learned from an error).
        window: Option<u64>,
        /// The estimated request size (tokens) before and after.
        tokens_before: u64,
        tokens_after: u64,
        /// Messages replaced by the summary, and messages kept verbatim.
        summarised: u64,
        kept: u64,
        summary: String,
    },
    TurnCompleted,
    /// The turn did not finish: Ctrl-C, an error, or (found on recovery) a
    /// process that died mid-turn.
    TurnInterrupted {
        reason: String,
    },
    /// A later start repaired this file.
    Recovered {
        truncated_bytes: u64,
    },
    ThreadCompleted {
        /// `completed`, `max_turns`, `interrupted`, `error`.
        status: String,
    },
    /// Whether undo snapshots are kept for this run (thread level, right
    /// after `thread_started`). Added after v1; its own format is `event_v`.
    Snapshots {
        event_v: u32,
        enabled: bool,
        /// Why they are off (shown on every surface), when `enabled` is false.
        reason: Option<String>,
        /// The store directory, when enabled.
        store: Option<PathBuf>,
    },
    /// One snapshot the loop took (`pre-turn:N`, `post-turn:N`,
    /// `tool:<call id>`), or the error that stopped it (the run goes on).
    Snapshot {
        event_v: u32,
        label: String,
        id: Option<u64>,
        /// The request (a whole prompt) this snapshot belongs to.
        request: u64,
        call_id: Option<String>,
        error: Option<String>,
    },
    /// Files that differ between two snapshots, saved when the later one is
    /// taken so receipts never need the snapshot store. With `call_id`: the
    /// changes of that one tool call (its `tool:` snapshot → the next
    /// snapshot); without: the whole turn (`pre-turn` → `post-turn`).
    FileChanges {
        event_v: u32,
        call_id: Option<String>,
        from: u64,
        to: u64,
        changes: Vec<ChangedFile>,
    },
}

impl Event {
    /// Whether this record must be on disk before the run goes on (the
    /// session file's group commit, [`super::SessionLog::append`]): what
    /// precedes a side effect — a tool call and its approval, a snapshot
    /// and the changes it records, a compaction that rewrites the history
    /// a resume reads — and the end of a turn or thread. Everything else
    /// (the start, prompts, streamed text, reasoning, usage) is written at
    /// once and made durable by the next commit point.
    pub fn is_commit_point(&self) -> bool {
        match self {
            Event::ToolCall { .. }
            | Event::Approval { .. }
            | Event::Snapshots { .. }
            | Event::Snapshot { .. }
            | Event::FileChanges { .. }
            | Event::Compaction { .. }
            | Event::TurnCompleted
            | Event::TurnInterrupted { .. }
            | Event::Recovered { .. }
            | Event::ThreadCompleted { .. } => true,
            Event::Subagent { record, .. } => record.is_commit_point(),
            _ => false,
        }
    }
}

/// The format of the event types added after v1 (`snapshots`, `snapshot`,
/// `file_changes`): their `event_v`.
pub const SNAPSHOT_EVENTS_VERSION: u32 = 1;

/// One changed file in a [`Event::FileChanges`] record. A copy of the
/// snapshot store's diff entry, kept here so the session format does not
/// change when the store's internal type does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub kind: String,
    pub added_lines: u64,
    pub removed_lines: u64,
    pub binary: bool,
    pub mode_changed: bool,
}

impl From<&crate::snapshot::FileChange> for ChangedFile {
    fn from(c: &crate::snapshot::FileChange) -> Self {
        use crate::snapshot::ChangeKind;
        ChangedFile {
            path: c.path.clone(),
            kind: match c.kind {
                ChangeKind::Added => "added",
                ChangeKind::Modified => "modified",
                ChangeKind::Deleted => "deleted",
            }
            .into(),
            added_lines: c.added_lines,
            removed_lines: c.removed_lines,
            binary: c.binary,
            mode_changed: c.mode_changed,
        }
    }
}

/// A recorded cost as every surface writes it: `"0.001234 USD"`, or
/// `"unknown"` when the price was not known. Here, beside the `cost_usd`
/// it renders, so receipts need not reach into the providers for it.
pub fn cost_label(c: Option<f64>) -> String {
    match c {
        Some(c) => format!("{c:.6} USD"),
        None => "unknown".into(),
    }
}
