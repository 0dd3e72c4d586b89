//! The MCP servers an editor passes in `session/new` / `session/load`
//! (`mcpServers`), as entries of codewhale's MCP client: each is started
//! like a server of `~/.codewhale/mcp.json` (sandboxed, workspace-write,
//! no network, the same timeouts) and offered in that session only.
//!
//! Only stdio servers are taken: `initialize` advertises
//! `mcpCapabilities {http: false, sse: false}`, and an `http`/`sse` entry
//! (which a client should not send then) is refused with a reason of its
//! own rather than failing the whole session. Editors name servers freely
//! ("GitHub Server"); a name is made into one codewhale accepts
//! (letters, digits, `-`, `_`, no `__`) and the result says which.

use crate::mcp::config::{self, ServerEntry, MAX_SERVER_NAME};
use agent_client_protocol_schema::v1::McpServer;
use serde::Serialize;
use std::collections::BTreeMap;

/// What became of one entry of `mcpServers` (reported to the editor in
/// the response's `_meta["codewhale/mcpServers"]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The name the editor gave.
    pub name: String,
    /// The name codewhale uses (tools are `mcp__<server>__<tool>`);
    /// `None` when refused.
    pub server: Option<String>,
    /// `accepted` (started with the session's first prompt) or `refused`.
    pub status: &'static str,
    pub error: Option<String>,
}

/// `name` made into a server name codewhale accepts.
pub fn server_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '-'
        };
        // `__` separates the parts of a tool name.
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out.chars().take(MAX_SERVER_NAME).collect()
}

/// The stdio entries of `servers` by server name, and what became of
/// each entry (in order).
pub fn entries(servers: &[McpServer]) -> (BTreeMap<String, ServerEntry>, Vec<Outcome>) {
    let mut out = BTreeMap::new();
    let mut report = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        let refuse = |name: &str, why: String| Outcome {
            name: name.to_string(),
            server: None,
            status: "refused",
            error: Some(format!("mcpServers[{i}] `{name}`: {why}")),
        };
        let stdio = match s {
            McpServer::Stdio(x) => x,
            McpServer::Http(h) => {
                report.push(refuse(
                    &h.name,
                    "http MCP servers are not supported (mcpCapabilities.http is false); pass a stdio server".into(),
                ));
                continue;
            }
            McpServer::Sse(h) => {
                report.push(refuse(
                    &h.name,
                    "sse MCP servers are not supported (mcpCapabilities.sse is false); pass a stdio server".into(),
                ));
                continue;
            }
            _ => {
                report.push(refuse("?", "this MCP transport is not supported".into()));
                continue;
            }
        };
        let name = server_name(&stdio.name);
        if let Err(e) = config::check_name(&name) {
            report.push(refuse(&stdio.name, e));
            continue;
        }
        if out.contains_key(&name) {
            report.push(refuse(
                &stdio.name,
                format!("a server named `{name}` is already in this list"),
            ));
            continue;
        }
        let command = stdio.command.display().to_string();
        if command.trim().is_empty() {
            report.push(refuse(&stdio.name, "the command is empty".into()));
            continue;
        }
        let mut e = ServerEntry::new(command, stdio.args.clone());
        e.env = stdio
            .env
            .iter()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect();
        out.insert(name.clone(), e);
        report.push(Outcome {
            name: stdio.name.clone(),
            server: Some(name),
            status: "accepted",
            error: None,
        });
    }
    (out, report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Vec<McpServer> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn stdio_servers_are_taken_and_http_sse_refused_one_by_one() {
        let s = parse(json!([
            {"name": "GitHub Server", "command": "/usr/bin/gh-mcp", "args": ["stdio"],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "web", "url": "https://x", "headers": []},
            {"type": "sse", "name": "old", "url": "https://y", "headers": []},
            {"name": "github-server", "command": "/bin/other", "args": [], "env": []},
            {"name": "a__b", "command": "/bin/x", "args": [], "env": []},
        ]));
        let (e, r) = entries(&s);
        assert_eq!(e.len(), 3, "{e:?}");
        let gh = &e["GitHub-Server"];
        assert_eq!(gh.command, "/usr/bin/gh-mcp");
        assert_eq!(gh.args, vec!["stdio"]);
        assert_eq!(gh.env["TOKEN"], "t");
        assert!(!gh.network, "an editor's server gets no network");
        assert_eq!(r[0].status, "accepted");
        assert_eq!(r[0].server.as_deref(), Some("GitHub-Server"));
        assert_eq!(r[1].status, "refused");
        let why = r[1].error.as_deref().unwrap();
        assert!(why.starts_with("mcpServers[1] `web`: http"), "{why}");
        assert!(r[2].error.as_deref().unwrap().contains("sse"), "{r:?}");
        // Different editor names, different server names.
        assert_eq!(r[3].server.as_deref(), Some("github-server"));
        // `__` is squeezed to `_`.
        assert_eq!(r[4].server.as_deref(), Some("a_b"));
        assert!(e.contains_key("a_b"));
    }

    #[test]
    fn names_become_acceptable_server_names() {
        assert_eq!(server_name("My Tools!"), "My-Tools-");
        assert_eq!(server_name("x___y"), "x_y");
        assert_eq!(server_name(&"n".repeat(80)).len(), MAX_SERVER_NAME);
        for n in ["My Tools!", "x___y", "ok"] {
            assert!(config::check_name(&server_name(n)).is_ok(), "{n}");
        }
        assert!(config::check_name(&server_name("  ")).is_err());
    }

    #[test]
    fn a_duplicate_name_is_refused() {
        let s = parse(json!([
            {"name": "a b", "command": "/bin/x", "args": [], "env": []},
            {"name": "a-b", "command": "/bin/y", "args": [], "env": []},
        ]));
        let (e, r) = entries(&s);
        assert_eq!(e.len(), 1);
        assert_eq!(e["a-b"].command, "/bin/x");
        assert_eq!(r[1].status, "refused");
        assert!(r[1].error.as_deref().unwrap().contains("already"), "{r:?}");
    }
}
