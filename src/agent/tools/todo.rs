//! `todo`: the model's to-do list for a goal (Operate; offered in Work
//! too). Each call replaces the whole list; the loop keeps the latest and
//! reports it as [`crate::agent::event::Event::TodoUpdated`] (the runtime's
//! `todo.updated`, the TUI's list above the input, ACP's `plan` update).
//!
//! This module only reads and checks the arguments: a bad id, a repeated
//! id, an unknown status or empty text is a tool error naming the entry
//! and the field, and nothing is replaced.

use super::ToolOutput;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The tool's name.
pub const TODO_TOOL: &str = "todo";

/// Entries one list may hold (a goal's steps, not a backlog).
pub const MAX_ITEMS: usize = 100;
/// Characters of one entry's text, and of its id.
pub const MAX_TEXT: usize = 500;
const MAX_ID: usize = 64;

/// Where one entry of the list stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Done,
    Blocked,
}

impl TodoStatus {
    pub const ALL: [TodoStatus; 4] = [
        TodoStatus::Pending,
        TodoStatus::InProgress,
        TodoStatus::Done,
        TodoStatus::Blocked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Done => "done",
            TodoStatus::Blocked => "blocked",
        }
    }

    fn parse(s: &str) -> Option<TodoStatus> {
        TodoStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// One entry of the list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    pub id: String,
    pub text: String,
    pub status: TodoStatus,
}

/// The list a `todo` call's arguments (`{"items": [...]}`) stand for, or
/// the tool error to send back (nothing replaced).
pub fn parse(args: &Value) -> Result<Vec<TodoItem>, ToolOutput> {
    let bad = |msg: String| ToolOutput::error("bad_arguments", msg);
    let Some(items) = args.get("items").and_then(Value::as_array) else {
        return Err(bad(
            "missing argument `items`: an array of {id, text, status} (the whole list)".into(),
        ));
    };
    if items.len() > MAX_ITEMS {
        return Err(bad(format!(
            "`items` has {} entries; at most {MAX_ITEMS}",
            items.len()
        )));
    }
    let mut out: Vec<TodoItem> = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let field = |k: &str| it.get(k).and_then(Value::as_str).map(str::trim);
        let id = match field("id") {
            Some(s) if !s.is_empty() && s.chars().count() <= MAX_ID => s.to_string(),
            Some(s) if !s.is_empty() => {
                return Err(bad(format!(
                    "items[{i}].id is longer than {MAX_ID} characters"
                )))
            }
            _ => {
                return Err(bad(format!(
                    "items[{i}].id is missing or empty (a short string, unique in the list)"
                )))
            }
        };
        if out.iter().any(|o| o.id == id) {
            return Err(bad(format!(
                "items[{i}].id `{id}` is used twice (ids are unique in the list)"
            )));
        }
        let text = match field("text") {
            Some(s) if !s.is_empty() && s.chars().count() <= MAX_TEXT => s.to_string(),
            Some(s) if !s.is_empty() => {
                return Err(bad(format!(
                    "items[{i}].text is longer than {MAX_TEXT} characters"
                )))
            }
            _ => return Err(bad(format!("items[{i}].text is missing or empty"))),
        };
        let status = match field("status") {
            Some(s) => TodoStatus::parse(s).ok_or_else(|| {
                bad(format!(
                    "items[{i}].status `{s}` is not one of {}",
                    TodoStatus::ALL.map(TodoStatus::as_str).join(", ")
                ))
            })?,
            None => {
                return Err(bad(format!(
                    "items[{i}].status is missing (one of {})",
                    TodoStatus::ALL.map(TodoStatus::as_str).join(", ")
                )))
            }
        };
        out.push(TodoItem { id, text, status });
    }
    Ok(out)
}

/// What goes back to the model: the list as it now stands.
pub fn summary(items: &[TodoItem]) -> String {
    if items.is_empty() {
        return "to-do list cleared".into();
    }
    let done = items
        .iter()
        .filter(|t| t.status == TodoStatus::Done)
        .count();
    let mut s = format!("to-do list updated ({done}/{} done):", items.len());
    for t in items {
        s.push_str(&format!("\n[{}] {}: {}", t.status.as_str(), t.id, t.text));
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_replaces_and_reads_back() {
        let l = parse(&json!({"items": [
            {"id": "1", "text": "read the code", "status": "done"},
            {"id": "2", "text": "fix it", "status": "in_progress"},
            {"id": "3", "text": "ask review", "status": "pending"},
            {"id": "4", "text": "deploy", "status": "blocked"},
        ]}))
        .unwrap();
        assert_eq!(l.len(), 4);
        assert_eq!(l[1].status, TodoStatus::InProgress);
        let s = summary(&l);
        assert!(s.starts_with("to-do list updated (1/4 done):"), "{s}");
        assert!(s.contains("[in_progress] 2: fix it"));
        assert_eq!(
            summary(&parse(&json!({"items": []})).unwrap()),
            "to-do list cleared"
        );
        // The serde form is the documented one.
        assert_eq!(
            serde_json::to_value(&l[1]).unwrap(),
            json!({"id": "2", "text": "fix it", "status": "in_progress"})
        );
    }

    #[test]
    fn bad_entries_are_tool_errors_naming_the_entry_and_field() {
        let err = |v: Value| parse(&v).unwrap_err().content;
        assert!(err(json!({})).contains("missing argument `items`"));
        assert!(err(json!({"items": [{"text": "x", "status": "done"}]})).contains("items[0].id"));
        assert!(err(json!({"items": [
            {"id": "a", "text": "x", "status": "done"},
            {"id": "a", "text": "y", "status": "done"}
        ]}))
        .contains("items[1].id `a` is used twice"));
        let e = err(json!({"items": [{"id": "a", "text": "x", "status": "finished"}]}));
        assert!(
            e.contains(
                "items[0].status `finished` is not one of pending, in_progress, done, blocked"
            ),
            "{e}"
        );
        assert!(
            err(json!({"items": [{"id": "a", "text": " ", "status": "done"}]}))
                .contains("items[0].text")
        );
        assert!(err(json!({"items": [{"id": "a", "text": "x"}]})).contains("items[0].status"));
        let many: Vec<Value> = (0..=MAX_ITEMS)
            .map(|i| json!({"id": i.to_string(), "text": "x", "status": "pending"}))
            .collect();
        assert!(err(json!({ "items": many })).contains("at most 100"));
        assert_eq!(
            parse(&json!({"items": 3})).unwrap_err().error_category,
            Some("bad_arguments")
        );
    }
}
