//! The tool call as the pipeline sees it, the tool registry, admission
//! lists, and session grants (`a` = "this kind for the session").

use super::rules::canonical_argv;
use super::shell::{Analysis, Piece};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The name of the shell tool.
pub const SHELL_TOOL: &str = crate::catalogue::SHELL;

/// What a tool can do: the catalogue's kinds.
pub use crate::catalogue::ToolKind;

/// One tool call from the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool: String,
    /// The tool's JSON arguments as the model sent them.
    pub args: serde_json::Value,
    /// For the shell tool: the command line (taken from `args.command` when
    /// absent; an argv array there is joined with shell quoting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The working directory (the workspace unless the call says otherwise).
    pub cwd: PathBuf,
}

impl ToolCall {
    /// A shell call.
    pub fn shell(command: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        let command = command.into();
        ToolCall {
            tool: SHELL_TOOL.into(),
            args: serde_json::json!({ "command": command }),
            command: Some(command),
            cwd: cwd.into(),
        }
    }

    /// Any other tool.
    pub fn new(tool: impl Into<String>, args: serde_json::Value, cwd: impl Into<PathBuf>) -> Self {
        ToolCall {
            tool: tool.into(),
            args,
            command: None,
            cwd: cwd.into(),
        }
    }

    /// A shell call the model asked to run as a background job
    /// (`"background": true`).
    pub fn runs_in_background(&self) -> bool {
        self.tool == SHELL_TOOL
            && self.args.get("background").and_then(|v| v.as_bool()) == Some(true)
    }

    /// The shell command line, if this call has one.
    pub fn command_line(&self) -> Option<String> {
        if let Some(c) = &self.command {
            return Some(c.clone());
        }
        crate::catalogue::shell_command_line(&self.args)
    }

    /// The paths a file tool targets (`path`, `file_path`, `paths`, and the
    /// file headers of an `apply_patch` body).
    pub fn target_paths(&self) -> Vec<String> {
        let mut v = Vec::new();
        for key in ["path", "file_path", "target", "destination"] {
            if let Some(s) = self.args.get(key).and_then(|x| x.as_str()) {
                v.push(s.to_string());
            }
        }
        if let Some(arr) = self.args.get("paths").and_then(|x| x.as_array()) {
            v.extend(arr.iter().filter_map(|x| x.as_str()).map(str::to_string));
        }
        for key in ["patch", "input"] {
            if let Some(body) = self.args.get(key).and_then(|x| x.as_str()) {
                for line in body.lines() {
                    for pre in [
                        "*** Update File: ",
                        "*** Add File: ",
                        "*** Delete File: ",
                        "*** Move to: ",
                        "+++ b/",
                        "--- a/",
                    ] {
                        if let Some(p) = line.strip_prefix(pre) {
                            v.push(p.trim().to_string());
                        }
                    }
                }
            }
        }
        v.sort();
        v.dedup();
        v
    }
}

/// One registered tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub kind: ToolKind,
    /// Whether an executor is registered (a listed tool without one is denied).
    pub executable: bool,
}

/// Which tools exist. The agent loop registers MCP tools as it discovers them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRegistry {
    pub tools: Vec<ToolSpec>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl ToolRegistry {
    /// The built-in tools (the catalogue's table).
    pub fn builtin() -> Self {
        ToolRegistry {
            tools: crate::catalogue::TOOLS
                .iter()
                .map(|t| ToolSpec {
                    name: t.name.into(),
                    kind: t.kind,
                    executable: true,
                })
                .collect(),
        }
    }

    pub fn register(&mut self, spec: ToolSpec) {
        self.tools.retain(|t| t.name != spec.name);
        self.tools.push(spec);
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Tool allow/deny lists from settings (gate 2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    /// When non-empty, only these tools are admitted.
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// Kinds approved with `a` during this session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionGrants {
    pub kinds: BTreeSet<String>,
}

impl SessionGrants {
    pub fn covers(&self, key: &str) -> bool {
        self.kinds.contains(key)
    }

    pub fn grant(&mut self, key: impl Into<String>) {
        self.kinds.insert(key.into());
    }
}

/// How many leading tokens name a command's "kind" (`git push`, `npm run test`).
fn arity(argv: &[String]) -> usize {
    let two = [
        "git",
        "cargo",
        "npm",
        "pnpm",
        "yarn",
        "go",
        "docker",
        "podman",
        "kubectl",
        "gh",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "apt",
        "apt-get",
        "brew",
        "make",
        "dotnet",
        "helm",
        "terraform",
    ];
    match argv.first().map(String::as_str) {
        Some("npm" | "pnpm" | "yarn") if argv.get(1).is_some_and(|s| s == "run") => 3,
        Some("docker") if argv.get(1).is_some_and(|s| s == "compose") => 3,
        Some(p) if two.contains(&p) => 2,
        _ => 1,
    }
}

/// The grant key of a shell piece (`shell:git push`).
fn piece_kind(p: &Piece) -> String {
    let c = canonical_argv(p);
    let n = arity(&c).min(c.len());
    c[..n].join(" ")
}

/// The session-grant key of a call: the tool, plus for shell the kinds of
/// every piece (so a grant for `cargo test` never covers `cargo test && rm x`).
pub fn grant_key(call: &ToolCall, analysis: Option<&Analysis>) -> String {
    match analysis {
        Some(a) => {
            let mut kinds: Vec<String> = a.pieces.iter().map(piece_kind).collect();
            kinds.sort();
            kinds.dedup();
            format!("{}:{}", call.tool, kinds.join(" + "))
        }
        None => call.tool.clone(),
    }
}
