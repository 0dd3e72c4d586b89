//! The receipt document, `codewhale.receipt/v3`. Every field here is part of
//! the documented schema (`docs/RECEIPTS.md`, `docs/receipt.schema.json`):
//! changing one means a new schema version.

use crate::host::{BackendKind, EnforcementLevel, Shortfall};
use serde::Serialize;

/// The schema id written into every receipt. v2 added
/// [`Action::enforced`]; v3 added a `sub_agent` action's [`Action::agent`]
/// and [`Action::children`].
pub const RECEIPT_SCHEMA: &str = "codewhale.receipt/v3";

/// Actions listed in one receipt; the rest are counted in `omitted_actions`.
pub const MAX_ACTIONS: usize = 2_000;

/// What a receipt is and is not (shown in both formats).
pub const CLAIM_CEILING: &str = "This receipt is a local record rebuilt from codewhale's own \
session file on this machine. It is not a safety certification: it shows what codewhale \
recorded, not everything that happened on the system, and anyone who can write the session \
file can change what it says.";

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Receipt {
    pub schema: &'static str,
    /// The first line of the prompt, masked and clipped.
    pub title: String,
    pub source: Source,
    pub postures: Postures,
    pub totals: Totals,
    /// Tokens and cost of the model calls in the covered turns.
    pub usage: UsageTotals,
    /// Project instruction files that went into the system prompt.
    pub instructions: Vec<InstructionFile>,
    pub actions: Vec<Action>,
    /// Actions beyond [`MAX_ACTIONS`] (counted in `totals`, not listed).
    pub omitted_actions: u64,
    /// The conversation's compactions in scope, in order (absent when
    /// there were none). The summaries themselves are model text and are
    /// not copied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compactions: Vec<CompactionEntry>,
    /// What this receipt cannot show, and why.
    pub not_recorded: Vec<String>,
    pub claim_ceiling: &'static str,
}

/// One compaction of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompactionEntry {
    pub turn: u32,
    /// `true`: the loop compacted on its own.
    pub auto: bool,
    /// `threshold` or `context_length`.
    pub reason: String,
    pub window: Option<u64>,
    /// Estimated request size (tokens) before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// Where the receipt comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Source {
    /// The session (thread) id.
    pub session_id: String,
    pub session_file: String,
    pub session_schema: String,
    pub workspace: String,
    pub provider: String,
    pub model: String,
    pub codewhale_version: String,
    /// Time of the first and last committed record (RFC 3339 UTC).
    pub started_at: String,
    pub ended_at: String,
    /// `completed`, `max_turns`, `interrupted`, `error`; `None` when the
    /// session never closed.
    pub status: Option<String>,
    /// `--turn N`: the receipt covers only that turn.
    pub turn: Option<u32>,
    /// The last sequence number read (the receipt covers records 1..=this).
    pub last_seq: u64,
}

/// The postures the run was under.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Postures {
    /// exec's `auto` (questions approved, sandbox kept) or `headless`
    /// (questions get no response); a run a person answers (the TUI, a
    /// runtime client) records its posture, e.g. `Work + Ask (interactive)`.
    pub approval: String,
    /// The sandbox mode asked for.
    pub sandbox: String,
    /// The enforcement labels commands actually ran under (distinct, in
    /// order of first use); empty when no command ran.
    pub enforcement: Vec<String>,
    pub snapshots: SnapshotsPosture,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SnapshotsPosture {
    /// `None` when the session predates snapshot records.
    pub enabled: Option<bool>,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Distinct files changed (from the turns' snapshot diffs; from the
    /// edit tools' reports when snapshots were off).
    pub files_changed: u64,
    /// `None` when some changes have no line counts (snapshots off).
    pub lines_added: Option<u64>,
    pub lines_removed: Option<u64>,
    pub commands_run: u64,
    pub commands_not_run: u64,
    pub network_calls: u64,
    pub mcp_calls: u64,
    pub sub_agents: u64,
    /// Read-only tool calls (counted, not listed).
    pub reads: u64,
    pub approvals: Approvals,
    pub failed_turns: u64,
    /// All actions, listed or omitted.
    pub actions: u64,
}

/// Model usage summed over the covered turns' `turn_usage` records.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UsageTotals {
    /// Turns whose provider reported usage.
    pub turns_reported: u64,
    /// Turns without a usage report (their tokens are not in the sums).
    pub turns_unreported: u64,
    pub input_tokens: u64,
    /// Of `input_tokens`, served from the provider's cache (0 in sessions
    /// recorded before this was kept).
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// Of `output_tokens`; `None` when any turn's format did not report it.
    pub reasoning_tokens: Option<u64>,
    /// `None` when any turn's price was unknown (never shown as 0).
    pub cost_usd: Option<f64>,
    /// `"0.001234 USD"` or `"unknown"`.
    pub cost: String,
    /// `provider/model` pairs that answered, in order of first use.
    pub models: Vec<String>,
}

/// One instruction file the run read into its prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstructionFile {
    pub path: String,
    /// `agents_md` or `import`.
    pub kind: String,
    pub bytes: u64,
    pub truncated: bool,
}

/// Questions the gates asked, and how they were answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Approvals {
    pub asked: u64,
    pub approved: u64,
    pub denied: u64,
    pub no_response: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    FileChange,
    Command,
    Network,
    Mcp,
    SubAgent,
    /// A call that was stopped at its authorization (a read, or any tool
    /// without a more specific kind).
    Approval,
    FailedTurn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    Succeeded,
    Failed,
    /// Asked for approval and not approved (denied, or no response).
    StoppedAtApproval,
    /// Refused before it started (a rule, the floor, the posture, or the
    /// in-process sandbox check of a file tool).
    BlockedBeforeStart,
    /// Started and never finished (Ctrl-C, crash).
    Interrupted,
}

/// Who decided whether an action ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decider {
    You,
    SessionRule,
    Posture,
    Rule,
    Hook,
    Floor,
    Sandbox,
    NoResponse,
    /// Auto-Review's model reviewer (the reason carries its risk).
    Reviewer,
    /// Auto-Review's model reviewer gave no usable answer.
    ReviewerUnavailable,
}

impl Decider {
    /// From the session's `decided_by` text (`repository` rules are rules).
    pub fn from_session(s: &str) -> Option<Self> {
        Some(match s {
            "you" => Decider::You,
            "session rule" | "session_rule" => Decider::SessionRule,
            "posture" => Decider::Posture,
            "rule" | "repository" => Decider::Rule,
            "hook" => Decider::Hook,
            "floor" => Decider::Floor,
            "sandbox" => Decider::Sandbox,
            "no response" | "no_response" => Decider::NoResponse,
            "reviewer" => Decider::Reviewer,
            "reviewer unavailable" | "reviewer_unavailable" => Decider::ReviewerUnavailable,
            _ => return None,
        })
    }

    /// As shown after "approved by" / "denied by".
    pub fn label(self) -> &'static str {
        match self {
            Decider::You => "you",
            Decider::SessionRule => "a session rule",
            Decider::Posture => "the posture",
            Decider::Rule => "a rule",
            Decider::Hook => "a hook",
            Decider::Floor => "the safety floor",
            Decider::Sandbox => "the sandbox",
            Decider::NoResponse => "no response",
            Decider::Reviewer => "reviewer",
            Decider::ReviewerUnavailable => "reviewer unavailable",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Action {
    /// 1-based position in the receipt.
    pub n: u64,
    pub turn: u32,
    pub kind: ActionKind,
    pub status: ActionStatus,
    /// Who decided: for a call that ran, set only when a question was asked
    /// (who approved it); for one that did not, who stopped it.
    pub decided_by: Option<Decider>,
    pub call_id: Option<String>,
    pub tool: Option<String>,
    /// Command line (masked, escaped, ≤ 200 characters).
    pub command: Option<String>,
    /// The path or query a tool was aimed at (masked, escaped, clipped).
    pub target: Option<String>,
    pub cwd: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    /// Files this action changed.
    pub files: Vec<FileEntry>,
    /// Why it did not run, or the first error line (≤ 160 characters).
    pub reason: Option<String>,
    /// The enforcement label a command ran under.
    pub enforcement: Option<String>,
    /// Under `network = "allowlist"`: the egress proxy's line for the
    /// command (`network: 3 connections to crates.io; 1 refused:
    /// evil.example (not in the allow list)`). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// How the command was sandboxed: backend, level and every item the
    /// backend did not enforce, with its reason. `None` when no command
    /// ran, or the session predates these records (session format v1).
    pub enforced: Option<Enforced>,
    /// For an MCP call: the server and the tool's own name (absent for
    /// other actions, and for sessions that predate the record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<crate::session::record::McpCall>,
    /// For a `sub_agent` action: the child it started (absent otherwise,
    /// and when the child never started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentEntry>,
    /// For a `sub_agent` action: the child's own actions, in order, each
    /// with who decided it (a grandchild's nested the same way).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Action>,
}

/// The sub-agent a `sub_agent` action started.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentEntry {
    pub agent_id: String,
    pub role: String,
}

/// What the host reported it enforced for one command.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Enforced {
    pub backend: BackendKind,
    pub level: EnforcementLevel,
    pub partial: Vec<PartialEntry>,
}

/// One thing the backend did not enforce as the policy asked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartialEntry {
    /// Stable id (`deny-read`, `write-protect`, `over-restricted`, …).
    pub item: Shortfall,
    /// Masked, escaped, clipped.
    pub path: Option<String>,
    /// Masked, escaped, clipped to 320 characters.
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileEntry {
    pub path: String,
    /// `added`, `modified`, `deleted`, or `unknown` (snapshots off).
    pub change: String,
    pub added_lines: Option<u64>,
    pub removed_lines: Option<u64>,
    pub binary: bool,
}

#[cfg(test)]
mod tests {
    use crate::host::Shortfall;

    /// The schema's list of partial item ids is the host's list.
    #[test]
    fn schema_lists_every_partial_item_id() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/receipt.schema.json")).unwrap();
        assert_eq!(
            schema["properties"]["schema"]["const"],
            super::RECEIPT_SCHEMA
        );
        let ids: Vec<&str> = schema["$defs"]["partial_item"]["properties"]["item"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ours: Vec<&str> = Shortfall::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(ids, ours);
    }
}
