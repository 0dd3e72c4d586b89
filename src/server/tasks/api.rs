//! The tasks and automations API as plain typed functions: a typed request
//! in, a serializable value or an [`ApiError`] out; [`TaskRequest`] is
//! their request as the one API (`server/api.rs`) carries it, decoded by
//! the HTTP routes (`server/http.rs`) and the stdio methods
//! (`server/stdio.rs`) like every other request.

use super::automation::{AutomationView, CreateAutomation, PatchAutomation, RunRecord};
use super::queue::TaskError;
use super::scheduler::AutomationError;
use super::task::{CreateTask, Origin, TaskRecord};
use super::Hub;
use crate::server::error::ApiError;
use axum::http::StatusCode;

/// `runs?limit=` when absent, and its bounds.
pub const DEFAULT_RUNS_LIMIT: usize = 20;
pub const MAX_RUNS_LIMIT: usize = 500;

impl From<TaskError> for ApiError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::Invalid { field, message } => ApiError::bad(field, message),
            TaskError::NotFound(id) => ApiError::not_found("task", &id),
            TaskError::Store(e) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            }
        }
    }
}

impl From<AutomationError> for ApiError {
    fn from(e: AutomationError) -> Self {
        match e {
            AutomationError::Invalid { field, message } => ApiError::bad(field, message),
            AutomationError::NotFound(id) => ApiError::not_found("automation", &id),
            AutomationError::Running(m) => {
                ApiError::new(StatusCode::CONFLICT, "automation_running", m)
            }
            AutomationError::Task(t) => t.into(),
            AutomationError::Store(e) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            }
        }
    }
}

pub fn create_task(h: &Hub, b: CreateTask) -> Result<TaskRecord, ApiError> {
    Ok(h.active()?.tasks.create(b, Origin::default())?)
}

pub fn list_tasks(h: &Hub) -> Result<Vec<TaskRecord>, ApiError> {
    Ok(h.active()?.tasks.list())
}

pub fn read_task(h: &Hub, id: &str) -> Result<TaskRecord, ApiError> {
    Ok(h.active()?.tasks.get(id)?)
}

pub fn cancel_task(h: &Hub, id: &str) -> Result<TaskRecord, ApiError> {
    Ok(h.active()?.tasks.cancel(id)?)
}

pub fn create_automation(h: &Hub, b: CreateAutomation) -> Result<AutomationView, ApiError> {
    Ok(h.active()?.automations.create(b)?)
}

pub fn list_automations(h: &Hub) -> Result<Vec<AutomationView>, ApiError> {
    Ok(h.active()?.automations.list())
}

pub fn read_automation(h: &Hub, id: &str) -> Result<AutomationView, ApiError> {
    Ok(h.active()?.automations.get(id)?)
}

pub fn update_automation(
    h: &Hub,
    id: &str,
    p: PatchAutomation,
) -> Result<AutomationView, ApiError> {
    Ok(h.active()?.automations.patch(id, p)?)
}

pub fn delete_automation(h: &Hub, id: &str) -> Result<(), ApiError> {
    Ok(h.active()?.automations.delete(id)?)
}

/// A manual run and its task.
pub fn run_automation(h: &Hub, id: &str) -> Result<(RunRecord, Option<TaskRecord>), ApiError> {
    let r = h.active()?.automations.run_now(id)?;
    let tasks = &h.active()?.tasks;
    let t = r.task_id.as_ref().and_then(|t| tasks.get(t).ok());
    Ok((r, t))
}

pub fn pause_automation(h: &Hub, id: &str) -> Result<AutomationView, ApiError> {
    Ok(h.active()?.automations.pause(id)?)
}

pub fn resume_automation(h: &Hub, id: &str) -> Result<AutomationView, ApiError> {
    Ok(h.active()?.automations.resume(id)?)
}

/// `limit`: 1–500, default 20.
pub fn automation_runs(
    h: &Hub,
    id: &str,
    limit: Option<usize>,
) -> Result<Vec<RunRecord>, ApiError> {
    let limit = limit.unwrap_or(DEFAULT_RUNS_LIMIT);
    if !(1..=MAX_RUNS_LIMIT).contains(&limit) {
        return Err(ApiError::bad(
            "limit",
            format!("must be between 1 and {MAX_RUNS_LIMIT}"),
        ));
    }
    Ok(h.active()?.automations.runs(id, limit)?)
}

/// One task or automation request, whichever transport carried it: the
/// one API's [`crate::server::api::Request::Tasks`] carries it, and
/// `Api::handle` answers it (the response shapes are spelled there once).
#[derive(Debug)]
pub enum TaskRequest {
    CreateTask(CreateTask),
    ListTasks,
    ReadTask {
        task_id: String,
    },
    CancelTask {
        task_id: String,
    },
    CreateAutomation(CreateAutomation),
    ListAutomations,
    ReadAutomation {
        automation_id: String,
    },
    UpdateAutomation {
        automation_id: String,
        patch: PatchAutomation,
    },
    DeleteAutomation {
        automation_id: String,
    },
    RunAutomation {
        automation_id: String,
    },
    PauseAutomation {
        automation_id: String,
    },
    ResumeAutomation {
        automation_id: String,
    },
    AutomationRuns {
        automation_id: String,
        limit: Option<usize>,
    },
}
