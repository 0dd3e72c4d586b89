#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench target may panic
//! TUI benchmarks (harness = false; prints medians, percentiles and
//! ranges; figures go in docs/PERFORMANCE.md). In process, on ratatui's
//! `TestBackend` (no pty, no terminal emulator): what is measured is the
//! UI's own work — state machine + frame build + buffer diff — not the
//! terminal's paint.
//!
//! 1. Frame build at 120×40 with a 2,000-cell transcript, against a
//!    baseline frame of an empty transcript measured in the same run.
//! 2. Keypress → frame ready, idle and while 200 deltas/s stream in (the
//!    deltas of each 5 ms slice are applied before the key, and the commit
//!    tick runs on its 16 ms clock).
//! 3. Idle: frames drawn over 1,000 ticks with nothing changing.
//! 4. A 2 MB tool output: time to turn it into a cell, and the bytes the
//!    cell keeps.

use codewhale::authz::Approval;
use codewhale::tui::render::draw;
use codewhale::tui::state::{Cell, Event, FooterInfo, Key, State};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use ratatui_textarea::TextArea;
use serde_json::json;
use std::time::{Duration, Instant};

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn footer() -> FooterInfo {
    FooterInfo {
        model: "scripted".into(),
        provider: "custom".into(),
        backend: "bwrap".into(),
        level: "full".into(),
        ..Default::default()
    }
}

fn env(event: &str, item: Option<&str>, payload: serde_json::Value) -> Event {
    Event::Runtime(
        json!({"event": event, "thread_id": "thr_b", "turn_id": "turn_b",
                          "item_id": item, "payload": payload}),
    )
}

fn big_state(cells: usize) -> State {
    let mut s = State::new("thr_b", Approval::Ask, footer());
    for i in 0..cells {
        s.transcript.push(match i % 4 {
            0 => Cell::User(format!("request {i}: please look at src/lib.rs")),
            1 => Cell::Agent {
                item_id: format!("m{i}"),
                text: format!(
                    "## Step {i}\n\nI read **the file** and found `x`:\n\n- one\n- two\n"
                ),
                pending: String::new(),
                done: true,
            },
            2 => Cell::Notice {
                error: false,
                text: format!("note {i}"),
            },
            _ => Cell::User(format!("short {i}")),
        });
    }
    s
}

fn time_frames(
    s: &State,
    term: &mut Terminal<TestBackend>,
    input: &TextArea,
    n: usize,
) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            term.draw(|f| draw(f, s, input)).unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

fn frame_build() {
    let input = TextArea::default();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let empty = State::new("thr_b", Approval::Ask, footer());
    let big = big_state(2000);
    let mut base = time_frames(&empty, &mut term, &input, 300);
    let mut full = time_frames(&big, &mut term, &input, 300);
    println!(
        "frame 120x40, 2000 cells: p50 {:.3} ms p95 {:.3} ms max {:.3} ms | empty transcript p50 {:.3} ms | ratio p50 {:.2}x",
        pct(&mut full, 0.5),
        pct(&mut full, 0.95),
        pct(&mut full, 1.0),
        pct(&mut base, 0.5),
        pct(&mut full, 0.5) / pct(&mut base, 0.5)
    );
}

fn keypress(streaming: bool) {
    let input = TextArea::default();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut s = big_state(200);
    s.update(env(
        "turn.started",
        None,
        json!({"turn": {"session_id": "s"}}),
    ));
    s.update(env(
        "item.started",
        Some("live"),
        json!({"item": {"kind": "agent_message", "metadata": {}}}),
    ));
    let mut lat = Vec::new();
    let mut since_tick = Duration::ZERO;
    for i in 0..2000u64 {
        // 5 ms of simulated time per key: one delta at 200/s.
        if streaming {
            s.update(env(
                "item.delta",
                Some("live"),
                json!({"delta": format!("word {i} ")}),
            ));
            if i % 8 == 0 {
                s.update(env("item.delta", Some("live"), json!({"delta": "\n"})));
            }
        }
        since_tick += Duration::from_millis(5);
        if since_tick >= Duration::from_millis(16) {
            since_tick = Duration::ZERO;
            s.update(Event::Tick);
        }
        let t = Instant::now();
        // A key the editor takes (the draft is not empty: Tab edits it).
        s.update(Event::Key {
            key: Key::Char('x'),
            at_ms: i * 5,
        });
        term.draw(|f| draw(f, &s, &input)).unwrap();
        s.dirty = false;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "keypress -> frame ({}): p50 {:.3} ms p99 {:.3} ms max {:.3} ms",
        if streaming {
            "streaming 200 deltas/s"
        } else {
            "idle"
        },
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0)
    );
}

fn idle() {
    let mut s = big_state(50);
    s.dirty = false;
    let mut frames = 0;
    for _ in 0..1000 {
        s.update(Event::Tick);
        if s.dirty {
            frames += 1;
            s.dirty = false;
        }
    }
    println!("idle: {frames} frames over 1000 ticks with nothing changing");
}

fn big_output() {
    let line = "x".repeat(99) + "\n";
    let out: String = line.repeat(2 * 1024 * 1024 / line.len());
    let mut s = State::new("thr_b", Approval::Ask, footer());
    s.update(env(
        "turn.started",
        None,
        json!({"turn": {"session_id": "s"}}),
    ));
    s.update(env(
        "item.started",
        Some("i"),
        json!({"item": {"kind": "command_execution", "metadata": {"call_id": "c", "tool": "shell", "args": {"command": "cat big"}}}}),
    ));
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        // The runtime's preview of the output (what the item carries),
        // then the item into the cell.
        let preview = codewhale::runtime::preview::output_preview(&out);
        s.update(env(
            "item.completed",
            Some("i"),
            json!({"item": {"kind": "command_execution",
                            "metadata": {"status": "ok", "output_preview": preview}}}),
        ));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let kept = s
        .transcript
        .iter()
        .map(|c| match c {
            Cell::Tool(t) => t
                .output
                .as_ref()
                .map(|(h, tl, _)| h.iter().chain(tl).map(String::len).sum::<usize>())
                .unwrap_or(0),
            _ => 0,
        })
        .sum::<usize>();
    let input = TextArea::default();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut f = time_frames(&s, &mut term, &input, 100);
    println!(
        "2 MB tool output: into a cell p50 {:.1} ms (5 runs, max {:.1} ms); the cell keeps {kept} bytes; frame after p50 {:.3} ms",
        pct(&mut times, 0.5),
        pct(&mut times, 1.0),
        pct(&mut f, 0.5)
    );
}

fn main() {
    frame_build();
    keypress(false);
    keypress(true);
    idle();
    big_output();
}
