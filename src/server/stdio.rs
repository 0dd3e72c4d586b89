//! `app-server --stdio`: newline-delimited JSON-RPC 2.0 on stdin/stdout.
//! stdout carries JSON only (one response or notification per line);
//! notes go to stderr. A line that is not JSON (-32700), not a request
//! (-32600), or names an unknown method (-32601) is answered and the
//! server keeps reading. Events of subscribed threads arrive as `event`
//! notifications carrying the same envelope as SSE.

use super::api::{self, Api, Request};
use super::tasks::api::TaskRequest;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Every method, by family. Pinned by tests/runtime_drift.rs against
/// tests/fixtures/runtime/methods.json: changing it is an API change.
pub const METHODS: &[&str] = &[
    "healthz",
    "capabilities",
    "shutdown",
    "app/capabilities",
    "app/info",
    "app/usage",
    "prompt/capabilities",
    "prompt/start",
    "thread/capabilities",
    "thread/list",
    "thread/start",
    "thread/read",
    "thread/update",
    "thread/fork",
    "thread/auto_review_resume",
    "thread/subscribe",
    "thread/unsubscribe",
    "turn/start",
    "turn/interrupt",
    "approval/decide",
    "turn/steer",
    "thread/compact",
    "user_input/answer",
    "tool_call/result",
    "thread/summary",
    "turn/receipt",
    "app/snapshots",
    "app/workspace_status",
    "task/create",
    "task/list",
    "task/read",
    "task/cancel",
    "automation/create",
    "automation/list",
    "automation/read",
    "automation/update",
    "automation/delete",
    "automation/run",
    "automation/pause",
    "automation/resume",
    "automation/runs",
    "app/skills/list",
    "app/skills/update",
    "app/mcp/servers",
    "app/mcp/tools",
    "app/sessions/list",
    "app/sessions/read",
    "app/sessions/delete",
    "app/sessions/resume_thread",
];

pub const FAMILIES: &[&str] = &["thread/*", "app/*", "prompt/*", "task/*", "automation/*"];

fn family(prefix: &str) -> Vec<&'static str> {
    let mut v: Vec<&str> = METHODS
        .iter()
        .copied()
        .filter(|m| m.starts_with(prefix))
        .collect();
    // Turns, approvals, user input and client tool calls belong to the
    // thread family.
    if prefix == "thread/" {
        v.extend(METHODS.iter().copied().filter(|m| {
            ["turn/", "approval/", "user_input/", "tool_call/"]
                .iter()
                .any(|p| m.starts_with(p))
        }));
    }
    v
}

struct RpcError {
    code: i64,
    message: String,
}

fn err(code: i64, message: impl Into<String>) -> RpcError {
    RpcError {
        code,
        message: message.into(),
    }
}

fn params_err(e: impl std::fmt::Display) -> RpcError {
    err(-32602, format!("params: {e}"))
}

fn parse<T: serde::de::DeserializeOwned>(p: &Value) -> Result<T, RpcError> {
    let p = if p.is_null() { json!({}) } else { p.clone() };
    serde_json::from_value(p).map_err(params_err)
}

fn from_api(e: super::error::ApiError) -> RpcError {
    let code = match e.status.as_u16() {
        404 => -32004,
        400 | 422 => -32602,
        409 => -32009,
        _ => -32603,
    };
    err(code, format!("{}: {}", e.code, e.message))
}

pub struct Stdio {
    pub api: Api,
}

pub async fn serve(s: Stdio) -> i32 {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(v) = rx.recv().await {
            let mut line = v.to_string();
            line.push('\n');
            if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let s = std::sync::Arc::new(s);
    let mut subs: std::collections::HashMap<String, tokio::task::JoinHandle<()>> =
        std::collections::HashMap::new();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = tx.send(json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("parse error: {e}")}}));
                continue;
            }
        };
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let valid_id = matches!(id, Value::Null | Value::Number(_) | Value::String(_));
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let (Some(method), true, true) = (
            method,
            msg.get("jsonrpc") == Some(&json!("2.0")),
            msg.is_object() && valid_id,
        ) else {
            let _ = tx.send(json!({"jsonrpc": "2.0", "id": if valid_id { id } else { Value::Null },
                "error": {"code": -32600, "message": "invalid request: needs jsonrpc \"2.0\", a string method and a number, string or null id"}}));
            continue;
        };
        let is_notification = msg.get("id").is_none();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let result = match method.as_str() {
            "shutdown" => {
                if !is_notification {
                    let _ = tx.send(
                        json!({"jsonrpc": "2.0", "id": id, "result": {"shutting_down": true}}),
                    );
                }
                break;
            }
            "thread/subscribe" => subscribe(&s, &params, &tx, &mut subs),
            "thread/unsubscribe" => parse::<api::ThreadRef>(&params).map(|p| {
                if let Some(h) = subs.remove(&p.thread_id) {
                    h.abort();
                }
                json!({"unsubscribed": true})
            }),
            m => {
                let s2 = s.clone();
                let m = m.to_string();
                tokio::task::spawn_blocking(move || call(&s2, &m, &params))
                    .await
                    .unwrap_or_else(|e| Err(err(-32603, e.to_string())))
            }
        };
        if is_notification {
            continue;
        }
        let reply = match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err(e) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
            }
        };
        let _ = tx.send(reply);
    }
    for (_, h) in subs {
        h.abort();
    }
    drop(tx);
    let _ = writer.await;
    crate::exit::OK
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeParams {
    thread_id: String,
    #[serde(default)]
    since_seq: u64,
}

fn subscribe(
    s: &Stdio,
    params: &Value,
    tx: &mpsc::UnboundedSender<Value>,
    subs: &mut std::collections::HashMap<String, tokio::task::JoinHandle<()>>,
) -> Result<Value, RpcError> {
    let p: SubscribeParams = parse(params)?;
    s.api.check_thread(&p.thread_id).map_err(from_api)?;
    let mut sub = s
        .api
        .driver
        .runtime()
        .subscribe(&p.thread_id, p.since_seq, None);
    let tx = tx.clone();
    let h = tokio::spawn(async move {
        while let Some(batch) = sub.next().await {
            for e in batch {
                if tx
                    .send(json!({"jsonrpc": "2.0", "method": "event", "params": e}))
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    if let Some(old) = subs.insert(p.thread_id.clone(), h) {
        old.abort();
    }
    Ok(json!({"subscribed": p.thread_id, "since_seq": p.since_seq}))
}

/// The patch's own fields are checked by [`crate::runtime::ThreadPatch`]
/// (unknown ones are refused by name there).
#[derive(serde::Deserialize)]
struct UpdateParams {
    thread_id: String,
    #[serde(flatten)]
    patch: Value,
}

/// `snapshots`' params: `limit` is a number here (HTTP's query is text).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotsParams {
    limit: Option<usize>,
    thread_id: Option<String>,
}

/// A method and its params as the one API's request; `None` for the
/// methods that belong to this transport (capabilities, subscriptions,
/// shutdown) or that do not exist.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskParams {
    task_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutomationParams {
    automation_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutomationUpdateParams {
    automation_id: String,
    #[serde(flatten)]
    patch: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutomationRunsParams {
    automation_id: String,
    limit: Option<usize>,
}

/// `task/*` and `automation/*` into the one API's task request.
fn decode_task(method: &str, p: &Value) -> Result<Option<TaskRequest>, RpcError> {
    let auto = |p: &Value| parse::<AutomationParams>(p).map(|a| a.automation_id);
    Ok(Some(match method {
        "task/create" => TaskRequest::CreateTask(parse(p)?),
        "task/list" => TaskRequest::ListTasks,
        "task/read" => TaskRequest::ReadTask {
            task_id: parse::<TaskParams>(p)?.task_id,
        },
        "task/cancel" => TaskRequest::CancelTask {
            task_id: parse::<TaskParams>(p)?.task_id,
        },
        "automation/create" => TaskRequest::CreateAutomation(parse(p)?),
        "automation/list" => TaskRequest::ListAutomations,
        "automation/read" => TaskRequest::ReadAutomation {
            automation_id: auto(p)?,
        },
        "automation/update" => {
            let u: AutomationUpdateParams = parse(p)?;
            TaskRequest::UpdateAutomation {
                automation_id: u.automation_id,
                patch: parse(&u.patch)?,
            }
        }
        "automation/delete" => TaskRequest::DeleteAutomation {
            automation_id: auto(p)?,
        },
        "automation/run" => TaskRequest::RunAutomation {
            automation_id: auto(p)?,
        },
        "automation/pause" => TaskRequest::PauseAutomation {
            automation_id: auto(p)?,
        },
        "automation/resume" => TaskRequest::ResumeAutomation {
            automation_id: auto(p)?,
        },
        "automation/runs" => {
            let r: AutomationRunsParams = parse(p)?;
            TaskRequest::AutomationRuns {
                automation_id: r.automation_id,
                limit: r.limit,
            }
        }
        _ => return Ok(None),
    }))
}

fn decode(method: &str, p: &Value) -> Result<Option<Request>, RpcError> {
    Ok(Some(match method {
        "healthz" => Request::Health,
        "app/info" => Request::Info,
        "app/usage" => Request::Usage(parse(p)?),
        "app/snapshots" => {
            let q: SnapshotsParams = parse(p)?;
            Request::Snapshots(api::SnapshotsQuery {
                limit: q.limit,
                thread_id: q.thread_id,
            })
        }
        "app/workspace_status" => Request::WorkspaceStatus,
        "thread/list" => Request::ListThreads(parse(p)?),
        "thread/summary" => Request::ThreadSummary(parse(p)?),
        "thread/start" => Request::CreateThread(parse(p)?),
        "thread/read" => Request::ReadThread(parse(p)?),
        "thread/update" => {
            let u: UpdateParams = parse(p)?;
            let patch = serde_json::from_value(u.patch).map_err(params_err)?;
            Request::UpdateThread(api::UpdateThread {
                thread_id: u.thread_id,
                patch,
            })
        }
        "thread/fork" => Request::ForkThread(parse(p)?),
        "thread/auto_review_resume" => Request::ResumeAutoReview(parse(p)?),
        "thread/compact" => Request::Compact(parse(p)?),
        "turn/start" => Request::StartTurn(parse(p)?),
        "prompt/start" => Request::StartPrompt(parse(p)?),
        "turn/steer" => Request::Steer(parse(p)?),
        "turn/interrupt" => Request::Interrupt(parse(p)?),
        "turn/receipt" => Request::Receipt(parse(p)?),
        "approval/decide" => Request::Decide(parse(p)?),
        "user_input/answer" => Request::AnswerInput(parse(p)?),
        "tool_call/result" => Request::ToolResult(parse(p)?),
        "app/skills/list" => Request::Skills,
        "app/skills/update" => Request::SkillUpdate(parse(p)?),
        "app/mcp/servers" => Request::McpServers,
        "app/mcp/tools" => Request::McpTools(parse(p)?),
        "app/sessions/list" => Request::Sessions(parse(p)?),
        "app/sessions/read" => Request::SessionRead(parse(p)?),
        "app/sessions/delete" => Request::SessionDelete(parse(p)?),
        "app/sessions/resume_thread" => Request::SessionResume(parse(p)?),
        m if m.starts_with("task/") || m.starts_with("automation/") => match decode_task(m, p)? {
            Some(r) => Request::Tasks(r),
            None => return Ok(None),
        },
        _ => return Ok(None),
    }))
}

fn call(s: &Stdio, method: &str, params: &Value) -> Result<Value, RpcError> {
    match method {
        "capabilities" => return Ok(json!({"families": FAMILIES, "methods": METHODS})),
        "thread/capabilities" => {
            return Ok(json!({"family": "thread/*", "methods": family("thread/")}))
        }
        "app/capabilities" => return Ok(json!({"family": "app/*", "methods": family("app/")})),
        "prompt/capabilities" => {
            return Ok(json!({"family": "prompt/*", "methods": family("prompt/")}))
        }
        _ => {}
    }
    match decode(method, params)? {
        Some(req) => s.api.handle(req).map(|r| r.body).map_err(from_api),
        None => Err(err(
            -32601,
            format!("method not found: `{method}` (see `capabilities`)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every method is either the one API's or this transport's own.
    #[test]
    fn every_listed_method_decodes() {
        let own = [
            "capabilities",
            "shutdown",
            "app/capabilities",
            "prompt/capabilities",
            "thread/capabilities",
            "thread/subscribe",
            "thread/unsubscribe",
        ];
        for m in METHODS {
            if own.contains(m) {
                assert!(matches!(decode(m, &Value::Null), Ok(None)), "{m}");
                continue;
            }
            match decode(m, &Value::Null) {
                Ok(Some(_)) => {}
                // Required params missing is still a decoded method.
                Err(e) => assert_eq!(e.code, -32602, "{m}: {}", e.message),
                Ok(None) => panic!("{m} is listed but not decoded"),
            }
        }
        assert!(matches!(decode("thread/nope", &Value::Null), Ok(None)));
    }

    #[test]
    fn a_bad_decision_is_a_params_error() {
        let e = decode(
            "approval/decide",
            &json!({"approval_id": "a", "decision": "maybe"}),
        )
        .unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(
            e.message.contains("decision") || e.message.contains("maybe"),
            "{}",
            e.message
        );
    }
}
