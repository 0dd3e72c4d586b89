//! The one list of built-in tools: each name, what it does (its
//! [`ToolKind`]) and whether `codewhale exec` offers it.
//!
//! The agent's executors, the authorization pipeline's registry and the
//! receipt builder all read this table, so a tool cannot be, say, a write
//! for the gates and a read for the receipt. It is a leaf: it imports no
//! other module of the crate, so anything may depend on it.

use serde::{Deserialize, Serialize};

/// What a tool can do (decides its baseline approval at gate 4, whether
/// the loop snapshots before it, and how a receipt lists it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolKind {
    /// Reads the workspace (read_file, list_dir, grep, glob).
    Read,
    /// Searches or fetches the web (allowed in Plan).
    Web,
    /// Writes files.
    Write,
    /// Runs shell commands.
    Shell,
    /// An MCP server's tool.
    Mcp,
    /// Starts a sub-agent.
    Subagent,
}

/// One built-in tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tool {
    pub name: &'static str,
    pub kind: ToolKind,
    /// `codewhale exec` has an executor for it and offers it to the model.
    pub agent: bool,
}

/// The name of the shell tool.
pub const SHELL: &str = "shell";

const fn tool(name: &'static str, kind: ToolKind, agent: bool) -> Tool {
    Tool { name, kind, agent }
}

/// Every built-in tool. The agent's tools come first, in the order they
/// are offered to the model.
pub const TOOLS: &[Tool] = &[
    tool("read_file", ToolKind::Read, true),
    tool("list_dir", ToolKind::Read, true),
    tool("search", ToolKind::Read, true),
    tool("write_file", ToolKind::Write, true),
    tool("edit_file", ToolKind::Write, true),
    tool("apply_patch", ToolKind::Write, true),
    tool(SHELL, ToolKind::Shell, true),
    tool("grep", ToolKind::Read, false),
    tool("glob", ToolKind::Read, false),
    tool("update_plan", ToolKind::Read, false),
    tool("web_search", ToolKind::Web, false),
    tool("web_fetch", ToolKind::Web, false),
    tool("delete_file", ToolKind::Write, false),
    tool("spawn_agent", ToolKind::Subagent, false),
    // The loop offers it itself (a run that may spawn: `agent::subagent`).
    tool("agent", ToolKind::Subagent, false),
    // Loads a skill's instructions (read-only). Not among the always-offered
    // tools: the loop offers it only when the run has usable skills.
    tool("skill", ToolKind::Read, false),
    // Appends a line to the memory file (outside the workspace: a write
    // with no workspace path, so it is a question unless Full Access or
    // `--auto`). Offered only with `[memory] enabled = true`.
    tool("remember", ToolKind::Write, false),
    // Operate's bookkeeping, offered by the loop in Work and Operate: the
    // to-do list (the loop's own state) and reading/stopping the session's
    // own background jobs (a job is started by `shell`, which the gates
    // judge as any command). None touches the workspace: reads.
    tool("todo", ToolKind::Read, false),
    tool("job_output", ToolKind::Read, false),
    tool("job_kill", ToolKind::Read, false),
];

/// The tools `codewhale exec` offers, in order.
pub const AGENT_TOOLS: [&str; 7] = agent_tools();

const fn agent_tools() -> [&'static str; 7] {
    let mut out = [""; 7];
    let mut i = 0;
    while i < 7 {
        out[i] = TOOLS[i].name;
        i += 1;
    }
    out
}

/// The built-in tool called `name`.
pub fn get(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The kind of the built-in tool `name` (`None`: not a built-in).
pub fn kind(name: &str) -> Option<ToolKind> {
    get(name).map(|t| t.kind)
}

/// Whether `name` is a built-in tool that only reads.
pub fn is_read(name: &str) -> bool {
    kind(name) == Some(ToolKind::Read)
}

/// Whether `name` is a built-in tool that writes files.
pub fn is_write(name: &str) -> bool {
    kind(name) == Some(ToolKind::Write)
}

/// Reserved words that may precede a command: the gates' shell parser
/// skips them at command position (`authz::shell::parse`).
pub const SHELL_PREFIX_WORDS: &[&str] = &[
    "if", "then", "elif", "else", "do", "while", "until", "!", "{", "time",
];
/// Reserved words that close a compound command: the parser reads them as
/// separators.
pub const SHELL_CLOSE_WORDS: &[&str] = &["fi", "done", "esac", "}"];
/// The shell's other reserved words (POSIX and bash), which the parser
/// leaves as words but a shell would not run as a program.
const SHELL_OTHER_RESERVED: &[&str] = &[
    "case", "coproc", "for", "function", "in", "select", "[[", "]]",
];

/// Whether the shell reads `word` as a keyword in command position.
fn shell_reserved(word: &str) -> bool {
    [SHELL_PREFIX_WORDS, SHELL_CLOSE_WORDS, SHELL_OTHER_RESERVED]
        .iter()
        .any(|l| l.contains(&word))
}

/// The command line of a shell call's `command` argument, as the gates
/// analyse it and receipts show it: a string as given; an argv array
/// joined with shell quoting (so `["sh", "-c", "a; b"]` stays one
/// argument). `None` when there is no usable `command`.
pub fn shell_command_line(args: &serde_json::Value) -> Option<String> {
    match args.get("command")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(a) => {
            let words: Option<Vec<&str>> = a.iter().map(|v| v.as_str()).collect();
            let words = words?;
            // A reserved word in command position is a keyword to the
            // shell (`do` alone parses as no command at all), while the
            // argv runs it as a program name: quote it, so the line the
            // gates parse is the argv that runs. (shlex quotes by
            // character only; these need no escaping inside '…'.)
            match words.split_first() {
                Some((first, rest)) if shell_reserved(first) => {
                    let rest = shlex::try_join(rest.iter().copied()).ok()?;
                    Some(if rest.is_empty() {
                        format!("'{first}'")
                    } else {
                        format!("'{first}' {rest}")
                    })
                }
                _ => shlex::try_join(words.iter().copied()).ok(),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agent_tools_are_the_flagged_prefix_and_names_are_unique() {
        let flagged: Vec<&str> = TOOLS.iter().filter(|t| t.agent).map(|t| t.name).collect();
        assert_eq!(flagged, AGENT_TOOLS);
        let mut names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
        assert!(is_read("search") && is_write("apply_patch") && !is_read(SHELL));
        assert_eq!(kind("nope"), None);
    }

    #[test]
    fn command_line_quotes_array_parts() {
        assert_eq!(
            shell_command_line(&json!({"command": ["sh", "-c", "test -f x && echo ok"]})).unwrap(),
            "sh -c 'test -f x && echo ok'"
        );
        assert_eq!(
            shell_command_line(&json!({"command": ["echo", "a|b"]})).unwrap(),
            "echo 'a|b'"
        );
        // A reserved word as the program is quoted (else it is a keyword).
        assert_eq!(
            shell_command_line(&json!({"command": ["do", "x"]})).unwrap(),
            "'do' x"
        );
        assert_eq!(
            shell_command_line(&json!({"command": "ls -l"})).unwrap(),
            "ls -l"
        );
        assert_eq!(shell_command_line(&json!({"command": [1]})), None);
        assert_eq!(shell_command_line(&json!({})), None);
    }
}
