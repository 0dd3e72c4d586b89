#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Automatic compaction in `codewhale exec` (one run, a long tool loop)
//! against the scripted model holding a context window and answering a
//! request over it the way each real API does (tests/common/scripted_model:
//! Anthropic's "prompt is too long: M tokens > N maximum", the Responses
//! API's `context_length_exceeded` without a number). The window is
//! unknown to codewhale (a custom provider without `context_window`): the
//! first refusal compacts the conversation mid-loop — keeping the pending
//! tool calls — and retries once, and the learned window holds from then on.

use crate::common;

use common::cli::{of_type, records, stderr, stdout_lines, Fixture};
use common::scripted_model::{Faithful, ScriptedModel, Wire};
use common::session_mix;

const FILES: usize = 20;
const REQUESTS: usize = 40;

fn run(wire: Wire, window: u64) {
    let model = ScriptedModel::start_faithful(
        wire,
        session_mix::script(REQUESTS, FILES, false),
        Faithful {
            context_window: Some(window),
            ..Faithful::default()
        },
    );
    let f = Fixture::new(&model, "");
    session_mix::workspace(&f.ws, FILES);
    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--max-turns",
        "80",
        "--output-format",
        "stream-json",
        "work through the files",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    let stats = model.window_stats();
    assert_eq!(stats.refused, 1, "{wire:?}: {stats:?}");
    assert!(stats.summaries >= 2, "{wire:?}: {stats:?}");
    let comp = of_type(&ev, "compaction");
    assert_eq!(comp.len() as u64, stats.summaries);
    assert_eq!(comp[0]["reason"], "context_length");
    assert!(comp[1..].iter().all(|c| c["reason"] == "threshold"));
    assert!(comp
        .iter()
        .all(|c| c["auto"] == true && c["kept"].as_u64() >= Some(1)));
    assert_eq!(model.steps_left(), 0, "every step answered");
    let done = of_type(&ev, "done");
    assert_eq!(done[0]["status"], "completed");
    // The session file records each compaction; the receipt lists them.
    let session = done[0]["session_file"].as_str().unwrap();
    let recs = records(std::path::Path::new(session));
    assert_eq!(of_type(&recs, "compaction").len(), comp.len());
    let r = f.run(&["receipts", "--format", "json"]);
    let receipt: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(
        receipt["compactions"].as_array().map(Vec::len),
        Some(comp.len()),
        "{receipt}"
    );
    assert!(
        !receipt.to_string().contains("summary #"),
        "no summary in a receipt"
    );
    common::receipts::validate(&receipt);
    // The request after the first compaction: the summary, the user's
    // request, then the tool call that was pending with its result.
    let reqs = model.requests();
    let marker = "(written by compaction)";
    let after = reqs
        .iter()
        .find(|r| r.body.to_string().contains(marker) && r.body.get("tools").is_some())
        .expect("a request after the compaction");
    let s = after.body.to_string();
    assert!(s.find(marker) < s.find("work through the files"));
}

#[test]
fn anthropic_prompt_too_long_compacts_retries_and_learns_the_window() {
    run(Wire::Anthropic, 30_000);
}

#[test]
fn responses_context_length_exceeded_without_a_number_learns_the_failed_size() {
    run(Wire::Responses, 30_000);
}
