use super::*;
use crate::authz::Approval;
use crate::tui::provider_picker::Presence;
use crate::tui::state::{Event, FooterInfo};

fn ask() -> LocalAsk {
    LocalAsk {
        root: "http://127.0.0.1:11434".into(),
        model: "qwen2.5-coder:7b".into(),
    }
}

fn answer(use_local: bool) -> LocalAnswer {
    LocalAnswer {
        use_local,
        root: "http://127.0.0.1:11434".into(),
        model: "qwen2.5-coder:7b".into(),
        answered_at: "2026-12-01T16:00:00Z".into(),
    }
}

fn st() -> State {
    State::new(
        "thr_1",
        Approval::Ask,
        FooterInfo {
            provider: "deepseek".into(),
            model: "deepseek-flash".into(),
            ..Default::default()
        },
    )
}

fn asked() -> State {
    let (s, fx) = st().step(Event::AskLocal(ask()));
    assert!(fx.is_empty());
    s
}

fn key(s: State, k: Key) -> (State, Vec<Effect>) {
    s.step(Event::Key { key: k, at_ms: 0 })
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            id: "deepseek".into(),
            name: "DeepSeek".into(),
            local: false,
            key: Presence::Missing,
        },
        Row {
            id: "openai".into(),
            name: "OpenAI".into(),
            local: false,
            key: Presence::Set,
        },
    ]
}

#[test]
fn plan_asks_only_when_no_key_no_answer_and_ollama_answers() {
    let probed = std::cell::Cell::new(0);
    let probe = || {
        probed.set(probed.get() + 1);
        Some(ask())
    };
    assert_eq!(plan(false, None, probe), Start::Ready);
    assert_eq!(probed.get(), 0, "a usable key: Ollama is not even probed");
    assert_eq!(plan(true, None, probe), Start::Ask(ask()));
    assert!(matches!(plan(true, None, || None), Start::Offer(_)));
    assert_eq!(
        plan(true, Some(&answer(true)), probe),
        Start::UseLocal(ask())
    );
    assert!(matches!(
        plan(true, Some(&answer(true)), || None),
        Start::Offer(w) if w.contains("does not answer")
    ));
    let before = probed.get();
    assert!(matches!(
        plan(true, Some(&answer(false)), probe),
        Start::Offer(w) if w.contains("chose not to")
    ));
    assert_eq!(probed.get(), before, "a remembered no never probes");
}

#[test]
fn y_uses_it_and_is_remembered() {
    let (s, fx) = key(asked(), Key::Char('y'));
    assert!(s.ask.is_none());
    assert_eq!(
        fx,
        vec![Effect::AnswerLocal {
            use_local: true,
            root: ask().root,
            model: ask().model,
        }]
    );
}

#[test]
fn the_default_is_no_and_no_opens_the_picker() {
    for k in [
        Key::Enter,
        Key::Char('n'),
        Key::Char('N'),
        Key::Esc,
        Key::CtrlC,
    ] {
        let (s, fx) = key(asked(), k);
        assert!(s.ask.is_none(), "{k:?}");
        assert_eq!(
            fx,
            vec![
                Effect::AnswerLocal {
                    use_local: false,
                    root: ask().root,
                    model: ask().model,
                },
                Effect::Provider
            ],
            "{k:?}"
        );
    }
}

#[test]
fn other_keys_and_pastes_do_not_answer() {
    for k in [Key::Char('x'), Key::Tab, Key::BackTab, Key::Up, Key::Other] {
        let (s, fx) = key(asked(), k);
        assert!(fx.is_empty(), "{k:?}");
        assert_eq!(s.ask, Some(ask()), "{k:?}");
    }
    let (s, fx) = asked().step(Event::Paste("y\n".into()));
    assert!(fx.is_empty());
    assert_eq!(s.ask, Some(ask()));
    // Ctrl-D still quits (unanswered: asked again next start).
    let (s, fx) = key(asked(), Key::CtrlD);
    assert!(s.quit);
    assert_eq!(fx, vec![Effect::Quit]);
}

#[test]
fn slash_provider_opens_the_picker_then_choosing_switches() {
    let (s, _) = st().step(Event::Submit("/provider".into()));
    let (s, fx) = s.step(Event::PickerRows(rows()));
    assert!(fx.is_empty());
    let p = s.picker.as_ref().unwrap();
    assert_eq!(
        p.selected_row().unwrap().id,
        "deepseek",
        "starts on the current"
    );
    let (s, _) = key(s, Key::Down);
    let (s, fx) = key(s, Key::Enter);
    assert!(s.picker.is_none());
    assert_eq!(fx, vec![Effect::ChooseProvider("openai".into())]);
    let (s, _) = s.step(Event::ProviderSwitched {
        provider: "openai".into(),
        model: "gpt-5.6".into(),
    });
    assert_eq!(
        (s.footer.provider.as_str(), s.footer.model.as_str()),
        ("openai", "gpt-5.6")
    );
}

#[test]
fn provider_is_refused_mid_turn() {
    let (s, _) = st().step(crate::tui::test_support::served(serde_json::json!({
        "event": "turn.started", "thread_id": "thr_1", "turn_id": "turn_1",
        "payload": {"turn": {"session_id": "s"}}})));
    let (s, fx) = s.step(Event::Submit("/provider".into()));
    assert!(fx.is_empty());
    assert_eq!(s.flash.as_deref(), Some("Esc to stop first"));
}

#[test]
fn a_key_typed_in_the_field_reaches_only_the_store_effect() {
    let (s, _) = st().step(Event::PickerRows(rows()));
    let (mut s, _) = key(s, Key::Enter);
    assert!(s.picker.as_ref().unwrap().entry.is_some());
    for c in "sk-live-42".chars() {
        let (n, fx) = key(s, Key::Char(c));
        assert!(fx.is_empty(), "typing never reaches the editor");
        s = n;
    }
    // Tab/Enter in the field never become a draft or a send.
    assert!(s.draft_empty);
    let (s, fx) = key(s, Key::Enter);
    match &fx[..] {
        [Effect::StoreKey { provider, key }] => {
            assert_eq!(provider, "deepseek");
            assert_eq!(key.expose(), "sk-live-42");
        }
        other => panic!("{other:?}"),
    }
    // Nothing of the key is in the state or its transcript.
    let dbg = format!("{s:?}");
    assert!(!dbg.contains("sk-live"), "{dbg}");
    assert!(s.transcript.is_empty());
    // The app stored it: the provider is chosen.
    let (s, fx) = s.step(Event::KeyStored {
        provider: "deepseek".into(),
    });
    assert!(s.picker.is_none());
    assert_eq!(fx, vec![Effect::ChooseProvider("deepseek".into())]);
    assert!(!format!("{s:?}").contains("sk-live"));
}

#[test]
fn a_paste_in_the_field_is_the_key_not_a_draft() {
    let (s, _) = st().step(Event::PickerRows(rows()));
    let (s, _) = key(s, Key::Enter);
    let (s, fx) = s.step(Event::Paste("sk-pasted\n".into()));
    assert!(fx.is_empty(), "no InsertDraft");
    let (_, fx) = key(s, Key::Enter);
    assert!(matches!(&fx[..], [Effect::StoreKey { key, .. }] if key.expose() == "sk-pasted"));
}

#[test]
fn a_refused_store_keeps_the_field_open_with_the_reason() {
    let (s, _) = st().step(Event::PickerRows(rows()));
    let (s, _) = key(s, Key::Enter);
    let (s, _) = s.step(Event::KeyRefused("not stored: disk full".into()));
    let e = s.picker.as_ref().unwrap().entry.as_ref().unwrap();
    assert_eq!(e.note.as_deref(), Some("not stored: disk full"));
}

#[test]
fn esc_closes_the_picker_and_says_nothing_changed() {
    let (s, _) = st().step(Event::PickerRows(rows()));
    let (s, fx) = key(s, Key::Esc);
    assert!(fx.is_empty());
    assert!(s.picker.is_none());
    assert!(
        matches!(s.transcript.last(), Some(crate::tui::state::Cell::Notice { text, .. }) if text.contains("unchanged"))
    );
}

#[test]
fn the_answer_file_round_trips_and_keeps_other_keys() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("cw");
    assert_eq!(load_local(&home).unwrap(), None);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(state_path(&home), "{\"other\": 1}").unwrap();
    let p = save_local(&home, &answer(true)).unwrap();
    assert_eq!(p, home.join(STATE_FILE));
    assert_eq!(load_local(&home).unwrap(), Some(answer(true)));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v["other"], 1);
    assert_eq!(v["local_ollama"]["use_local"], true);
    save_local(&home, &answer(false)).unwrap();
    assert_eq!(load_local(&home).unwrap(), Some(answer(false)));
}

#[test]
fn a_bad_answer_file_is_named_not_overwritten() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(state_path(t.path()), "{not json").unwrap();
    let e = load_local(t.path()).unwrap_err().to_string();
    assert!(e.contains(STATE_FILE), "{e}");
    assert!(save_local(t.path(), &answer(true)).is_err());
    assert_eq!(
        std::fs::read_to_string(state_path(t.path())).unwrap(),
        "{not json"
    );
    std::fs::write(
        state_path(t.path()),
        "{\"local_ollama\": {\"use_local\": 1}}",
    )
    .unwrap();
    let e = load_local(t.path()).unwrap_err().to_string();
    assert!(e.contains("local_ollama"), "{e}");
}
