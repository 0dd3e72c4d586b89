#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Anthropic prompt caching through `codewhale exec` against the scripted
//! model's cache simulation (prefix match against earlier requests, billed
//! as the API bills): breakpoints on the stable prefix and the latest
//! turns, never more than four; later requests read what earlier ones
//! wrote; usage and cost count reads and writes at their own prices.

use crate::common;

use common::cli::*;
use common::scripted_model::{Faithful, ScriptedModel, Wire};
use common::session_mix;
use serde_json::Value;

fn count_marks(v: &Value) -> usize {
    match v {
        Value::Object(o) => {
            usize::from(o.contains_key("cache_control"))
                + o.values().map(count_marks).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_marks).sum(),
        _ => 0,
    }
}

#[test]
fn a_tool_loop_reads_its_prefix_from_the_cache_and_bills_it_so() {
    let turns = 12;
    let model = ScriptedModel::start_faithful(
        Wire::Anthropic,
        session_mix::script(turns, 8, false),
        Faithful {
            anthropic_cache: true,
            ..Faithful::default()
        },
    );
    // Prices: $3 input, $0.30 cache reads, $3.75 cache writes, $15 output.
    let f = Fixture::new(
        &model,
        "price_input_per_mtok = 3.0\nprice_output_per_mtok = 15.0\nprice_cached_input_per_mtok = 0.3\nprice_cache_write_per_mtok = 3.75\n",
    );
    session_mix::workspace(&f.ws, 8);
    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--max-turns",
        "30",
        "--output-format",
        "stream-json",
        "work through the files",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let reqs = model.requests();
    let bills = model.cache_bills();
    assert_eq!(reqs.len(), turns);
    for r in &reqs {
        let n = count_marks(&r.body);
        assert!((3..=4).contains(&n), "{n} cache_control blocks");
    }
    // The first request writes the prefix; every later one reads at least
    // everything the one before it sent.
    assert_eq!(bills[0].read, 0);
    assert!(bills[0].write > 1_000, "{:?}", bills[0]);
    for k in 1..bills.len() {
        assert!(
            bills[k].read >= bills[k - 1].total() - bills[k - 1].fresh,
            "request {k}: {:?} after {:?}",
            bills[k],
            bills[k - 1]
        );
    }
    // Billed as input-token equivalents (writes 1.25x, reads 0.1x, the
    // 5-minute rates of the caching guide's pricing table), the whole
    // session costs well under half of what it costs uncached.
    let with: f64 = bills
        .iter()
        .map(|b| b.fresh as f64 + 1.25 * b.write as f64 + 0.1 * b.read as f64)
        .sum();
    let without: u64 = bills.iter().map(|b| b.total()).sum();
    assert!(with / (without as f64) < 0.5, "{with} / {without}");
    // codewhale's accounting is the API's.
    let ev = stdout_lines(&o);
    let done = ev.last().unwrap();
    let sum = |f: fn(&common::scripted_model::CacheBill) -> u64| bills.iter().map(f).sum::<u64>();
    assert_eq!(done["input_tokens"], sum(|b| b.total()));
    assert_eq!(done["cached_input_tokens"], sum(|b| b.read));
    assert_eq!(done["cache_write_tokens"], sum(|b| b.write));
    let want = (sum(|b| b.fresh) as f64 * 3.0
        + sum(|b| b.read) as f64 * 0.3
        + sum(|b| b.write) as f64 * 3.75
        + (20 * turns) as f64 * 15.0)
        / 1e6;
    let usages = of_type(&ev, "turn_usage");
    let cost: f64 = usages.iter().map(|u| u["cost_usd"].as_f64().unwrap()).sum();
    assert!((cost - want).abs() < 1e-9, "{cost} vs {want}");
}
