//! The MCP client: the servers of `~/.codewhale/mcp.json`, started under
//! the sandbox, their tools offered to the model as
//! `mcp__<server>__<tool>`.
//!
//! Invariants:
//! - Starting never blocks the caller: [`McpManager::start`] returns at
//!   once and each server starts on its own task, concurrently; status
//!   reads ([`McpManager::status`], [`McpManager::tools`]) take a short
//!   lock and never wait for a server.
//! - Every server is a host run under its own policy
//!   ([`client_transport::server_policy`]); nothing here spawns a process.
//! - A server that does not initialize within its startup timeout is
//!   stopped and shown failed; one that exits is shown failed with its
//!   exit and the end of its stderr log. Nothing is restarted
//!   automatically (no hot loop): [`McpManager::reload`] (`/mcp reload`,
//!   `codewhale mcp list`) starts them again, and so does
//!   [`McpManager::reload_if_changed`] once `mcp.json` has changed.
//! - Tool annotations (`readOnlyHint`, …) are kept for display only: every
//!   MCP tool is `ToolKind::Mcp` for the gates, which ask about it.

use super::client_names;
use super::client_transport::{self, StdoutJunk};
use super::config::{self, McpConfigError, McpFile, ServerEntry};
use crate::host::{CancelToken, HostSettings};
use crate::policy::SandboxPolicy;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RunningService};
use rmcp::RoleClient;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[path = "client_start.rs"]
mod start;

/// What the manager needs to start servers.
#[derive(Clone, Debug)]
pub struct ManagerSpec {
    /// `mcp.json` (read again by [`McpManager::reload`]).
    pub config_file: PathBuf,
    /// The run's policy; each server's is derived from it.
    pub base_policy: SandboxPolicy,
    pub host: HostSettings,
    /// Where each server's stderr log goes (`<dir>/<server>.log`).
    pub log_dir: PathBuf,
}

impl ManagerSpec {
    /// The default places under the codewhale home: `mcp.json`, and the
    /// logs in the state directory `logs/mcp/`.
    pub fn new(codewhale_home: &Path, base_policy: SandboxPolicy, host: HostSettings) -> Self {
        ManagerSpec {
            config_file: config::path(codewhale_home),
            base_policy,
            host,
            log_dir: codewhale_home.join("logs").join("mcp"),
        }
    }
}

/// One MCP tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    pub server: String,
    /// The name the server knows it by.
    pub tool: String,
    pub description: String,
    /// The tool's JSON Schema for its arguments (always an object schema).
    pub input_schema: Value,
    /// The server's annotations, shown but never trusted.
    pub annotations: Option<Value>,
}

/// Where a server is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Disabled,
    Starting,
    Ready,
    Failed,
    Stopped,
}

/// One server's status (`codewhale mcp list --json`).
#[derive(Clone, Debug, Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// In `mcp.json` (always true for a listed server).
    pub configured: bool,
    pub enabled: bool,
    pub command: String,
    pub command_found: bool,
    /// Its process was started under the sandbox.
    pub started: bool,
    /// It answered `initialize` and `tools/list`.
    pub initialized: bool,
    pub state: Phase,
    pub tools: usize,
    pub tool_names: Vec<String>,
    pub last_error: Option<String>,
    /// Non-protocol lines it wrote to stdout.
    pub stdout_junk: StdoutJunk,
    pub stderr_log: PathBuf,
    /// The sandbox mode it runs under.
    pub sandbox: String,
    pub network: bool,
    /// The backend the host selected for it.
    pub backend: Option<String>,
    /// `name version` from its `initialize` answer.
    pub server_info: Option<String>,
    pub startup_timeout_sec: u64,
    pub tool_timeout_sec: u64,
    /// What the host reported it enforced for the server's run: known
    /// once the process has ended (backend, level, partial items).
    pub enforced: Option<crate::host::EnforcementSummary>,
}

/// A failed tool call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// `unknown_tool`, `mcp_unavailable`, `mcp_timeout`, `mcp_error`, `cancelled`.
    pub category: &'static str,
    pub message: String,
}

/// A finished tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallResult {
    /// The content as text for the model.
    pub text: String,
    /// The server flagged the result as an error (`isError`).
    pub is_error: bool,
    /// How the server is sandboxed, for the tool result and receipt.
    pub enforcement: String,
}

struct State {
    phase: Phase,
    command_found: bool,
    started: bool,
    initialized: bool,
    last_error: Option<String>,
    tools: Vec<McpTool>,
    peer: Option<Peer<RoleClient>>,
    service: Option<RunningService<RoleClient, ()>>,
    junk: Arc<Mutex<StdoutJunk>>,
    backend: Option<String>,
    server_info: Option<String>,
    enforced: Option<crate::host::EnforcementSummary>,
}

struct Server {
    name: String,
    entry: ServerEntry,
    policy: SandboxPolicy,
    log: PathBuf,
    /// Stops the process (the host kills its whole tree).
    cancel: CancelToken,
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Server {
    fn fail(&self, why: String) {
        let mut s = lock(&self.state);
        if s.phase == Phase::Stopped {
            return;
        }
        s.phase = Phase::Failed;
        s.last_error = Some(why);
        s.tools.clear();
        s.peer = None;
        s.service = None;
    }

    fn stopping(&self) -> bool {
        lock(&self.state).phase == Phase::Stopped
    }

    fn enforcement(&self, backend: Option<&str>) -> String {
        format!(
            "mcp server `{}`: {}, network {}, backend {}",
            self.name,
            self.policy.mode,
            if self.policy.network { "on" } else { "off" },
            backend.unwrap_or("unknown")
        )
    }

    fn status(&self) -> ServerStatus {
        let s = lock(&self.state);
        let junk = lock(&s.junk).clone();
        ServerStatus {
            name: self.name.clone(),
            configured: true,
            enabled: self.entry.enabled,
            command: self.entry.command.clone(),
            command_found: s.command_found,
            started: s.started,
            initialized: s.initialized,
            state: s.phase,
            tools: s.tools.len(),
            tool_names: s.tools.iter().map(|t| t.name.clone()).collect(),
            last_error: s.last_error.clone(),
            stdout_junk: junk,
            stderr_log: self.log.clone(),
            sandbox: self.policy.mode.to_string(),
            network: self.policy.network,
            backend: s.backend.clone(),
            server_info: s.server_info.clone(),
            startup_timeout_sec: self.entry.startup_timeout().as_secs(),
            tool_timeout_sec: self.entry.tool_timeout().as_secs(),
            enforced: s.enforced.clone(),
        }
    }

    fn stop(&self) {
        let service = {
            let mut s = lock(&self.state);
            if matches!(s.phase, Phase::Starting | Phase::Ready) {
                s.phase = Phase::Stopped;
            }
            s.tools.clear();
            s.peer = None;
            s.service.take()
        };
        self.cancel.cancel();
        drop(service);
    }
}

/// The running set of servers of one `mcp.json`.
pub struct McpManager {
    spec: ManagerSpec,
    runtime: tokio::runtime::Handle,
    servers: Mutex<Vec<Arc<Server>>>,
    /// Servers started besides those of `mcp.json` (an ACP editor's, for
    /// one session); an extra server replaces a file server of its name.
    extra: BTreeMap<String, ServerEntry>,
    /// The bytes of `mcp.json` the running set was started from (`None`:
    /// no file), to notice a changed file.
    seen: Mutex<Option<Vec<u8>>>,
}

/// The bytes of `file` now (`None` when it cannot be read: missing).
fn fingerprint(file: &Path) -> Option<Vec<u8>> {
    std::fs::read(file).ok()
}

impl McpManager {
    /// Read the configuration and start every enabled server, each on its
    /// own task; returns at once. Must be called inside a tokio runtime.
    pub fn start(spec: ManagerSpec) -> Result<Arc<McpManager>, McpConfigError> {
        Self::start_on(spec, tokio::runtime::Handle::current())
    }

    /// [`Self::start`] with the servers' tasks on `runtime` (which must
    /// outlive the manager's use).
    pub fn start_on(
        spec: ManagerSpec,
        runtime: tokio::runtime::Handle,
    ) -> Result<Arc<McpManager>, McpConfigError> {
        let seen = fingerprint(&spec.config_file);
        let doc = config::load(&spec.config_file)?;
        Ok(Self::start_doc(spec, runtime, doc, BTreeMap::new(), seen))
    }

    /// Start the servers of `mcp.json` plus `extra` (the ones an editor
    /// passes in ACP's `session/new`; their names must pass
    /// [`config::check_name`]); an extra server replaces a file server of
    /// the same name. A bad `mcp.json` starts the extra servers alone and
    /// says why in the returned note. [`Self::reload`] reads the file
    /// again and keeps `extra`.
    pub fn start_with(
        spec: ManagerSpec,
        runtime: tokio::runtime::Handle,
        extra: BTreeMap<String, ServerEntry>,
    ) -> (Arc<McpManager>, Option<String>) {
        let seen = fingerprint(&spec.config_file);
        let (doc, note) = match config::load(&spec.config_file) {
            Ok(d) => (d, None),
            Err(e) => (McpFile::default(), Some(format!("mcp.json not used: {e}"))),
        };
        (Self::start_doc(spec, runtime, doc, extra, seen), note)
    }

    fn start_doc(
        spec: ManagerSpec,
        runtime: tokio::runtime::Handle,
        doc: McpFile,
        extra: BTreeMap<String, ServerEntry>,
        seen: Option<Vec<u8>>,
    ) -> Arc<McpManager> {
        let m = Arc::new(McpManager {
            spec,
            runtime,
            servers: Mutex::new(Vec::new()),
            extra,
            seen: Mutex::new(seen),
        });
        let doc = m.merged(doc);
        m.launch(doc);
        m
    }

    fn merged(&self, mut doc: McpFile) -> McpFile {
        for (name, e) in &self.extra {
            doc.mcp_servers.insert(name.clone(), e.clone());
        }
        doc
    }

    /// Whether anything would start: an enabled server in the set.
    pub fn any_enabled(&self) -> bool {
        lock(&self.servers).iter().any(|s| s.entry.enabled)
    }

    /// Stop every server, read `mcp.json` again and start what it lists
    /// (the TUI's `/mcp reload`). A bad file leaves the running servers as
    /// they are and says why.
    pub fn reload(&self) -> Result<Vec<ServerStatus>, McpConfigError> {
        let seen = fingerprint(&self.spec.config_file);
        let result = config::load(&self.spec.config_file);
        // Remember the bytes even when they are bad: one error per change,
        // not one per turn.
        *lock(&self.seen) = seen;
        let doc = self.merged(result?);
        self.stop_all();
        self.launch(doc);
        Ok(self.status())
    }

    /// [`Self::reload`] when `mcp.json`'s bytes differ from the ones the
    /// running set was started from (`None`: unchanged, nothing done).
    /// The runtime calls this at every turn start, so an edited file takes
    /// effect at the next turn without a restart.
    pub fn reload_if_changed(&self) -> Option<Result<Vec<ServerStatus>, McpConfigError>> {
        let now = fingerprint(&self.spec.config_file);
        if *lock(&self.seen) == now {
            return None;
        }
        Some(self.reload())
    }

    fn launch(&self, doc: McpFile) {
        // Logs are best effort; the status names the path anyway.
        let _ = std::fs::create_dir_all(&self.spec.log_dir);
        if doc.mcp_servers.values().any(|e| e.enabled) {
            ensure_caches();
        }
        let mut list = Vec::new();
        for (name, entry) in doc.mcp_servers {
            let policy = client_transport::server_policy(&self.spec.base_policy, &entry);
            let phase = if entry.enabled {
                Phase::Starting
            } else {
                Phase::Disabled
            };
            let server = Arc::new(Server {
                log: self.spec.log_dir.join(format!("{name}.log")),
                name,
                entry,
                policy,
                cancel: CancelToken::new(),
                state: Mutex::new(State {
                    phase,
                    command_found: false,
                    started: false,
                    initialized: false,
                    last_error: None,
                    tools: Vec::new(),
                    peer: None,
                    service: None,
                    junk: Arc::default(),
                    backend: None,
                    server_info: None,
                    enforced: None,
                }),
            });
            if server.entry.enabled {
                let s = server.clone();
                let host = self.spec.host.clone();
                self.runtime.spawn(start::run_server(s, host));
            }
            list.push(server);
        }
        *lock(&self.servers) = list;
    }

    /// Stop every server (also done when the manager is dropped).
    pub fn stop_all(&self) {
        for s in lock(&self.servers).iter() {
            s.stop();
        }
    }

    pub fn config_file(&self) -> &Path {
        &self.spec.config_file
    }

    /// Every configured server's status, now (never waits).
    pub fn status(&self) -> Vec<ServerStatus> {
        lock(&self.servers).iter().map(|s| s.status()).collect()
    }

    /// The tools of the servers that are ready now.
    pub fn tools(&self) -> Vec<McpTool> {
        lock(&self.servers)
            .iter()
            .flat_map(|s| lock(&s.state).tools.clone())
            .collect()
    }

    /// Whether a server is still starting.
    pub fn starting(&self) -> bool {
        lock(&self.servers)
            .iter()
            .any(|s| lock(&s.state).phase == Phase::Starting)
    }

    /// The longest startup timeout among the enabled servers.
    pub fn startup_bound(&self) -> Duration {
        lock(&self.servers)
            .iter()
            .filter(|s| s.entry.enabled)
            .map(|s| s.entry.startup_timeout())
            .max()
            .unwrap_or_default()
    }

    /// Wait until no server is starting, at most `bound` (each server's
    /// own startup timeout also ends its start).
    pub async fn wait_settled(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while self.starting() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Call the MCP tool offered as `name` with `args` (a JSON object),
    /// bounded by the server's tool timeout; `cancel` ends the wait.
    pub async fn call(
        &self,
        name: &str,
        args: &Value,
        cancel: &CancelToken,
    ) -> Result<CallResult, CallError> {
        let found = lock(&self.servers).iter().find_map(|s| {
            let st = lock(&s.state);
            st.tools.iter().find(|t| t.name == name).map(|t| {
                (
                    s.clone(),
                    t.tool.clone(),
                    st.peer.clone(),
                    st.backend.clone(),
                )
            })
        });
        let Some((server, tool, peer, backend)) = found else {
            let known = lock(&self.servers).iter().find_map(|s| {
                name.strip_prefix(&format!("{}{}__", client_names::PREFIX, s.name))
                    .map(|_| s.status())
            });
            return Err(match known {
                Some(st) if st.state != Phase::Ready => CallError {
                    category: "mcp_unavailable",
                    message: format!(
                        "MCP server `{}` is {}{}",
                        st.name,
                        serde_json::to_value(st.state)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                        st.last_error.map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                },
                _ => CallError {
                    category: "unknown_tool",
                    message: format!("no MCP tool named `{name}`"),
                },
            });
        };
        let Some(peer) = peer else {
            return Err(CallError {
                category: "mcp_unavailable",
                message: format!("MCP server `{}` is not connected", server.name),
            });
        };
        let arguments = match args {
            Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        let params = CallToolRequestParams::new(tool).with_arguments(arguments);
        let timeout = server.entry.tool_timeout();
        let call = tokio::time::timeout(timeout, peer.call_tool(params));
        tokio::pin!(call);
        let cancelled = async {
            while !cancel.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let out = tokio::select! {
            r = &mut call => r,
            _ = cancelled => return Err(CallError {
                category: "cancelled",
                message: "cancelled".into(),
            }),
        };
        let enforcement = server.enforcement(backend.as_deref());
        match out {
            Err(_) => Err(CallError {
                category: "mcp_timeout",
                message: format!(
                    "MCP server `{}` did not answer within {} s (toolTimeoutSec)",
                    server.name,
                    timeout.as_secs()
                ),
            }),
            Ok(Err(e)) => Err(CallError {
                category: "mcp_error",
                message: format!("MCP server `{}`: {e}", server.name),
            }),
            Ok(Ok(result)) => {
                let v = serde_json::to_value(&result).unwrap_or(Value::Null);
                Ok(CallResult {
                    text: result_text(&v),
                    is_error: v["isError"].as_bool().unwrap_or(false),
                    enforcement,
                })
            }
        }
    }
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("config_file", &self.spec.config_file)
            .field(
                "servers",
                &lock(&self.servers)
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The sandbox makes the npm and XDG caches writable only if they exist
/// (`docs/SANDBOX.md`); on a fresh machine `npx`/`uvx` servers would then
/// fail to start, so the two directories are created (empty) first.
fn ensure_caches() {
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        return;
    };
    let home = PathBuf::from(home);
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cache"));
    for dir in [home.join(".npm"), xdg] {
        let _ = std::fs::create_dir_all(dir);
    }
}

/// The text of a `tools/call` result for the model: text blocks as they
/// are, other blocks described, `structuredContent` when there is no
/// content.
pub fn result_text(v: &Value) -> String {
    let mut parts = Vec::new();
    for c in v["content"].as_array().into_iter().flatten() {
        match c["type"].as_str() {
            Some("text") => parts.push(c["text"].as_str().unwrap_or("").to_string()),
            Some("image") | Some("audio") => parts.push(format!(
                "[{} {}, {} base64 characters]",
                c["type"].as_str().unwrap_or(""),
                c["mimeType"].as_str().unwrap_or("?"),
                c["data"].as_str().map_or(0, str::len)
            )),
            Some("resource") => match c["resource"]["text"].as_str() {
                Some(t) => parts.push(t.to_string()),
                None => parts.push(format!(
                    "[resource {}]",
                    c["resource"]["uri"].as_str().unwrap_or("?")
                )),
            },
            Some("resource_link") => parts.push(format!(
                "[resource link {}]",
                c["uri"].as_str().unwrap_or("?")
            )),
            _ => parts.push(c.to_string()),
        }
    }
    if parts.is_empty() {
        if let Some(s) = v.get("structuredContent").filter(|s| !s.is_null()) {
            parts.push(s.to_string());
        }
    }
    parts.join("\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_text_keeps_text_and_describes_the_rest() {
        let v = json!({"content": [
            {"type": "text", "text": "Echo: hi"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "x://a", "text": "body"}},
        ], "isError": false});
        assert_eq!(
            result_text(&v),
            "Echo: hi\n[image image/png, 4 base64 characters]\nbody"
        );
        assert_eq!(
            result_text(&json!({"content": [], "structuredContent": {"a": 1}})),
            "{\"a\":1}"
        );
    }
}
