//! `~/.codewhale/mcp.json`: the MCP servers codewhale starts as tools.
//!
//! User-side only: the file lives in the codewhale home (`$CODEWHALE_HOME`
//! or `~/.codewhale`). A repository cannot add servers — they run
//! programs — so a project `.mcp.json` is never read; [`project_note`]
//! says so when one exists.
//!
//! The shape is the widely used `{"mcpServers": {NAME: {command, args,
//! env}}}` plus codewhale's own keys (sandbox, network, timeouts). Unknown
//! keys are errors, and every error names the file, the line and the key.

use crate::policy::SandboxMode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file name, in the codewhale home.
pub const FILE_NAME: &str = "mcp.json";

/// Default time a server gets to answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT_SEC: u64 = 30;
/// Default time one `tools/call` may take.
pub const DEFAULT_TOOL_TIMEOUT_SEC: u64 = 120;
/// Hard maximum of `startupTimeoutSec` (a larger value is an error).
pub const MAX_STARTUP_TIMEOUT_SEC: u64 = 300;
/// Hard maximum of `toolTimeoutSec` (a larger value is an error).
pub const MAX_TOOL_TIMEOUT_SEC: u64 = 900;
/// Longest server name: the tool names built from it stay readable and
/// within the 128-character limit.
pub const MAX_SERVER_NAME: usize = 48;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct McpFile {
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, ServerEntry>,
}

/// The sandbox mode a server may ask for (it is always sandboxed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerSandbox {
    ReadOnly,
    WorkspaceWrite,
}

impl ServerSandbox {
    pub fn mode(self) -> SandboxMode {
        match self {
            ServerSandbox::ReadOnly => SandboxMode::ReadOnly,
            ServerSandbox::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        }
    }
}

/// One server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerEntry {
    /// Only `"stdio"` (the default) is supported.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// The program (looked up on `PATH`).
    pub command: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Set for the server after the sandbox's environment scrubbing (so a
    /// token the server needs is passed on purpose, by name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The server may use the network (default: no network).
    #[serde(default, skip_serializing_if = "is_false")]
    pub network: bool,
    /// `workspace-write` (default) or `read-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<ServerSandbox>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_sec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_sec: Option<u64>,
    /// `false` keeps the entry without starting it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}
fn is_false(b: &bool) -> bool {
    !*b
}

impl ServerEntry {
    /// A stdio server running `command args…` with the defaults.
    pub fn new(command: impl Into<String>, args: Vec<String>) -> Self {
        ServerEntry {
            transport: None,
            command: command.into(),
            args,
            env: BTreeMap::new(),
            network: false,
            sandbox: None,
            startup_timeout_sec: None,
            tool_timeout_sec: None,
            enabled: true,
        }
    }

    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs(
            self.startup_timeout_sec
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT_SEC),
        )
    }

    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs(self.tool_timeout_sec.unwrap_or(DEFAULT_TOOL_TIMEOUT_SEC))
    }

    pub fn sandbox(&self) -> ServerSandbox {
        self.sandbox.unwrap_or(ServerSandbox::WorkspaceWrite)
    }
}

/// A bad `mcp.json`, or one that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    /// Not JSON, or a key/value serde rejects (unknown key, wrong type).
    #[error("{}:{line}:{column}: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A value that parses but is not acceptable.
    #[error("{}:{line}: mcpServers.{server}{}: {message}", file.display(), key.as_ref().map(|k| format!(".{k}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: usize,
        server: String,
        key: Option<String>,
        message: String,
    },
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
}

/// `mcp.json` in the codewhale home.
pub fn path(codewhale_home: &Path) -> PathBuf {
    codewhale_home.join(FILE_NAME)
}

/// Read and check the file; a missing file is an empty configuration.
pub fn load(file: &Path) -> Result<McpFile, McpConfigError> {
    match std::fs::read_to_string(file) {
        Ok(text) => parse(file, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(McpFile::default()),
        Err(source) => Err(McpConfigError::Io {
            file: file.to_path_buf(),
            source,
        }),
    }
}

/// Parse and check `text` (the contents of `file`, named in errors).
pub fn parse(file: &Path, text: &str) -> Result<McpFile, McpConfigError> {
    let doc: McpFile = serde_json::from_str(text).map_err(|e| McpConfigError::Syntax {
        file: file.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    for (name, entry) in &doc.mcp_servers {
        check_entry(name, entry).map_err(|(key, message)| McpConfigError::Invalid {
            file: file.to_path_buf(),
            line: locate(text, name, key),
            server: name.clone(),
            key: key.map(str::to_string),
            message,
        })?;
    }
    Ok(doc)
}

/// serde_json appends " at line L column C"; the error names them itself.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Why a server name cannot be used, if it cannot.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the server name is empty".into());
    }
    if name.len() > MAX_SERVER_NAME {
        return Err(format!(
            "the server name is longer than {MAX_SERVER_NAME} characters"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "the server name may use only letters, digits, `-` and `_` (found {c:?})"
        ));
    }
    if name.contains("__") {
        return Err("the server name may not contain `__` (it separates the parts of mcp__<server>__<tool>)".into());
    }
    Ok(())
}

/// Check one entry: `Err((key, message))`, `key` `None` for the name.
fn check_entry(name: &str, e: &ServerEntry) -> Result<(), (Option<&'static str>, String)> {
    check_name(name).map_err(|m| (None, m))?;
    if let Some(t) = &e.transport {
        if t != "stdio" {
            return Err((
                Some("type"),
                format!("only \"stdio\" servers are supported (got {t:?}); remote http/sse servers are not"),
            ));
        }
    }
    if e.command.trim().is_empty() {
        return Err((Some("command"), "the command is empty".into()));
    }
    for k in e.env.keys() {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err((Some("env"), format!("invalid variable name {k:?}")));
        }
    }
    let bound = |key: &'static str, v: Option<u64>, max: u64| match v {
        Some(0) => Err((Some(key), "must be at least 1 second".to_string())),
        Some(v) if v > max => Err((
            Some(key),
            format!("{v} s is above the hard maximum of {max} s"),
        )),
        _ => Ok(()),
    };
    bound(
        "startupTimeoutSec",
        e.startup_timeout_sec,
        MAX_STARTUP_TIMEOUT_SEC,
    )?;
    bound("toolTimeoutSec", e.tool_timeout_sec, MAX_TOOL_TIMEOUT_SEC)?;
    Ok(())
}

/// The 1-based line of `key` inside the server `name`'s object (or of the
/// name itself): the first `"key"` after `"name":`.
fn locate(text: &str, name: &str, key: Option<&str>) -> usize {
    let quoted = format!("\"{name}\"");
    let mut start = 0;
    let mut at = None;
    while let Some(i) = text[start..].find(&quoted) {
        let after = start + i + quoted.len();
        if text[after..].trim_start().starts_with(':') {
            at = Some(start + i);
            break;
        }
        start = after;
    }
    let Some(mut pos) = at else { return 1 };
    if let Some(k) = key {
        if let Some(i) = text[pos..].find(&format!("\"{k}\"")) {
            pos += i;
        }
    }
    text[..pos].matches('\n').count() + 1
}

/// Write `doc` to `file` (checked first; written to a temporary file and
/// renamed, so a failure never leaves half a file).
/// The text [`save`] writes for `doc` (checked to read back).
pub fn to_text(file: &Path, doc: &McpFile) -> Result<String, McpConfigError> {
    let mut text = serde_json::to_string_pretty(doc).map_err(|e| McpConfigError::Io {
        file: file.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    text.push('\n');
    // What we write must read back.
    parse(file, &text)?;
    Ok(text)
}

pub fn save(file: &Path, doc: &McpFile) -> Result<(), McpConfigError> {
    let io = |source| McpConfigError::Io {
        file: file.to_path_buf(),
        source,
    };
    let text = to_text(file, doc)?;
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
    tmp.persist(file).map_err(|e| io(e.error))?;
    Ok(())
}

/// The note for a project `.mcp.json` next to `workspace`'s repository
/// root, which is never read.
pub fn project_note(workspace: &Path) -> Option<String> {
    let p = crate::config::paths::repo_root(workspace).join(".mcp.json");
    p.exists().then(|| {
        format!(
            "{} ignored: a repository cannot add MCP servers (they run programs); \
             add the ones you trust with `codewhale mcp add` (~/.codewhale/mcp.json)",
            p.display()
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "config_tests.rs"]
mod tests;
