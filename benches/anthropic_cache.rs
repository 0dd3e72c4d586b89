#![allow(clippy::unwrap_used, clippy::expect_used)]
// a bench target may panic
// The shared test modules are included whole; the bench uses part of them.
#![allow(dead_code)]
//! Anthropic prompt caching over a long session (harness = false; figures
//! go in docs/PERFORMANCE.md): a 60-turn `codewhale exec` session — reads,
//! edits, searches and commands whose outputs are 1–20 KB, an `AGENTS.md`
//! in the system prompt — against the scripted model's Anthropic cache
//! simulation (prefix match against earlier requests, billed as the API
//! bills: `tests/common/scripted_model`). Reports the billed input-token
//! equivalents with caching ÷ without (cache writes at 1.25× and reads at
//! 0.1× the input price, the 5-minute rates of Anthropic's prompt-caching
//! guide; without caching every prompt token is billed at 1×). Goal
//! (issue 35): ≤ 0.25. Also the peak request size and the wall time of the
//! session (median and range of RUNS runs) with the load average.
//!
//! Then the same session with automatic compaction: the scripted model
//! holds a context window of half the session's peak request (its own
//! count, body bytes / 4; a request over it is refused with Anthropic's
//! "prompt is too long" error) and the provider is configured with that
//! `context_window`; reported: the peak request, the number of
//! compactions, refusals (must be 0: never above the window) and the
//! caching ratio of the compacted session.
//!
//! Commands run with `--sandbox danger-full-access` in a temporary
//! workspace (fixed `head -c` commands), so the figure does not depend on
//! which sandbox the machine has.
//!
//! Run: `cargo bench --bench anthropic_cache`.

#[path = "../tests/common/cli.rs"]
mod cli;
#[path = "../tests/common/scripted_model/mod.rs"]
mod scripted_model;
#[path = "../tests/common/session_mix.rs"]
mod session_mix;

use scripted_model::{Faithful, ScriptedModel, Wire};
use std::time::Instant;

const TURNS: usize = 60;
const FILES: usize = 20;
const RUNS: usize = 3;

struct Run {
    ratio: f64,
    with: f64,
    without: u64,
    peak: u64,
    requests: usize,
    ok_results: usize,
    results: usize,
    secs: f64,
    /// The scripted model's view of request sizes (its own count).
    window: scripted_model::WindowStats,
    compactions: usize,
}

/// One session; `window`: the scripted model's context window and the
/// provider's `context_window` (`None`: a window no request reaches, so
/// the sizes are still counted).
fn run(window: Option<u64>) -> Run {
    let model = ScriptedModel::start_faithful(
        Wire::Anthropic,
        session_mix::script(TURNS, FILES, true),
        Faithful {
            anthropic_cache: true,
            context_window: Some(window.unwrap_or(u64::MAX / 2)),
            ..Faithful::default()
        },
    );
    let extra = window
        .map(|w| format!("context_window = {w}\n"))
        .unwrap_or_default();
    let f = cli::Fixture::new(&model, &extra);
    session_mix::workspace(&f.ws, FILES);
    let t = Instant::now();
    let o = f.run(&[
        "exec",
        "--auto",
        "--sandbox",
        "danger-full-access",
        "--provider",
        "custom",
        "--max-turns",
        "80",
        "--output-format",
        "stream-json",
        "work through the files",
    ]);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(0), "{}", cli::stderr(&o));
    let ev = cli::stdout_lines(&o);
    let results = cli::of_type(&ev, "tool_result");
    let bills = model.cache_bills();
    let with: f64 = bills
        .iter()
        .map(|b| b.fresh as f64 + 1.25 * b.write as f64 + 0.1 * b.read as f64)
        .sum();
    let without: u64 = bills.iter().map(|b| b.total()).sum();
    Run {
        ratio: with / without as f64,
        with,
        without,
        peak: bills.iter().map(|b| b.total()).max().unwrap_or(0),
        requests: bills.len(),
        ok_results: results.iter().filter(|r| r["status"] == "ok").count(),
        results: results.len(),
        secs,
        window: model.window_stats(),
        compactions: cli::of_type(&ev, "compaction").len(),
    }
}

fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let runs: Vec<Run> = (0..RUNS).map(|_| run(None)).collect();
    let r = &runs[0];
    for o in &runs[1..] {
        assert_eq!(
            (o.without, o.with.to_bits()),
            (r.without, r.with.to_bits()),
            "deterministic"
        );
    }
    let mut secs: Vec<f64> = runs.iter().map(|r| r.secs).collect();
    secs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{} requests, {}/{} tool results ok; prompt tokens without caching {}; billed equivalents with caching {:.0}",
        r.requests, r.ok_results, r.results, r.without, r.with
    );
    println!(
        "billed input-token equivalents, caching / without: {:.3} (goal <= 0.25)",
        r.ratio
    );
    println!("peak request: {} tokens", r.peak);
    println!(
        "session wall time: median {:.2} s, range {:.2}-{:.2} s over {RUNS} runs; load average at start: {}",
        secs[secs.len() / 2],
        secs[0],
        secs[secs.len() - 1],
        load.trim()
    );

    // Automatic compaction under a window of half the peak request.
    let window = r.window.peak / 2;
    let comp: Vec<Run> = (0..RUNS).map(|_| run(Some(window))).collect();
    let c = &comp[0];
    for o in &comp[1..] {
        assert_eq!(
            (o.window, o.compactions),
            (c.window, c.compactions),
            "deterministic"
        );
    }
    assert_eq!(c.window.refused, 0, "a request above the window");
    assert!(c.window.peak <= window);
    let mut csecs: Vec<f64> = comp.iter().map(|r| r.secs).collect();
    csecs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "with automatic compaction (window {window} = half the peak of {} in the scripted model's count): \
         peak request {} ({:.1} % of the window), {} compactions, {} refusals, {}/{} tool results ok, \
         caching ratio {:.3}; wall time median {:.2} s, range {:.2}-{:.2} s",
        r.window.peak,
        c.window.peak,
        100.0 * c.window.peak as f64 / window as f64,
        c.compactions,
        c.window.refused,
        c.ok_results,
        c.results,
        c.ratio,
        csecs[csecs.len() / 2],
        csecs[0],
        csecs[csecs.len() - 1],
    );
}
