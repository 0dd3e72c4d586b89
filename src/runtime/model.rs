//! The durable records the runtime serves: threads, turns and turn items.
//!
//! They are projections: the event log is the only thing written, and each
//! record is rebuilt by folding the log ([`super::projection`]). Every
//! field here is part of the served API (`docs/RUNTIME_API.md`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A conversation: settings that apply to each of its turns.
/// What a thread's turns may do: `agent` (tools offered; the posture mode
/// Work — `work` is the same mode), `plan` (reads and read-only commands),
/// `operate` (Work's permissions, run as a goal: docs/OPERATE.md) or
/// `chat` (answers without tools). The wire form is the lowercase name;
/// a Work thread is reported as `agent`, as it always was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadMode {
    #[default]
    #[serde(alias = "work")]
    Agent,
    Chat,
    Plan,
    Operate,
}

impl ThreadMode {
    pub const ALL: [ThreadMode; 4] = [
        ThreadMode::Plan,
        ThreadMode::Agent,
        ThreadMode::Operate,
        ThreadMode::Chat,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThreadMode::Agent => "agent",
            ThreadMode::Chat => "chat",
            ThreadMode::Plan => "plan",
            ThreadMode::Operate => "operate",
        }
    }

    /// The posture mode of the thread's turns (`None`: chat, no tools).
    pub fn posture_mode(self) -> Option<crate::authz::Mode> {
        match self {
            ThreadMode::Agent => Some(crate::authz::Mode::Work),
            ThreadMode::Plan => Some(crate::authz::Mode::Plan),
            ThreadMode::Operate => Some(crate::authz::Mode::Operate),
            ThreadMode::Chat => None,
        }
    }

    /// A client's `field` value (`work` is `agent`), or an error naming
    /// the field and the values it may take.
    pub fn parse(field: &str, v: &str) -> Result<ThreadMode, super::RuntimeError> {
        if v == "work" {
            return Ok(ThreadMode::Agent);
        }
        ThreadMode::ALL
            .into_iter()
            .find(|m| m.as_str() == v)
            .ok_or_else(|| {
                super::RuntimeError::invalid(
                    field,
                    format!("`{v}` is not one of plan, work (or agent), operate, chat"),
                )
            })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub id: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub updated_at: String,
    pub model: String,
    /// The provider id the thread's turns use (`None`: the configured
    /// default, with exec's local-Ollama fallback). Set by a client, e.g.
    /// the TUI's `/provider`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    pub workspace: PathBuf,
    /// `agent` (tools offered) or `chat` (answers without tools).
    pub mode: ThreadMode,
    pub system_prompt: Option<String>,
    pub latest_turn_id: Option<String>,
    pub archived: bool,
    pub title: Option<String>,
    /// Whether the `shell` tool is offered in this thread's turns.
    pub allow_shell: bool,
    /// Whether the workspace's project configuration is trusted.
    pub trust_mode: bool,
    /// Approve what the gates ask about (never a hold, never a deny; the
    /// sandbox stays), like `exec --auto`.
    pub auto_approve: bool,
    /// Tools the thread's client executes itself: offered to the model in
    /// `agent` mode; a call becomes a pending `tool_call.requested` that
    /// the client answers with its result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<ClientTool>,
    /// The background task (`/v1/tasks`) this thread runs, when a task
    /// made it: a client can go from the thread back to its task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// A client-executed tool as the model is offered it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object (default: any object).
    #[serde(default = "any_object")]
    pub parameters: serde_json::Value,
}

fn any_object() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}

/// One model that answered part of a turn (a routed turn may use several).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub provider: String,
    pub model: String,
    pub usage: TurnUsage,
    /// `None`: the price (or the usage) is unknown — never counted as 0.
    pub cost_usd: Option<f64>,
    /// Model requests this entry adds up.
    pub requests: u64,
}

/// The router's choice for one model request of a turn, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouteChoice {
    /// The loop's model-request number within the turn.
    pub request: u64,
    /// The turn kind the router classified (`plan`, `edit`, …).
    pub kind: String,
    pub provider: String,
    pub model: String,
    pub reason: String,
    /// What answered (differs from the choice after a fallback).
    pub used_provider: String,
    pub used_model: String,
    /// Attempts that failed first (provider, model, error).
    #[serde(default)]
    pub failed: serde_json::Value,
}

/// A turn's lifecycle. `queued` and `in_progress` are open; the others are
/// terminal and never change again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Queued,
    InProgress,
    Completed,
    Failed,
    Interrupted,
    Canceled,
}

impl TurnStatus {
    pub fn is_open(self) -> bool {
        matches!(self, TurnStatus::Queued | TurnStatus::InProgress)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Queued => "queued",
            TurnStatus::InProgress => "in_progress",
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Canceled => "canceled",
        }
    }
}

/// Tokens one turn used (0 when the provider reported nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, read from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic cache
    /// writes; 0 in records from before it was kept).
    #[serde(default)]
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
}

/// One request to the model and everything it led to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub id: String,
    pub thread_id: String,
    pub status: TurnStatus,
    pub effective_provider: Option<String>,
    pub effective_model: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub usage: TurnUsage,
    /// Why the turn did not complete (a summary, never a provider body).
    pub error: Option<String>,
    /// The session file (`<home>/sessions/<id>.jsonl`) the loop wrote for
    /// this turn: what `codewhale receipts` and the receipt route read.
    #[serde(default)]
    pub session_id: Option<String>,
    /// What the turn cost, when the provider's price is known (`None` is
    /// unknown, never 0).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Tokens and cost per model that answered (one entry unless routed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_model: Vec<ModelUsage>,
    /// The router's choices (empty when the thread names one model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routing: Vec<RouteChoice>,
    /// How much of the model's context the conversation fills after the
    /// turn's latest model request: that request's prompt (cached tokens
    /// included) plus its answer, which the next prompt carries. `None`
    /// until a request reported usage. A client sets it against the
    /// model's context window (the TUI footer's `ctx` figure).
    #[serde(default)]
    pub context_tokens: Option<u64>,
}

/// What an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    UserMessage,
    AgentMessage,
    ToolCall,
    FileChange,
    CommandExecution,
    /// A call of an MCP server's tool (`mcp__<server>__<tool>`); its
    /// metadata names the server and the tool (`mcp`).
    McpToolCall,
    ContextCompaction,
    /// The model's reasoning before a response (its readable text; never
    /// in a receipt).
    Reasoning,
    Status,
    Error,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::UserMessage => "user_message",
            ItemKind::AgentMessage => "agent_message",
            ItemKind::ToolCall => "tool_call",
            ItemKind::FileChange => "file_change",
            ItemKind::CommandExecution => "command_execution",
            ItemKind::McpToolCall => "mcp_tool_call",
            ItemKind::ContextCompaction => "context_compaction",
            ItemKind::Reasoning => "reasoning",
            ItemKind::Status => "status",
            ItemKind::Error => "error",
        }
    }
}

/// An item's lifecycle; same open/terminal split as [`TurnStatus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    Queued,
    InProgress,
    Completed,
    Failed,
    Interrupted,
    Canceled,
}

impl ItemStatus {
    pub fn is_open(self) -> bool {
        matches!(self, ItemStatus::Queued | ItemStatus::InProgress)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ItemStatus::Queued => "queued",
            ItemStatus::InProgress => "in_progress",
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
            ItemStatus::Interrupted => "interrupted",
            ItemStatus::Canceled => "canceled",
        }
    }
}

/// One step inside a turn: a message, a tool call, a status line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnItemRecord {
    pub id: String,
    pub turn_id: String,
    pub kind: ItemKind,
    pub status: ItemStatus,
    /// Kind-specific facts (`text` of a message, `tool`/`call_id`/`status`
    /// of a call, …). Never a secret; user-input answers are never here.
    pub metadata: serde_json::Value,
}

/// The error every turn and item left open by a dead process gets.
pub const RESTART_ERROR: &str = "Interrupted by process restart";

/// A fresh id with a readable prefix (`thr_`, `turn_`, `item_`, `appr_`).
pub fn new_id(prefix: &str) -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}_{}", &u[..16])
}

/// RFC 3339 UTC with milliseconds, the one timestamp format of the log.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_are_the_contract() {
        let all = [
            TurnStatus::Queued,
            TurnStatus::InProgress,
            TurnStatus::Completed,
            TurnStatus::Failed,
            TurnStatus::Interrupted,
            TurnStatus::Canceled,
        ];
        let names: Vec<String> = all
            .iter()
            .map(|s| {
                serde_json::to_value(s)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "queued",
                "in_progress",
                "completed",
                "failed",
                "interrupted",
                "canceled"
            ]
        );
        for s in all {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert!(TurnStatus::Queued.is_open() && TurnStatus::InProgress.is_open());
        assert!(!TurnStatus::Completed.is_open() && !TurnStatus::Interrupted.is_open());
    }

    #[test]
    fn item_kinds_are_the_contract() {
        let all = [
            ItemKind::UserMessage,
            ItemKind::AgentMessage,
            ItemKind::ToolCall,
            ItemKind::FileChange,
            ItemKind::CommandExecution,
            ItemKind::ContextCompaction,
            ItemKind::Reasoning,
            ItemKind::Status,
            ItemKind::Error,
        ];
        for k in all {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(ItemKind::CommandExecution.as_str(), "command_execution");
    }

    #[test]
    fn timestamps_have_millisecond_precision() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z'), "{t}");
        let frac = t.rsplit('.').next().unwrap();
        assert_eq!(frac.len(), 4, "{t}");
        assert!(new_id("thr").starts_with("thr_"));
        assert_ne!(new_id("thr"), new_id("thr"));
    }
}
