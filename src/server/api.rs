//! The runtime API, once. Every request either transport carries — an
//! HTTP route in [`super::http`], a JSON-RPC method in [`super::stdio`] —
//! is decoded into one typed [`Request`] and answered by [`Api::handle`],
//! so validation, defaults and the shape of each answer are decided here
//! and nowhere else. The transports own only their wire: paths, query
//! strings, status codes, JSON-RPC framing and event streaming.

use super::error::ApiError;
use super::usage;
use crate::runtime::driver::Driver;
use crate::runtime::request::CreateThread;
use crate::runtime::{
    Answer, ItemKind, RequestKind, Runtime, Settlement, ThreadPatch, ThreadRecord, TurnRecord,
};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;

/// What the API serves from: the runtime's driver and the server's
/// defaults for threads that name no workspace or model.
pub struct Api {
    pub driver: Driver,
    /// Used when a new thread names no workspace.
    pub workspace: PathBuf,
    /// Used when a new thread names no model.
    pub default_model: String,
    /// Background tasks and automations.
    pub hub: std::sync::Arc<super::tasks::Hub>,
}

/// One request to the runtime API, whichever transport carried it.
#[derive(Debug)]
pub enum Request {
    Health,
    Info,
    Usage(UsageQuery),
    ListThreads(ListQuery),
    ThreadSummary(ListQuery),
    CreateThread(CreateThread),
    /// The thread's snapshot: turns, items, pending requests, `latest_seq`.
    ReadThread(ThreadRef),
    UpdateThread(UpdateThread),
    ForkThread(ThreadRef),
    /// The user selects Auto-Review again after its breaker paused it.
    ResumeAutoReview(ThreadRef),
    StartTurn(StartTurn),
    /// A new thread with the server's defaults and its first turn.
    StartPrompt(Prompt),
    Steer(SteerTurn),
    Interrupt(TurnRef),
    Compact(ThreadRef),
    Decide(Decide),
    AnswerInput(AnswerInput),
    ToolResult(CallResult),
    Receipt(TurnRef),
    Snapshots(SnapshotsQuery),
    WorkspaceStatus,
    /// The skills of the server's workspace (docs/SKILLS.md).
    Skills,
    SkillUpdate(SkillUpdate),
    /// `~/.codewhale/mcp.json`'s servers and which run in this process.
    McpServers,
    McpTools(super::introspect::McpToolsQuery),
    /// The stored session files (`exec` runs and runtime turns).
    Sessions(super::sessions::ListSessions),
    SessionRead(SessionRef),
    SessionDelete(SessionRef),
    /// A stored session as a runtime thread.
    SessionResume(SessionRef),
    /// Background tasks and automations (`/v1/tasks`, `/v1/automations`;
    /// `task/*`, `automation/*`).
    Tasks(super::tasks::api::TaskRequest),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillUpdate {
    pub name: String,
    pub enabled: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRef {
    pub session_id: String,
}

/// A typed answer as the JSON both transports send.
fn body<T: serde::Serialize>(v: T) -> Result<Value, ApiError> {
    serde_json::to_value(v)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))
}

/// How a transport that has statuses answers a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Created,
    Accepted,
}

impl Status {
    pub fn http(self) -> StatusCode {
        match self {
            Status::Ok => StatusCode::OK,
            Status::Created => StatusCode::CREATED,
            Status::Accepted => StatusCode::ACCEPTED,
        }
    }
}

/// A success: its status and the JSON body both transports send.
#[derive(Debug)]
pub struct Reply {
    pub status: Status,
    pub body: Value,
}

fn ok(body: Value) -> Reply {
    Reply {
        status: Status::Ok,
        body,
    }
}

fn with(status: Status, body: Value) -> Reply {
    Reply { status, body }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub limit: Option<usize>,
    #[serde(default)]
    pub include_archived: bool,
    #[serde(default)]
    pub archived_only: bool,
    pub search: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    pub since: Option<String>,
    pub until: Option<String>,
    pub group_by: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadRef {
    pub thread_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRef {
    pub thread_id: String,
    pub turn_id: String,
}

/// A thread id and its patch. The patch's own fields are checked by
/// [`ThreadPatch`] (unknown ones are refused by name there).
#[derive(Debug)]
pub struct UpdateThread {
    pub thread_id: String,
    pub patch: ThreadPatch,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartTurn {
    pub thread_id: String,
    pub prompt: String,
    /// This turn's mode (`plan`, `work`/`agent`, `operate`) instead of
    /// the thread's.
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    pub prompt: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerTurn {
    pub thread_id: String,
    pub turn_id: String,
    pub prompt: String,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decide {
    pub approval_id: String,
    pub decision: Decision,
    #[serde(default)]
    pub remember: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerInput {
    pub thread_id: String,
    pub input_id: String,
    pub answers: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallResult {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub output: String,
    #[serde(default = "yes")]
    pub success: bool,
}

fn yes() -> bool {
    true
}

/// Snapshots of the server's workspace, or of a thread's.
#[derive(Debug, Default)]
pub struct SnapshotsQuery {
    /// 1–100; default 20.
    pub limit: Option<usize>,
    pub thread_id: Option<String>,
}

/// Blocking work (appends fsync, `git status`): transports call
/// [`Api::handle`] off their async workers.
impl Api {
    fn rt(&self) -> &Runtime {
        self.driver.runtime()
    }

    /// A task or automation request; every transport's body for it.
    fn tasks(&self, r: super::tasks::api::TaskRequest) -> Result<Reply, ApiError> {
        use super::tasks::api::{self as t, TaskRequest as T};
        let h = &self.hub;
        let created = |body| with(Status::Created, body);
        Ok(match r {
            T::CreateTask(b) => created(json!({ "task": body(t::create_task(h, b)?)? })),
            T::ListTasks => ok(json!({ "tasks": body(t::list_tasks(h)?)? })),
            T::ReadTask { task_id } => ok(json!({ "task": body(t::read_task(h, &task_id)?)? })),
            T::CancelTask { task_id } => ok(json!({ "task": body(t::cancel_task(h, &task_id)?)? })),
            T::CreateAutomation(b) => {
                created(json!({ "automation": body(t::create_automation(h, b)?)? }))
            }
            T::ListAutomations => ok(json!({ "automations": body(t::list_automations(h)?)? })),
            T::ReadAutomation { automation_id: id } => {
                ok(json!({ "automation": body(t::read_automation(h, &id)?)? }))
            }
            T::UpdateAutomation {
                automation_id: id,
                patch,
            } => ok(json!({ "automation": body(t::update_automation(h, &id, patch)?)? })),
            T::DeleteAutomation { automation_id: id } => {
                t::delete_automation(h, &id)?;
                ok(json!({ "deleted": true, "id": id }))
            }
            T::RunAutomation { automation_id: id } => {
                let (run, task) = t::run_automation(h, &id)?;
                with(
                    Status::Accepted,
                    json!({ "run": body(run)?, "task": body(task)? }),
                )
            }
            T::PauseAutomation { automation_id: id } => {
                ok(json!({ "automation": body(t::pause_automation(h, &id)?)? }))
            }
            T::ResumeAutomation { automation_id: id } => {
                ok(json!({ "automation": body(t::resume_automation(h, &id)?)? }))
            }
            T::AutomationRuns {
                automation_id: id,
                limit,
            } => ok(json!({ "runs": body(t::automation_runs(h, &id, limit)?)? })),
        })
    }

    pub fn handle(&self, req: Request) -> Result<Reply, ApiError> {
        match req {
            Request::Health => Ok(ok(
                json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}),
            )),
            Request::Info => Ok(ok(json!({
                "name": "codewhale",
                "version": env!("CARGO_PKG_VERSION"),
                "schema_version": crate::runtime::event::ENVELOPE_SCHEMA_VERSION,
                "events": crate::runtime::EVENT_NAMES,
            }))),
            Request::Usage(q) => self.usage(q).map(ok),
            Request::Tasks(r) => self.tasks(r),
            Request::ListThreads(q) => Ok(ok(json!({ "threads": self.listed(&q)? }))),
            Request::ThreadSummary(q) => self.summary(&q).map(ok),
            Request::CreateThread(b) => {
                let nt = b.into_new_thread(&self.workspace, &self.default_model)?;
                let t = self.rt().create_thread(nt)?;
                Ok(with(Status::Created, json!({ "thread": t })))
            }
            Request::ReadThread(r) => self.detail(&r.thread_id).map(ok),
            Request::UpdateThread(u) => {
                let t = self.rt().update_thread(&u.thread_id, u.patch)?;
                Ok(ok(json!({ "thread": t })))
            }
            Request::ForkThread(r) => {
                let t = self.rt().fork_thread(&r.thread_id)?;
                Ok(with(
                    Status::Created,
                    json!({ "thread": t, "source_thread_id": r.thread_id }),
                ))
            }
            Request::ResumeAutoReview(r) => {
                self.rt().thread(&r.thread_id)?;
                let ended = self.driver.resume_auto_review(&r.thread_id)?;
                Ok(ok(json!({
                    "thread_id": r.thread_id,
                    "resumed": ended.is_some(),
                    "auto_review": self.driver.auto_review_state(&r.thread_id),
                })))
            }
            Request::StartTurn(b) => {
                non_empty(&b.prompt)?;
                let mode = b
                    .mode
                    .as_deref()
                    .map(|m| crate::runtime::ThreadMode::parse("mode", m))
                    .transpose()?;
                let turn = self.driver.start_turn(&b.thread_id, b.prompt, mode)?;
                Ok(with(Status::Accepted, json!({ "turn": turn })))
            }
            Request::StartPrompt(b) => {
                non_empty(&b.prompt)?;
                let nt = CreateThread::default()
                    .into_new_thread(&self.workspace, &self.default_model)?;
                let t = self.rt().create_thread(nt)?;
                let turn = self.driver.start(&t.id, b.prompt)?;
                Ok(with(Status::Accepted, json!({ "thread": t, "turn": turn })))
            }
            Request::Steer(b) => {
                non_empty(&b.prompt)?;
                let item = self.driver.steer(&b.thread_id, &b.turn_id, b.prompt)?;
                Ok(with(Status::Accepted, json!({ "item": item })))
            }
            Request::Interrupt(r) => {
                self.driver.interrupt(&r.thread_id, &r.turn_id)?;
                Ok(with(
                    Status::Accepted,
                    json!({ "interrupt_requested": true }),
                ))
            }
            Request::Compact(r) => {
                let turn = self.driver.compact(&r.thread_id)?;
                Ok(with(Status::Accepted, json!({ "turn": turn })))
            }
            Request::Decide(d) => {
                let how = Settlement::Answered(Answer::Approval {
                    allow: d.decision == Decision::Allow,
                    remember: d.remember,
                });
                self.rt()
                    .settle(&d.approval_id, Some(RequestKind::Approval), None, None, how)?;
                Ok(ok(
                    json!({"approval_id": d.approval_id, "decision": d.decision.as_str()}),
                ))
            }
            Request::AnswerInput(a) => {
                let how = Settlement::Answered(Answer::UserInput {
                    answers: Value::Array(a.answers),
                });
                self.rt().settle(
                    &a.input_id,
                    Some(RequestKind::UserInput),
                    Some(&a.thread_id),
                    None,
                    how,
                )?;
                Ok(ok(
                    json!({"input_id": a.input_id, "response_redacted": true}),
                ))
            }
            Request::ToolResult(c) => {
                let how = Settlement::Answered(Answer::ToolResult {
                    output: c.output,
                    success: c.success,
                });
                self.rt().settle(
                    &c.call_id,
                    Some(RequestKind::ToolCall),
                    Some(&c.thread_id),
                    Some(&c.turn_id),
                    how,
                )?;
                Ok(with(
                    Status::Accepted,
                    json!({"call_id": c.call_id, "result_accepted": true}),
                ))
            }
            Request::Receipt(r) => self.receipt(&r).map(ok),
            Request::Snapshots(q) => self.snapshots(q).map(ok),
            Request::Skills => {
                let paths = crate::config::ConfigPaths::from_env();
                body(super::introspect::list_skills(&paths, &self.workspace)?).map(ok)
            }
            Request::SkillUpdate(u) => {
                let paths = crate::config::ConfigPaths::from_env();
                let toggle = super::introspect::SkillToggle { enabled: u.enabled };
                body(super::introspect::toggle_skill(
                    &paths,
                    &self.workspace,
                    &u.name,
                    toggle,
                )?)
                .map(ok)
            }
            Request::McpServers => {
                let live = self.driver.mcp_live(&self.canonical_workspace());
                body(super::introspect::mcp_servers(self.driver.home(), live)?).map(ok)
            }
            Request::McpTools(q) => {
                let live = self.driver.mcp_live_tools(&self.canonical_workspace());
                body(super::introspect::mcp_tools(self.driver.home(), &q, live)?).map(ok)
            }
            Request::Sessions(q) => body(super::sessions::list(self.driver.home(), &q)?).map(ok),
            Request::SessionRead(r) => {
                body(super::sessions::get(self.driver.home(), &r.session_id)?).map(ok)
            }
            Request::SessionDelete(r) => {
                body(super::sessions::delete(self.driver.home(), &r.session_id)?).map(ok)
            }
            Request::SessionResume(r) => {
                let resumed =
                    super::sessions::resume_thread(self.rt(), self.driver.home(), &r.session_id)?;
                let status = if resumed.created {
                    Status::Created
                } else {
                    Status::Ok
                };
                body(resumed).map(|b| with(status, b))
            }
            Request::WorkspaceStatus => {
                let g = super::git::status(&self.workspace);
                Ok(ok(
                    json!({"workspace": self.workspace, "branch": g.branch, "head": g.head, "dirty": g.dirty}),
                ))
            }
        }
    }

    fn usage(&self, q: UsageQuery) -> Result<Value, ApiError> {
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
        let by = usage::GroupBy::parse(q.group_by.as_deref())
            .map_err(|e| ApiError::bad("group_by", e))?;
        let turns: Vec<TurnRecord> = self.rt().read(|st| st.turns.values().cloned().collect());
        let (totals, buckets) = usage::aggregate(&turns, since, until, by);
        Ok(json!({
            "since": q.since, "until": q.until, "group_by": by.as_str(),
            "totals": totals, "buckets": buckets,
        }))
    }

    fn listed(&self, q: &ListQuery) -> Result<Vec<ThreadRecord>, ApiError> {
        let limit = q.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(ApiError::bad("limit", "must be between 1 and 500"));
        }
        let mut v: Vec<_> = self.rt().read(|st| st.threads.values().cloned().collect());
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

    /// `dirty` runs `git status`, once per workspace.
    fn summary(&self, q: &ListQuery) -> Result<Value, ApiError> {
        let threads = self.listed(q)?;
        let mut git_of: HashMap<PathBuf, super::git::GitStatus> = HashMap::new();
        let items: Vec<Value> = threads
            .iter()
            .map(|t| {
                let (preview, status) = self.rt().read(|st| {
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

    fn detail(&self, id: &str) -> Result<Value, ApiError> {
        let t = self.rt().thread(id)?;
        let auto_review = self.driver.auto_review_state(id);
        Ok(self.rt().read(|st| {
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
                "auto_review": auto_review,
            })
        }))
    }

    /// The same read-only receipt `codewhale receipts` builds, from the
    /// turn's session file.
    fn receipt(&self, r: &TurnRef) -> Result<Value, ApiError> {
        let t = self.rt().turn(&r.turn_id)?;
        if t.thread_id != r.thread_id {
            return Err(ApiError::not_found("turn", &r.turn_id));
        }
        let Some(sid) = t.session_id.clone() else {
            return Err(ApiError::not_found("session file for turn", &r.turn_id));
        };
        let dir = crate::session::sessions_dir(self.driver.home());
        let path = crate::receipt::find_session(&dir, &sid)
            .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string()))?;
        let receipt = crate::receipt::from_file(&path, None).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })?;
        serde_json::to_value(receipt).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })
    }

    /// The undo snapshots, newest first, from the same store `codewhale
    /// undo` reads. Read-only: restoring is not served (the contract
    /// defers it).
    fn snapshots(&self, q: SnapshotsQuery) -> Result<Value, ApiError> {
        let limit = q.limit.unwrap_or(20);
        if !(1..=100).contains(&limit) {
            return Err(ApiError::bad(
                "limit",
                format!("`{limit}` is not between 1 and 100"),
            ));
        }
        let ws = match &q.thread_id {
            Some(t) => self.rt().thread(t)?.workspace,
            None => self.workspace.clone(),
        };
        super::snapshots::list(self.driver.home(), &ws, limit)
    }

    fn canonical_workspace(&self) -> PathBuf {
        std::fs::canonicalize(&self.workspace).unwrap_or_else(|_| self.workspace.clone())
    }

    /// A subscription's thread must exist before either transport starts
    /// streaming it.
    pub fn check_thread(&self, id: &str) -> Result<(), ApiError> {
        self.rt().thread(id)?;
        Ok(())
    }
}

fn non_empty(prompt: &str) -> Result<(), ApiError> {
    if prompt.trim().is_empty() {
        return Err(ApiError::bad("prompt", "must not be empty"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_read_as_the_wire_spells_them() {
        let d: Decide =
            serde_json::from_value(json!({"approval_id": "a", "decision": "deny"})).unwrap();
        assert_eq!(d.decision, Decision::Deny);
        assert!(!d.remember);
        let e = serde_json::from_value::<Decide>(json!({"approval_id": "a", "decision": "maybe"}))
            .unwrap_err();
        assert!(e.to_string().contains("maybe"), "{e}");
    }

    #[test]
    fn an_empty_prompt_is_refused_by_name() {
        let e = non_empty("  \n").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.contains("prompt"), "{}", e.message);
        assert!(non_empty("go").is_ok());
    }

    #[test]
    fn a_tool_result_is_a_success_unless_it_says_otherwise() {
        let c: CallResult = serde_json::from_value(
            json!({"thread_id": "t", "turn_id": "u", "call_id": "c", "output": "x"}),
        )
        .unwrap();
        assert!(c.success);
    }
}
