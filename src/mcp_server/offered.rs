//! The tools `codewhale serve --mcp` offers, as a pure table: each MCP
//! tool name maps onto one of the agent's own tools (the name the nine
//! gates and the host know), its object input schema, and how its MCP
//! arguments become the agent tool's arguments. Nothing here runs
//! anything; [`super`] authorizes and executes.

use serde_json::{json, Map, Value};

/// The MCP tools, in the order `tools/list` gives them.
pub const MCP_TOOLS: &[&str] = &[
    "read",
    "search",
    "edit",
    "write",
    "shell",
    "codewhale_sandbox_run",
];

/// One MCP tool: its agent tool and what `tools/list` says about it.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    pub name: &'static str,
    /// The agent tool the gates and the host see.
    pub agent_tool: &'static str,
    pub description: &'static str,
    /// Always a JSON object schema (`"type": "object"`).
    pub input_schema: Value,
    pub read_only: bool,
}

/// The table entry of `name`, or `None` for a name we do not serve.
pub fn lookup(name: &str) -> Option<McpTool> {
    let t = match name {
        "read" => McpTool {
            name: "read",
            agent_tool: "read_file",
            description: "Read a text file of the workspace (path relative to it). Optional 1-based start line `offset` and line count `limit`. Checked by codewhale's nine gates and its in-process sandbox guard.",
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "file path, relative to the workspace"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1}},
                "required": ["path"], "additionalProperties": false}),
            read_only: true,
        },
        "search" => McpTool {
            name: "search",
            agent_tool: "search",
            description: "Search file contents of the workspace with a regular expression (respects .gitignore). Returns path:line:text lines.",
            input_schema: json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"}},
                "required": ["pattern"], "additionalProperties": false}),
            read_only: true,
        },
        "edit" => McpTool {
            name: "edit",
            agent_tool: "edit_file",
            description: "Replace the single exact occurrence of old_string with new_string in a workspace file.",
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"}},
                "required": ["path", "old_string", "new_string"], "additionalProperties": false}),
            read_only: false,
        },
        "write" => McpTool {
            name: "write",
            agent_tool: "write_file",
            description: "Create or overwrite a workspace file with the given content.",
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"}},
                "required": ["path", "content"], "additionalProperties": false}),
            read_only: false,
        },
        "shell" => McpTool {
            name: "shell",
            agent_tool: "shell",
            description: "Run a command in codewhale's OS sandbox (workspace-write by default). `command` is a shell string (run with sh -c) or an argv array. A command the gates would ask about is denied: this server cannot ask anyone.",
            input_schema: json!({"type": "object", "properties": {
                "command": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                "timeout_ms": {"type": "integer", "minimum": 1}},
                "required": ["command"], "additionalProperties": false}),
            read_only: false,
        },
        "codewhale_sandbox_run" => McpTool {
            name: "codewhale_sandbox_run",
            agent_tool: "shell",
            description: "Run one argv (no shell) in codewhale's OS sandbox and report exactly how it was sandboxed: backend, enforcement level and every partially enforced item with its reason.",
            input_schema: json!({"type": "object", "properties": {
                "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "timeout_ms": {"type": "integer", "minimum": 1}},
                "required": ["argv"], "additionalProperties": false}),
            read_only: false,
        },
        _ => return None,
    };
    Some(t)
}

/// The agent tool's arguments for an MCP call of `tool` (already looked
/// up), or an error naming the argument at fault. Unknown arguments are
/// refused by name (the schemas say `additionalProperties: false`).
pub fn agent_args(tool: &McpTool, args: &Map<String, Value>) -> Result<Value, String> {
    let allowed: Vec<&str> = tool.input_schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if let Some(k) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "argument `{k}`: not an argument of `{}` (it takes {})",
            tool.name,
            allowed.join(", ")
        ));
    }
    let required: Vec<&str> = tool.input_schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(k) = required.iter().find(|k| !args.contains_key(**k)) {
        return Err(format!(
            "argument `{k}`: required by `{}` and missing",
            tool.name
        ));
    }
    if tool.name != "codewhale_sandbox_run" {
        return Ok(Value::Object(args.clone()));
    }
    let argv = match args.get("argv") {
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_string) => a.clone(),
        _ => return Err("argument `argv`: must be a non-empty array of strings".into()),
    };
    let mut out = json!({"command": argv});
    if let Some(t) = args.get("timeout_ms") {
        out["timeout_ms"] = t.clone();
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn every_tool_has_an_object_schema_and_an_agent_tool() {
        for n in MCP_TOOLS {
            let t = lookup(n).unwrap();
            assert_eq!(t.input_schema["type"], "object", "{n}");
            assert!(
                crate::agent::tools::ALL_TOOLS.contains(&t.agent_tool),
                "{n} → {}",
                t.agent_tool
            );
        }
        assert!(lookup("read_file").is_none());
        assert!(lookup("nope").is_none());
    }

    #[test]
    fn sandbox_run_takes_an_argv_and_becomes_a_shell_argv() {
        let t = lookup("codewhale_sandbox_run").unwrap();
        let a = agent_args(&t, &obj(json!({"argv": ["echo", "a b"], "timeout_ms": 5}))).unwrap();
        assert_eq!(a, json!({"command": ["echo", "a b"], "timeout_ms": 5}));
        let e = agent_args(&t, &obj(json!({"argv": "echo hi"}))).unwrap_err();
        assert!(e.starts_with("argument `argv`"), "{e}");
        let e = agent_args(&t, &obj(json!({"argv": []}))).unwrap_err();
        assert!(e.starts_with("argument `argv`"), "{e}");
    }

    #[test]
    fn unknown_and_missing_arguments_are_named() {
        let t = lookup("write").unwrap();
        let e = agent_args(&t, &obj(json!({"path": "a", "content": "", "mode": 1}))).unwrap_err();
        assert!(e.starts_with("argument `mode`"), "{e}");
        let e = agent_args(&t, &obj(json!({"path": "a"}))).unwrap_err();
        assert!(e.starts_with("argument `content`"), "{e}");
        let ok = agent_args(&t, &obj(json!({"path": "a", "content": "x"}))).unwrap();
        assert_eq!(ok, json!({"path": "a", "content": "x"}));
    }
}
