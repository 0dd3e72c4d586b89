//! Snapshots of rendered buffers (ratatui's `TestBackend`): what a user
//! sees for each posture, the card, its one-line fallback, diff and tool
//! cells, narrow widths. docs/TUI.md's screens are these snapshots.

use super::*;
use crate::runtime::preview::output_preview;
use crate::tui::state::{Event, FooterInfo};
use crate::tui::test_support::buffer_text as text;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::Terminal;
use serde_json::json;

fn footer() -> FooterInfo {
    FooterInfo {
        model: "deepseek-flash".into(),
        provider: "deepseek".into(),
        backend: "bwrap".into(),
        level: "full".into(),
        input_tokens: 1200,
        output_tokens: 345,
        cost_usd: Some(0.0021),
        full_access_capped: None,
        selected: ("bwrap".into(), "full".into()),
        context_tokens: Some(23_400),
        context_window: Some(128_000),
    }
}

fn st(permission: Approval) -> State {
    let mut s = State::new("thr_1", permission, footer());
    s.workspace = "/home/dev/project".into();
    s
}

fn input() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_block(Block::default().borders(Borders::ALL));
    t
}

fn screen(st: &State, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let inp = input();
    term.draw(|f| draw(f, st, &inp)).unwrap();
    term.backend().buffer().clone()
}

fn env(event: &str, item: Option<&str>, payload: serde_json::Value) -> Event {
    crate::tui::test_support::served(
        json!({"event": event, "thread_id": "thr_1", "turn_id": "turn_1",
                          "item_id": item, "payload": payload}),
    )
}

fn with_card(mut s: State) -> State {
    s.update(env(
        "turn.started",
        None,
        json!({"turn": {"session_id": "s1"}}),
    ));
    s.update(env(
        "item.started",
        Some("i1"),
        json!({"item": {"kind": "command_execution",
                         "metadata": {"call_id": "c1", "tool": "shell", "args": {"command": "cargo publish --dry-run"}}}}),
    ));
    s.update(env(
        "approval.required",
        Some("i1"),
        json!({"approval_id": "appr_1", "tool": "shell", "command": "cargo publish --dry-run",
               "reason": "`cargo publish` is not read-only", "hold": false}),
    ));
    s
}

fn conversation() -> State {
    let mut s = st(Approval::Ask);
    s.update(Event::Submit(
        "Rename world to codewhale in hello.txt".into(),
    ));
    s.update(env(
        "turn.started",
        None,
        json!({"turn": {"session_id": "s1"}}),
    ));
    s.update(env(
        "item.started",
        Some("i1"),
        json!({"item": {"kind": "file_change", "metadata": {"call_id": "c1", "tool": "edit_file",
               "args": {"path": "hello.txt", "old_string": "hello world\n", "new_string": "hello codewhale\n"}}}}),
    ));
    s.update(env(
        "item.completed",
        Some("i1"),
        json!({"item": {"kind": "file_change", "metadata": {"status": "ok", "duration_ms": 3,
               "diff": "--- a/hello.txt\n+++ b/hello.txt\n@@ -1,2 +1,2 @@\n-hello world\n+hello codewhale\n second line\n"}}}),
    ));
    s.update(env(
        "item.started",
        Some("i2"),
        json!({"item": {"kind": "command_execution", "metadata": {"call_id": "c2", "tool": "shell",
               "args": {"command": "cat hello.txt"}}}}),
    ));
    let out = "hello codewhale\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\n";
    s.update(env(
        "item.completed",
        Some("i2"),
        json!({"item": {"kind": "command_execution", "metadata": {"status": "ok", "exit_code": 0,
               "duration_ms": 41, "approval": {"decision": "ask", "outcome": "allow", "decided_by": "you",
                            "asked_by": "posture", "gate": 8, "reason": "you approved this call", "hold": false},
               "output_preview": output_preview(out)}}}),
    ));
    s.update(env(
        "item.started",
        Some("m1"),
        json!({"item": {"kind": "agent_message", "metadata": {}}}),
    ));
    s.update(env(
        "item.delta",
        Some("m1"),
        json!({"delta": "## Done\n\nI changed **hello.txt**:\n\n- `world` → `codewhale`\n"}),
    ));
    s.update(env(
        "turn.completed",
        None,
        json!({"turn": {"status": "completed", "usage": {}, "cost_usd": 0.0}}),
    ));
    s
}

#[test]
fn footer_per_posture() {
    let mut all = String::new();
    for p in [Approval::Ask, Approval::AutoReview, Approval::FullAccess] {
        for m in [
            crate::authz::Mode::Plan,
            crate::authz::Mode::Work,
            crate::authz::Mode::Operate,
        ] {
            let mut s = st(p);
            s.mode = m;
            all.push_str(text(&screen(&s, 80, 4)).lines().last().unwrap_or(""));
            all.push('\n');
        }
    }
    insta::assert_snapshot!(all);
}

#[test]
fn full_access_is_red_in_the_footer() {
    let b = screen(&st(Approval::FullAccess), 80, 4);
    let row = b.area.height - 1;
    let x = (0..b.area.width)
        .find(|x| b[(*x, row)].symbol() == "F")
        .expect("Full Access in the footer");
    assert_eq!(b[(x, row)].bg, Color::Red);
    let b = screen(&st(Approval::Ask), 80, 4);
    assert!((0..b.area.width).all(|x| b[(x, row)].bg != Color::Red));
}

#[test]
fn full_access_capped_by_settings_says_so() {
    let mut s = st(Approval::FullAccess);
    s.footer.full_access_capped = Some("workspace-write".into());
    let t = text(&screen(&s, 100, 4));
    assert!(
        t.contains("workspace-write: settings cap it") && !t.contains("sandbox off"),
        "{t}"
    );
}

#[test]
fn unknown_cost_is_never_zero() {
    let mut s = st(Approval::Ask);
    s.footer.cost_usd = None;
    let t = text(&screen(&s, 80, 4));
    assert!(t.contains("cost ?") && !t.contains("$0"), "{t}");
}

/// The context part: a share of a known window (coloured as it fills),
/// the bare count against an unknown one, `ctx ?` when neither is known
/// (`ctx 0%` before any usage of a model with a known window).
#[test]
fn context_fullness_in_the_footer() {
    let line = |ctx: Option<u64>, win: Option<u32>| {
        let mut s = st(Approval::Ask);
        (s.footer.context_tokens, s.footer.context_window) = (ctx, win);
        let b = screen(&s, 120, 4);
        let t = text(&b).lines().last().unwrap_or("").to_string();
        let row = b.area.height - 1;
        let x = t.find("ctx").map(|i| t[..i].chars().count() as u16);
        (t, x.map(|x| b[(x, row)].fg))
    };
    let (t, fg) = line(Some(23_400), Some(128_000));
    assert!(t.contains("ctx 18% ·"), "{t}");
    assert_eq!(fg, Some(Color::Reset));
    let (t, fg) = line(Some(110_000), Some(128_000));
    assert!(t.contains("ctx 85% ·"), "{t}");
    assert_eq!(fg, Some(Color::Yellow));
    let (t, fg) = line(Some(990_000), Some(1_000_000));
    assert!(t.contains("ctx 99% ·"), "{t}");
    assert_eq!(fg, Some(Color::Red));
    let (t, _) = line(Some(23_400), None);
    assert!(t.contains("ctx 23.4k ·"), "{t}");
    let (t, _) = line(None, None);
    assert!(t.contains("ctx ? ·"), "{t}");
    let (t, _) = line(None, Some(131_072));
    assert!(t.contains("ctx 0% ·"), "{t}");
}

#[test]
fn approval_card() {
    insta::assert_snapshot!(text(&screen(&with_card(st(Approval::Ask)), 72, 16)));
}

#[test]
fn approval_card_highlights_deny() {
    let b = screen(&with_card(st(Approval::Ask)), 72, 16);
    let t = text(&b);
    let (row, line) = t
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("[n no]"))
        .unwrap();
    let col = line.find("[n no]").unwrap();
    let x = line[..col].chars().count() as u16 + 1;
    assert_eq!(
        b[(x, row as u16)].bg,
        Color::Yellow,
        "deny is the highlighted default"
    );
}

#[test]
fn card_falls_back_to_one_line_when_small() {
    let s = with_card(st(Approval::Ask));
    let t = text(&screen(&s, 40, 5));
    insta::assert_snapshot!(t);
    assert!(t.contains("y/a/[n] Esc"), "{t}");
    // Even at 20x5 the question is still on screen.
    let t = text(&screen(&s, 20, 5));
    assert!(t.contains("y/a/[n] Esc"), "{t}");
}

#[test]
fn transcript_with_diff_and_tool_cells() {
    insta::assert_snapshot!(text(&screen(&conversation(), 80, 30)));
}

#[test]
fn narrow_width_wraps_without_losing_input_or_footer() {
    let s = conversation();
    for (w, h) in [(20u16, 5u16), (30, 12), (45, 20)] {
        let t = text(&screen(&s, w, h));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), h as usize);
        assert!(lines[h as usize - 1].contains("Work"), "{w}x{h}: {t}");
        assert!(
            lines.iter().any(|l| l.starts_with('┌')),
            "{w}x{h}: input box: {t}"
        );
    }
    insta::assert_snapshot!(text(&screen(&s, 30, 12)));
}

#[test]
fn hostile_tool_output_is_drawn_as_text() {
    let mut s = conversation();
    s.update(env(
        "item.completed",
        Some("i2"),
        json!({"item": {"kind": "command_execution", "metadata": {"status": "ok", "exit_code": 0,
               "output_preview": output_preview("\x1b[2J\x1b]0;pwned\x07\x1b]52;c;aGk=\x07safe\x1b[1;1H")}}}),
    ));
    let b = screen(&s, 80, 30);
    for c in b.content() {
        assert!(
            !c.symbol().chars().any(|ch| ch.is_control()),
            "control char in cell {:?}",
            c.symbol()
        );
    }
    let t = text(&b);
    assert!(t.contains("│ safe") && !t.contains("pwned"), "{t}");
}

#[test]
fn the_flash_line_says_esc_to_stop_first() {
    let mut s = with_card(st(Approval::Ask));
    s.card = None;
    s.update(Event::Key {
        key: crate::tui::state::Key::Tab,
        at_ms: 0,
    });
    assert!(text(&screen(&s, 60, 8)).contains("Esc to stop first"));
}

#[test]
fn wrap_is_exact() {
    let l = Line::from(vec![Span::raw("abcdef"), Span::raw("世界x")]);
    let rows: Vec<String> = wrap(l, 4)
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect();
    assert_eq!(rows, ["abcd", "ef世", "界x"]);
}

/// Plan's hand-off after a Plan turn completed: the card with its
/// default (keep planning) highlighted, above the footer.
#[test]
fn plan_hand_off_card() {
    let mut s = st(Approval::Ask);
    s.mode = crate::authz::Mode::Plan;
    s.transcript
        .push(crate::tui::state::Cell::User("plan the refactor".into()));
    s.handoff = Some(crate::tui::handoff::Handoff::default());
    insta::assert_snapshot!(text(&screen(&s, 78, 10)));
}

/// Operate's to-do list (`todo.updated`) above the input: a mark per
/// status, the header counting what is done.
#[test]
fn todo_list_above_the_input() {
    use crate::runtime::served::{TodoItem, TodoStatus};
    let mut s = st(Approval::Ask);
    s.mode = crate::authz::Mode::Operate;
    s.transcript
        .push(crate::tui::state::Cell::User("make the tests pass".into()));
    let item = |id: &str, text: &str, status| TodoItem {
        id: id.into(),
        text: text.into(),
        status,
    };
    s.todos = vec![
        item("1", "find the failing tests", TodoStatus::Done),
        item(
            "2",
            "fix the parser (child: implement)",
            TodoStatus::InProgress,
        ),
        item("3", "run the suite in the background", TodoStatus::Pending),
        item("4", "reviewer verdict", TodoStatus::Blocked),
    ];
    insta::assert_snapshot!(text(&screen(&s, 78, 12)));
    // No list, no rows: the same screen has no to-do header.
    s.todos.clear();
    assert!(!text(&screen(&s, 78, 12)).contains("to-do"));
}

#[test]
fn docs_show_the_snapshots() {
    crate::tui::test_support::assert_docs_show(
        "render",
        &[
            "transcript_with_diff_and_tool_cells",
            "footer_per_posture",
            "approval_card",
            "card_falls_back_to_one_line_when_small",
            "plan_hand_off_card",
            "todo_list_above_the_input",
        ],
    );
}

#[test]
fn the_footer_says_auto_review_is_paused() {
    let mut s = st(Approval::Ask);
    s.auto_review_paused = Some("auto-review paused: 3 reviewer denials in a row".into());
    let line = text(&screen(&s, 100, 4))
        .lines()
        .last()
        .unwrap_or("")
        .to_string();
    assert!(line.contains("Ask (Auto-Review paused)"), "{line}");
    // Positive control: without the pause the footer says Ask.
    let line = text(&screen(&st(Approval::Ask), 100, 4))
        .lines()
        .last()
        .unwrap_or("")
        .to_string();
    assert!(!line.contains("paused"), "{line}");
}
