//! The ACP agent's sessions: each session is a runtime thread (its id is
//! the thread id), each prompt a runtime turn driven by the same
//! [`Driver`] as the app-server's, and what the editor sees is the
//! thread's event stream translated by [`super::translate::Mapper`].
//! Gate-8 questions are the runtime's pending approvals; this adapter
//! puts them to the editor and settles them, the runtime owns the one
//! settlement (a timeout is its `approval.timeout`, `no response`).

use super::rpc::Peer;
use super::translate::{Action, Mapper, Question, TurnEnd};
use crate::authz::Mode;
use crate::runtime::driver::Driver;
use crate::runtime::{Answer, RequestKind, Settlement};
use agent_client_protocol_schema::v1::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, CancelNotification, ContentBlock,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind,
    PromptCapabilities, PromptRequest, PromptResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SessionCapabilities, SessionInfo,
    SessionListCapabilities, SessionMode, SessionModeState, SessionNotification,
    SetSessionModeRequest, SetSessionModeResponse, ToolCallUpdate,
};
use agent_client_protocol_schema::ProtocolVersion;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// JSON-RPC error of a handler: code and message (the message names the
/// field at fault).
pub type RpcResult = Result<Value, (i64, String)>;

fn params_err(e: impl std::fmt::Display) -> (i64, String) {
    (-32602, format!("params: {e}"))
}

fn internal(e: impl std::fmt::Display) -> (i64, String) {
    (-32603, e.to_string())
}

fn parse<T: serde::de::DeserializeOwned>(p: &Value) -> Result<T, (i64, String)> {
    serde_json::from_value(p.clone()).map_err(params_err)
}

/// The modes a session can be in: the posture modes of gate 1.
pub const MODES: &[(&str, &str, &str)] = &[
    (
        "plan",
        "Plan",
        "Reads and searches only; the sandbox is read-only.",
    ),
    (
        "work",
        "Work",
        "Edits files and runs commands in the workspace-write sandbox.",
    ),
    (
        "operate",
        "Operate",
        "Work's permissions, run as a goal: a to-do list (sent as plan updates), parallel sub-agents, background jobs, a reviewer asked for before a multi-file change ends.",
    ),
];

fn mode_of(id: &str) -> Option<Mode> {
    match id {
        "plan" => Some(Mode::Plan),
        "work" => Some(Mode::Work),
        "operate" => Some(Mode::Operate),
        _ => None,
    }
}

fn mode_state(current: &str) -> SessionModeState {
    SessionModeState::new(
        current.to_string(),
        MODES
            .iter()
            .map(|(id, name, d)| SessionMode::new(id.to_string(), *name).description(d.to_string()))
            .collect(),
    )
}

struct Session {
    cwd: PathBuf,
    mode: String,
    /// The running turn, if a prompt is in flight.
    turn: Option<String>,
}

pub struct Agent {
    pub driver: Driver,
    pub workspace: PathBuf,
    pub default_model: String,
    peer: Peer,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Agent {
    pub fn new(driver: Driver, workspace: PathBuf, default_model: String, peer: Peer) -> Self {
        Agent {
            driver,
            workspace,
            default_model,
            peer,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// A request from the editor.
    pub async fn handle(self: &Arc<Self>, method: &str, params: Value) -> RpcResult {
        match method {
            "initialize" => self.initialize(&params),
            "authenticate" => self.authenticate(&params).await,
            "session/new" => self.new_session(&params).await,
            "session/load" => self.load_session(&params).await,
            "session/list" => self.list_sessions(&params),
            "session/set_mode" => self.set_mode(&params),
            "session/set_config_option" => self.set_config_option(&params),
            "session/prompt" => self.prompt(&params).await,
            m => Err((-32601, format!("method not found: `{m}`"))),
        }
    }

    /// A notification from the editor.
    pub fn notified(&self, method: &str, params: Value) {
        if method == "session/cancel" {
            match parse::<CancelNotification>(&params) {
                Ok(c) => self.cancel(&c.session_id.to_string()),
                Err(e) => eprintln!("codewhale serve --acp: session/cancel: {}", e.1),
            }
        }
    }

    fn initialize(&self, params: &Value) -> RpcResult {
        let req: InitializeRequest = parse(params)?;
        // Echo what the client asked for when we speak it, else our
        // latest (ACP: the client then decides whether to go on).
        let version = if req.protocol_version == ProtocolVersion::V1 {
            req.protocol_version
        } else {
            ProtocolVersion::LATEST
        };
        let caps = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                PromptCapabilities::new()
                    .image(false)
                    .audio(false)
                    .embedded_context(true),
            )
            // The editor's stdio MCP servers are started (sandboxed) for
            // the session; http and sse are not implemented, so not claimed.
            .mcp_capabilities(McpCapabilities::new().http(false).sse(false))
            .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()));
        let auth = AuthMethod::Agent(
            AuthMethodAgent::new("codewhale-provider-key", "Provider API key").description(
                "codewhale reads the model provider's key from its own store: run `codewhale auth set --provider <id>` in a terminal (or set the provider's key variable) before the first prompt."
                    .to_string(),
            ),
        );
        let r = InitializeResponse::new(version)
            .agent_capabilities(caps)
            .auth_methods(vec![auth])
            .agent_info(Implementation::new("codewhale", env!("CARGO_PKG_VERSION")));
        serde_json::to_value(r).map_err(internal)
    }

    /// The one method: succeeds when the configured provider has a key.
    async fn authenticate(&self, params: &Value) -> RpcResult {
        let id = params["methodId"].as_str().unwrap_or("");
        if id != "codewhale-provider-key" {
            return Err(params_err(format!(
                "methodId: `{id}` is not codewhale-provider-key"
            )));
        }
        let ws = self.workspace.clone();
        let home = self.driver.home().to_path_buf();
        let ok = tokio::task::spawn_blocking(move || provider_has_key(&ws, &home))
            .await
            .map_err(internal)?;
        match ok {
            Ok(()) => Ok(json!({})),
            Err(e) => Err((-32000, format!("authentication required: {e}"))),
        }
    }

    async fn new_session(&self, params: &Value) -> RpcResult {
        let req: NewSessionRequest = parse(params)?;
        let cwd = check_cwd(&req.cwd)?;
        let nt = crate::runtime::request::CreateThread {
            workspace: Some(cwd.clone()),
            ..Default::default()
        }
        .into_new_thread(&cwd, &self.default_model)
        .map_err(internal)?;
        let rt = self.driver.runtime().clone();
        // The runtime's own check refuses a system directory (`cwd`, in
        // ACP's words): invalid params, not an internal error.
        let t = tokio::task::spawn_blocking(move || rt.create_thread(nt))
            .await
            .map_err(internal)?
            .map_err(|e| match e {
                crate::runtime::RuntimeError::Invalid { message, .. } => {
                    params_err(format!("cwd: {message}"))
                }
                other => internal(other),
            })?;
        self.sessions().insert(
            t.id.clone(),
            Session {
                cwd,
                mode: "work".into(),
                turn: None,
            },
        );
        let meta = self.take_mcp_servers(&t.id, &req.mcp_servers);
        let options = self.config_options(&t.id, &t.workspace);
        let r = NewSessionResponse::new(t.id)
            .modes(mode_state("work"))
            .config_options(options)
            .meta(meta);
        serde_json::to_value(r).map_err(internal)
    }

    /// Hand the session's `mcpServers` to the driver (started with its
    /// next prompt, offered in this session only); what became of each
    /// goes back in `_meta["codewhale/mcpServers"]` (and refusals to
    /// stderr).
    fn take_mcp_servers(
        &self,
        session: &str,
        servers: &[agent_client_protocol_schema::v1::McpServer],
    ) -> Option<serde_json::Map<String, Value>> {
        let (entries, report) = super::mcp::entries(servers);
        for o in &report {
            if let Some(e) = &o.error {
                eprintln!("codewhale serve --acp: MCP server not started: {e}");
            }
        }
        self.driver.set_thread_mcp(session, entries);
        if report.is_empty() {
            return None;
        }
        let mut meta = serde_json::Map::new();
        meta.insert("codewhale/mcpServers".into(), json!(report));
        Some(meta)
    }

    async fn load_session(&self, params: &Value) -> RpcResult {
        let req: LoadSessionRequest = parse(params)?;
        let id = req.session_id.to_string();
        let t = self
            .driver
            .runtime()
            .thread(&id)
            .map_err(|e| (-32602, format!("sessionId: {e}")))?;
        let cwd = t.workspace.clone();
        let events: Vec<Value> = self.driver.runtime().read(|s| {
            s.thread_events
                .get(&id)
                .into_iter()
                .flatten()
                .map(|r| r.envelope(0))
                .collect()
        });
        let mut m = Mapper::replay(&cwd);
        for e in &events {
            for a in m.map(e) {
                if let Action::Update(u) = a {
                    self.send_update(&id, u);
                }
            }
        }
        let mode = {
            let mut s = self.sessions();
            let e = s.entry(id.clone()).or_insert(Session {
                cwd,
                mode: "work".into(),
                turn: None,
            });
            e.mode.clone()
        };
        let meta = self.take_mcp_servers(&id, &req.mcp_servers);
        let options = self.config_options(&id, &t.workspace);
        serde_json::to_value(
            LoadSessionResponse::new()
                .modes(mode_state(&mode))
                .config_options(options)
                .meta(meta),
        )
        .map_err(internal)
    }

    fn list_sessions(&self, params: &Value) -> RpcResult {
        let req: ListSessionsRequest = if params.is_null() {
            parse(&json!({}))?
        } else {
            parse(params)?
        };
        let mut threads: Vec<_> = self.driver.runtime().read(|s| {
            s.threads
                .values()
                .filter(|t| !t.archived)
                .filter(|t| req.cwd.as_ref().is_none_or(|c| *c == t.workspace))
                .cloned()
                .collect()
        });
        threads.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        let sessions = threads
            .into_iter()
            .map(|t| {
                SessionInfo::new(t.id, t.workspace)
                    .title(t.title)
                    .updated_at(Some(t.updated_at))
            })
            .collect();
        serde_json::to_value(ListSessionsResponse::new(sessions)).map_err(internal)
    }

    /// The session's configuration options: `auto_review` when the
    /// workspace's configuration selects Auto-Review (on unless its
    /// breaker paused the thread); none otherwise, or when the
    /// configuration cannot be read (a turn would say why).
    fn config_options(
        &self,
        thread: &str,
        cwd: &std::path::Path,
    ) -> Option<Vec<agent_client_protocol_schema::v1::SessionConfigOption>> {
        let settings = crate::config::load(&crate::config::LoadOptions::new(cwd)).ok()?;
        (settings.approval == crate::authz::Approval::AutoReview).then(|| {
            vec![super::options::auto_review(
                self.driver.auto_review_paused(thread).is_none(),
            )]
        })
    }

    /// `session/set_config_option`: switching `auto_review` on selects
    /// Auto-Review again after its breaker paused it.
    fn set_config_option(&self, params: &Value) -> RpcResult {
        use agent_client_protocol_schema::v1::{
            SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
        };
        let req: SetSessionConfigOptionRequest = parse(params)?;
        let id = req.session_id.to_string();
        let t = self
            .driver
            .runtime()
            .thread(&id)
            .map_err(|e| params_err(format!("sessionId: {e}")))?;
        let offered = self.config_options(&id, &t.workspace).is_some();
        match super::options::parse_set(&req.config_id.to_string(), &req.value, offered)
            .map_err(params_err)?
        {
            super::options::SetOption::ResumeAutoReview => {
                self.driver.resume_auto_review(&id).map_err(internal)?;
            }
        }
        let options = self.config_options(&id, &t.workspace).unwrap_or_default();
        serde_json::to_value(SetSessionConfigOptionResponse::new(options)).map_err(internal)
    }

    fn set_mode(&self, params: &Value) -> RpcResult {
        let req: SetSessionModeRequest = parse(params)?;
        let mode = req.mode_id.to_string();
        if mode_of(&mode).is_none() {
            return Err(params_err(format!(
                "modeId: `{mode}` is not one of plan, work, operate"
            )));
        }
        let mut s = self.sessions();
        let Some(sess) = s.get_mut(&req.session_id.to_string()) else {
            return Err(params_err(format!(
                "sessionId: no session `{}` (session/new or session/load first)",
                req.session_id
            )));
        };
        sess.mode = mode;
        serde_json::to_value(SetSessionModeResponse::new()).map_err(internal)
    }

    fn cancel(&self, session: &str) {
        let turn = self.sessions().get(session).and_then(|s| s.turn.clone());
        if let Some(turn) = turn {
            if let Err(e) = self.driver.interrupt(session, &turn) {
                eprintln!("codewhale serve --acp: session/cancel: {e}");
            }
        }
    }

    fn send_update(&self, session: &str, u: agent_client_protocol_schema::v1::SessionUpdate) {
        match serde_json::to_value(SessionNotification::new(session.to_string(), u)) {
            Ok(v) => self.peer.notify("session/update", v),
            Err(e) => eprintln!("codewhale serve --acp: session/update: {e}"),
        }
    }

    async fn prompt(self: &Arc<Self>, params: &Value) -> RpcResult {
        let req: PromptRequest = parse(params)?;
        let id = req.session_id.to_string();
        let text = prompt_text(&req.prompt);
        if text.trim().is_empty() {
            return Err(params_err("prompt: no text in the content blocks"));
        }
        let (cwd, mode) = {
            let s = self.sessions();
            let Some(sess) = s.get(&id) else {
                return Err(params_err(format!(
                    "sessionId: no session `{id}` (session/new or session/load first)"
                )));
            };
            if sess.turn.is_some() {
                return Err((
                    -32009,
                    format!("sessionId: session `{id}` already has a prompt running"),
                ));
            }
            (sess.cwd.clone(), mode_of(&sess.mode).unwrap_or(Mode::Work))
        };
        let rt = self.driver.runtime().clone();
        let since = rt.read(|s| {
            s.thread_events
                .get(&id)
                .and_then(|v| v.last())
                .map_or(0, |r| r.seq)
        });
        let mut sub = rt.subscribe(&id, since, None);
        let d = self.driver.clone();
        let tid = id.clone();
        let turn = tokio::task::spawn_blocking(move || d.start_in_mode(&tid, text, mode))
            .await
            .map_err(internal)?
            .map_err(|e| (-32603, e.to_string()))?;
        if let Some(s) = self.sessions().get_mut(&id) {
            s.turn = Some(turn.id.clone());
        }
        let mut m = Mapper::live(&cwd, &turn.id);
        let mut asks: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
        let end = 'turn: loop {
            let Some(batch) = sub.next().await else {
                break TurnEnd::Failed("the runtime's event stream ended".into());
            };
            for env in batch {
                for a in m.map(&env) {
                    match a {
                        Action::Update(u) => self.send_update(&id, u),
                        Action::Ask(q) => {
                            let h = self.ask(&id, q.clone());
                            if let Some(h) = h {
                                asks.insert(q.approval_id, h);
                            }
                        }
                        Action::Settled { approval_id } => {
                            // Settled elsewhere (timeout, turn end): stop
                            // waiting for the editor.
                            if let Some(h) = asks.remove(&approval_id) {
                                h.abort();
                            }
                        }
                        Action::Done(e) => break 'turn e,
                    }
                }
            }
        };
        for (_, h) in asks {
            h.abort();
        }
        if let Some(s) = self.sessions().get_mut(&id) {
            s.turn = None;
        }
        match end {
            TurnEnd::Stop(r) => serde_json::to_value(PromptResponse::new(r)).map_err(internal),
            TurnEnd::Failed(e) => Err((-32603, e)),
        }
    }

    /// Put a question to the editor; the task settles the runtime's
    /// request with the answer. `allow_always` is `remember: true`, which
    /// the runtime turns into the thread's session grant (the pipeline's
    /// own session rule): later calls of the same kind pass gate 8
    /// without a question, so they never reach this adapter.
    fn ask(self: &Arc<Self>, session: &str, q: Question) -> Option<tokio::task::JoinHandle<()>> {
        let rt = self.driver.runtime().clone();
        let options = vec![
            PermissionOption::new("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "allow_always",
                "Always allow in this session",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ];
        let mut meta = serde_json::Map::new();
        meta.insert("codewhale/reason".into(), json!(q.reason));
        let req = RequestPermissionRequest::new(
            session.to_string(),
            ToolCallUpdate::new(q.tool_call_id.clone(), q.fields.clone()),
            options,
        )
        .meta(meta);
        let params = match serde_json::to_value(req) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("codewhale serve --acp: request_permission: {e}");
                return None;
            }
        };
        let rx = self.peer.request("session/request_permission", params);
        Some(tokio::spawn(async move {
            let reply = rx.await;
            let how = match reply {
                Ok(Ok(v)) => match serde_json::from_value::<RequestPermissionResponse>(v) {
                    Ok(r) => match r.outcome {
                        RequestPermissionOutcome::Selected(s) => {
                            match s.option_id.to_string().as_str() {
                                "allow_once" => Settlement::Answered(Answer::Approval {
                                    allow: true,
                                    remember: false,
                                }),
                                "allow_always" => Settlement::Answered(Answer::Approval {
                                    allow: true,
                                    remember: true,
                                }),
                                _ => Settlement::Answered(Answer::Approval {
                                    allow: false,
                                    remember: false,
                                }),
                            }
                        }
                        // The editor withdrew the question (the prompt was
                        // cancelled): not an answer.
                        _ => Settlement::TimedOut,
                    },
                    Err(e) => {
                        eprintln!("codewhale serve --acp: request_permission response: {e}");
                        Settlement::TimedOut
                    }
                },
                // An error answer, or the connection closed: nobody answered.
                _ => Settlement::TimedOut,
            };
            // Already settled (timeout, turn over) is fine: one settlement.
            let _ = rt.settle(&q.approval_id, Some(RequestKind::Approval), None, None, how);
        }))
    }
}

/// The prompt's text: text blocks, links as `@uri`, embedded text
/// resources with their uri (images and audio are not advertised).
pub fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => out.push(t.text.clone()),
            ContentBlock::ResourceLink(l) => out.push(format!("@{}", l.uri)),
            ContentBlock::Resource(r) => {
                let v = serde_json::to_value(&r.resource).unwrap_or(Value::Null);
                if let (Some(uri), Some(text)) = (v["uri"].as_str(), v["text"].as_str()) {
                    out.push(format!("<file uri=\"{uri}\">\n{text}\n</file>"));
                }
            }
            _ => {}
        }
    }
    out.join("\n")
}

fn check_cwd(p: &std::path::Path) -> Result<PathBuf, (i64, String)> {
    if !p.is_absolute() {
        return Err(params_err(format!(
            "cwd: `{}` is not an absolute path",
            p.display()
        )));
    }
    std::fs::canonicalize(p)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| params_err(format!("cwd: `{}` is not a directory", p.display())))
}

fn provider_has_key(ws: &std::path::Path, home: &std::path::Path) -> Result<(), String> {
    let settings =
        crate::config::load(&crate::config::LoadOptions::new(ws)).map_err(|e| e.to_string())?;
    let cfg =
        crate::provider::config::ExecConfig::from_settings(&settings).map_err(|e| e.to_string())?;
    let store = crate::provider::auth::AuthStore::new(home);
    let env = |n: &str| std::env::var(n).ok();
    let s = crate::provider::registry::select(None, None, &cfg, &store, &env)
        .map_err(|e| e.to_string())?;
    if s.key_source == crate::provider::registry::KeySource::Missing {
        return Err(format!(
            "no API key for provider {}: run `codewhale auth set --provider {}`",
            s.id, s.id
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn prompt_text_keeps_text_links_and_embedded_text() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "fix it"},
            {"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}
        ]))
        .unwrap();
        let t = prompt_text(&blocks);
        assert!(t.starts_with("fix it\n@file:///w/a.rs\n"), "{t}");
        assert!(t.contains("fn b() {}"), "{t}");
    }

    #[test]
    fn modes_are_the_posture_modes() {
        for (id, _, _) in MODES {
            assert!(mode_of(id).is_some());
        }
        assert!(mode_of("yolo").is_none());
    }
}
