#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! A long conversation in the TUI: the real `codewhale` binary in a real
//! pseudo-terminal (tests/common/pty.rs), 200 turns against the scripted
//! model holding a small context window the way the real APIs do. The
//! conversation compacts automatically, every turn ends with its answer,
//! no request passes the window, and `/receipts` lists the compactions.
#![cfg(unix)]

use crate::common;

use common::long_session;
use common::pty::{provider_config, FreshHome, Pty};
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_codewhale");
const WINDOW: u64 = 9_000;

#[test]
fn two_hundred_turns_in_the_tui_compact_and_receipts_list_them() {
    let turns = 200;
    let model = long_session::model(turns, WINDOW);
    let config = format!(
        "{}context_window = {WINDOW}\n",
        provider_config(model.kind(), &model.base_url())
    );
    let home = FreshHome::new(&config);
    long_session::workspace(&home.ws);
    let pty = Pty::spawn(home.command(Path::new(BIN)), 40, 140);
    pty.wait_for("Ask codewhale", Duration::from_secs(20));
    let started = Instant::now();
    for i in 0..turns {
        pty.send(long_session::prompt(i).as_bytes());
        std::thread::sleep(Duration::from_millis(5));
        pty.send(b"\r");
        let s = pty.wait_for(&format!("turn {i} done"), Duration::from_secs(30));
        assert!(!s.contains("turn failed"), "turn {i}:\n{s}");
        pty.wait_idle(Duration::from_secs(30));
    }
    let took = started.elapsed();
    let stats = model.window_stats();
    assert_eq!(stats.refused, 0, "{stats:?}");
    assert!(stats.peak <= WINDOW, "{stats:?}");
    assert!(stats.summaries >= 1, "{stats:?}");
    assert_eq!(model.steps_left(), 0);
    // `/receipts`: the last turn's receipt, then the conversation's
    // compactions, one line each.
    pty.type_text("/receipts");
    pty.send(b"\r");
    let s = pty.wait_for(
        &format!("Compactions in this conversation: {}", stats.summaries),
        Duration::from_secs(10),
    );
    assert!(s.contains("automatic (threshold)"), "{s}");
    // The turn of the first compaction: its own receipt lists it.
    let first = s
        .lines()
        .find_map(|l| l.trim().strip_prefix("- turn "))
        .and_then(|r| r.split(':').next())
        .map(str::to_string)
        .expect("a compaction line");
    pty.type_text(&format!("/receipts {first}"));
    pty.send(b"\r");
    pty.wait_for("**Compactions:** 1", Duration::from_secs(10));
    eprintln!(
        "200 TUI turns in {:.1}s: {} compactions, peak {} of {WINDOW}",
        took.as_secs_f64(),
        stats.summaries,
        stats.peak
    );
    pty.send(b"\x04");
}
