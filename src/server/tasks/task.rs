//! A task's durable record and the body that creates one.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `queued` → `running` → `completed` | `failed` | `canceled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Canceled,
}

impl TaskStatus {
    pub fn is_done(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Canceled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Canceled => "canceled",
        }
    }
}

/// The error of a task that was running when its process ended.
pub const RESTART_ERROR: &str = "interrupted by process restart";

/// One task: a prompt run as its own runtime thread.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub prompt: String,
    pub status: TaskStatus,
    /// The runtime thread the prompt runs in (its events, approvals and
    /// receipts are the runtime's).
    pub thread_id: Option<String>,
    /// The thread's turn running the prompt.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// The final agent message (its first 2,000 characters).
    pub summary: Option<String>,
    pub error: Option<String>,
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub auto_approve: bool,
    /// Set when an automation's run created this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// `POST /v1/tasks` and `task/create`; unknown fields are refused by name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    pub prompt: String,
    pub workspace: Option<PathBuf>,
    pub model: Option<String>,
    /// Approve what the gates ask about, as `exec --auto` does (never a
    /// hold or a deny). Default false: a question waits
    /// `--approval-timeout`, then is denied as `no response`.
    #[serde(default)]
    pub auto_approve: bool,
}

/// Where a task came from, besides its body.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// A fixed id (an automation run's, derived from its slot) instead of
    /// a fresh one.
    pub id: Option<String>,
    pub automation_id: Option<String>,
    pub run_id: Option<String>,
}
