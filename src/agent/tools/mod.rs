//! The tools the model can call. File tools check every path with the
//! in-process [`guard::FsGuard`]; `shell` runs only through
//! [`crate::host::run`] — nothing here spawns a process.

#[cfg(target_os = "linux")]
pub mod beneath;
pub mod edit_diff;
pub mod files;
pub mod guard;
pub mod jobs;
pub mod patch;
pub mod shell;
pub mod skill;
pub mod todo;

use crate::host::{EnforcementSummary, HostSettings};
use crate::policy::SandboxPolicy;
use crate::provider::ToolSpec;
use guard::{FsGuard, GuardError, OpenError};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Bytes of tool output sent back to the model.
pub const MODEL_OUTPUT_CAP: usize = 64 * 1024;

/// Every tool this loop has an executor for, in the order offered (from
/// [`crate::catalogue`], which also says what each one does).
pub const ALL_TOOLS: &[&str] = &crate::catalogue::AGENT_TOOLS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    /// The sandbox (in-process or OS) refused.
    Denied,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Denied => "denied",
        }
    }
}

/// A sandbox refusal, reported as its own `sandbox_denied` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SandboxDenial {
    pub path: Option<PathBuf>,
    pub reason: String,
    /// True when inferred from a command's error output rather than known.
    pub inferred: bool,
}

/// One connection the egress proxy handled while a command ran
/// (`network = "allowlist"`). Each becomes its own stream-json event: a
/// refusal is `sandbox_denied` (`kind: "network"`), an allowed connection
/// `sandbox_allowed`; the runtime event log carries them as
/// `sandbox.denied` / `sandbox.allowed` on the shell call's item, with the
/// name, port, deciding rule and the bytes relayed each way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetworkConnection {
    /// The name (or IP literal) the command asked for.
    pub host: String,
    pub port: u16,
    pub decision: crate::net::Decision,
    /// The rule that decided (`allow: ok.test`, `not in the allow list`,
    /// `deny: …`, `resolves to 127.0.0.1 (loopback)`, …).
    pub rule: String,
    /// The proxy front end the command used (`http-connect`, …).
    pub protocol: crate::net::Protocol,
    /// Bytes from the command to the server (0 for a refusal).
    pub bytes_up: u64,
    /// Bytes from the server to the command (0 for a refusal).
    pub bytes_down: u64,
    /// The address the proxy dialled (allowed connections that got that far).
    pub addr: Option<std::net::SocketAddr>,
    /// A dial or relay failure after the allow (refused by the server,
    /// byte cap reached, cut at shutdown).
    pub error: Option<String>,
}

impl NetworkConnection {
    /// Every connection among a command's egress events, in order.
    pub fn of_events(events: &[crate::net::ConnectionEvent]) -> Vec<NetworkConnection> {
        events
            .iter()
            .map(|e| NetworkConnection {
                host: e.host.clone(),
                port: e.port,
                decision: e.decision,
                rule: e.rule.clone(),
                protocol: e.protocol,
                bytes_up: e.bytes_up,
                bytes_down: e.bytes_down,
                addr: e.addr,
                error: e.error.clone(),
            })
            .collect()
    }

    pub fn refused(&self) -> bool {
        self.decision == crate::net::Decision::Refused
    }

    /// `the egress proxy refused HOST:PORT: RULE` or `the egress proxy
    /// allowed HOST:PORT (RULE)`.
    pub fn reason(&self) -> String {
        if self.refused() {
            format!(
                "the egress proxy refused {}:{}: {}",
                self.host, self.port, self.rule
            )
        } else {
            format!(
                "the egress proxy allowed {}:{} ({})",
                self.host, self.port, self.rule
            )
        }
    }
}

/// What a command ran under, in words: the host's label and, under
/// `network = "allowlist"`, the egress proxy's one-line account. Kept
/// apart; stream-json's documented `enforcement` string joins them
/// (`label; network: …`) and nothing splits it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnforcementLabel {
    pub label: String,
    /// `network: 3 connections to crates.io; 1 refused: …`.
    pub network: Option<String>,
}

impl EnforcementLabel {
    pub fn new(label: impl Into<String>) -> Self {
        EnforcementLabel {
            label: label.into(),
            network: None,
        }
    }

    /// The joined form stream-json documents.
    pub fn joined(&self) -> String {
        match &self.network {
            Some(n) => format!("{}; {n}", self.label),
            None => self.label.clone(),
        }
    }
}

impl serde::Serialize for EnforcementLabel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.joined())
    }
}

/// What the host enforced for a command run, and the connections the
/// egress proxy handled during it (one box: keeps `ToolOutput` small).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellEnforced {
    pub summary: EnforcementSummary,
    pub connections: Vec<NetworkConnection>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub status: ToolStatus,
    /// What goes back to the model (capped to [`MODEL_OUTPUT_CAP`]).
    pub content: String,
    pub truncated: bool,
    pub error_category: Option<&'static str>,
    pub exit_code: Option<i32>,
    pub files_touched: Vec<PathBuf>,
    /// The enforcement label of a command run, and the egress proxy's
    /// line apart from it. (Boxed: keeps `ToolOutput` small as the tools'
    /// error type.)
    pub enforcement: Option<Box<EnforcementLabel>>,
    /// What the host enforced for a command run: backend, level and each
    /// partial item with its reason (boxed for the same reason as below).
    pub enforced: Option<Box<ShellEnforced>>,
    /// Boxed: keeps `ToolOutput` small as the error type of the tools.
    pub sandbox_denied: Option<Box<SandboxDenial>>,
    /// For a file edit: the unified diff of the files' real change
    /// ([`edit_diff::file_diff`]; several files for `apply_patch`). A thin
    /// box, for the same reason as `enforcement`'s.
    pub diff: Option<Box<String>>,
}

impl ToolOutput {
    pub fn ok(content: String) -> Self {
        let (content, truncated) = cap(content);
        ToolOutput {
            status: ToolStatus::Ok,
            content,
            truncated,
            error_category: None,
            exit_code: None,
            files_touched: Vec::new(),
            enforcement: None,
            enforced: None,
            sandbox_denied: None,
            diff: None,
        }
    }

    pub fn error(category: &'static str, content: String) -> Self {
        ToolOutput {
            status: ToolStatus::Error,
            error_category: Some(category),
            ..ToolOutput::ok(content)
        }
    }

    pub fn touched(mut self, p: PathBuf) -> Self {
        self.files_touched.push(p);
        self
    }

    /// Attach the edit's unified diff (`None`: not text, not shown).
    pub fn with_diff(mut self, d: Option<String>) -> Self {
        self.diff = d.map(Box::new);
        self
    }
}

impl From<GuardError> for ToolOutput {
    fn from(e: GuardError) -> Self {
        let path = match &e {
            GuardError::DenyRead { path, .. }
            | GuardError::WriteProtected { path, .. }
            | GuardError::OutsideWritable { path }
            | GuardError::ReadOnly { path }
            | GuardError::Moved { path } => path.clone(),
        };
        ToolOutput {
            status: ToolStatus::Denied,
            error_category: Some("sandbox_denied"),
            sandbox_denied: Some(Box::new(SandboxDenial {
                path: Some(path),
                reason: e.to_string(),
                inferred: false,
            })),
            ..ToolOutput::ok(format!("denied by the sandbox: {e}"))
        }
    }
}

impl From<OpenError> for ToolOutput {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Denied(g) => g.into(),
            OpenError::Io { path, source } => io_error(&path, source),
        }
    }
}

/// A file-system error as a tool error, by kind.
pub(crate) fn io_error(path: &std::path::Path, e: std::io::Error) -> ToolOutput {
    let cat = match e.kind() {
        std::io::ErrorKind::NotFound => "not_found",
        std::io::ErrorKind::PermissionDenied => "permission_denied",
        _ => "io",
    };
    ToolOutput::error(cat, format!("{}: {e}", path.display()))
}

/// Cut `s` to the model cap on a char boundary.
fn cap(mut s: String) -> (String, bool) {
    if s.len() <= MODEL_OUTPUT_CAP {
        return (s, false);
    }
    let mut end = MODEL_OUTPUT_CAP;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let total = s.len();
    s.truncate(end);
    s.push_str(&format!("\n[… truncated: {end} of {total} bytes shown]"));
    (s, true)
}

/// What a tool needs to run.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub guard: FsGuard,
    pub policy: SandboxPolicy,
    pub host: HostSettings,
    /// Cancelled on Ctrl-C: running commands are killed, and the loop still
    /// waits for the host to finish its clean-up before the post-turn snapshot.
    pub cancel: crate::host::CancelToken,
    /// The MCP servers of this run (`None`: no MCP tools). Their tools are
    /// offered as `mcp__<server>__<tool>` and called through the manager.
    pub mcp: Option<std::sync::Arc<crate::mcp::McpManager>>,
    /// The skills of this run (`None`: none found or not loaded). The
    /// model is offered the `skill` tool only when some are usable.
    pub skills: Option<std::sync::Arc<crate::skills::Skills>>,
    /// codewhale's home when `[memory] enabled = true` (the memory file
    /// goes into the prompt and `remember` appends to it); `None`: off.
    pub memory: Option<PathBuf>,
    /// The session's background jobs (`shell {"background": true}`,
    /// `job_output`, `job_kill`): shared by its turns and sub-agents.
    pub jobs: jobs::Jobs,
}

/// The schemas offered to the model.
pub fn spec(name: &str) -> Option<ToolSpec> {
    let (desc, params) = match name {
        "read_file" => (
            "Read a text file (path relative to the workspace). Optional 1-based start line and line count.",
            json!({"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}),
        ),
        "list_dir" => (
            "List a directory's entries (directories end with /).",
            json!({"type":"object","properties":{"path":{"type":"string"}},"required":[]}),
        ),
        "search" => (
            "Search file contents with a regular expression, respecting .gitignore. Returns path:line:text.",
            json!({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"glob":{"type":"string"}},"required":["pattern"]}),
        ),
        "write_file" => (
            "Create or overwrite a file with the given content.",
            json!({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}),
        ),
        "edit_file" => (
            "Replace the single exact occurrence of old_string with new_string in a file.",
            json!({"type":"object","properties":{"path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}},"required":["path","old_string","new_string"]}),
        ),
        "apply_patch" => (
            "Apply a unified diff (one or more files; /dev/null creates or deletes).",
            json!({"type":"object","properties":{"patch":{"type":"string"}},"required":["patch"]}),
        ),
        "shell" => (
            "Run a command in the sandbox. `command` is a shell string (run with sh -c) or an argv array. With `background: true` it starts as a background job and returns its id at once (no timeout; read it with job_output, stop it with job_kill; killed if the turn is interrupted or the session ends).",
            json!({"type":"object","properties":{"command":{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"string"}}]},"timeout_ms":{"type":"integer"},"background":{"type":"boolean"}},"required":["command"]}),
        ),
        "job_output" => (
            "Read a background job's output written since the last read, and its exit status once it has ended.",
            json!({"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}),
        ),
        "job_kill" => (
            "Stop a background job (its whole sandboxed process tree).",
            json!({"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}),
        ),
        "todo" => (
            "Replace your to-do list for the goal (the whole list each time). Each item: a short unique `id`, its `text`, and `status` pending, in_progress, done or blocked. The user sees the list.",
            json!({"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"text":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","done","blocked"]}},"required":["id","text","status"]}}},"required":["items"]}),
        ),
        "agent" => (
            "Start a sub-agent and wait for its result. It gets only `prompt` (none of this conversation), runs with the tools and permissions of its `role` (never more than yours) and returns its final answer, its status (completed, failed, denied, interrupted, limit) and the files it changed. Several `agent` calls in one response run in parallel. Roles: general and implement (edit files, run commands), test (verification commands; read-only sandbox), explore and reviewer (read-only investigation), planner (read-only checks), advisor (reads only, no commands). Writers may pass `write_scope` (workspace paths they will change: directories, or a single existing file, which can then be rewritten in place but not replaced; a path that does not exist yet is created as a directory); its file tools and its commands can write nothing else of the workspace; concurrent writers' scopes must not overlap, and a writer without one owns the whole workspace. With `worktree: true` (git repositories only) the child works in its own checkout instead of the workspace and returns its change as `diff`: the workspace is unchanged until you apply that diff with apply_patch.",
            json!({"type":"object","properties":{"role":{"type":"string","enum":["general","implement","test","explore","reviewer","planner","advisor"]},"prompt":{"type":"string"},"write_scope":{"type":"array","items":{"type":"string"}},"worktree":{"type":"boolean"}},"required":["role","prompt"]}),
        ),
        "remember" => (
            "Append one line to the user's memory file (kept across sessions). Only when the user asks you to remember something.",
            json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
        ),
        "skill" => (
            "Load a skill (listed under Skills in the system prompt) by name: its instructions and the list of its files.",
            json!({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}),
        ),
        _ => return None,
    };
    Some(ToolSpec {
        name: name.to_string(),
        description: desc.to_string(),
        parameters: params,
    })
}

/// The schema offered to the model for an MCP tool.
pub fn mcp_spec(t: &crate::mcp::McpTool) -> ToolSpec {
    let description = if t.description.is_empty() {
        format!("MCP tool `{}` of server `{}`.", t.tool, t.server)
    } else {
        format!("[MCP server `{}`] {}", t.server, t.description)
    };
    ToolSpec {
        name: t.name.clone(),
        description,
        parameters: t.input_schema.clone(),
    }
}

/// Run an admitted, authorized MCP tool call through the run's manager.
async fn mcp_call(name: &str, args: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some(m) = &ctx.mcp else {
        return ToolOutput::error(
            "unknown_tool",
            format!("no tool named `{name}` (no MCP servers in this run)"),
        );
    };
    match m.call(name, args, &ctx.cancel).await {
        Ok(r) => {
            let mut o = if r.is_error {
                ToolOutput::error("mcp_tool_error", r.text)
            } else {
                ToolOutput::ok(r.text)
            };
            o.enforcement = Some(Box::new(EnforcementLabel::new(r.enforcement)));
            o
        }
        Err(e) => ToolOutput::error(e.category, e.message),
    }
}

/// `remember`: append the line to the memory file.
fn remember(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let text = arg_str(args, "text")?;
    let Some(home) = &ctx.memory else {
        return Err(ToolOutput::error(
            "unknown_tool",
            "memory is off ([memory] enabled = false)".into(),
        ));
    };
    match crate::memory::append(home, text) {
        Ok(line) => {
            let p = crate::memory::path(home);
            Ok(ToolOutput::ok(format!("remembered in {}: {line}", p.display())).touched(p))
        }
        Err(crate::memory::MemoryError::Empty) => Err(ToolOutput::error(
            "bad_arguments",
            "nothing to remember: `text` is empty".into(),
        )),
        Err(crate::memory::MemoryError::Io { path, source }) => Err(io_error(&path, source)),
    }
}

/// A required string argument, or a tool error naming it.
pub(crate) fn arg_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolOutput> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| {
        ToolOutput::error(
            "bad_arguments",
            format!("missing or non-string argument `{key}`"),
        )
    })
}

/// Run one admitted, authorized tool call.
pub async fn execute(name: &str, args: &Value, ctx: &ToolContext) -> ToolOutput {
    let r = match name {
        "read_file" => files::read_file(args, &ctx.guard),
        "list_dir" => files::list_dir(args, &ctx.guard),
        "search" => files::search(args, &ctx.guard),
        "write_file" => files::write_file(args, &ctx.guard),
        "edit_file" => files::edit_file(args, &ctx.guard),
        "apply_patch" => patch::apply_patch(args, &ctx.guard),
        // `background: true` starts a job (same host, same sandbox).
        "shell" => {
            return match args.get("background") {
                None | Some(Value::Null) | Some(Value::Bool(false)) => shell::run(args, ctx).await,
                Some(Value::Bool(true)) => jobs::start(args, ctx).await,
                Some(_) => {
                    ToolOutput::error("bad_arguments", "`background` must be true or false".into())
                }
            }
        }
        "skill" => skill::run(args, ctx),
        "remember" => remember(args, ctx),
        jobs::JOB_OUTPUT_TOOL => return jobs::output(args, ctx).await,
        jobs::JOB_KILL_TOOL => return jobs::kill(args, ctx).await,
        // The loop runs `todo` itself (it keeps the list); reaching here
        // means a caller without a loop.
        todo::TODO_TOOL => todo::parse(args).map(|l| ToolOutput::ok(todo::summary(&l))),
        n if crate::mcp::client_names::is_mcp(n) => return mcp_call(n, args, ctx).await,
        other => Err(ToolOutput::error(
            "unknown_tool",
            format!("no tool named `{other}`"),
        )),
    };
    r.unwrap_or_else(|e| e)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_spec() {
        for t in ALL_TOOLS {
            assert!(spec(t).is_some(), "{t}");
        }
        assert!(spec("nope").is_none());
    }

    #[test]
    fn cap_marks_truncation() {
        let (s, t) = cap("é".repeat(MODEL_OUTPUT_CAP));
        assert!(t);
        assert!(s.contains("truncated"));
        let (s, t) = cap("short".into());
        assert!(!t);
        assert_eq!(s, "short");
    }

    #[test]
    fn network_connections_are_every_event_in_order_with_bytes() {
        use crate::net::{ConnectionEvent, Decision, Protocol};
        let ev = |host: &str, decision, rule: &str, up, down| ConnectionEvent {
            id: 0,
            protocol: Protocol::Socks5,
            host: host.into(),
            port: 443,
            decision,
            rule: rule.into(),
            addr: None,
            local: None,
            bytes_up: up,
            bytes_down: down,
            error: None,
        };
        let c = NetworkConnection::of_events(&[
            ev(
                "crates.io",
                Decision::Allowed,
                "allow: crates.io",
                517,
                90_000,
            ),
            ev(
                "evil.example",
                Decision::Refused,
                "not in the allow list",
                0,
                0,
            ),
            ev(
                "meta.test",
                Decision::Refused,
                "resolves to 169.254.169.254 (cloud-metadata)",
                0,
                0,
            ),
        ]);
        assert_eq!(c.len(), 3);
        assert!(!c[0].refused() && c[1].refused() && c[2].refused());
        assert_eq!((c[0].bytes_up, c[0].bytes_down), (517, 90_000));
        assert_eq!(
            c[0].reason(),
            "the egress proxy allowed crates.io:443 (allow: crates.io)"
        );
        assert_eq!(c[1].host, "evil.example");
        assert_eq!(
            c[2].reason(),
            "the egress proxy refused meta.test:443: resolves to 169.254.169.254 (cloud-metadata)"
        );
    }
}
