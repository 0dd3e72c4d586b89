#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench target may panic
//! Keypress → paint through a real pseudo-terminal (harness = false;
//! figures go in docs/PERFORMANCE.md). The real `codewhale` binary runs in
//! a portable-pty pty against the scripted model server of the tests; its
//! output is parsed by a terminal emulator's parser (vt100) on a reader
//! thread, which stamps the moment the screen first shows what the key
//! should have changed (the draft gains an `x`, or empties again after a
//! Backspace). So a sample is: write the key → the kernel's pty → the
//! TUI's key reader, state machine, frame and write → the pty → parsed.
//!
//! Baseline, same run, same reader and parser: a raw echo round trip
//! through a pty (`cat` with the pty in raw mode, no echo by the line
//! discipline): what the pty and the scheduler cost by themselves.
//!
//! 1. Idle: the TUI waits for input.
//! 2. Streaming: the model streams one delta (a line) every 5 ms, nominally
//!    200 deltas/s (the rate actually reached is printed).

#[allow(dead_code)] // the bench uses only part of the tests' server
#[path = "../tests/common/scripted_model/mod.rs"]
mod scripted_model;

/// The tests' PTY harness (one copy: tests/common/pty.rs).
#[path = "../tests/common/pty.rs"]
mod pty;

use portable_pty::CommandBuilder;
use pty::{provider_config, FreshHome, Pty as Term};
use scripted_model::{ScriptedModel, Step, Wire};
use std::time::{Duration, Instant};

const ROWS: u16 = 30;
const COLS: u16 = 100;
/// Keys per scenario (half `x`, half Backspace).
const SAMPLES: usize = 300;
/// Pause between keys, so each key meets a settled UI.
const GAP: Duration = Duration::from_millis(10);

/// The first line inside the input box (under its top border).
fn draft(s: &vt100::Screen) -> String {
    let c = s.contents();
    let mut lines = c.lines().skip_while(|l| !l.starts_with('┌'));
    lines.next();
    lines
        .next()
        .unwrap_or_default()
        .trim_start_matches('│')
        .trim_end()
        .trim_end_matches('│')
        .trim_end()
        .to_string()
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Raw echo round trips: one byte to `cat` and back.
fn baseline() -> Vec<f64> {
    let mut cmd = CommandBuilder::new("sh");
    cmd.args(["-c", "stty raw -echo && echo ready && exec cat"]);
    let t = Term::spawn(cmd, ROWS, COLS);
    t.wait_for("ready", Duration::from_secs(10));
    (0..SAMPLES)
        .map(|_| {
            let want = t.bytes() + 1;
            let ms = t.sample(b"x", Box::new(move |_, total| total >= want));
            std::thread::sleep(GAP);
            ms
        })
        .collect()
}

/// `codewhale` in a fresh home against `model` (the home lives as long
/// as the returned pair).
fn tui(model: &ScriptedModel) -> (FreshHome, Term) {
    let home = FreshHome::new(&provider_config(model.kind(), &model.base_url()));
    let t = Term::spawn(
        home.command(std::path::Path::new(env!("CARGO_BIN_EXE_codewhale"))),
        ROWS,
        COLS,
    );
    t.wait_for("Ask codewhale", Duration::from_secs(30));
    (home, t)
}

/// Alternately `x` (the draft becomes "x") and Backspace (empty again).
fn keys(t: &Term) -> Vec<f64> {
    (0..SAMPLES)
        .map(|i| {
            let ms = if i % 2 == 0 {
                t.sample(b"x", Box::new(|s, _| draft(s) == "x"))
            } else {
                t.sample(b"\x7f", Box::new(|s, _| draft(s).contains("Ask codewhale")))
            };
            std::thread::sleep(GAP);
            ms
        })
        .collect()
}

fn report(what: &str, v: &[f64], base: &[f64]) {
    let (p50, p99, b50, b99) = (pct(v, 0.5), pct(v, 0.99), pct(base, 0.5), pct(base, 0.99));
    println!(
        "{what}: p50 {p50:.2} ms p99 {p99:.2} ms max {:.2} ms | baseline echo p50 {b50:.3} ms p99 {b99:.3} ms | ratio p50 {:.1}x p99 {:.1}x",
        pct(v, 1.0),
        p50 / b50,
        p99 / b99
    );
}

fn main() {
    println!("load before: {}", load());
    let base = baseline();
    println!(
        "baseline: raw pty echo round trip p50 {:.3} ms p99 {:.3} ms ({SAMPLES} samples)",
        pct(&base, 0.5),
        pct(&base, 0.99)
    );

    // Idle.
    let m = ScriptedModel::start(Wire::OpenAi, vec![]);
    let (_home, t) = tui(&m);
    let idle = keys(&t);
    report("keypress -> paint, idle", &idle, &base);
    drop(t);

    // Streaming: one line every 5 ms, far more than the samples need.
    let chunks: Vec<String> = (1..=6000)
        .map(|i| format!("delta {i} of the stream\n\n"))
        .collect();
    let m = ScriptedModel::start(
        Wire::OpenAi,
        vec![Step::Trickle {
            chunks,
            every: Duration::from_millis(5),
        }],
    );
    let (_home, t) = tui(&m);
    for c in "stream please".chars() {
        t.send(c.to_string().as_bytes());
        std::thread::sleep(Duration::from_millis(5));
    }
    t.send(b"\r");
    t.wait_for("delta 1 of the stream", Duration::from_secs(30));
    let started = Instant::now();
    let first = latest_delta(&t.screen());
    let streaming = keys(&t);
    let s = t.screen();
    let (last, secs) = (latest_delta(&s), started.elapsed().as_secs_f64());
    assert!(
        s.contains("Esc to stop"),
        "the stream ended before the samples did:\n{s}"
    );
    report(
        &format!(
            "keypress -> paint, streaming ({:.0} deltas/s reached)",
            (last - first) as f64 / secs
        ),
        &streaming,
        &base,
    );
    drop(t);
    println!("load after: {}", load());
}

/// The highest `delta N` on the screen.
fn latest_delta(s: &str) -> u64 {
    s.split("delta ")
        .filter_map(|p| p.split_whitespace().next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}
