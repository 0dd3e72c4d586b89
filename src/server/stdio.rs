//! `app-server --stdio`: newline-delimited JSON-RPC 2.0 on stdin/stdout.
//! stdout carries JSON only (one response or notification per line);
//! notes go to stderr. A line that is not JSON (-32700), not a request
//! (-32600), or names an unknown method (-32601) is answered and the
//! server keeps reading. Events of subscribed threads arrive as `event`
//! notifications carrying the same envelope as SSE.

use crate::runtime::driver::Driver;
use crate::runtime::{Answer, RequestKind, Settlement, ThreadPatch};
use serde_json::{json, Value};
use std::path::PathBuf;
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
    "thread/subscribe",
    "thread/unsubscribe",
    "turn/start",
    "turn/interrupt",
    "approval/decide",
    "turn/steer",
    "thread/compact",
    "user_input/answer",
    "tool_call/result",
    "app/skills/list",
    "app/skills/update",
    "app/mcp/servers",
    "app/mcp/tools",
    "app/sessions/list",
    "app/sessions/read",
    "app/sessions/delete",
    "app/sessions/resume_thread",
];

pub const FAMILIES: &[&str] = &["thread/*", "app/*", "prompt/*"];

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
    pub driver: Driver,
    pub workspace: PathBuf,
    pub default_model: String,
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
            "thread/unsubscribe" => parse::<ThreadRef>(&params).map(|p| {
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
struct ThreadRef {
    thread_id: String,
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
    s.driver
        .runtime()
        .thread(&p.thread_id)
        .map_err(|e| from_api(e.into()))?;
    let mut sub = s
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

use crate::runtime::request::CreateThread as StartThread;

/// The patch's own fields are checked by [`ThreadPatch`] (unknown ones
/// are refused by name there).
#[derive(serde::Deserialize)]
struct UpdateThread {
    thread_id: String,
    #[serde(flatten)]
    patch: Value,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StartTurn {
    thread_id: String,
    prompt: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SteerTurn {
    thread_id: String,
    turn_id: String,
    prompt: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerInput {
    thread_id: String,
    input_id: String,
    answers: Vec<Value>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallResult {
    thread_id: String,
    turn_id: String,
    call_id: String,
    output: String,
    success: Option<bool>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnRef {
    thread_id: String,
    turn_id: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Decide {
    approval_id: String,
    decision: String,
    #[serde(default)]
    remember: bool,
}

fn new_thread(s: &Stdio, b: StartThread) -> Result<crate::runtime::ThreadRecord, RpcError> {
    let nt = b
        .into_new_thread(&s.workspace, &s.default_model)
        .map_err(|e| from_api(e.into()))?;
    s.driver
        .runtime()
        .create_thread(nt)
        .map_err(|e| from_api(e.into()))
}

fn call(s: &Stdio, method: &str, params: &Value) -> Result<Value, RpcError> {
    let rt = s.driver.runtime();
    let api = |e: crate::runtime::RuntimeError| from_api(e.into());
    match method {
        "healthz" => Ok(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")})),
        "capabilities" => Ok(json!({"families": FAMILIES, "methods": METHODS})),
        "thread/capabilities" => Ok(json!({"family": "thread/*", "methods": family("thread/")})),
        "app/capabilities" => Ok(json!({"family": "app/*", "methods": family("app/")})),
        "prompt/capabilities" => Ok(json!({"family": "prompt/*", "methods": family("prompt/")})),
        "app/info" => Ok(json!({
            "name": "codewhale", "version": env!("CARGO_PKG_VERSION"),
            "schema_version": crate::runtime::event::ENVELOPE_SCHEMA_VERSION,
            "events": crate::runtime::EVENT_NAMES,
        })),
        "app/usage" => {
            let turns: Vec<_> = rt.read(|st| st.turns.values().cloned().collect());
            let (totals, buckets) =
                super::usage::aggregate(&turns, None, None, super::usage::GroupBy::Day);
            Ok(json!({"group_by": "day", "totals": totals, "buckets": buckets}))
        }
        "app/skills/list"
        | "app/skills/update"
        | "app/mcp/servers"
        | "app/mcp/tools"
        | "app/sessions/list"
        | "app/sessions/read"
        | "app/sessions/delete"
        | "app/sessions/resume_thread" => introspection(s, method, params),
        "thread/list" => {
            let mut v: Vec<_> = rt.read(|st| {
                st.threads
                    .values()
                    .filter(|t| !t.archived)
                    .cloned()
                    .collect()
            });
            v.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
            Ok(json!({"threads": v}))
        }
        "thread/start" => Ok(json!({"thread": new_thread(s, parse(params)?)?})),
        "thread/read" => {
            let p: ThreadRef = parse(params)?;
            let t = rt.thread(&p.thread_id).map_err(api)?;
            let latest = rt.read(|st| {
                st.thread_events
                    .get(&p.thread_id)
                    .and_then(|v| v.last())
                    .map_or(0, |r| r.seq)
            });
            Ok(json!({"thread": t, "latest_seq": latest}))
        }
        "thread/update" => {
            let p: UpdateThread = parse(params)?;
            let patch: ThreadPatch = serde_json::from_value(p.patch).map_err(params_err)?;
            Ok(json!({"thread": rt.update_thread(&p.thread_id, patch).map_err(api)?}))
        }
        "thread/fork" => {
            let p: ThreadRef = parse(params)?;
            Ok(
                json!({"thread": rt.fork_thread(&p.thread_id).map_err(api)?, "source_thread_id": p.thread_id}),
            )
        }
        "turn/start" => {
            let p: StartTurn = parse(params)?;
            if p.prompt.trim().is_empty() {
                return Err(params_err("prompt: must not be empty"));
            }
            let turn = s
                .driver
                .start(&p.thread_id, p.prompt)
                .map_err(|e| from_api(e.into()))?;
            Ok(json!({"turn": turn}))
        }
        "prompt/start" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct P {
                prompt: String,
            }
            let p: P = parse(params)?;
            if p.prompt.trim().is_empty() {
                return Err(params_err("prompt: must not be empty"));
            }
            let t = new_thread(s, StartThread::default())?;
            let turn = s
                .driver
                .start(&t.id, p.prompt)
                .map_err(|e| from_api(e.into()))?;
            Ok(json!({"thread": t, "turn": turn}))
        }
        "turn/steer" => {
            let p: SteerTurn = parse(params)?;
            if p.prompt.trim().is_empty() {
                return Err(params_err("prompt: must not be empty"));
            }
            let item = s
                .driver
                .steer(&p.thread_id, &p.turn_id, p.prompt)
                .map_err(api)?;
            Ok(json!({"item": item}))
        }
        "thread/compact" => {
            let p: ThreadRef = parse(params)?;
            let turn = s
                .driver
                .compact(&p.thread_id)
                .map_err(|e| from_api(e.into()))?;
            Ok(json!({"turn": turn}))
        }
        "user_input/answer" => {
            let p: AnswerInput = parse(params)?;
            let how = Settlement::Answered(Answer::UserInput {
                answers: Value::Array(p.answers),
            });
            rt.settle(
                &p.input_id,
                Some(RequestKind::UserInput),
                Some(&p.thread_id),
                None,
                how,
            )
            .map_err(api)?;
            Ok(json!({"input_id": p.input_id, "response_redacted": true}))
        }
        "tool_call/result" => {
            let p: CallResult = parse(params)?;
            let how = Settlement::Answered(Answer::ToolResult {
                output: p.output,
                success: p.success.unwrap_or(true),
            });
            rt.settle(
                &p.call_id,
                Some(RequestKind::ToolCall),
                Some(&p.thread_id),
                Some(&p.turn_id),
                how,
            )
            .map_err(api)?;
            Ok(json!({"call_id": p.call_id, "result_accepted": true}))
        }
        "turn/interrupt" => {
            let p: TurnRef = parse(params)?;
            s.driver.interrupt(&p.thread_id, &p.turn_id).map_err(api)?;
            Ok(json!({"interrupt_requested": true}))
        }
        "approval/decide" => {
            let p: Decide = parse(params)?;
            let allow = match p.decision.as_str() {
                "allow" => true,
                "deny" => false,
                o => return Err(params_err(format!("decision: `{o}` is not allow or deny"))),
            };
            let how = Settlement::Answered(Answer::Approval {
                allow,
                remember: p.remember,
            });
            rt.settle(&p.approval_id, Some(RequestKind::Approval), None, None, how)
                .map_err(api)?;
            Ok(json!({"approval_id": p.approval_id, "decision": p.decision}))
        }
        m => Err(err(
            -32601,
            format!("method not found: `{m}` (see `capabilities`)"),
        )),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillUpdate {
    name: String,
    enabled: bool,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionRef {
    session_id: String,
}

/// The skills, MCP and session methods: the same typed functions as the
/// HTTP routes (server/introspect.rs, server/sessions.rs).
fn introspection(s: &Stdio, method: &str, params: &Value) -> Result<Value, RpcError> {
    use super::{introspect, sessions};
    let paths = crate::config::ConfigPaths::from_env();
    let home = s.driver.home();
    let ws = std::fs::canonicalize(&s.workspace).unwrap_or_else(|_| s.workspace.clone());
    let v = match method {
        "app/skills/list" => to_value(introspect::list_skills(&paths, &s.workspace)),
        "app/skills/update" => {
            let p: SkillUpdate = parse(params)?;
            to_value(introspect::toggle_skill(
                &paths,
                &s.workspace,
                &p.name,
                introspect::SkillToggle { enabled: p.enabled },
            ))
        }
        "app/mcp/servers" => to_value(introspect::mcp_servers(home, s.driver.mcp_live(&ws))),
        "app/mcp/tools" => {
            let q: introspect::McpToolsQuery = parse(params)?;
            to_value(introspect::mcp_tools(
                home,
                &q,
                s.driver.mcp_live_tools(&ws),
            ))
        }
        "app/sessions/list" => {
            let q: sessions::ListSessions = parse(params)?;
            to_value(sessions::list(home, &q))
        }
        "app/sessions/read" => {
            let p: SessionRef = parse(params)?;
            to_value(sessions::get(home, &p.session_id))
        }
        "app/sessions/delete" => {
            let p: SessionRef = parse(params)?;
            to_value(sessions::delete(home, &p.session_id))
        }
        _ => {
            let p: SessionRef = parse(params)?;
            to_value(sessions::resume_thread(
                s.driver.runtime(),
                home,
                &p.session_id,
            ))
        }
    };
    v
}

fn to_value<T: serde::Serialize>(r: Result<T, super::error::ApiError>) -> Result<Value, RpcError> {
    let t = r.map_err(from_api)?;
    serde_json::to_value(t).map_err(|e| err(-32603, e.to_string()))
}
