//! `codewhale serve --mcp`: codewhale's tools as an MCP stdio server, on
//! the official Rust SDK (`rmcp`).
//!
//! Every `tools/call` is authorized by the nine gates in a non-interactive
//! posture (the `exec` one without `--auto`: a call the gates would ask
//! about is denied with its reason, since nobody here can answer) and then
//! run by the agent's own tool executors, whose commands go through
//! [`crate::host::run`] under the resolved sandbox policy. The result says
//! how the call was sandboxed.
//!
//! Protocol versions: the initialize-era 2024-11-05, 2025-03-26,
//! 2025-06-18 and 2025-11-25. `server/discover` (the 2026 stateless era)
//! is answered `-32601` by a line filter in front of the SDK, before the
//! SDK sees it, so a dual-era client falls back to `initialize` at once
//! whatever `_meta` it sent. stdout carries protocol lines only.

pub mod offered;

use crate::agent::authorizer::{Authorizer, ToolCallRequest, TurnContext};
use crate::agent::tools::{self, guard::FsGuard, ToolContext, ToolOutput, ToolStatus};
use crate::agent::{exec_posture, PipelineAuthorizer};
use crate::config::{LoadOptions, RulesFile, SandboxContext, SandboxFlags};
use crate::policy::{resolve, HostFacts, SandboxMode};
use offered::{self as server_tools, McpTool, MCP_TOOLS};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The newest initialize-era version; what we answer a client that asks
/// for a version we do not know.
pub const LATEST: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The gates and the host, set up once for the server's workspace.
pub struct Gatekeeper {
    authorizer: PipelineAuthorizer,
    ctx: ToolContext,
    workspace: PathBuf,
    mode: SandboxMode,
    calls: AtomicU64,
}

/// What one `tools/call` came to, before it is put into MCP's shape.
#[derive(Debug)]
pub struct CallOutcome {
    pub text: String,
    pub is_error: bool,
    pub structured: Value,
}

impl Gatekeeper {
    /// Resolve the workspace's settings as `exec` does (config layers,
    /// rules, posture without `--auto`, sandbox policy).
    pub fn load(workspace: &Path) -> anyhow::Result<Self> {
        let mut o = LoadOptions::new(workspace);
        let sandbox = SandboxContext::load_with(&mut o, &SandboxFlags::default(), RulesFile::Load)?;
        let (posture, sandbox, notes) = exec_posture(sandbox, false, None);
        for n in notes {
            eprintln!("codewhale serve --mcp: {n}");
        }
        let resolved = resolve(&sandbox.policy, &HostFacts::detect())?;
        let authorizer = PipelineAuthorizer::new(&sandbox.settings, posture, sandbox.mode());
        Ok(Gatekeeper {
            authorizer,
            mode: sandbox.mode(),
            ctx: ToolContext {
                guard: FsGuard::new(&resolved),
                policy: sandbox.policy.clone(),
                host: sandbox.host.clone(),
                cancel: crate::host::CancelToken::new(),
                // `serve --mcp` offers codewhale's own tools only.
                mcp: None,
                skills: None,
                memory: None,
                jobs: Default::default(),
            },
            workspace: sandbox.settings.workspace.clone(),
            calls: AtomicU64::new(0),
        })
    }

    pub fn sandbox_mode(&self) -> SandboxMode {
        self.mode
    }

    /// One call: look up, map arguments, gates 1–8 (a question is denied:
    /// nobody can answer), then the tool through the host. `cancelled`
    /// resolving kills a running command (the host still cleans up).
    pub async fn call(
        &self,
        tool: &McpTool,
        args: &Map<String, Value>,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> CallOutcome {
        let args = match server_tools::agent_args(tool, args) {
            Ok(a) => a,
            Err(e) => return refused(tool, "bad_arguments", &e, json!(null)),
        };
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let command = (tool.agent_tool == "shell")
            .then(|| crate::catalogue::shell_command_line(&args))
            .flatten();
        let req = ToolCallRequest {
            call_id: format!("mcp-{n}"),
            tool: tool.agent_tool.to_string(),
            args: args.clone(),
            command,
        };
        let tctx = TurnContext {
            workspace: self.workspace.clone(),
            auto: false,
            headless: true,
            agent: None,
        };
        let v = self.authorizer.authorize(&req, &tctx).await;
        let verdict = json!({
            "decision": v.decision.as_str(), "outcome": v.outcome(),
            "decided_by": v.decided_by.as_str(), "gate": v.reported_gate().number(),
            "reason": v.reason,
        });
        if !v.is_allowed() {
            // The question the gates asked, in its own words: the
            // headless reason's advice (`--auto`) is exec's, not ours.
            let why = if let (Some(q), "no_response") = (&v.question, v.outcome()) {
                format!(
                    "not run: {} (asked by {} at gate {}); this MCP server cannot ask anyone, so what would ask is denied. A rule in permissions.toml can allow it.",
                    q.reason,
                    q.asked_by.as_str(),
                    q.gate.number()
                )
            } else {
                format!(
                    "not run: denied by {} (gate {}): {}",
                    v.decided_by.as_str(),
                    v.reported_gate().number(),
                    v.reason
                )
            };
            return refused(tool, "not_approved", &why, verdict);
        }
        let mut ctx = self.ctx.clone();
        ctx.cancel = crate::host::CancelToken::new();
        let out = {
            let fut = tools::execute(tool.agent_tool, &args, &ctx);
            tokio::pin!(fut);
            tokio::pin!(cancelled);
            tokio::select! {
                o = &mut fut => o,
                _ = &mut cancelled => {
                    ctx.cancel.cancel();
                    fut.await
                }
            }
        };
        self.render(tool, out, verdict)
    }

    fn render(&self, tool: &McpTool, o: ToolOutput, verdict: Value) -> CallOutcome {
        // File tools: the in-process guard (gate 9) checked every path.
        const GUARD: &str = "in-process path guard (no process was started)";
        let sandbox = match (&o.enforced, &o.enforcement) {
            (Some(e), label) => json!({"mode": self.mode.to_string(), "enforcement": label,
                "backend": e.summary.backend, "level": e.summary.level, "partial": e.summary.partial}),
            (None, Some(label)) => json!({"mode": self.mode.to_string(), "enforcement": label}),
            (None, None) => json!({"mode": self.mode.to_string(), "enforcement": GUARD}),
        };
        // The text line from the typed values the JSON above was built from.
        let label = match (&o.enforced, &o.enforcement) {
            (_, Some(l)) => Some(l.joined()),
            (None, None) => Some(GUARD.to_string()),
            (Some(_), None) => None,
        };
        let level = o.enforced.as_ref().map(|e| e.summary.level);
        let how = match (label, level) {
            (Some(l), None) => format!("sandbox: {} — {l}", self.mode),
            (Some(l), Some(lv)) => format!("sandbox: {} — {l} (level {lv})", self.mode),
            (None, _) => format!("sandbox: {}", self.mode),
        };
        let mut text = o.content.clone();
        text.push_str(&format!("\n[{how}]"));
        if tool.name == "codewhale_sandbox_run" {
            for item in o.enforced.iter().flat_map(|e| e.summary.partial.iter()) {
                text.push_str(&format!("\n[partial: {}]", json!(item)));
            }
        }
        CallOutcome {
            is_error: o.status != ToolStatus::Ok,
            structured: json!({
                "tool": tool.name, "agent_tool": tool.agent_tool, "status": o.status.as_str(),
                "exit_code": o.exit_code, "error_category": o.error_category,
                "files_touched": o.files_touched, "truncated": o.truncated,
                "sandbox_denied": o.sandbox_denied.as_ref().map(|d| json!({"path": d.path, "reason": d.reason, "inferred": d.inferred})),
                "authorization": verdict, "sandbox": sandbox,
            }),
            text,
        }
    }
}

fn refused(tool: &McpTool, category: &str, why: &str, verdict: Value) -> CallOutcome {
    CallOutcome {
        text: why.to_string(),
        is_error: true,
        structured: json!({"tool": tool.name, "agent_tool": tool.agent_tool, "status": "not_run",
            "error_category": category, "authorization": verdict, "sandbox": null}),
    }
}

/// The rmcp handler.
#[derive(Clone)]
pub struct McpServer {
    gate: Arc<Gatekeeper>,
}

impl McpServer {
    pub fn new(gate: Gatekeeper) -> Self {
        McpServer {
            gate: Arc::new(gate),
        }
    }

    fn tool_list(&self) -> Vec<Tool> {
        MCP_TOOLS
            .iter()
            .filter_map(|n| server_tools::lookup(n))
            .map(|t| {
                let schema = match t.input_schema {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                let mut ann = ToolAnnotations::new();
                ann.read_only_hint = Some(t.read_only);
                ann.open_world_hint = Some(false);
                Tool::new(t.name, t.description, schema).with_annotations(ann)
            })
            .collect()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(LATEST)
            .with_server_info(Implementation::new("codewhale", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "codewhale's tools. Every call passes codewhale's nine authorization gates without a person to ask (what would ask is denied) and runs under its sandbox (mode {}).",
                self.gate.sandbox_mode()
            ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&LATEST))
    }

    async fn discover(&self, _c: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        Err(McpError::method_not_found::<
            rmcp::model::DiscoverRequestMethod,
        >())
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_list().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        r: CallToolRequestParams,
        c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = server_tools::lookup(&r.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`: this server has {}",
                    r.name,
                    MCP_TOOLS.join(", ")
                ),
                None,
            ));
        };
        let args = r.arguments.unwrap_or_default();
        let ct = c.ct.clone();
        let o = self.gate.call(&tool, &args, ct.cancelled_owned()).await;
        let mut res = if o.is_error {
            CallToolResult::error(vec![ContentBlock::text(o.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(o.text)])
        };
        res.structured_content = Some(o.structured);
        Ok(res.into())
    }
}

/// The `-32601` answer to a `server/discover` line (`Value::Null` for a
/// discover notification: dropped, nothing to answer), or `None` for any
/// other line (which goes on to the SDK unchanged).
pub fn discover_refusal(line: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("method")?.as_str()? != "server/discover" {
        return None;
    }
    let Some(id) = v.get("id").cloned() else {
        return Some(Value::Null);
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601,
        "message": "method not found: server/discover (this server speaks the initialize-era protocol: send `initialize`)"}}))
}

/// Serve MCP on stdin/stdout until the client closes stdin.
pub async fn serve(gate: Gatekeeper) -> anyhow::Result<()> {
    let (sdk_side, our_side) = tokio::io::duplex(1 << 16);
    let (sdk_r, sdk_w) = tokio::io::split(sdk_side);
    let (our_r, mut our_w) = tokio::io::split(our_side);
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(mut line) = rx.recv().await {
            line.push('\n');
            if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    // The SDK's answers, line by line, onto the one stdout writer.
    let tx2 = tx.clone();
    let from_sdk = tokio::spawn(async move {
        let mut lines = BufReader::new(our_r).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            if tx2.send(l).is_err() {
                break;
            }
        }
    });
    let tx3 = tx.clone();
    let to_sdk = tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            if let Some(refusal) = discover_refusal(&l) {
                if !refusal.is_null() {
                    eprintln!("codewhale serve --mcp: server/discover answered -32601 (initialize-era server)");
                    let _ = tx3.send(refusal.to_string());
                }
                continue;
            }
            let mut l = l;
            l.push('\n');
            if our_w.write_all(l.as_bytes()).await.is_err() {
                break;
            }
        }
        let _ = our_w.shutdown().await;
    });
    drop(tx);
    let running = McpServer::new(gate).serve((sdk_r, sdk_w)).await;
    match running {
        Ok(r) => {
            let _ = r.waiting().await;
        }
        Err(e) => eprintln!("codewhale serve --mcp: {e}"),
    }
    to_sdk.abort();
    let _ = from_sdk.await;
    let _ = writer.await;
    Ok(())
}

/// `codewhale serve --mcp [-C DIR]`.
pub fn run(workspace: Option<PathBuf>) -> anyhow::Result<i32> {
    use anyhow::Context;
    let ws = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("current directory")?,
    };
    let ws = std::fs::canonicalize(&ws).with_context(|| format!("-C {}", ws.display()))?;
    let gate = Gatekeeper::load(&ws)?;
    eprintln!(
        "codewhale serve --mcp: workspace {} (sandbox {}); speaking MCP on stdio",
        ws.display(),
        gate.sandbox_mode()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(serve(gate))?;
    rt.shutdown_background();
    Ok(crate::exit::OK)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn discover_is_refused_and_nothing_else_is() {
        let r =
            discover_refusal(r#"{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{}}"#)
                .unwrap();
        assert_eq!(r["error"]["code"], -32601);
        assert_eq!(r["id"], 7);
        assert!(discover_refusal(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).is_none());
        assert!(discover_refusal("not json").is_none());
        // A notification gets no answer.
        assert_eq!(
            discover_refusal(r#"{"jsonrpc":"2.0","method":"server/discover"}"#),
            Some(Value::Null)
        );
    }

    #[test]
    fn versions_are_the_initialize_era_ones() {
        let v: Vec<&str> = ProtocolVersion::known_up_to(&LATEST)
            .iter()
            .map(|v| v.as_str())
            .collect();
        for want in ["2024-11-05", "2025-06-18", "2025-11-25"] {
            assert!(v.contains(&want), "{v:?}");
        }
        assert!(!v.contains(&"2026-07-28"));
    }
}
