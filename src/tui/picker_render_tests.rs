//! Snapshots of the `/provider` picker, its key field (bullets only) and
//! the first run's question, drawn by the real [`crate::tui::render::draw`]
//! into ratatui's `TestBackend`. docs/TUI.md shows them.

use super::*;
use crate::authz::Approval;
use crate::tui::provider_picker::Row;
use crate::tui::render::draw;
use crate::tui::state::{Event, FooterInfo, Key, State};
use crate::tui::test_support::buffer_text as text;
use ratatui::backend::TestBackend;
use ratatui::widgets::{Block, Borders};
use ratatui::Terminal;
use ratatui_textarea::TextArea;

fn st() -> State {
    State::new(
        "thr_1",
        Approval::Ask,
        FooterInfo {
            model: "deepseek-flash".into(),
            provider: "deepseek".into(),
            backend: "bwrap".into(),
            level: "partial".into(),
            cost_usd: Some(0.0),
            ..Default::default()
        },
    )
}

fn screen(s: &State, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut inp = TextArea::default();
    inp.set_block(Block::default().borders(Borders::ALL));
    term.draw(|f| draw(f, s, &inp)).unwrap();
    text(term.backend().buffer())
}

fn rows() -> Vec<Row> {
    let r = |id: &str, name: &str, local: bool, key| Row {
        id: id.into(),
        name: name.into(),
        local,
        key,
    };
    vec![
        r("deepseek", "DeepSeek", false, Presence::Missing),
        r("openai", "OpenAI", false, Presence::Set),
        r("anthropic", "Anthropic", false, Presence::Missing),
        r(
            "google",
            "Google Gemini (OpenAI-compatible)",
            false,
            Presence::Missing,
        ),
        r("groq", "Groq", false, Presence::Missing),
        r("openrouter", "OpenRouter", false, Presence::Set),
        r("ollama", "Ollama", true, Presence::NotNeeded),
        r("vllm", "vLLM", true, Presence::NotNeeded),
    ]
}

fn keys(mut s: State, ks: &[Key]) -> State {
    for k in ks {
        s.update(Event::Key { key: *k, at_ms: 0 });
    }
    s
}

fn typed(s: State, t: &str) -> State {
    let ks: Vec<Key> = t.chars().map(Key::Char).collect();
    keys(s, &ks)
}

fn picker() -> State {
    let mut s = st();
    s.update(Event::PickerRows(rows()));
    s
}

#[test]
fn provider_picker() {
    insta::assert_snapshot!(screen(&picker(), 80, 20));
}

#[test]
fn provider_picker_filtered() {
    insta::assert_snapshot!(screen(&typed(picker(), "op"), 80, 14));
}

#[test]
fn provider_key_field_shows_bullets_only() {
    let s = keys(picker(), &[Key::Enter]);
    let s = typed(s, "sk-secret-value-42");
    let out = screen(&s, 80, 12);
    assert!(!out.contains("sk-"), "{out}");
    assert!(!out.contains("secret"), "{out}");
    assert!(out.contains(&"•".repeat(18)), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn provider_key_field_says_why_enter_did_nothing() {
    let s = keys(picker(), &[Key::Enter, Key::Enter]);
    let out = screen(&s, 80, 12);
    assert!(out.contains("empty key"), "{out}");
}

#[test]
fn first_run_asks_about_local_ollama() {
    let mut s = st();
    s.update(Event::AskLocal(crate::tui::first_run::LocalAsk {
        root: "http://localhost:11434".into(),
        model: "qwen2.5-coder:7b".into(),
    }));
    insta::assert_snapshot!(screen(&s, 80, 12));
}

#[test]
fn small_terminals_still_ask_in_one_line() {
    let mut s = st();
    s.update(Event::AskLocal(crate::tui::first_run::LocalAsk {
        root: "http://localhost:11434".into(),
        model: "llama3".into(),
    }));
    let out = screen(&s, 40, 5);
    assert!(
        out.contains("Use local Ollama model llama3? y/[N]"),
        "{out}"
    );
    let s = keys(picker(), &[Key::Enter]);
    let s = typed(s, "abc");
    let out = screen(&s, 30, 5);
    assert!(out.contains("key for deepseek: •••"), "{out}");
    assert!(!out.contains("abc"), "{out}");
}

#[test]
fn docs_show_the_first_run_snapshots() {
    crate::tui::test_support::assert_docs_show(
        "picker_render",
        &[
            "provider_picker",
            "provider_key_field_shows_bullets_only",
            "first_run_asks_about_local_ollama",
        ],
    );
}
