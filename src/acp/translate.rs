//! Runtime events → ACP `session/update`s, as a pure state machine
//! ([`Mapper`]): the adapter feeds it every event envelope of the thread
//! (live, or the stored ones for `session/load`) and sends what it returns.
//! Titles, kinds, locations and diffs come from the tool call's own
//! arguments, so the editor shows the real command or path.

use crate::runtime::item_meta::ToolItemMeta;
use crate::runtime::served::{ItemEnd, Served, ServedEvent};
use crate::runtime::{ItemKind, TurnRecord, TurnStatus};
use agent_client_protocol_schema::v1::{
    ConfigOptionUpdate, ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, StopReason, TextContent, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The loop's error text for a turn that hit its model-request bound
/// (src/agent/run.rs `finish`).
const MAX_TURNS_PREFIX: &str = "stopped after --max-turns";

/// What one event asks the adapter to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Update(SessionUpdate),
    /// Gate 8 asked: put it to the editor (`session/request_permission`).
    Ask(Question),
    /// A question ended without the editor (timeout, turn over).
    Settled {
        approval_id: String,
    },
    /// The turn is over.
    Done(TurnEnd),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub approval_id: String,
    pub tool_call_id: String,
    pub tool: String,
    pub command: Option<String>,
    pub reason: String,
    /// The call's title/kind/locations as the editor already saw them.
    pub fields: ToolCallUpdateFields,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    Stop(StopReason),
    /// The turn failed: answered as a JSON-RPC error with this message.
    Failed(String),
}

/// The stop reason of a finished turn, from its record.
pub fn turn_end(turn: &TurnRecord) -> TurnEnd {
    let err = turn.error.clone().unwrap_or_default();
    match turn.status {
        TurnStatus::Completed => TurnEnd::Stop(StopReason::EndTurn),
        TurnStatus::Interrupted | TurnStatus::Canceled => TurnEnd::Stop(StopReason::Cancelled),
        _ if err.starts_with(MAX_TURNS_PREFIX) => TurnEnd::Stop(StopReason::MaxTurnRequests),
        _ if err.is_empty() => TurnEnd::Failed("the turn failed".into()),
        _ => TurnEnd::Failed(err),
    }
}

pub fn tool_kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list_dir" => ToolKind::Read,
        "search" => ToolKind::Search,
        "write_file" | "edit_file" | "apply_patch" => ToolKind::Edit,
        "shell" => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// The path argument of a file tool, made absolute against `cwd`.
fn path_arg(args: &Value, cwd: &Path) -> Option<PathBuf> {
    let p = args.get("path")?.as_str()?;
    Some(cwd.join(p))
}

/// The real command line (shell) or path (file tools); the tool name
/// when the arguments name neither.
pub fn tool_title(tool: &str, args: &Value) -> String {
    if tool == "shell" {
        if let Some(c) = crate::catalogue::shell_command_line(args) {
            return c;
        }
    }
    if tool == "search" {
        if let Some(p) = args.get("pattern").and_then(Value::as_str) {
            let within = args.get("path").and_then(Value::as_str).unwrap_or(".");
            return format!("{p} in {within}");
        }
    }
    if tool == "apply_patch" {
        let files = patch_files(args);
        if !files.is_empty() {
            return files.join(", ");
        }
    }
    args.get("path")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| tool.to_string())
}

/// The files a unified diff names (`+++ b/…` lines, `/dev/null` left out).
fn patch_files(args: &Value) -> Vec<String> {
    let p = args.get("patch").and_then(Value::as_str).unwrap_or("");
    p.lines()
        .filter_map(|l| l.strip_prefix("+++ "))
        .map(|l| l.split('\t').next().unwrap_or(l).trim())
        .filter(|f| *f != "/dev/null")
        .map(|f| f.strip_prefix("b/").unwrap_or(f).to_string())
        .collect()
}

pub fn locations(tool: &str, args: &Value, cwd: &Path) -> Vec<ToolCallLocation> {
    if tool == "apply_patch" {
        return patch_files(args)
            .into_iter()
            .map(|f| ToolCallLocation::new(cwd.join(f)))
            .collect();
    }
    if tool == "shell" {
        return Vec::new();
    }
    match path_arg(args, cwd) {
        Some(p) => vec![ToolCallLocation::new(p)],
        // list_dir / search without a path: the workspace itself.
        None if matches!(tool, "list_dir" | "search") => vec![ToolCallLocation::new(cwd)],
        None => Vec::new(),
    }
}

/// The diff blocks of a completed edit, one per file, from the unified
/// diff the tool made of each file's real change (the item's `diff`): each
/// block's old and new text are the hunks' lines with their context (the
/// lines the change touched and three either side), so a client's diff of
/// the two is the file's change, not the tool's argument strings.
pub fn diffs(unified: &str, cwd: &Path) -> Vec<Diff> {
    let mut out = Vec::new();
    let mut cur: Option<(PathBuf, String, String)> = None;
    let mut lines = unified.lines().peekable();
    while let Some(l) = lines.next() {
        if let (Some(a), Some(b)) = (
            l.strip_prefix("--- "),
            lines.peek().and_then(|n| n.strip_prefix("+++ ")),
        ) {
            let name = if b == "/dev/null" {
                a.strip_prefix("a/").unwrap_or(a)
            } else {
                b.strip_prefix("b/").unwrap_or(b)
            };
            out.extend(cur.take());
            cur = Some((cwd.join(name), String::new(), String::new()));
            lines.next();
            continue;
        }
        let Some((_, old, new)) = cur.as_mut() else {
            continue;
        };
        if let Some(t) = l.strip_prefix('-') {
            old.push_str(t);
            old.push('\n');
        } else if let Some(t) = l.strip_prefix('+') {
            new.push_str(t);
            new.push('\n');
        } else if let Some(t) = l.strip_prefix(' ') {
            old.push_str(t);
            old.push('\n');
            new.push_str(t);
            new.push('\n');
        }
    }
    out.extend(cur);
    out.into_iter()
        .map(|(p, old, new)| Diff::new(p, new).old_text(Some(old).filter(|o| !o.is_empty())))
        .collect()
}

fn text_chunk(t: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(t)))
}

/// One thread's events → ACP updates. Tool call ids are the model's call
/// ids (the ones the runtime's items and approvals carry).
#[derive(Debug)]
pub struct Mapper {
    cwd: PathBuf,
    /// Only this turn's events (live prompt); `None`: every turn (load).
    turn: Option<String>,
    /// Tool item id → (call id, tool, args).
    calls: HashMap<String, (String, String, Value)>,
    /// Whether to replay the user's own messages (session/load).
    replay_user: bool,
}

impl Mapper {
    pub fn live(cwd: &Path, turn: &str) -> Self {
        Mapper {
            cwd: cwd.to_path_buf(),
            turn: Some(turn.to_string()),
            calls: HashMap::new(),
            replay_user: false,
        }
    }

    pub fn replay(cwd: &Path) -> Self {
        Mapper {
            cwd: cwd.to_path_buf(),
            turn: None,
            calls: HashMap::new(),
            replay_user: true,
        }
    }

    fn fields(&self, tool: &str, args: &Value) -> ToolCallUpdateFields {
        ToolCallUpdateFields::new()
            .title(tool_title(tool, args))
            .kind(tool_kind(tool))
            .locations(locations(tool, args, &self.cwd))
            .raw_input(args.clone())
    }

    /// What the event `env` (a served envelope) asks for, read as its
    /// typed event.
    pub fn map(&mut self, env: &Value) -> Vec<Action> {
        let Some(ev) = Served::decode(env) else {
            return Vec::new();
        };
        if let Some(t) = &self.turn {
            if ev.turn_id.as_deref() != Some(t.as_str()) {
                return Vec::new();
            }
        }
        let item_id = ev.item_id.unwrap_or_default();
        match ev.event {
            ServedEvent::ItemStarted(item) if is_tool(item.kind) => {
                let m = ToolItemMeta::of(&item.metadata).start;
                let call = if m.call_id.is_empty() {
                    item_id.clone()
                } else {
                    m.call_id
                };
                let (tool, args) = (m.tool, m.args);
                let f = self.fields(&tool, &args);
                let mut tc = ToolCall::new(call.clone(), f.title.clone().unwrap_or_default())
                    .kind(tool_kind(&tool))
                    .status(ToolCallStatus::InProgress)
                    .locations(f.locations.clone().unwrap_or_default())
                    .raw_input(args.clone());
                tc.name = Some(tool.clone());
                self.calls.insert(item_id, (call, tool, args));
                vec![Action::Update(SessionUpdate::ToolCall(tc))]
            }
            ServedEvent::ItemStarted(item)
                if item.kind == ItemKind::UserMessage && self.replay_user =>
            {
                let t = item.metadata["text"].as_str().unwrap_or("");
                vec![Action::Update(SessionUpdate::UserMessageChunk(text_chunk(
                    t,
                )))]
            }
            ServedEvent::ItemDelta { kind, delta } if kind == "agent_message" => {
                if delta.is_empty() {
                    return Vec::new();
                }
                vec![Action::Update(SessionUpdate::AgentMessageChunk(
                    text_chunk(&delta),
                ))]
            }
            ServedEvent::ItemFinished { end, item } if is_tool(item.kind) => {
                let Some((call, _, _)) = self.calls.remove(&item_id) else {
                    return Vec::new();
                };
                let m = ToolItemMeta::of(&item.metadata).result;
                let ok = end == ItemEnd::Completed && m.status == "ok";
                let mut f = ToolCallUpdateFields::new()
                    .status(if ok {
                        ToolCallStatus::Completed
                    } else {
                        ToolCallStatus::Failed
                    })
                    .raw_output(serde_json::json!({
                        "status": m.status, "exit_code": m.exit_code,
                        "enforcement": m.enforcement, "files_touched": m.files_touched,
                        "error_category": m.error_category, "approval": m.approval,
                    }));
                if let Some(u) = m.diff.as_deref().filter(|_| ok) {
                    let d = diffs(u, &self.cwd);
                    if !d.is_empty() {
                        f = f.content(d.into_iter().map(ToolCallContent::Diff).collect::<Vec<_>>());
                    }
                }
                vec![Action::Update(SessionUpdate::ToolCallUpdate(
                    ToolCallUpdate::new(call, f),
                ))]
            }
            ServedEvent::ApprovalRequired(ask) if self.turn.is_some() => {
                let args = self
                    .calls
                    .values()
                    .find(|(c, _, _)| *c == ask.tool_call_id)
                    .map(|(_, _, a)| a.clone())
                    .unwrap_or(Value::Null);
                let fields = self
                    .fields(&ask.tool, &args)
                    .status(ToolCallStatus::Pending);
                let ask = *ask;
                vec![Action::Ask(Question {
                    approval_id: ask.approval_id,
                    tool_call_id: ask.tool_call_id,
                    command: ask.command,
                    reason: ask.reason,
                    tool: ask.tool,
                    fields,
                })]
            }
            ServedEvent::ApprovalSettled { approval_id, .. } => {
                vec![Action::Settled { approval_id }]
            }
            ServedEvent::TodoUpdated(items) => {
                vec![Action::Update(SessionUpdate::Plan(plan(&items)))]
            }
            ServedEvent::TurnCompleted(turn) if self.turn.is_some() => {
                vec![Action::Done(turn_end(&turn))]
            }
            // The thread's own breaker (a sub-agent's pauses only it):
            // the `auto_review` option goes off, and on again when
            // Auto-Review is selected again.
            ServedEvent::ReviewPaused(p) if p.agent_id.is_none() => {
                vec![Action::Update(SessionUpdate::ConfigOptionUpdate(
                    ConfigOptionUpdate::new(vec![super::options::auto_review(false)]),
                ))]
            }
            ServedEvent::ReviewResumed => vec![Action::Update(SessionUpdate::ConfigOptionUpdate(
                ConfigOptionUpdate::new(vec![super::options::auto_review(true)]),
            ))],
            _ => Vec::new(),
        }
    }
}

/// The to-do list as ACP's `plan` update (the whole list each time, as
/// ACP asks). ACP has no "blocked": such an entry stays `pending` and its
/// text says `(blocked)`; every entry is `medium` (the list has no
/// priorities).
fn plan(items: &[crate::runtime::served::TodoItem]) -> Plan {
    use crate::runtime::served::TodoStatus;
    Plan::new(
        items
            .iter()
            .map(|t| {
                let (status, content) = match t.status {
                    TodoStatus::Pending => (PlanEntryStatus::Pending, t.text.clone()),
                    TodoStatus::InProgress => (PlanEntryStatus::InProgress, t.text.clone()),
                    TodoStatus::Done => (PlanEntryStatus::Completed, t.text.clone()),
                    TodoStatus::Blocked => {
                        (PlanEntryStatus::Pending, format!("{} (blocked)", t.text))
                    }
                };
                PlanEntry::new(content, PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// The tool items an editor shows as tool calls.
fn is_tool(kind: ItemKind) -> bool {
    matches!(
        kind,
        ItemKind::ToolCall
            | ItemKind::FileChange
            | ItemKind::CommandExecution
            | ItemKind::McpToolCall
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(event: &str, turn: &str, item: &str, payload: Value) -> Value {
        crate::runtime::served::testing::complete(
            json!({"event": event, "turn_id": turn, "item_id": item, "payload": payload}),
        )
    }

    #[test]
    fn titles_are_the_real_command_or_path() {
        assert_eq!(
            tool_title("shell", &json!({"command": ["echo", "a b"]})),
            "echo 'a b'"
        );
        assert_eq!(tool_title("shell", &json!({"command": "ls -l"})), "ls -l");
        assert_eq!(
            tool_title("write_file", &json!({"path": "src/a.rs"})),
            "src/a.rs"
        );
        assert_eq!(
            tool_title("apply_patch", &json!({"patch": "--- a/x\n+++ b/x\n@@\n"})),
            "x"
        );
        assert_eq!(tool_kind("shell"), ToolKind::Execute);
        assert_eq!(tool_kind("edit_file"), ToolKind::Edit);
        assert_eq!(tool_kind("read_file"), ToolKind::Read);
    }

    #[test]
    fn a_tool_call_streams_start_then_result_with_a_diff() {
        let cwd = Path::new("/ws");
        let mut m = Mapper::live(cwd, "turn_1");
        let args = json!({"path": "a.txt", "old_string": "x", "new_string": "y"});
        let started = env(
            "item.started",
            "turn_1",
            "item_1",
            json!({"item": {"kind": "file_change", "metadata": {"call_id": "c1", "tool": "edit_file", "args": args}}}),
        );
        let a = m.map(&started);
        let Action::Update(SessionUpdate::ToolCall(tc)) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(tc.tool_call_id.to_string(), "c1");
        assert_eq!(tc.title, "a.txt");
        assert_eq!(tc.kind, ToolKind::Edit);
        assert_eq!(tc.locations[0].path, PathBuf::from("/ws/a.txt"));
        let done = env(
            "item.completed",
            "turn_1",
            "item_1",
            json!({"item": {"kind": "file_change", "metadata": {"call_id": "c1", "status": "ok",
                "diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-x marks\n+y marks\n three\n"}}}),
        );
        let a = m.map(&done);
        let Action::Update(SessionUpdate::ToolCallUpdate(u)) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(u.fields.status, Some(ToolCallStatus::Completed));
        let Some(c) = &u.fields.content else { panic!() };
        let ToolCallContent::Diff(d) = &c[0] else {
            panic!()
        };
        // The file's real change with its context, not the tool's strings.
        assert_eq!(d.path, PathBuf::from("/ws/a.txt"));
        assert_eq!(d.old_text.as_deref(), Some("one\nx marks\nthree\n"));
        assert_eq!(d.new_text, "one\ny marks\nthree\n");
        // Another turn's events are not this prompt's.
        assert!(m
            .map(&env(
                "item.delta",
                "turn_2",
                "i",
                json!({"kind": "agent_message", "delta": "x"})
            ))
            .is_empty());
    }

    #[test]
    fn a_patch_over_two_files_gives_a_diff_block_each() {
        let u = "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new.md\n@@ -0,0 +1 @@\n+new\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
        let d = diffs(u, Path::new("/ws"));
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].path, PathBuf::from("/ws/src/a.rs"));
        assert_eq!(
            (d[0].old_text.as_deref(), d[0].new_text.as_str()),
            (Some("a\n"), "b\n")
        );
        assert_eq!(
            (d[1].old_text.as_deref(), d[1].new_text.as_str()),
            (None, "new\n")
        );
        assert_eq!(d[2].path, PathBuf::from("/ws/gone.txt"));
        assert_eq!(
            (d[2].old_text.as_deref(), d[2].new_text.as_str()),
            (Some("bye\n"), "")
        );
    }

    #[test]
    fn a_denied_call_fails_and_carries_no_diff() {
        let mut m = Mapper::live(Path::new("/ws"), "t");
        m.map(&env("item.started", "t", "i", json!({"item": {"kind": "file_change",
            "metadata": {"call_id": "c", "tool": "write_file", "args": {"path": "../x", "content": "y"}}}})));
        let a = m.map(&env(
            "item.completed",
            "t",
            "i",
            json!({"item": {"kind": "file_change",
            "metadata": {"call_id": "c", "status": "not_run"}}}),
        ));
        let Action::Update(SessionUpdate::ToolCallUpdate(u)) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(u.fields.status, Some(ToolCallStatus::Failed));
        assert!(u.fields.content.is_none());
    }

    /// `todo.updated` becomes ACP's `plan` update: every entry, in order,
    /// blocked ones pending with the word in their text.
    #[test]
    fn a_todo_update_is_an_acp_plan() {
        let mut m = Mapper::live(Path::new("/ws"), "t");
        let a = m.map(&env(
            "todo.updated",
            "t",
            "",
            json!({"call_id": "c", "items": [
                {"id": "1", "text": "read", "status": "done"},
                {"id": "2", "text": "fix", "status": "in_progress"},
                {"id": "3", "text": "ship", "status": "blocked"},
            ]}),
        ));
        let [Action::Update(SessionUpdate::Plan(p))] = a.as_slice() else {
            panic!("{a:?}")
        };
        let got: Vec<(&str, &PlanEntryStatus)> = p
            .entries
            .iter()
            .map(|e| (e.content.as_str(), &e.status))
            .collect();
        assert_eq!(
            got,
            vec![
                ("read", &PlanEntryStatus::Completed),
                ("fix", &PlanEntryStatus::InProgress),
                ("ship (blocked)", &PlanEntryStatus::Pending),
            ]
        );
        let v = serde_json::to_value(SessionUpdate::Plan(p.clone())).unwrap();
        assert_eq!(v["sessionUpdate"], "plan");
    }

    #[test]
    fn stop_reasons() {
        let e = |s: &str, err: Value| {
            let env = env(
                "turn.completed",
                "t",
                "",
                json!({"turn": {"status": s, "error": err}}),
            );
            let Some(Served {
                event: ServedEvent::TurnCompleted(turn),
                ..
            }) = Served::decode(&env)
            else {
                panic!("{env}")
            };
            turn_end(&turn)
        };
        assert_eq!(
            e("completed", Value::Null),
            TurnEnd::Stop(StopReason::EndTurn)
        );
        assert_eq!(
            e("interrupted", json!("x")),
            TurnEnd::Stop(StopReason::Cancelled)
        );
        assert_eq!(
            e("failed", json!("stopped after --max-turns 20")),
            TurnEnd::Stop(StopReason::MaxTurnRequests)
        );
        assert_eq!(
            e("failed", json!("provider: 500")),
            TurnEnd::Failed("provider: 500".into())
        );
    }

    #[test]
    fn a_question_carries_the_call() {
        let mut m = Mapper::live(Path::new("/ws"), "t");
        m.map(&env(
            "item.started",
            "t",
            "i",
            json!({"item": {"kind": "command_execution",
            "metadata": {"call_id": "c", "tool": "shell", "args": {"command": "rm -rf build"}}}}),
        ));
        let a = m.map(&env(
            "approval.required",
            "t",
            "i",
            json!({"approval_id": "appr_1",
            "tool_call_id": "c", "tool": "shell", "command": "rm -rf build", "reason": "asks"}),
        ));
        let Action::Ask(q) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(q.approval_id, "appr_1");
        assert_eq!(q.fields.title.as_deref(), Some("rm -rf build"));
        assert_eq!(q.fields.status, Some(ToolCallStatus::Pending));
    }
}
