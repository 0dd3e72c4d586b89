//! `GET /v1/skills`, `PATCH /v1/skills/{name}`, `GET /v1/apps/mcp/servers`
//! and `GET /v1/apps/mcp/tools` as plain typed functions; the HTTP and
//! JSON-RPC front ends only register them (docs/RUNTIME_API.md).
//!
//! Skills are discovered and the state file read on every call, so a
//! toggle made by another process (`codewhale skills disable`) shows
//! without a restart. The MCP listings never start a server: `servers`
//! is `mcp.json` plus the live status of the servers a turn started in
//! this process; `tools` lists the tools of running servers only.

use super::error::ApiError;
use crate::config::ConfigPaths;
use crate::mcp::client::{McpTool, Phase, ServerStatus};
use crate::mcp::config::{self as mcp_config, ServerSandbox};
use crate::skills::{Listed, Report, Skills, StateStore};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn config_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "config_error",
        e.to_string(),
    )
}

/// `GET /v1/skills`: every skill of `workspace` (shadowed duplicates with
/// `shadowed_by`), the files that are not valid skills, and the roots.
pub fn list_skills(paths: &ConfigPaths, workspace: &Path) -> Result<Report, ApiError> {
    Ok(Skills::load(paths, workspace)
        .map_err(config_error)?
        .report())
}

/// `PATCH /v1/skills/{name}` body.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillToggle {
    pub enabled: bool,
}

/// The answer to a toggle: the skill as listed after it (every entry of
/// that name, the one in effect first).
#[derive(Clone, Debug, Serialize)]
pub struct ToggleAnswer {
    pub name: String,
    pub enabled: bool,
    pub skills: Vec<Listed>,
}

/// `PATCH /v1/skills/{name}`: switch a known skill on or off, persisted
/// under the cross-process lock.
pub fn toggle_skill(
    paths: &ConfigPaths,
    workspace: &Path,
    name: &str,
    body: SkillToggle,
) -> Result<ToggleAnswer, ApiError> {
    if !crate::skills::manifest::valid_name(name) {
        return Err(ApiError::bad(
            "name",
            format!("`{name}` is not a skill name (lowercase letters, digits, hyphens)"),
        ));
    }
    let before = Skills::load(paths, workspace).map_err(config_error)?;
    if !before.knows(name) {
        return Err(ApiError::not_found("skill", name));
    }
    StateStore::new(&paths.codewhale_home)
        .set(name, body.enabled)
        .map_err(config_error)?;
    let after = Skills::load(paths, workspace).map_err(config_error)?;
    Ok(ToggleAnswer {
        name: name.to_string(),
        enabled: after.state.enabled(name),
        skills: after
            .listed()
            .into_iter()
            .filter(|l| l.name == name)
            .collect(),
    })
}

/// One server of `mcp.json` (its `env` by key only: values may be secrets).
#[derive(Clone, Debug, Serialize)]
pub struct McpServerView {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The names of the variables set for it (never their values).
    pub env_keys: Vec<String>,
    pub enabled: bool,
    pub network: bool,
    pub sandbox: ServerSandbox,
    pub startup_timeout_sec: u64,
    pub tool_timeout_sec: u64,
    /// `not_started` until a turn in this process started it, else its phase.
    pub state: String,
    /// Tools it offers (known once it is ready).
    pub tools: usize,
    pub last_error: Option<String>,
}

/// `GET /v1/apps/mcp/servers`.
#[derive(Clone, Debug, Serialize)]
pub struct McpServers {
    pub config_file: PathBuf,
    pub present: bool,
    pub servers: Vec<McpServerView>,
}

fn phase(p: Phase) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `mcp.json`'s servers with what `live` (the running manager's status,
/// if any) says of each.
pub fn mcp_servers(home: &Path, live: Option<Vec<ServerStatus>>) -> Result<McpServers, ApiError> {
    let file = mcp_config::path(home);
    let doc = mcp_config::load(&file).map_err(config_error)?;
    let live = live.unwrap_or_default();
    let servers = doc
        .mcp_servers
        .iter()
        .map(|(name, e)| {
            let st = live.iter().find(|s| &s.name == name);
            McpServerView {
                name: name.clone(),
                command: e.command.clone(),
                args: e.args.clone(),
                env_keys: e.env.keys().cloned().collect(),
                enabled: e.enabled,
                network: e.network,
                sandbox: e.sandbox(),
                startup_timeout_sec: e.startup_timeout().as_secs(),
                tool_timeout_sec: e.tool_timeout().as_secs(),
                state: match (st, e.enabled) {
                    (Some(s), _) => phase(s.state),
                    (None, false) => phase(Phase::Disabled),
                    (None, true) => "not_started".into(),
                },
                tools: st.map_or(0, |s| s.tools),
                last_error: st.and_then(|s| s.last_error.clone()),
            }
        })
        .collect();
    Ok(McpServers {
        present: file.is_file(),
        config_file: file,
        servers,
    })
}

/// `GET /v1/apps/mcp/tools` query.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToolsQuery {
    pub server: Option<String>,
}

/// One tool of a running server.
#[derive(Clone, Debug, Serialize)]
pub struct McpToolView {
    /// `mcp__<server>__<tool>`: the name the model calls it by.
    pub name: String,
    pub server: String,
    pub tool: String,
    pub description: String,
    pub input_schema: Value,
}

/// `GET /v1/apps/mcp/tools`.
#[derive(Clone, Debug, Serialize)]
pub struct McpTools {
    /// Whether the servers run in this process (a turn starts them).
    pub running: bool,
    pub tools: Vec<McpToolView>,
}

/// The tools of the running servers (`live`), optionally of one server;
/// a server `mcp.json` does not name is a 404.
pub fn mcp_tools(
    home: &Path,
    q: &McpToolsQuery,
    live: Option<Vec<McpTool>>,
) -> Result<McpTools, ApiError> {
    if let Some(name) = &q.server {
        let doc = mcp_config::load(&mcp_config::path(home)).map_err(config_error)?;
        if !doc.mcp_servers.contains_key(name) {
            return Err(ApiError::not_found("MCP server", name));
        }
    }
    let running = live.is_some();
    let tools = live
        .unwrap_or_default()
        .into_iter()
        .filter(|t| q.server.as_ref().is_none_or(|s| &t.server == s))
        .map(|t| McpToolView {
            name: t.name,
            server: t.server,
            tool: t.tool,
            description: t.description,
            input_schema: t.input_schema,
        })
        .collect();
    Ok(McpTools { running, tools })
}
