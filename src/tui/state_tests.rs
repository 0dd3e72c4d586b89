use super::*;
use serde_json::json;

fn st() -> State {
    State::new("thr_1", Approval::Ask, FooterInfo::default())
}

fn key(s: State, k: Key) -> (State, Vec<Effect>) {
    s.step(Event::Key { key: k, at_ms: 0 })
}

fn key_at(s: State, k: Key, at_ms: u64) -> (State, Vec<Effect>) {
    s.step(Event::Key { key: k, at_ms })
}

fn env(event: &str, turn: Option<&str>, item: Option<&str>, payload: Value) -> Event {
    crate::tui::test_support::served(
        json!({"event": event, "thread_id": "thr_1", "turn_id": turn,
                          "item_id": item, "payload": payload}),
    )
}

fn running() -> State {
    let (s, _) = st().step(env(
        "turn.started",
        Some("turn_1"),
        None,
        json!({"turn": {"session_id": "sess_1"}}),
    ));
    s
}

fn with_card() -> State {
    let s = running();
    let (s, _) = s.step(env(
        "item.started",
        Some("turn_1"),
        Some("item_1"),
        json!({"item": {"kind": "command_execution",
                         "metadata": {"call_id": "c1", "tool": "shell", "args": {"command": "touch x"}}}}),
    ));
    let (s, _) = s.step(env(
        "approval.required",
        Some("turn_1"),
        Some("item_1"),
        json!({"approval_id": "appr_1", "tool": "shell", "command": "touch x",
               "reason": "not read-only", "hold": false}),
    ));
    s
}

#[test]
fn tab_cycles_modes_on_an_empty_input_only() {
    let (s, fx) = key(st(), Key::Tab);
    assert_eq!(s.mode, Mode::Operate);
    assert_eq!(s.flash.as_deref(), Some(OPERATE_NOTE));
    assert!(fx.is_empty());
    let (s, _) = key(s, Key::Tab);
    assert_eq!(s.mode, Mode::Plan);
    let (s, _) = key(s, Key::Tab);
    assert_eq!(s.mode, Mode::Work);
    let (s, _) = s.step(Event::DraftChanged { empty: false });
    let (s, fx) = key(s, Key::Tab);
    assert_eq!(s.mode, Mode::Work);
    assert_eq!(fx, vec![Effect::PassToEditor]);
}

#[test]
fn shift_tab_cycles_permissions_with_their_notes() {
    let (s, _) = key(st(), Key::BackTab);
    assert_eq!(s.permission, Approval::AutoReview);
    assert_eq!(s.flash.as_deref(), Some(AUTO_REVIEW_NOTE));
    let (s, _) = key(s, Key::BackTab);
    assert_eq!(s.permission, Approval::FullAccess);
    assert_eq!(s.flash.as_deref(), Some(FULL_ACCESS_NOTE));
    let (s, _) = key(s, Key::BackTab);
    assert_eq!(s.permission, Approval::Ask);
    assert_eq!(s.flash, None);
}

#[test]
fn neither_changes_mid_turn() {
    let s = running();
    let (s, fx) = key(s, Key::Tab);
    assert_eq!((s.mode, fx.len()), (Mode::Work, 0));
    assert_eq!(s.flash.as_deref(), Some("Esc to stop first"));
    let (s, _) = key(s, Key::BackTab);
    assert_eq!(s.permission, Approval::Ask);
    assert_eq!(s.flash.as_deref(), Some("Esc to stop first"));
    let (s, fx) = s.step(Event::Submit("/mode plan".into()));
    assert_eq!((s.mode, fx.len()), (Mode::Work, 0));
}

#[test]
fn esc_interrupts_a_running_turn_and_does_nothing_idle() {
    let (s, fx) = key(running(), Key::Esc);
    assert_eq!(
        fx,
        vec![Effect::Interrupt {
            turn_id: "turn_1".into(),
            cause: InterruptCause::Esc,
        }]
    );
    assert!(s.stopping);
    let (_, fx) = key(st(), Key::Esc);
    assert!(fx.is_empty());
}

#[test]
fn enter_takes_the_draft_and_submit_starts_a_turn_in_the_posture() {
    let (s, _) = st().step(Event::DraftChanged { empty: false });
    let (s, fx) = key(s, Key::Enter);
    assert_eq!(fx, vec![Effect::TakeDraft]);
    let (s, _) = key(s, Key::BackTab);
    let (s, fx) = s.step(Event::Submit("line one\nline two".into()));
    assert_eq!(
        fx,
        vec![Effect::StartTurn {
            prompt: "line one\nline two".into(),
            mode: Mode::Work,
            permission: Approval::AutoReview
        }]
    );
    assert_eq!(s.transcript, vec![Cell::User("line one\nline two".into())]);
    // Enter on an empty input sends nothing.
    let (_, fx) = key(st(), Key::Enter);
    assert!(fx.is_empty());
}

#[test]
fn the_card_defaults_to_deny_and_enter_never_approves() {
    let s = with_card();
    let c = s.card.clone().unwrap();
    assert_eq!(c.selected, Choice::Deny);
    assert_eq!(c.command.as_deref(), Some("touch x"));
    let (s, fx) = key(s, Key::Enter);
    assert_eq!(
        fx,
        vec![Effect::Answer {
            approval_id: "appr_1".into(),
            choice: Choice::Deny
        }]
    );
    assert!(s.card.is_none());
}

#[test]
fn card_letters_answer() {
    for (k, c) in [
        ('y', Choice::Once),
        ('a', Choice::Session),
        ('n', Choice::Deny),
    ] {
        let (s, fx) = key(with_card(), Key::Char(k));
        assert_eq!(
            fx,
            vec![Effect::Answer {
                approval_id: "appr_1".into(),
                choice: c
            }]
        );
        assert!(s.card.is_none());
    }
}

#[test]
fn other_keys_and_pastes_never_answer_a_card_nor_reach_the_draft() {
    let s = with_card();
    for k in [
        Key::Char('x'),
        Key::Other,
        Key::BackTab,
        Key::CtrlD,
        Key::Char(' '),
    ] {
        let (s2, fx) = key(s.clone(), k);
        assert!(fx.is_empty(), "{k:?} gave {fx:?}");
        assert!(s2.card.is_some());
    }
    let (s2, fx) = s.step(Event::Paste("y".into()));
    assert!(fx.is_empty());
    assert!(s2.card.is_some());
}

#[test]
fn moving_the_highlight_then_enter_picks_it() {
    let (s, _) = key(with_card(), Key::Left);
    assert_eq!(s.card.as_ref().unwrap().selected, Choice::Session);
    let (s, _) = key(s, Key::Left);
    let (s, _) = key(s, Key::Left);
    assert_eq!(s.card.as_ref().unwrap().selected, Choice::Once);
    let (_, fx) = key(s, Key::Enter);
    assert_eq!(
        fx,
        vec![Effect::Answer {
            approval_id: "appr_1".into(),
            choice: Choice::Once
        }]
    );
}

#[test]
fn esc_on_a_card_aborts_the_turn() {
    let (s, fx) = key(with_card(), Key::Esc);
    assert_eq!(
        fx,
        vec![Effect::Interrupt {
            turn_id: "turn_1".into(),
            cause: InterruptCause::Esc,
        }]
    );
    assert!(s.card.is_none());
    // Ctrl-C on a card stops the turn too, recorded as Ctrl-C.
    let (_, fx) = key(with_card(), Key::CtrlC);
    assert_eq!(
        fx,
        vec![Effect::Interrupt {
            turn_id: "turn_1".into(),
            cause: InterruptCause::CtrlC,
        }]
    );
}

#[test]
fn a_settled_request_removes_its_card() {
    let (s, _) = with_card().step(env(
        "approval.canceled",
        Some("turn_1"),
        None,
        json!({"approval_id": "appr_1"}),
    ));
    assert!(s.card.is_none());
}

#[test]
fn ctrl_c_interrupts_else_clears_else_arms_then_quits_within_a_second() {
    let (_, fx) = key(running(), Key::CtrlC);
    assert_eq!(
        fx,
        vec![Effect::Interrupt {
            turn_id: "turn_1".into(),
            cause: InterruptCause::CtrlC,
        }]
    );
    let (s, _) = st().step(Event::DraftChanged { empty: false });
    let (s, fx) = key_at(s, Key::CtrlC, 10);
    assert_eq!(fx, vec![Effect::ClearDraft]);
    let (s, fx) = key_at(s, Key::CtrlC, 100);
    assert!(fx.is_empty());
    assert_eq!(s.flash.as_deref(), Some("Ctrl-C again to quit"));
    // Too late: arms again instead.
    let (s, fx) = key_at(s, Key::CtrlC, 100 + QUIT_WINDOW_MS + 1);
    assert!(fx.is_empty() && !s.quit);
    let (s, fx) = key_at(s, Key::CtrlC, 100 + QUIT_WINDOW_MS + 500);
    assert_eq!(fx, vec![Effect::Quit]);
    assert!(s.quit);
}

#[test]
fn another_key_disarms_quit() {
    let (s, _) = key_at(st(), Key::CtrlC, 0);
    let (s, _) = key_at(s, Key::Char('x'), 10);
    let (s, fx) = key_at(s, Key::CtrlC, 20);
    assert!(fx.is_empty() && !s.quit);
}

#[test]
fn ctrl_d_quits_only_on_an_empty_input() {
    let (s, fx) = key(st(), Key::CtrlD);
    assert_eq!(fx, vec![Effect::Quit]);
    assert!(s.quit);
    let (s, _) = st().step(Event::DraftChanged { empty: false });
    let (s, fx) = key(s, Key::CtrlD);
    assert_eq!(fx, vec![Effect::PassToEditor]);
    assert!(!s.quit);
}

#[test]
fn paste_becomes_one_draft_never_a_send() {
    let (_, fx) = st().step(Event::Paste("a\r\nb\rc".into()));
    assert_eq!(fx, vec![Effect::InsertDraft("a\nb\nc".into())]);
}

#[test]
fn streamed_text_commits_whole_lines_on_the_tick() {
    let s = running();
    let (s, _) = s.step(env(
        "item.started",
        Some("turn_1"),
        Some("m1"),
        json!({"item": {"kind": "agent_message", "metadata": {}}}),
    ));
    let (s, _) = s.step(env(
        "item.delta",
        Some("turn_1"),
        Some("m1"),
        json!({"delta": "# Ti"}),
    ));
    let (s, _) = s.step(env(
        "item.delta",
        Some("turn_1"),
        Some("m1"),
        json!({"delta": "tle\npart"}),
    ));
    let agent = |s: &State| match &s.transcript[0] {
        Cell::Agent { text, pending, .. } => (text.clone(), pending.clone()),
        c => panic!("{c:?}"),
    };
    assert_eq!(agent(&s).0, "");
    let (s, _) = s.step(Event::Tick);
    assert_eq!(agent(&s), ("# Title\n".into(), "part".into()));
    let (s, _) = s.step(env(
        "item.completed",
        Some("turn_1"),
        Some("m1"),
        json!({"item": {"kind": "agent_message", "metadata": {}}}),
    ));
    assert_eq!(agent(&s), ("# Title\npart".into(), "".into()));
}

#[test]
fn a_tick_with_nothing_new_does_not_redraw() {
    let mut s = st();
    s.dirty = false;
    let (s, _) = s.step(Event::Tick);
    assert!(!s.dirty);
}

/// `ev` of item `item` in the running turn: the next state and effects.
fn on(s: State, ev: &str, item: &str, payload: Value) -> (State, Vec<Effect>) {
    s.step(env(ev, Some("turn_1"), Some(item), payload))
}

/// A running turn with the shell call `command` started as item `i1`.
fn shell_started(command: &str) -> State {
    on(
        running(),
        "item.started",
        "i1",
        json!({"item": {"kind": "command_execution",
                         "metadata": {"call_id": "c1", "tool": "shell", "args": {"command": command}}}}),
    )
    .0
}

#[test]
fn tool_items_become_cells_with_their_facts() {
    // The output's head and tail come on the item itself (as the runtime
    // keeps them): no effect reads the session file, so it does not matter
    // whether the session record was written before the event.
    let out: String = (1..=10).map(|i| format!("l{i}\n")).collect();
    let (s, fx) = on(
        shell_started("ls"),
        "item.completed",
        "i1",
        json!({"item": {"kind": "command_execution", "status": "completed",
                         "metadata": {"status": "ok", "exit_code": 0, "duration_ms": 12, "output_bytes": out.len(),
                                      "output_preview": crate::runtime::preview::output_preview(&out),
                                      "approval": {"decision": "ask", "outcome": "allow", "decided_by": "you",
                                                   "asked_by": "posture", "gate": 8, "reason": "you approved this call", "hold": false}}}}),
    );
    assert!(fx.is_empty(), "{fx:?}");
    let Cell::Tool(t) = &s.transcript[0] else {
        panic!()
    };
    assert_eq!(t.title, "ls");
    assert_eq!(t.exit_code, Some(0));
    // The recorded verdict as the runtime kept it: a question, answered yes.
    let a = t.approval.as_ref().unwrap();
    assert_eq!(
        (a.decided_by.as_str(), a.outcome.as_str()),
        ("you", "allow")
    );
    assert_eq!(a.decided_phrase(), "approved by you");
    let (head, tail, hidden) = t.output.clone().unwrap();
    assert_eq!(head, ["l1", "l2", "l3"]);
    assert_eq!(tail, ["l8", "l9", "l10"]);
    assert_eq!(hidden, 4);
}

#[test]
fn hostile_preview_lines_are_sanitised_in_the_cell() {
    let (s, _) = on(
        shell_started("cat f"),
        "item.completed",
        "i1",
        json!({"item": {"kind": "command_execution", "metadata": {"status": "ok",
               "output_preview": {"head": ["\x1b]52;c;aGk=\x07ok\x1b[2J"], "tail": [], "hidden_lines": 0}}}}),
    );
    let Cell::Tool(t) = &s.transcript[0] else {
        panic!()
    };
    assert_eq!(t.output.clone().unwrap().0, ["ok"]);
}

#[test]
fn an_interrupted_message_keeps_its_text_and_says_it_was_cut() {
    let message = json!({"item": {"kind": "agent_message", "metadata": {}}});
    let (s, _) = on(running(), "item.started", "m1", message.clone());
    let (s, _) = on(s, "item.delta", "m1", json!({"delta": "first half"}));
    let (s, _) = on(s, "item.interrupted", "m1", message.clone());
    assert!(
        matches!(&s.transcript[0], Cell::Agent { text, done: true, .. } if text == "first half"),
        "{:?}",
        s.transcript
    );
    assert!(
        matches!(&s.transcript[1], Cell::Notice { text, .. } if text == INTERRUPTED_MESSAGE),
        "{:?}",
        s.transcript
    );
    // A completed message gets no such line.
    let (s, _) = on(running(), "item.started", "m2", message.clone());
    let (s, _) = on(s, "item.completed", "m2", message);
    assert_eq!(s.transcript.len(), 1, "{:?}", s.transcript);
}

#[test]
fn the_end_of_a_turn_frees_the_keys_and_reports_failures() {
    let (s, _) = with_card().step(env(
        "turn.completed",
        Some("turn_1"),
        None,
        json!({"turn": {"status": "interrupted", "error": "interrupted by a client",
                         "usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": null}}),
    ));
    assert!(s.turn.is_none() && s.card.is_none());
    assert_eq!(s.footer.input_tokens, 10);
    assert_eq!(s.footer.cost_usd, None, "an unknown price is never $0");
    assert!(
        matches!(s.transcript.last(), Some(Cell::Notice { text, .. }) if text.contains("interrupted"))
    );
    let (s, _) = key(s, Key::Tab);
    assert_eq!(s.mode, Mode::Operate);
}

#[test]
fn other_threads_are_ignored() {
    let (s, _) = st().step(crate::tui::test_support::served(
        json!({"event": "turn.started", "thread_id": "thr_2",
                                                 "turn_id": "t", "payload": {"turn": {}}}),
    ));
    assert!(s.turn.is_none());
}

#[test]
fn restore_needs_trust_or_full_access() {
    let (s, fx) = st().step(Event::Submit("/restore 2".into()));
    assert!(fx.is_empty());
    assert!(matches!(
        s.transcript.last(),
        Some(Cell::Notice { error: true, .. })
    ));
    let (s, _) = s.step(Event::Submit("/trust on".into()));
    let (_, fx) = s.step(Event::Submit("/restore 2".into()));
    assert_eq!(fx, vec![Effect::Restore(2)]);
    let (s, _) = key(st(), Key::BackTab);
    let (s, _) = key(s, Key::BackTab);
    let (_, fx) = s.step(Event::Submit("/restore 2".into()));
    assert_eq!(fx, vec![Effect::Restore(2)]);
}

#[test]
fn undo_names_the_latest_turns_session() {
    let s = running();
    let (s, _) = s.step(env(
        "turn.completed",
        Some("turn_1"),
        None,
        json!({"turn": {"status": "completed", "usage": {}, "cost_usd": 0.0}}),
    ));
    let (_, fx) = s.step(Event::Submit("/undo".into()));
    assert_eq!(
        fx,
        vec![Effect::Undo {
            session: Some("sess_1".into())
        }]
    );
}

#[test]
fn unknown_commands_list_the_known_ones() {
    let (s, fx) = st().step(Event::Submit("/nope".into()));
    assert!(fx.is_empty());
    let Some(Cell::Notice { error: true, text }) = s.transcript.last() else {
        panic!()
    };
    assert!(text.contains("/undo") && text.contains("/help"), "{text}");
}

#[test]
fn provider_with_an_id_selects_it_without_the_picker() {
    let (s, fx) = st().step(Event::Submit("/provider ollama".into()));
    assert_eq!(fx, vec![Effect::ChooseProvider("ollama".into())]);
    assert!(s.picker.is_none());
    let (_, fx) = st().step(Event::Submit("/provider".into()));
    assert_eq!(fx, vec![Effect::Provider]);
}

#[test]
fn the_footer_level_becomes_what_the_last_command_ran_under() {
    let mut s = shell_started("ls");
    s.footer.backend = "bwrap".into();
    s.footer.level = "partial".into();
    // No report (a file tool): the selected tier stays.
    let (s, _) = on(
        s,
        "item.completed",
        "i1",
        json!({"item": {"kind": "command_execution", "metadata": {"status": "ok"}}}),
    );
    assert_eq!(
        (s.footer.backend.as_str(), s.footer.level.as_str()),
        ("bwrap", "partial")
    );
    let (s, _) = on(
        s,
        "item.completed",
        "i1",
        json!({"item": {"kind": "command_execution", "metadata": {"status": "ok",
               "enforced": {"backend": "landlock", "level": "full", "partial_items": 0}}}}),
    );
    assert_eq!(
        (s.footer.backend.as_str(), s.footer.level.as_str()),
        ("landlock", "full")
    );
}

/// A permission change puts the selected sandbox back in the footer: a
/// Full Access command's `none off` never lingers into Ask.
#[test]
fn a_permission_change_restores_the_selected_sandbox_in_the_footer() {
    let mut s = shell_started("ls");
    s.footer.selected = ("bwrap".into(), "partial".into());
    (s.footer.backend, s.footer.level) = s.footer.selected.clone();
    s.permission = Approval::FullAccess;
    let (s, _) = on(
        s,
        "item.completed",
        "i1",
        json!({"item": {"kind": "command_execution", "metadata": {"status": "ok",
               "enforced": {"backend": "none", "level": "unsandboxed", "partial_items": 0}}}}),
    );
    assert_eq!(
        (s.footer.backend.as_str(), s.footer.level.as_str()),
        ("none", "unsandboxed")
    );
    let (s, _) = s.step(env(
        "turn.completed",
        Some("turn_1"),
        None,
        json!({"turn": {"status": "completed", "usage": {}}}),
    ));
    let (s, _) = key(s, Key::BackTab);
    assert_ne!(s.permission, Approval::FullAccess);
    assert_eq!(
        (s.footer.backend.as_str(), s.footer.level.as_str()),
        ("bwrap", "partial")
    );
}

/// The footer follows the model that really answered (routing, `/model`)
/// with its catalogue window, and the runtime's `context_tokens`.
#[test]
fn the_footer_follows_the_answering_model_and_its_context() {
    let mut s = running();
    s.footer.set_model("deepseek", "deepseek-flash");
    assert_eq!(s.footer.context_window, Some(1_000_000));
    let (s, _) = s.step(env(
        "turn.lifecycle",
        Some("turn_1"),
        None,
        json!({"turn": {"status": "in_progress", "effective_provider": "anthropic",
                        "effective_model": "claude-sonnet-5-5", "context_tokens": 4321,
                        "usage": {"input_tokens": 4000, "output_tokens": 321}}}),
    ));
    assert_eq!(
        (s.footer.provider.as_str(), s.footer.model.as_str()),
        ("anthropic", "claude-sonnet-5-5")
    );
    assert_eq!(s.footer.context_window, Some(1_000_000));
    assert_eq!(s.footer.context_tokens, Some(4321));
    // An unknown model: no window, the count stays.
    let (s, _) = s.step(env(
        "turn.lifecycle",
        Some("turn_1"),
        None,
        json!({"turn": {"status": "in_progress", "effective_provider": "ollama",
                        "effective_model": "llama-local", "usage": {}}}),
    ));
    assert_eq!(s.footer.context_window, None);
    assert_eq!(s.footer.context_tokens, Some(4321));
}

/// The cell says what the runtime recorded: a question answered yes is
/// "approved by you" (it was labelled "denied by you" when the cell read
/// the gates' `decision`, which stays `ask`), a refusal names its decider.
#[test]
fn a_tool_cell_carries_the_recorded_decision() {
    let cases = [
        (
            json!({"decision": "ask", "outcome": "allow", "decided_by": "you", "asked_by": "posture",
                "gate": 8, "reason": "you approved this call", "hold": false}),
            "approved by you",
        ),
        (
            json!({"decision": "ask", "outcome": "deny", "decided_by": "you", "asked_by": "posture",
                "gate": 8, "reason": "you denied it", "hold": false}),
            "denied by you",
        ),
        (
            json!({"decision": "allow", "outcome": "allow", "decided_by": "posture",
                "gate": 4, "reason": "read-only", "hold": false}),
            "allowed by posture",
        ),
        (
            json!({"decision": "deny", "outcome": "deny", "decided_by": "floor",
                "gate": 6, "reason": "credential upload", "hold": false}),
            "denied by floor",
        ),
        (
            json!({"decision": "ask", "outcome": "no_response", "decided_by": "no response",
                "asked_by": "posture", "gate": 8, "reason": "nobody", "hold": false}),
            "no response",
        ),
    ];
    for (approval, want) in cases {
        let (s, _) = on(
            shell_started("ls"),
            "item.completed",
            "i1",
            json!({"item": {"kind": "command_execution", "status": "completed",
                             "metadata": {"status": "ok", "exit_code": 0, "approval": approval}}}),
        );
        let Cell::Tool(t) = &s.transcript[0] else {
            panic!()
        };
        assert_eq!(
            t.approval.as_ref().map(|a| a.decided_phrase()).as_deref(),
            Some(want)
        );
    }
}

#[test]
fn the_startup_header_names_version_workspace_model_and_sandbox() {
    let mut s = State::new(
        "t",
        Approval::Ask,
        FooterInfo {
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
            backend: "bwrap".into(),
            level: "full".into(),
            ..Default::default()
        },
    );
    s.workspace = "/home/dev/project".into();
    let h = s.startup_header();
    assert_eq!(
        h,
        format!(
            "codewhale {} · /home/dev/project\ndeepseek · deepseek-flash · sandbox bwrap full\nTab mode · Shift+Tab permission · /help",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// Plan's hand-off as the state machine applies it (the card's own keys
/// and drawing are tested in `tui::handoff`).
mod handoff {
    use super::*;
    use crate::authz::Mode;
    use crate::tui::handoff::{HandoffChoice, GO_AHEAD};

    /// A state whose Plan turn `t1` is running (started from the UI).
    fn planning() -> State {
        let mut st = State::new("th", Approval::Ask, FooterInfo::default());
        st.update(Event::Key {
            key: Key::Tab,
            at_ms: 0,
        }); // Work → Operate
        st.update(Event::Key {
            key: Key::Tab,
            at_ms: 0,
        }); // Operate → Plan
        assert_eq!(st.mode, Mode::Plan);
        let fx = st.update(Event::Submit("plan the refactor".into()));
        assert!(matches!(
            fx.as_slice(),
            [Effect::StartTurn {
                mode: Mode::Plan,
                ..
            }]
        ));
        st.update(crate::tui::test_support::served(json!({
            "thread_id": "th", "turn_id": "t1", "event": "turn.started",
            "payload": {"turn": {"session_id": "s1"}}
        })));
        st
    }

    fn completed(st: &mut State, status: &str) {
        st.update(crate::tui::test_support::served(json!({
            "thread_id": "th", "turn_id": "t1", "event": "turn.completed",
            "payload": {"turn": {"status": status}}
        })));
    }

    fn key(st: &mut State, k: Key) -> Vec<Effect> {
        st.update(Event::Key { key: k, at_ms: 0 })
    }

    #[test]
    fn a_finished_plan_turn_offers_the_hand_off_with_keep_planning_selected() {
        let mut st = planning();
        assert!(st.handoff.is_none(), "not while the turn runs");
        completed(&mut st, "completed");
        assert_eq!(
            st.handoff.as_ref().map(|h| h.selected),
            Some(HandoffChoice::KeepPlanning)
        );
        // Enter takes the default: nothing starts, Plan stays.
        assert!(key(&mut st, Key::Enter).is_empty());
        assert!(st.handoff.is_none());
        assert_eq!((st.mode, st.permission), (Mode::Plan, Approval::Ask));
    }

    #[test]
    fn w_switches_to_work_ask_and_sends_go_ahead() {
        let mut st = planning();
        completed(&mut st, "completed");
        let fx = key(&mut st, Key::Char('w'));
        assert_eq!(
            fx,
            vec![Effect::StartTurn {
                prompt: GO_AHEAD.into(),
                mode: Mode::Work,
                permission: Approval::Ask,
            }]
        );
        assert_eq!((st.mode, st.permission), (Mode::Work, Approval::Ask));
        assert!(matches!(st.transcript.last(), Some(Cell::User(p)) if p == GO_AHEAD));
    }

    #[test]
    fn o_switches_to_operate_ask_and_sends_go_ahead() {
        let mut st = planning();
        completed(&mut st, "completed");
        let fx = key(&mut st, Key::Char('o'));
        assert_eq!(
            fx,
            vec![Effect::StartTurn {
                prompt: GO_AHEAD.into(),
                mode: Mode::Operate,
                permission: Approval::Ask,
            }]
        );
        assert_eq!((st.mode, st.permission), (Mode::Operate, Approval::Ask));
    }

    #[test]
    fn r_and_the_arrows_choose_work_auto_review() {
        let mut st = planning();
        completed(&mut st, "completed");
        assert!(key(&mut st, Key::Left).is_empty());
        assert!(key(&mut st, Key::Left).is_empty());
        assert_eq!(
            st.handoff.as_ref().map(|h| h.selected),
            Some(HandoffChoice::WorkAutoReview)
        );
        let fx = key(&mut st, Key::Enter);
        assert!(matches!(
            fx.as_slice(),
            [Effect::StartTurn {
                mode: Mode::Work,
                permission: Approval::AutoReview,
                ..
            }]
        ));
        // The same through its letter.
        let mut st = planning();
        completed(&mut st, "completed");
        let fx = key(&mut st, Key::Char('r'));
        assert!(matches!(
            fx.as_slice(),
            [Effect::StartTurn {
                permission: Approval::AutoReview,
                ..
            }]
        ));
    }

    #[test]
    fn esc_and_other_keys_keep_planning_and_never_reach_the_draft() {
        let mut st = planning();
        completed(&mut st, "completed");
        assert!(key(&mut st, Key::Char('x')).is_empty(), "swallowed");
        assert!(st.handoff.is_some());
        assert!(st.update(Event::Paste("go".into())).is_empty());
        assert!(key(&mut st, Key::Esc).is_empty());
        assert!(st.handoff.is_none());
        assert_eq!(st.mode, Mode::Plan);
    }

    #[test]
    fn no_hand_off_after_a_failed_or_interrupted_plan_turn_or_a_work_turn() {
        for status in ["failed", "interrupted"] {
            let mut st = planning();
            completed(&mut st, status);
            assert!(st.handoff.is_none(), "{status}");
        }
        let mut st = State::new("th", Approval::Ask, FooterInfo::default());
        st.update(Event::Submit("do it".into()));
        st.update(crate::tui::test_support::served(json!({
            "thread_id": "th", "turn_id": "t1", "event": "turn.started",
            "payload": {"turn": {}}
        })));
        completed(&mut st, "completed");
        assert!(st.handoff.is_none(), "a Work turn has no hand-off");
    }
}

#[test]
fn reasoning_is_one_collapsed_line_that_ctrl_o_expands_and_collapses() {
    let s = running();
    let (s, _) = s.step(env(
        "item.started",
        Some("turn_1"),
        Some("item_r"),
        json!({"item": {"kind": "reasoning",
                        "metadata": {"chars": 26, "text": "first line\nsecond \u{1b}[31mline"}}}),
    ));
    let lines = |s: &State| -> Vec<String> {
        s.transcript
            .iter()
            .flat_map(super::super::render::cell_lines)
            .map(|l| l.spans.iter().map(|x| x.content.to_string()).collect())
            .collect()
    };
    let collapsed = lines(&s);
    assert_eq!(
        collapsed,
        vec!["thinking … (27 chars) · Ctrl-O expands".to_string()]
    );
    let (s, fx) = key(s, Key::CtrlO);
    assert!(fx.is_empty());
    let open = lines(&s);
    assert_eq!(open[0], "thinking (27 chars) · Ctrl-O collapses");
    assert_eq!(open[1], "  first line");
    // Terminal escapes in the model's text never reach the screen.
    assert!(open[2].starts_with("  second ") && !open[2].contains('\u{1b}'));
    let (s, _) = key(s, Key::CtrlO);
    assert_eq!(lines(&s), collapsed);
    // Nothing to expand: said, not silent.
    let (s, _) = key(st(), Key::CtrlO);
    assert_eq!(s.flash.as_deref(), Some("no reasoning to expand"));
}

#[test]
fn an_automatic_compaction_is_a_notice_and_kept_for_receipts() {
    let s = running();
    let (s, _) = s.step(env(
        "item.completed",
        Some("turn_1"),
        Some("item_c"),
        json!({"item": {"kind": "context_compaction",
                        "metadata": {"auto": true, "reason": "threshold", "window": 9000,
                                     "tokens_before": 7700, "tokens_after": 1100,
                                     "summary": "s"}}}),
    ));
    assert_eq!(s.compactions.len(), 1);
    let line = s.compactions[0].line();
    assert_eq!(
        line,
        "turn 1: automatic (threshold), ~7.7k → ~1.1k tokens of a 9.0k window"
    );
    assert!(
        matches!(s.transcript.last(), Some(Cell::Notice { error: false, text }) if text.contains(&line))
    );
}

#[test]
fn each_review_is_one_line_and_a_pause_drops_to_ask_until_auto_review_is_chosen_again() {
    let s = running();
    let (s, _) = s.step(env(
        "item.started",
        Some("turn_1"),
        Some("item_1"),
        json!({"item": {"kind": "command_execution",
                         "metadata": {"call_id": "c1", "tool": "shell", "args": {"command": "cargo run --example x"}}}}),
    ));
    let (s, _) = s.step(env(
        "auto_review.decided",
        Some("turn_1"),
        Some("item_1"),
        json!({"call_id": "c1", "tool": "shell", "decision": "allow", "risk": "low",
               "reason": "runs an example"}),
    ));
    match s.transcript.last() {
        Some(Cell::Notice { error, text }) => {
            assert!(!error);
            assert!(text.starts_with("reviewer allowed `"), "{text}");
            assert!(text.contains("cargo run --example x"), "{text}");
            assert!(text.ends_with("(low): runs an example"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    let (s, _) = s.step(env(
        "auto_review.decided",
        Some("turn_1"),
        Some("item_1"),
        json!({"call_id": "c1", "tool": "shell", "decision": "unavailable",
               "reason": "timeout after 90s"}),
    ));
    assert!(matches!(s.transcript.last(),
        Some(Cell::Notice { error: true, text }) if text.contains("reviewer unavailable for") && text.ends_with("timeout after 90s")));
    let mut s = s;
    s.permission = Approval::AutoReview;
    let (s, _) = s.step(env(
        "auto_review.paused",
        Some("turn_1"),
        Some("item_1"),
        json!({"call_id": "c1", "reason": "auto-review paused: 3 reviewer denials in a row",
               "kind": "denies_in_a_row", "consecutive_denies": 3}),
    ));
    assert_eq!(s.permission, Approval::Ask);
    assert!(s.auto_review_paused.is_some());
    let (s, _) = s.step(env(
        "turn.completed",
        Some("turn_1"),
        None,
        json!({"turn": {"status": "failed", "error": "auto-review paused: 3 reviewer denials in a row",
                         "usage": {}, "cost_usd": null}}),
    ));
    // Selecting Auto-Review again resumes it.
    let (s, fx) = key(s, Key::BackTab);
    assert_eq!(s.permission, Approval::AutoReview);
    assert_eq!(fx, vec![Effect::ResumeAutoReview]);
    assert!(s.auto_review_paused.is_none());
    // Positive control: without a pause, no resume.
    let (s, _) = key(s, Key::BackTab);
    let (s, _) = key(s, Key::BackTab);
    let (_, fx) = key(s, Key::BackTab);
    assert!(fx.is_empty());
}

/// A sub-agent's own reviewer: its lines say whose reviewer it was, and its
/// pause stops only that child (the footer and the permission stay);
/// `auto_review.resumed` from another client selects Auto-Review again.
#[test]
fn a_childs_review_and_pause_leave_the_threads_posture_and_a_resume_restores_it() {
    let mut s = st();
    s.permission = Approval::AutoReview;
    let (s, _) = s.step(env(
        "auto_review.decided",
        Some("turn_1"),
        Some("item_1"),
        json!({"call_id": "c1", "tool": "shell", "decision": "deny", "risk": "high",
               "reason": "no", "agent_id": "a1"}),
    ));
    assert!(matches!(s.transcript.last(),
        Some(Cell::Notice { error: true, text }) if text.starts_with("sub-agent a1's reviewer denied")));
    let (s, _) = s.step(env(
        "auto_review.paused",
        Some("turn_1"),
        Some("item_1"),
        json!({"call_id": "c1", "reason": "auto-review paused: 3 reviewer denials in a row",
               "kind": "denies_in_a_row", "consecutive_denies": 3, "agent_id": "a1"}),
    ));
    assert_eq!(s.permission, Approval::AutoReview);
    assert!(s.auto_review_paused.is_none());
    assert!(matches!(s.transcript.last(),
        Some(Cell::Notice { error: true, text }) if text.starts_with("sub-agent a1: auto-review paused")));
    // The thread's own pause (control), then a resume made elsewhere.
    let (s, _) = s.step(env(
        "auto_review.paused",
        Some("turn_1"),
        Some("item_1"),
        json!({"call_id": "c2", "reason": "auto-review paused: 3 reviewer denials in a row",
               "kind": "denies_in_a_row", "consecutive_denies": 3}),
    ));
    assert_eq!(s.permission, Approval::Ask);
    let (s, _) = s.step(env(
        "auto_review.resumed",
        None,
        None,
        json!({"ended": {"paused": true}}),
    ));
    assert_eq!(s.permission, Approval::AutoReview);
    assert!(s.auto_review_paused.is_none());
}

/// `todo.updated` replaces the list the TUI shows (typed, never read by
/// key); another thread's list and a bad payload change nothing.
#[test]
fn a_todo_update_replaces_the_shown_list() {
    use crate::runtime::served::TodoStatus;
    let mut s = st();
    let thread = s.thread_id.clone();
    let upd = |thread: &str, items: serde_json::Value| {
        crate::tui::test_support::served(json!({
            "thread_id": thread, "turn_id": "t1", "event": "todo.updated",
            "payload": {"call_id": "c1", "items": items}
        }))
    };
    s.update(upd(
        &thread,
        json!([{"id": "1", "text": "a", "status": "pending"},
               {"id": "2", "text": "b", "status": "in_progress"}]),
    ));
    assert_eq!(s.todos.len(), 2);
    assert_eq!(s.todos[1].status, TodoStatus::InProgress);
    s.update(upd(
        &thread,
        json!([{"id": "1", "text": "a", "status": "done"}]),
    ));
    assert_eq!(s.todos.len(), 1);
    assert_eq!(s.todos[0].status, TodoStatus::Done);
    s.update(upd("other", json!([])));
    assert_eq!(s.todos.len(), 1, "another thread's list is not ours");
    s.update(upd(&thread, json!("nope")));
    assert_eq!(
        s.todos.len(),
        1,
        "a payload that is not a list changes nothing"
    );
}
