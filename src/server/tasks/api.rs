//! The tasks and automations API as plain typed functions: a typed request
//! in, a serializable value or an [`ApiError`] out. The HTTP routes
//! ([`super::http`]) and the stdio methods ([`rpc`]) are thin transports
//! over these.

use super::automation::{AutomationView, CreateAutomation, PatchAutomation, RunRecord};
use super::queue::TaskError;
use super::scheduler::AutomationError;
use super::task::{CreateTask, Origin, TaskRecord};
use super::Hub;
use crate::server::error::ApiError;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskRef {
    task_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutomationRef {
    automation_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateParams {
    automation_id: String,
    #[serde(flatten)]
    patch: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsParams {
    automation_id: String,
    limit: Option<usize>,
}

fn params<T: serde::de::DeserializeOwned>(p: &Value) -> Result<T, ApiError> {
    let p = if p.is_null() { json!({}) } else { p.clone() };
    serde_json::from_value(p).map_err(|e| ApiError::bad("params", e))
}

fn val<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A `task/*` or `automation/*` stdio method (listed in
/// [`crate::server::stdio::METHODS`]): its result (the same body as the route's
/// answer), or `None` for a method that is not one of them.
pub fn rpc(h: &Hub, method: &str, p: &Value) -> Option<Result<Value, ApiError>> {
    let r = match method {
        "task/create" => params(p)
            .and_then(|b| create_task(h, b))
            .map(|t| json!({"task": t})),
        "task/list" => list_tasks(h).map(|t| json!({"tasks": t})),
        "task/read" => params::<TaskRef>(p)
            .and_then(|r| read_task(h, &r.task_id))
            .map(|t| json!({"task": t})),
        "task/cancel" => params::<TaskRef>(p)
            .and_then(|r| cancel_task(h, &r.task_id))
            .map(|t| json!({"task": t})),
        "automation/create" => params(p)
            .and_then(|b| create_automation(h, b))
            .map(|a| json!({"automation": val(a)})),
        "automation/list" => list_automations(h).map(|a| json!({"automations": val(a)})),
        "automation/read" => params::<AutomationRef>(p)
            .and_then(|r| read_automation(h, &r.automation_id))
            .map(|a| json!({"automation": val(a)})),
        "automation/update" => params::<UpdateParams>(p).and_then(|u| {
            let patch: PatchAutomation = params(&u.patch)?;
            update_automation(h, &u.automation_id, patch).map(|a| json!({"automation": val(a)}))
        }),
        "automation/delete" => params::<AutomationRef>(p).and_then(|r| {
            delete_automation(h, &r.automation_id)
                .map(|()| json!({"deleted": true, "id": r.automation_id}))
        }),
        "automation/run" => params::<AutomationRef>(p)
            .and_then(|r| run_automation(h, &r.automation_id))
            .map(|(run, task)| json!({"run": run, "task": task})),
        "automation/pause" => params::<AutomationRef>(p)
            .and_then(|r| pause_automation(h, &r.automation_id))
            .map(|a| json!({"automation": val(a)})),
        "automation/resume" => params::<AutomationRef>(p)
            .and_then(|r| resume_automation(h, &r.automation_id))
            .map(|a| json!({"automation": val(a)})),
        "automation/runs" => params::<RunsParams>(p)
            .and_then(|r| automation_runs(h, &r.automation_id, r.limit))
            .map(|runs| json!({"runs": runs})),
        _ => return None,
    };
    Some(r)
}
