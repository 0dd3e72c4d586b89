//! The `/v1/*` routes over the runtime (docs/RUNTIME_API.md lists each):
//! HTTP/SSE as a transport of the one API. Each handler decodes its path,
//! query and body into an [`api::Request`] and sends back what
//! [`api::Api::handle`] answers; only the event stream is served here.

use super::api::{self, Api, Request};
use super::auth::Auth;
use super::error::{ApiError, ApiJson, ApiQuery};
use axum::extract::{DefaultBodyLimit, Path, Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// Request bodies larger than this are refused (413).
pub const BODY_LIMIT: usize = 1024 * 1024;
/// `replay_limit` may ask for at most this many of the newest events.
pub const MAX_REPLAY_LIMIT: usize = 4096;

pub struct AppState {
    pub api: Api,
    pub auth: Auth,
    /// `codewhale web`: the browser client's sessions and port.
    pub web: Option<Arc<super::web::WebState>>,
    /// `app-server --mobile`: the bound port (the phone page's `Host`
    /// check names it).
    pub mobile: Option<u16>,
}

type St = State<Arc<AppState>>;

pub fn router(state: Arc<AppState>, cors: tower_http::cors::CorsLayer) -> Router {
    let v1 = Router::new()
        .route("/threads", get(list_threads).post(create_thread))
        .route("/threads/summary", get(summary))
        .route("/threads/{id}", get(thread_detail).patch(patch_thread))
        .route("/threads/{id}/resume", post(thread_detail))
        .route("/threads/{id}/fork", post(fork))
        .route("/threads/{id}/auto-review/resume", post(resume_auto_review))
        .route("/threads/{id}/turns", post(start_turn))
        .route("/threads/{id}/turns/{turn}/interrupt", post(interrupt))
        .route("/threads/{id}/turns/{turn}/steer", post(steer))
        .route("/threads/{id}/compact", post(compact))
        .route("/threads/{id}/turns/{turn}/receipt", get(receipt))
        .route(
            "/threads/{id}/turns/{turn}/tool-calls/{call}/result",
            post(tool_result),
        )
        .route("/threads/{id}/events", get(events))
        .route("/approvals/{id}", post(approve))
        .route("/user-input/{thread}/{input}", post(user_input))
        .route("/usage", get(usage))
        .route("/snapshots", get(snapshots))
        .route("/workspace/status", get(workspace_status))
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
        .route("/skills", get(skills_list))
        .route("/skills/{name}", patch(skills_patch))
        .route("/apps/mcp/servers", get(mcp_servers))
        .route("/apps/mcp/tools", get(mcp_tools))
        .route("/sessions", get(sessions_list))
        .route("/sessions/{id}", get(session_get).delete(session_delete))
        .route("/sessions/{id}/resume-thread", post(session_resume))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/v1/runtime/info", get(info));
    if let Some(web) = state.web.clone() {
        let w = super::web::routes::WebRoutes {
            web,
            auth: state.auth.clone(),
        };
        app = app.merge(super::web::routes::router(w));
    }
    if let Some(port) = state.mobile {
        app = app.merge(super::web::mobile::router(port));
    }
    let mut app = app
        .nest("/v1", v1)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(middleware::from_fn(super::error::json_errors))
        .layer(cors);
    if let Some(w) = state.web.clone() {
        app = app.layer(middleware::from_fn_with_state(
            w,
            super::web::routes::guard_layer,
        ));
    }
    app.with_state(state)
}

/// A bearer client as always. In web mode a browser — the session cookie
/// or the runtime-token cookie — must also come from the page's origin
/// for anything that changes state.
async fn require_token(State(s): St, req: HttpRequest, next: Next) -> Response {
    use super::auth::Presented;
    let by = s.auth.presented_by(req.headers());
    if let Some(w) = &s.web {
        let browser = by == Some(Presented::Cookie)
            || (by.is_none() && super::web::routes::has_session(w, req.headers()));
        if by == Some(Presented::Header) {
            return next.run(req).await;
        }
        if browser {
            return match super::web::routes::same_origin(&req) {
                Ok(()) => next.run(req).await,
                Err(e) => e.into_response(),
            };
        }
    } else if by.is_some() {
        return next.run(req).await;
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "a runtime token is required (Authorization: Bearer, X-Codewhale-Runtime-Token, or the codewhale_runtime_token cookie)",
    )
    .into_response()
}

/// The one API's answer as an HTTP response. Its work (appends fsync,
/// `git status`) runs off the async workers.
async fn answer(s: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let reply = tokio::task::spawn_blocking(move || s.api.handle(req))
        .await
        .map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })??;
    Ok((reply.status.http(), Json(reply.body)).into_response())
}

type Answer = Result<Response, ApiError>;

async fn health(State(s): St) -> Answer {
    answer(s, Request::Health).await
}

/// Public: metadata only (no token, no thread data), plus how this
/// transport authenticates.
async fn info(State(s): St) -> Answer {
    let mut body = s.api.handle(Request::Info)?.body;
    body["auth"] =
        serde_json::json!({"required": s.auth.enabled(), "source": s.auth.source.as_str()});
    Ok(Json(body).into_response())
}

async fn list_threads(State(s): St, ApiQuery(q): ApiQuery<api::ListQuery>) -> Answer {
    answer(s, Request::ListThreads(q)).await
}

async fn summary(State(s): St, ApiQuery(q): ApiQuery<api::ListQuery>) -> Answer {
    answer(s, Request::ThreadSummary(q)).await
}

async fn create_thread(
    State(s): St,
    ApiJson(b): ApiJson<crate::runtime::request::CreateThread>,
) -> Answer {
    answer(s, Request::CreateThread(b)).await
}

async fn thread_detail(State(s): St, Path(thread_id): Path<String>) -> Answer {
    answer(s, Request::ReadThread(api::ThreadRef { thread_id })).await
}

async fn patch_thread(
    State(s): St,
    Path(thread_id): Path<String>,
    ApiJson(patch): ApiJson<crate::runtime::ThreadPatch>,
) -> Answer {
    answer(
        s,
        Request::UpdateThread(api::UpdateThread { thread_id, patch }),
    )
    .await
}

async fn fork(State(s): St, Path(thread_id): Path<String>) -> Answer {
    answer(s, Request::ForkThread(api::ThreadRef { thread_id })).await
}

async fn resume_auto_review(State(s): St, Path(thread_id): Path<String>) -> Answer {
    answer(s, Request::ResumeAutoReview(api::ThreadRef { thread_id })).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptBody {
    prompt: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnBody {
    prompt: String,
    #[serde(default)]
    mode: Option<String>,
}

async fn start_turn(
    State(s): St,
    Path(thread_id): Path<String>,
    ApiJson(b): ApiJson<TurnBody>,
) -> Answer {
    let req = api::StartTurn {
        thread_id,
        prompt: b.prompt,
        mode: b.mode,
    };
    answer(s, Request::StartTurn(req)).await
}

async fn interrupt(State(s): St, Path((thread_id, turn_id)): Path<(String, String)>) -> Answer {
    answer(s, Request::Interrupt(api::TurnRef { thread_id, turn_id })).await
}

/// Inject user input into the running turn: recorded as a user message of
/// the turn (`turn.steered`), sent to the model before its next request.
async fn steer(
    State(s): St,
    Path((thread_id, turn_id)): Path<(String, String)>,
    ApiJson(b): ApiJson<PromptBody>,
) -> Answer {
    let req = api::SteerTurn {
        thread_id,
        turn_id,
        prompt: b.prompt,
    };
    answer(s, Request::Steer(req)).await
}

/// Manual compaction: a turn whose `context_compaction` item summarises
/// the thread's history through its model.
async fn compact(State(s): St, Path(thread_id): Path<String>) -> Answer {
    answer(s, Request::Compact(api::ThreadRef { thread_id })).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideBody {
    decision: api::Decision,
    #[serde(default)]
    remember: bool,
}

async fn approve(
    State(s): St,
    Path(approval_id): Path<String>,
    ApiJson(b): ApiJson<DecideBody>,
) -> Answer {
    let req = api::Decide {
        approval_id,
        decision: b.decision,
        remember: b.remember,
    };
    answer(s, Request::Decide(req)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserInputBody {
    answers: Vec<Value>,
}

async fn user_input(
    State(s): St,
    Path((thread_id, input_id)): Path<(String, String)>,
    ApiJson(b): ApiJson<UserInputBody>,
) -> Answer {
    let req = api::AnswerInput {
        thread_id,
        input_id,
        answers: b.answers,
    };
    answer(s, Request::AnswerInput(req)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolResultBody {
    output: String,
    #[serde(default = "yes")]
    success: bool,
}

fn yes() -> bool {
    true
}

async fn tool_result(
    State(s): St,
    Path((thread_id, turn_id, call_id)): Path<(String, String, String)>,
    ApiJson(b): ApiJson<ToolResultBody>,
) -> Answer {
    let req = api::CallResult {
        thread_id,
        turn_id,
        call_id,
        output: b.output,
        success: b.success,
    };
    answer(s, Request::ToolResult(req)).await
}

async fn receipt(State(s): St, Path((thread_id, turn_id)): Path<(String, String)>) -> Answer {
    answer(s, Request::Receipt(api::TurnRef { thread_id, turn_id })).await
}

async fn usage(State(s): St, ApiQuery(q): ApiQuery<api::UsageQuery>) -> Answer {
    answer(s, Request::Usage(q)).await
}

/// Query strings are text: `limit` is read here so a bad one is named
/// with what was sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotsQuery {
    limit: Option<String>,
    thread_id: Option<String>,
}

async fn snapshots(State(s): St, ApiQuery(q): ApiQuery<SnapshotsQuery>) -> Answer {
    let limit = match q.limit.as_deref() {
        None => None,
        Some(v) => Some(
            v.parse::<usize>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| ApiError::bad("limit", format!("`{v}` is not between 1 and 100")))?,
        ),
    };
    let req = api::SnapshotsQuery {
        limit,
        thread_id: q.thread_id,
    };
    answer(s, Request::Snapshots(req)).await
}

async fn workspace_status(State(s): St) -> Answer {
    answer(s, Request::WorkspaceStatus).await
}

// ---- skills, MCP listings, sessions: the one API's requests ----

async fn skills_list(State(s): St) -> Answer {
    answer(s, Request::Skills).await
}

async fn skills_patch(
    State(s): St,
    Path(name): Path<String>,
    ApiJson(b): ApiJson<super::introspect::SkillToggle>,
) -> Answer {
    let req = api::SkillUpdate {
        name,
        enabled: b.enabled,
    };
    answer(s, Request::SkillUpdate(req)).await
}

async fn mcp_servers(State(s): St) -> Answer {
    answer(s, Request::McpServers).await
}

async fn mcp_tools(
    State(s): St,
    ApiQuery(q): ApiQuery<super::introspect::McpToolsQuery>,
) -> Answer {
    answer(s, Request::McpTools(q)).await
}

async fn sessions_list(
    State(s): St,
    ApiQuery(q): ApiQuery<super::sessions::ListSessions>,
) -> Answer {
    answer(s, Request::Sessions(q)).await
}

async fn session_get(State(s): St, Path(session_id): Path<String>) -> Answer {
    answer(s, Request::SessionRead(api::SessionRef { session_id })).await
}

async fn session_delete(State(s): St, Path(session_id): Path<String>) -> Answer {
    answer(s, Request::SessionDelete(api::SessionRef { session_id })).await
}

async fn session_resume(State(s): St, Path(session_id): Path<String>) -> Answer {
    answer(s, Request::SessionResume(api::SessionRef { session_id })).await
}
// ---- tasks and automations: the one API's `Request::Tasks` ----

use super::tasks::api::TaskRequest as T;

async fn tasks(s: Arc<AppState>, r: T) -> Answer {
    answer(s, Request::Tasks(r)).await
}

async fn create_task(State(s): St, ApiJson(b): ApiJson<super::tasks::task::CreateTask>) -> Answer {
    tasks(s, T::CreateTask(b)).await
}

async fn list_tasks(State(s): St) -> Answer {
    tasks(s, T::ListTasks).await
}

async fn read_task(State(s): St, Path(task_id): Path<String>) -> Answer {
    tasks(s, T::ReadTask { task_id }).await
}

async fn cancel_task(State(s): St, Path(task_id): Path<String>) -> Answer {
    tasks(s, T::CancelTask { task_id }).await
}

async fn create_automation(
    State(s): St,
    ApiJson(b): ApiJson<super::tasks::automation::CreateAutomation>,
) -> Answer {
    tasks(s, T::CreateAutomation(b)).await
}

async fn list_automations(State(s): St) -> Answer {
    tasks(s, T::ListAutomations).await
}

async fn read_automation(State(s): St, Path(automation_id): Path<String>) -> Answer {
    tasks(s, T::ReadAutomation { automation_id }).await
}

async fn update_automation(
    State(s): St,
    Path(automation_id): Path<String>,
    ApiJson(patch): ApiJson<super::tasks::automation::PatchAutomation>,
) -> Answer {
    let r = T::UpdateAutomation {
        automation_id,
        patch,
    };
    tasks(s, r).await
}

async fn delete_automation(State(s): St, Path(automation_id): Path<String>) -> Answer {
    tasks(s, T::DeleteAutomation { automation_id }).await
}

async fn run_automation(State(s): St, Path(automation_id): Path<String>) -> Answer {
    tasks(s, T::RunAutomation { automation_id }).await
}

async fn pause_automation(State(s): St, Path(automation_id): Path<String>) -> Answer {
    tasks(s, T::PauseAutomation { automation_id }).await
}

async fn resume_automation(State(s): St, Path(automation_id): Path<String>) -> Answer {
    tasks(s, T::ResumeAutomation { automation_id }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    limit: Option<String>,
}

async fn automation_runs(
    State(s): St,
    Path(automation_id): Path<String>,
    ApiQuery(q): ApiQuery<RunsQuery>,
) -> Answer {
    let limit = q
        .limit
        .as_deref()
        .map(|v| {
            v.parse::<usize>()
                .map_err(|_| ApiError::bad("limit", format!("`{v}` is not a count")))
        })
        .transpose()?;
    let r = T::AutomationRuns {
        automation_id,
        limit,
    };
    tasks(s, r).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    since_seq: Option<String>,
    replay_limit: Option<String>,
}

fn cursor(field: &str, v: &str) -> Result<u64, ApiError> {
    v.trim()
        .parse::<u64>()
        .map_err(|_| ApiError::bad(field, format!("`{v}` is not a sequence number")))
}

async fn events(
    State(s): St,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    s.api.check_thread(&id)?;
    // A reconnecting EventSource sends Last-Event-ID: it wins over the
    // query's cursor (the page that opened the stream may be older).
    let since = match headers.get("last-event-id") {
        Some(v) => cursor(
            "Last-Event-ID",
            v.to_str()
                .map_err(|_| ApiError::bad("Last-Event-ID", "not text"))?,
        )?,
        None => q
            .since_seq
            .as_deref()
            .map(|v| cursor("since_seq", v))
            .transpose()?
            .unwrap_or(0),
    };
    let limit = match q.replay_limit.as_deref() {
        None => None,
        Some(v) => {
            let n: usize = v
                .parse()
                .map_err(|_| ApiError::bad("replay_limit", format!("`{v}` is not a count")))?;
            if n == 0 || n > MAX_REPLAY_LIMIT {
                return Err(ApiError::bad(
                    "replay_limit",
                    format!("must be between 1 and {MAX_REPLAY_LIMIT}"),
                ));
            }
            Some(n)
        }
    };
    let sub = s.api.driver.runtime().subscribe(&id, since, limit);
    let st = stream::unfold(sub, |mut sub| async move {
        sub.next().await.map(|batch| (batch, sub))
    })
    .flat_map(|batch| {
        stream::iter(batch.into_iter().map(|e| {
            let seq = e["seq"].as_u64().unwrap_or(0);
            let name = e["event"].as_str().unwrap_or("message").to_string();
            Ok(Event::default()
                .id(seq.to_string())
                .event(name)
                .data(e.to_string()))
        }))
    });
    Ok(Sse::new(st).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
