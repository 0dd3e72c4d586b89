//! The `/v1/tasks` and `/v1/automations` routes: thin handlers over
//! [`super::api`], merged into the server's token-gated `/v1` router.

use super::api;
use super::automation::{CreateAutomation, PatchAutomation};
use super::task::CreateTask;
use super::Hub;
use crate::server::error::{ApiError, ApiJson, ApiQuery};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type St = State<Arc<Hub>>;

/// The routes, relative to `/v1`, for any outer router state.
pub fn routes<S: Clone + Send + Sync + 'static>(hub: Arc<Hub>) -> Router<S> {
    Router::new()
        .route("/tasks", get(list_tasks).post(create_task))
        .route("/tasks/{id}", get(read_task))
        .route("/tasks/{id}/cancel", post(cancel_task))
        .route(
            "/automations",
            get(list_automations).post(create_automation),
        )
        .route(
            "/automations/{id}",
            get(read_automation)
                .patch(update_automation)
                .delete(delete_automation),
        )
        .route("/automations/{id}/run", post(run_automation))
        .route("/automations/{id}/pause", post(pause_automation))
        .route("/automations/{id}/resume", post(resume_automation))
        .route("/automations/{id}/runs", get(automation_runs))
        .with_state(hub)
}

/// Store writes fsync: off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}

fn val<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

async fn create_task(
    State(h): St,
    ApiJson(b): ApiJson<CreateTask>,
) -> Result<impl IntoResponse, ApiError> {
    let t = blocking(move || api::create_task(&h, b)).await?;
    Ok((StatusCode::CREATED, Json(json!({"task": t}))))
}

async fn list_tasks(State(h): St) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"tasks": api::list_tasks(&h)?})))
}

async fn read_task(State(h): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"task": api::read_task(&h, &id)?})))
}

async fn cancel_task(State(h): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let t = blocking(move || api::cancel_task(&h, &id)).await?;
    Ok(Json(json!({"task": t})))
}

async fn create_automation(
    State(h): St,
    ApiJson(b): ApiJson<CreateAutomation>,
) -> Result<impl IntoResponse, ApiError> {
    let a = blocking(move || api::create_automation(&h, b)).await?;
    Ok((StatusCode::CREATED, Json(json!({"automation": val(a)}))))
}

async fn list_automations(State(h): St) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"automations": val(api::list_automations(&h)?)}),
    ))
}

async fn read_automation(State(h): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"automation": val(api::read_automation(&h, &id)?)}),
    ))
}

async fn update_automation(
    State(h): St,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<PatchAutomation>,
) -> Result<Json<Value>, ApiError> {
    let a = blocking(move || api::update_automation(&h, &id, p)).await?;
    Ok(Json(json!({"automation": val(a)})))
}

async fn delete_automation(State(h): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id2 = id.clone();
    blocking(move || api::delete_automation(&h, &id2)).await?;
    Ok(Json(json!({"deleted": true, "id": id})))
}

async fn run_automation(
    State(h): St,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let (run, task) = blocking(move || api::run_automation(&h, &id)).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"run": run, "task": task})),
    ))
}

async fn pause_automation(State(h): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let a = blocking(move || api::pause_automation(&h, &id)).await?;
    Ok(Json(json!({"automation": val(a)})))
}

async fn resume_automation(State(h): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let a = blocking(move || api::resume_automation(&h, &id)).await?;
    Ok(Json(json!({"automation": val(a)})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    limit: Option<String>,
}

async fn automation_runs(
    State(h): St,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<RunsQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q
        .limit
        .as_deref()
        .map(|v| {
            v.parse::<usize>()
                .map_err(|_| ApiError::bad("limit", format!("`{v}` is not a count")))
        })
        .transpose()?;
    Ok(Json(json!({"runs": api::automation_runs(&h, &id, limit)?})))
}
