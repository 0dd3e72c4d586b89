//! An automation's durable record, its runs' records, and the bodies that
//! create and change one.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What happens to slots that passed while the server was down or the
/// automation paused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedRunPolicy {
    /// One run for everything missed; the other slots are recorded
    /// `skipped_missed`.
    #[default]
    RunOnce,
    /// A run for every missed slot.
    CatchUp,
    /// Every missed slot is recorded `skipped_missed`.
    Skip,
}

/// What a slot does while the automation's previous run is still queued
/// or running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The slot is recorded `skipped_overlap` (a manual `run` is 409).
    #[default]
    SkipIfRunning,
    /// The slot's task is queued anyway.
    Allow,
}

/// A run's status: its task's, or why the slot did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Canceled,
    SkippedMissed,
    SkippedOverlap,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AutomationRecord {
    pub id: String,
    pub name: String,
    pub prompt: String,
    /// Canonical text ([`super::planner::Schedule`]'s display).
    pub schedule: String,
    /// IANA name.
    pub timezone: String,
    pub missed_run_policy: MissedRunPolicy,
    pub overlap: Overlap,
    pub auto_approve: bool,
    pub paused: bool,
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    #[serde(default)]
    pub model: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Slots up to this instant (RFC 3339) have been handled (run or
    /// skipped); later ones are due when they pass.
    pub cursor: String,
    /// Why the scheduler paused this record (it could not be read back:
    /// a schedule or zone that no longer parses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One slot of an automation: run (with its task) or skipped.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// Derived from (automation, slot): one slot is one run, ever.
    pub id: String,
    pub automation_id: String,
    /// RFC 3339 UTC instant of the slot (a manual run's: when asked).
    pub slot: String,
    pub task_id: Option<String>,
    pub status: RunStatus,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    #[serde(default)]
    pub manual: bool,
}

/// `POST /v1/automations`; unknown fields are refused by name.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAutomation {
    pub name: String,
    pub prompt: String,
    pub schedule: String,
    pub timezone: Option<String>,
    #[serde(default)]
    pub missed_run_policy: MissedRunPolicy,
    #[serde(default)]
    pub overlap: Overlap,
    #[serde(default)]
    pub auto_approve: bool,
    #[serde(default)]
    pub paused: bool,
    pub workspace: Option<PathBuf>,
    pub model: Option<String>,
}

/// `PATCH /v1/automations/{id}`: the fields given change.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchAutomation {
    pub name: Option<String>,
    pub prompt: Option<String>,
    pub schedule: Option<String>,
    pub timezone: Option<String>,
    pub missed_run_policy: Option<MissedRunPolicy>,
    pub overlap: Option<Overlap>,
    pub auto_approve: Option<bool>,
    pub paused: Option<bool>,
    pub workspace: Option<PathBuf>,
    pub model: Option<String>,
}

/// A record as clients see it: the record and its `next_run_at`.
#[derive(Clone, Debug, Serialize)]
pub struct AutomationView {
    #[serde(flatten)]
    pub record: AutomationRecord,
    /// RFC 3339 UTC; null while paused and once a ONCE slot is past.
    pub next_run_at: Option<String>,
}
