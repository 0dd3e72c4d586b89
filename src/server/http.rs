//! The `/v1/*` routes over the runtime (docs/RUNTIME_API.md lists each).

use super::auth::Auth;
use super::error::{ApiError, ApiJson, ApiQuery};
use super::usage;
use crate::runtime::driver::Driver;
use crate::runtime::{Answer, ItemKind, RequestKind, Runtime, Settlement, ThreadPatch, TurnRecord};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Request bodies larger than this are refused (413).
pub const BODY_LIMIT: usize = 1024 * 1024;
/// `replay_limit` may ask for at most this many of the newest events.
pub const MAX_REPLAY_LIMIT: usize = 4096;

pub struct AppState {
    pub driver: Driver,
    pub auth: Auth,
    /// Used when a new thread names no workspace.
    pub workspace: PathBuf,
    /// Used when a new thread names no model.
    pub default_model: String,
}

type St = State<Arc<AppState>>;

impl AppState {
    fn rt(&self) -> &Runtime {
        self.driver.runtime()
    }
}

pub fn router(state: Arc<AppState>, cors: tower_http::cors::CorsLayer) -> Router {
    let v1 = Router::new()
        .route("/threads", get(list_threads).post(create_thread))
        .route("/threads/summary", get(summary))
        .route("/threads/{id}", get(thread_detail).patch(patch_thread))
        .route("/threads/{id}/resume", post(resume))
        .route("/threads/{id}/fork", post(fork))
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
        .route("/usage", get(usage_route))
        .route("/snapshots", get(snapshots))
        .route("/workspace/status", get(workspace_status))
        .route("/skills", get(skills_list))
        .route("/skills/{name}", patch(skills_patch))
        .route("/apps/mcp/servers", get(mcp_servers))
        .route("/apps/mcp/tools", get(mcp_tools))
        .route("/sessions", get(sessions_list))
        .route("/sessions/{id}", get(session_get).delete(session_delete))
        .route("/sessions/{id}/resume-thread", post(session_resume))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/health", get(health))
        .route("/v1/runtime/info", get(info))
        .nest("/v1", v1)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(middleware::from_fn(super::error::json_errors))
        .layer(cors)
        .with_state(state)
}

async fn require_token(State(s): St, req: Request, next: Next) -> Response {
    if s.auth.allows(req.headers()) {
        return next.run(req).await;
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "a runtime token is required (Authorization: Bearer, X-Codewhale-Runtime-Token, or the codewhale_runtime_token cookie)",
    )
    .into_response()
}

/// Blocking runtime work (appends fsync) off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// Public: metadata only (no token, no thread data).
async fn info(State(s): St) -> Json<Value> {
    Json(json!({
        "name": "codewhale",
        "version": env!("CARGO_PKG_VERSION"),
        "schema_version": crate::runtime::event::ENVELOPE_SCHEMA_VERSION,
        "auth": {"required": s.auth.enabled(), "source": s.auth.source.as_str()},
        "events": crate::runtime::EVENT_NAMES,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<usize>,
    #[serde(default)]
    include_archived: bool,
    #[serde(default)]
    archived_only: bool,
    search: Option<String>,
}

fn listed(s: &AppState, q: &ListQuery) -> Result<Vec<crate::runtime::ThreadRecord>, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad("limit", "must be between 1 and 500"));
    }
    let mut v: Vec<_> = s.rt().read(|st| st.threads.values().cloned().collect());
    v.retain(|t| {
        if q.archived_only {
            t.archived
        } else {
            q.include_archived || !t.archived
        }
    });
    if let Some(needle) = q.search.as_deref().map(str::to_lowercase) {
        v.retain(|t| {
            t.title
                .as_deref()
                .unwrap_or("")
                .to_lowercase()
                .contains(&needle)
                || t.id.contains(&needle)
        });
    }
    v.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.cmp(&a.id)));
    v.truncate(limit);
    Ok(v)
}

async fn list_threads(
    State(s): St,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "threads": listed(&s, &q)? })))
}

async fn summary(State(s): St, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Json<Value>, ApiError> {
    let s2 = s.clone();
    // `dirty` runs `git status`: off the async workers, once per workspace.
    blocking(move || summary_items(&s2, &q)).await.map(Json)
}

fn summary_items(s: &AppState, q: &ListQuery) -> Result<Value, ApiError> {
    let threads = listed(s, q)?;
    let mut git_of: std::collections::HashMap<PathBuf, super::git::GitStatus> =
        std::collections::HashMap::new();
    let items: Vec<Value> = threads
        .iter()
        .map(|t| {
            let (preview, status) = s.rt().read(|st| {
                let first_turn = st.thread_turns.get(&t.id).and_then(|v| v.first());
                let preview = first_turn
                    .and_then(|turn| st.turn_items.get(turn))
                    .into_iter()
                    .flatten()
                    .filter_map(|i| st.items.get(i))
                    .find(|i| i.kind == ItemKind::UserMessage)
                    .and_then(|i| i.metadata.get("text").and_then(Value::as_str))
                    .map(|s| s.chars().take(200).collect::<String>());
                let status = t
                    .latest_turn_id
                    .as_ref()
                    .and_then(|id| st.turns.get(id))
                    .map(|t| t.status);
                (preview, status)
            });
            let git = git_of
                .entry(t.workspace.clone())
                .or_insert_with(|| super::git::status(&t.workspace));
            json!({
                "id": t.id, "title": t.title, "preview": preview, "model": t.model,
                "mode": t.mode, "archived": t.archived, "updated_at": t.updated_at,
                "latest_turn_id": t.latest_turn_id, "latest_turn_status": status,
                "branch": git.branch, "head": git.head, "dirty": git.dirty,
                "workspace": t.workspace,
            })
        })
        .collect();
    Ok(json!({ "items": items }))
}

async fn create_thread(
    State(s): St,
    ApiJson(b): ApiJson<crate::runtime::request::CreateThread>,
) -> Result<impl IntoResponse, ApiError> {
    let nt = b.into_new_thread(&s.workspace, &s.default_model)?;
    let s2 = s.clone();
    let t = blocking(move || Ok(s2.rt().create_thread(nt)?)).await?;
    Ok((StatusCode::CREATED, Json(json!({ "thread": t }))))
}

fn detail(s: &AppState, id: &str) -> Result<Value, ApiError> {
    let t = s.rt().thread(id)?;
    Ok(s.rt().read(|st| {
        let turns: Vec<&TurnRecord> = st
            .thread_turns
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|t| st.turns.get(t))
            .collect();
        let items: Vec<_> = turns
            .iter()
            .flat_map(|t| st.turn_items.get(&t.id).into_iter().flatten())
            .filter_map(|i| st.items.get(i))
            .collect();
        let pending = |k: RequestKind| -> Vec<Value> {
            st.open_requests
                .values()
                .filter(|r| r.request.thread_id == id && r.request.kind == k)
                .map(|r| {
                    json!({"id": r.request.id, "turn_id": r.request.turn_id, "item_id": r.item_id,
                           "seq": r.seq, "payload": r.payload})
                })
                .collect()
        };
        let latest_seq = st
            .thread_events
            .get(id)
            .and_then(|v| v.last())
            .map_or(0, |r| r.seq);
        json!({
            "thread": t, "turns": turns, "items": items,
            "pending_approvals": pending(RequestKind::Approval),
            "pending_user_inputs": pending(RequestKind::UserInput),
            "pending_dynamic_tool_calls": pending(RequestKind::ToolCall),
            "latest_seq": latest_seq,
        })
    }))
}

async fn thread_detail(State(s): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(detail(&s, &id)?))
}

async fn patch_thread(
    State(s): St,
    Path(id): Path<String>,
    ApiJson(p): ApiJson<ThreadPatch>,
) -> Result<Json<Value>, ApiError> {
    let s2 = s.clone();
    let t = blocking(move || Ok(s2.rt().update_thread(&id, p)?)).await?;
    Ok(Json(json!({ "thread": t })))
}

/// Threads are always loaded here; resuming returns the same snapshot as
/// `GET /v1/threads/{id}` (a client resumes by subscribing from its
/// `latest_seq`).
async fn resume(State(s): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(detail(&s, &id)?))
}

async fn fork(State(s): St, Path(id): Path<String>) -> Result<impl IntoResponse, ApiError> {
    let s2 = s.clone();
    let t = blocking(move || Ok(s2.rt().fork_thread(&id)?)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "thread": t, "source_thread_id": t.id })),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartTurn {
    prompt: String,
}

async fn start_turn(
    State(s): St,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<StartTurn>,
) -> Result<impl IntoResponse, ApiError> {
    if b.prompt.trim().is_empty() {
        return Err(ApiError::bad("prompt", "must not be empty"));
    }
    let s2 = s.clone();
    let turn = blocking(move || Ok(s2.driver.start(&id, b.prompt)?)).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "turn": turn }))))
}

async fn interrupt(
    State(s): St,
    Path((id, turn)): Path<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let s2 = s.clone();
    blocking(move || Ok(s2.driver.interrupt(&id, &turn)?)).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "interrupt_requested": true })),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Steer {
    prompt: String,
}

/// Inject user input into the running turn: recorded as a user message of
/// the turn (`turn.steered`), sent to the model before its next request.
async fn steer(
    State(s): St,
    Path((id, turn)): Path<(String, String)>,
    ApiJson(b): ApiJson<Steer>,
) -> Result<impl IntoResponse, ApiError> {
    if b.prompt.trim().is_empty() {
        return Err(ApiError::bad("prompt", "must not be empty"));
    }
    let s2 = s.clone();
    let item = blocking(move || Ok(s2.driver.steer(&id, &turn, b.prompt)?)).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "item": item }))))
}

/// Manual compaction: a turn whose `context_compaction` item summarises
/// the thread's history through its model.
async fn compact(State(s): St, Path(id): Path<String>) -> Result<impl IntoResponse, ApiError> {
    let s2 = s.clone();
    let turn = blocking(move || Ok(s2.driver.compact(&id)?)).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "turn": turn }))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decide {
    decision: Decision,
    #[serde(default)]
    remember: bool,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Decision {
    Allow,
    Deny,
}

async fn approve(
    State(s): St,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<Decide>,
) -> Result<Json<Value>, ApiError> {
    let allow = matches!(b.decision, Decision::Allow);
    let s2 = s.clone();
    let id2 = id.clone();
    blocking(move || {
        let how = Settlement::Answered(Answer::Approval {
            allow,
            remember: b.remember,
        });
        Ok(s2
            .rt()
            .settle(&id2, Some(RequestKind::Approval), None, None, how)?)
    })
    .await?;
    Ok(Json(
        json!({"approval_id": id, "decision": if allow {"allow"} else {"deny"}}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserInputAnswer {
    answers: Vec<Value>,
}

async fn user_input(
    State(s): St,
    Path((thread, input)): Path<(String, String)>,
    ApiJson(b): ApiJson<UserInputAnswer>,
) -> Result<Json<Value>, ApiError> {
    let s2 = s.clone();
    let input2 = input.clone();
    blocking(move || {
        let how = Settlement::Answered(Answer::UserInput {
            answers: Value::Array(b.answers),
        });
        Ok(s2.rt().settle(
            &input2,
            Some(RequestKind::UserInput),
            Some(&thread),
            None,
            how,
        )?)
    })
    .await?;
    Ok(Json(json!({"input_id": input, "response_redacted": true})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolResult {
    output: String,
    #[serde(default = "yes")]
    success: bool,
}

fn yes() -> bool {
    true
}

async fn tool_result(
    State(s): St,
    Path((thread, turn, call)): Path<(String, String, String)>,
    ApiJson(b): ApiJson<ToolResult>,
) -> Result<impl IntoResponse, ApiError> {
    let s2 = s.clone();
    let call2 = call.clone();
    blocking(move || {
        let how = Settlement::Answered(Answer::ToolResult {
            output: b.output,
            success: b.success,
        });
        Ok(s2.rt().settle(
            &call2,
            Some(RequestKind::ToolCall),
            Some(&thread),
            Some(&turn),
            how,
        )?)
    })
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"call_id": call, "result_accepted": true})),
    ))
}

/// The same read-only receipt `codewhale receipts` builds, from the turn's
/// session file.
async fn receipt(
    State(s): St,
    Path((id, turn)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let t = s.rt().turn(&turn)?;
    if t.thread_id != id {
        return Err(ApiError::not_found("turn", &turn));
    }
    let Some(sid) = t.session_id.clone() else {
        return Err(ApiError::not_found("session file for turn", &turn));
    };
    let dir = crate::session::sessions_dir(s.driver.home());
    let r = blocking(move || {
        let path = crate::receipt::find_session(&dir, &sid)
            .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string()))?;
        crate::receipt::from_file(&path, None).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })
    })
    .await?;
    Ok(Json(serde_json::to_value(r).unwrap_or(Value::Null)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageQuery {
    since: Option<String>,
    until: Option<String>,
    group_by: Option<String>,
}

async fn usage_route(
    State(s): St,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    let since = q
        .since
        .as_deref()
        .map(|v| usage::parse_time("since", v))
        .transpose()
        .map_err(|e| ApiError::bad("since", e))?;
    let until = q
        .until
        .as_deref()
        .map(|v| usage::parse_time("until", v))
        .transpose()
        .map_err(|e| ApiError::bad("until", e))?;
    let by =
        usage::GroupBy::parse(q.group_by.as_deref()).map_err(|e| ApiError::bad("group_by", e))?;
    let turns: Vec<TurnRecord> = s.rt().read(|st| st.turns.values().cloned().collect());
    let (totals, buckets) = usage::aggregate(&turns, since, until, by);
    Ok(Json(json!({
        "since": q.since, "until": q.until, "group_by": by.as_str(),
        "totals": totals, "buckets": buckets,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotsQuery {
    limit: Option<String>,
    thread_id: Option<String>,
}

/// The undo snapshots of the server's workspace (or a thread's), newest
/// first, from the same store `codewhale undo` reads. Read-only: restoring
/// is not served (the contract defers it).
async fn snapshots(
    State(s): St,
    ApiQuery(q): ApiQuery<SnapshotsQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = match q.limit.as_deref() {
        None => 20,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| ApiError::bad("limit", format!("`{v}` is not between 1 and 100")))?,
    };
    let ws = match &q.thread_id {
        Some(t) => s.rt().thread(t)?.workspace,
        None => s.workspace.clone(),
    };
    let home = s.driver.home().to_path_buf();
    let list = blocking(move || super::snapshots::list(&home, &ws, limit)).await?;
    Ok(Json(list))
}

async fn workspace_status(State(s): St) -> Result<Json<Value>, ApiError> {
    let ws = s.workspace.clone();
    let g = blocking(move || Ok(super::git::status(&ws))).await?;
    Ok(Json(
        json!({"workspace": s.workspace, "branch": g.branch, "head": g.head, "dirty": g.dirty}),
    ))
}

// ---- skills, MCP listings, sessions: logic in introspect.rs / sessions.rs ----

fn canonical(p: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

async fn skills_list(State(s): St) -> Result<Json<crate::skills::Report>, ApiError> {
    let ws = s.workspace.clone();
    let paths = crate::config::ConfigPaths::from_env();
    blocking(move || super::introspect::list_skills(&paths, &ws))
        .await
        .map(Json)
}

async fn skills_patch(
    State(s): St,
    Path(name): Path<String>,
    ApiJson(b): ApiJson<super::introspect::SkillToggle>,
) -> Result<Json<super::introspect::ToggleAnswer>, ApiError> {
    let ws = s.workspace.clone();
    let paths = crate::config::ConfigPaths::from_env();
    blocking(move || super::introspect::toggle_skill(&paths, &ws, &name, b))
        .await
        .map(Json)
}

async fn mcp_servers(State(s): St) -> Result<Json<super::introspect::McpServers>, ApiError> {
    let live = s.driver.mcp_live(&canonical(&s.workspace));
    super::introspect::mcp_servers(s.driver.home(), live).map(Json)
}

async fn mcp_tools(
    State(s): St,
    ApiQuery(q): ApiQuery<super::introspect::McpToolsQuery>,
) -> Result<Json<super::introspect::McpTools>, ApiError> {
    let live = s.driver.mcp_live_tools(&canonical(&s.workspace));
    super::introspect::mcp_tools(s.driver.home(), &q, live).map(Json)
}

async fn sessions_list(
    State(s): St,
    ApiQuery(q): ApiQuery<super::sessions::ListSessions>,
) -> Result<Json<super::sessions::SessionList>, ApiError> {
    let s2 = s.clone();
    blocking(move || super::sessions::list(s2.driver.home(), &q))
        .await
        .map(Json)
}

async fn session_get(
    State(s): St,
    Path(id): Path<String>,
) -> Result<Json<super::sessions::SessionDetail>, ApiError> {
    let s2 = s.clone();
    blocking(move || super::sessions::get(s2.driver.home(), &id))
        .await
        .map(Json)
}

async fn session_delete(
    State(s): St,
    Path(id): Path<String>,
) -> Result<Json<super::sessions::Deleted>, ApiError> {
    let s2 = s.clone();
    blocking(move || super::sessions::delete(s2.driver.home(), &id))
        .await
        .map(Json)
}

async fn session_resume(State(s): St, Path(id): Path<String>) -> Result<Response, ApiError> {
    let s2 = s.clone();
    let r =
        blocking(move || super::sessions::resume_thread(s2.rt(), s2.driver.home(), &id)).await?;
    let code = if r.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((code, Json(r)).into_response())
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
    s.rt().thread(&id)?;
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
    let sub = s.rt().subscribe(&id, since, limit);
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
