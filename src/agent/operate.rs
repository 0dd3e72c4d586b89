//! Operate mode: Work's permissions, run as a goal. The request's agent
//! (depth 0) in Operate gets [`PROMPT`] in its system prompt (keep a
//! to-do list, split independent steps across parallel children with
//! disjoint write scopes, run long commands in the background, get a
//! `reviewer` child's verdict before ending), and the loop enforces the
//! last part with [`ReviewGate`]: when a turn is about to end with more
//! than one file changed since the last `reviewer` child completed (by
//! its file tools, its children, or its commands and MCP calls as the
//! undo snapshots saw them), the
//! loop sends the model one message ([`ReviewGate::nudge`]) asking for a
//! review, once per unreviewed change set. The model may still end after
//! it; what is enforced is that it is asked (docs/OPERATE.md).
//!
//! Pure: the gate only watches the loop's typed events and the changed
//! paths the loop hands it.

use super::event::Event;
use super::subagent::Role;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The system prompt section of an Operate run.
pub const PROMPT: &str = "\n\nMode: Operate. The user's request is a goal: work until it is done or you are blocked.\n\
- Keep a to-do list with the `todo` tool (the whole list each call; statuses pending, in_progress, done, blocked) and keep it current as you go: the user sees it.\n\
- Send independent steps to parallel sub-agents (several `agent` calls in one response run at once). Give writers (`general`, `implement`) disjoint `write_scope`s; use `explore` to investigate and `test` to verify.\n\
- Run long commands (builds, test suites, servers) with `shell` and `background: true`, do other work, then read them with `job_output`; stop them with `job_kill`.\n\
- Before you end: any change touching more than one file needs a `reviewer` sub-agent's verdict (an `agent` call with role `reviewer` and a prompt describing the change). Address what it finds.";

/// What the message to the model says when a turn would end unreviewed.
pub fn nudge_text(files: &[PathBuf]) -> String {
    let shown: Vec<String> = files
        .iter()
        .take(10)
        .map(|p| p.display().to_string())
        .collect();
    let more = files.len().saturating_sub(shown.len());
    format!(
        "[codewhale Operate] {} files changed since the last reviewer verdict ({}{}). Before ending, spawn a `reviewer` sub-agent (the `agent` tool, role `reviewer`) to review this change, then address its findings.",
        files.len(),
        shown.join(", "),
        if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        }
    )
}

/// Files changed since the last completed `reviewer` child, and whether
/// the model was already asked about them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReviewGate {
    /// Workspace-relative where the path is inside the workspace, so a
    /// file named by a tool (absolute) and by a snapshot diff (relative)
    /// counts once.
    changed: BTreeSet<PathBuf>,
    asked: bool,
    /// The canonical workspace the tools' absolute paths are under.
    workspace: Option<PathBuf>,
}

impl ReviewGate {
    /// A gate for a run in `workspace` (canonical, as the file tools and
    /// the snapshot store name it).
    pub fn for_workspace(workspace: &std::path::Path) -> Self {
        ReviewGate {
            workspace: Some(workspace.to_path_buf()),
            ..Default::default()
        }
    }

    /// Files the file-changing calls changed as the undo snapshots saw
    /// them (workspace-relative): commands, children and MCP calls
    /// included, which no tool result lists.
    pub fn observe_changed(&mut self, rel: &[String]) {
        if !rel.is_empty() {
            let files: Vec<PathBuf> = rel.iter().map(PathBuf::from).collect();
            self.add(&files);
        }
    }

    /// Watch one step of the run: a file tool's successful write and a
    /// child's changed files add to the set; a `reviewer` child that
    /// completed clears it. (A command's own changes come from the
    /// snapshots: [`Self::observe_changed`].)
    pub fn observe(&mut self, ev: &Event) {
        match ev {
            Event::ToolResult(r) if r.status == "ok" && crate::catalogue::is_write(&r.tool) => {
                self.add(&r.files_touched)
            }
            Event::SubagentCompleted(c) => {
                if c.role == Role::Reviewer && c.status == "completed" {
                    self.changed.clear();
                    self.asked = false;
                } else {
                    self.add(&c.files_changed)
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, files: &[PathBuf]) {
        let before = self.changed.len();
        let ws = self.workspace.as_deref();
        self.changed.extend(files.iter().map(|f| {
            ws.and_then(|w| f.strip_prefix(w).ok())
                .map_or_else(|| f.clone(), std::path::Path::to_path_buf)
        }));
        if self.changed.len() != before {
            // A new change: the earlier question was about less.
            self.asked = false;
        }
    }

    /// At the end of a turn: the message to send when more than one file
    /// changed since the last review and the model was not yet asked
    /// about this change set (then it counts as asked).
    pub fn nudge(&mut self) -> Option<String> {
        if self.changed.len() <= 1 || self.asked {
            return None;
        }
        self.asked = true;
        let files: Vec<PathBuf> = self.changed.iter().cloned().collect();
        Some(nudge_text(&files))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::agent::event::{SubagentCompleted, ToolResult};

    fn write(tool: &str, status: &str, files: &[&str]) -> Event {
        Event::ToolResult(Box::new(ToolResult {
            call_id: "c".into(),
            tool: tool.into(),
            status: status.into(),
            duration_ms: 0,
            truncated: false,
            error_category: None,
            exit_code: None,
            enforcement: None,
            enforced: None,
            files_touched: files.iter().map(PathBuf::from).collect(),
            output: String::new(),
            diff: None,
        }))
    }

    fn child(role: Role, status: &str, files: &[&str]) -> Event {
        Event::SubagentCompleted(Box::new(SubagentCompleted {
            agent_id: "a1".into(),
            parent_call_id: "p".into(),
            role,
            status: status.into(),
            duration_ms: 0,
            input_tokens: 0,
            output_tokens: 0,
            files_changed: files.iter().map(PathBuf::from).collect(),
            reason: None,
        }))
    }

    #[test]
    fn one_file_needs_no_review_two_files_ask_once() {
        let mut g = ReviewGate::default();
        g.observe(&write("edit_file", "ok", &["a.rs"]));
        g.observe(&write("edit_file", "ok", &["a.rs"]));
        assert_eq!(
            g.nudge(),
            None,
            "one file (twice) is not a multi-file change"
        );
        g.observe(&write("write_file", "ok", &["b.rs"]));
        let m = g.nudge().unwrap();
        assert!(
            m.contains("2 files changed") && m.contains("a.rs, b.rs"),
            "{m}"
        );
        assert!(m.contains("`reviewer`"));
        assert_eq!(g.nudge(), None, "asked once per change set");
        // A further change asks again.
        g.observe(&write("apply_patch", "ok", &["c.rs"]));
        assert!(g.nudge().unwrap().contains("3 files"));
    }

    #[test]
    fn failed_writes_reads_and_command_results_do_not_count_by_themselves() {
        let mut g = ReviewGate::default();
        g.observe(&write("edit_file", "error", &["a.rs"]));
        g.observe(&write("read_file", "ok", &["b.rs"]));
        g.observe(&write("shell", "ok", &["c.rs"]));
        g.observe(&write("write_file", "not_run", &["d.rs"]));
        assert_eq!(g.nudge(), None);
    }

    #[test]
    fn childrens_files_count_and_a_completed_reviewer_clears() {
        let mut g = ReviewGate::default();
        g.observe(&child(Role::Implement, "completed", &["x.rs"]));
        g.observe(&child(Role::General, "failed", &["y.rs"]));
        // A reviewer that did not complete gives no verdict.
        g.observe(&child(Role::Reviewer, "failed", &[]));
        assert!(g.nudge().is_some());
        g.observe(&child(Role::Reviewer, "completed", &[]));
        assert_eq!(g.nudge(), None);
        assert_eq!(g, ReviewGate::default());
    }

    #[test]
    fn files_commands_changed_count_once_with_the_tools_writes() {
        let mut g = ReviewGate::for_workspace(std::path::Path::new("/ws"));
        // The same file written by a tool (absolute) and seen by the
        // snapshot diff (relative) is one file.
        g.observe(&write("edit_file", "ok", &["/ws/a.rs"]));
        g.observe_changed(&["a.rs".into()]);
        assert_eq!(g.nudge(), None);
        // A command changed a second one.
        g.observe_changed(&["src/b.rs".into()]);
        let m = g.nudge().unwrap();
        assert!(
            m.contains("2 files changed") && m.contains("a.rs, src/b.rs"),
            "{m}"
        );
        // A completed reviewer clears what commands changed too.
        g.observe(&child(Role::Reviewer, "completed", &[]));
        assert_eq!(g.nudge(), None);
        g.observe_changed(&["c.rs".into(), "d.rs".into()]);
        assert!(g.nudge().unwrap().contains("2 files"));
    }

    #[test]
    fn the_message_lists_at_most_ten_files() {
        let files: Vec<PathBuf> = (0..12).map(|i| PathBuf::from(format!("f{i}"))).collect();
        let m = nudge_text(&files);
        assert!(m.contains("12 files") && m.contains("and 2 more"), "{m}");
    }
}
