#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! A long session through `codewhale app-server --stdio` (a real process,
//! JSON-RPC over its stdin/stdout) against the scripted model holding a
//! small context window the way the real APIs do (a request over it is
//! refused with the provider's own context-length error): the runtime
//! compacts automatically and every turn reaches its end.
#![cfg(unix)]

use crate::common;

use common::cli::Fixture;
use common::long_session;
use common::runtime::StdioServer;
use common::scripted_model::ScriptedModel;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The scripted model's window, in its own tokens (body bytes / 4).
const WINDOW: u64 = 9_000;

fn config(model: &ScriptedModel, window_line: &str) -> String {
    format!(
        "provider = \"custom\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n{window_line}\n[compaction]\nthreshold = 0.85\n",
        model.kind(),
        model.base_url()
    )
}

/// Start a thread and run `turns` turns of the long session one after
/// the other; the `turn.completed` payloads, in order.
fn run(rpc: &mut StdioServer, turns: usize) -> Vec<Value> {
    rpc.send(r#"{"jsonrpc":"2.0","id":1,"method":"thread/start","params":{}}"#);
    let thread = rpc.reply_to(1)["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"thread/subscribe","params":{{"thread_id":"{thread}"}}}}"#
    ));
    rpc.reply_to(2);
    let mut done = Vec::new();
    for i in 0..turns {
        let id = 100 + i as u64;
        let prompt = serde_json::to_string(&long_session::prompt(i)).unwrap();
        rpc.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"turn/start","params":{{"thread_id":"{thread}","prompt":{prompt}}}}}"#
        ));
        let reply = rpc.reply_to(id);
        let turn = reply["result"]["turn"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("turn {i} not started: {reply}"))
            .to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        let end = loop {
            assert!(Instant::now() < deadline, "turn {i} never completed");
            if let Some(e) = rpc
                .events
                .iter()
                .find(|e| e["event"] == "turn.completed" && e["turn_id"] == turn.as_str())
            {
                break e.clone();
            }
            let m = rpc.read();
            if m["method"] == "event" {
                rpc.events.push(m["params"].clone());
            }
        };
        done.push(end);
    }
    done
}

fn auto_compactions(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "item.completed")
        .map(|e| e["payload"]["item"].clone())
        .filter(|i| i["kind"] == "context_compaction" && i["metadata"]["auto"] == true)
        .collect()
}

fn assert_all_completed(done: &[Value]) {
    for (i, d) in done.iter().enumerate() {
        let t = &d["payload"]["turn"];
        assert_eq!(t["status"], "completed", "turn {i}: {d}");
    }
}

/// 200 turns with a configured window: compaction before the request
/// that would pass 85 % of it, never a refusal, never a request over it.
#[test]
fn two_hundred_turns_over_stdio_compact_before_the_window() {
    let turns = 200;
    let model = long_session::model(turns, WINDOW);
    let f = Fixture::with_config(&config(&model, &format!("context_window = {WINDOW}")));
    long_session::workspace(&f.ws);
    let started = Instant::now();
    let mut rpc = StdioServer::start(&f);
    let done = run(&mut rpc, turns);
    let took = started.elapsed();
    assert_all_completed(&done);
    let stats = model.window_stats();
    assert_eq!(stats.refused, 0, "{stats:?}");
    assert!(stats.peak <= WINDOW, "{stats:?}");
    assert!(stats.summaries >= 1, "{stats:?}");
    let compactions = auto_compactions(&rpc.events);
    assert!(!compactions.is_empty());
    assert_eq!(compactions.len() as u64, stats.summaries);
    for c in &compactions {
        assert_eq!(c["metadata"]["reason"], "threshold", "{c}");
        assert!(c["metadata"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("summary #"));
        assert!(c["metadata"]["tokens_after"].as_u64() < c["metadata"]["tokens_before"].as_u64());
    }
    assert_eq!(model.steps_left(), 0, "every scripted step was used");
    // The request after a compaction carries the summary, and the latest
    // user request verbatim.
    let reqs = model.requests();
    let after = reqs
        .iter()
        .find(|r| {
            let m = r.body["messages"].as_array().unwrap();
            m.iter().any(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("(written by compaction)"))
            }) && r.body.get("tools").is_some()
        })
        .expect("a request after a compaction");
    let msgs = after.body["messages"].as_array().unwrap();
    assert!(msgs
        .iter()
        .any(|m| m["role"] == "user" && m["content"].as_str().unwrap().starts_with("Turn ")));
    eprintln!(
        "200 turns over stdio in {:.1}s: {} compactions, peak {} of {WINDOW}",
        took.as_secs_f64(),
        compactions.len(),
        stats.peak
    );
    rpc.shutdown(9);
}

/// No window configured (a model the catalogue does not list): the first
/// request over the window is refused with the provider's error, the
/// runtime compacts and retries it once, and from then on keeps under the
/// size that failed — one refusal in the whole session.
#[test]
fn unknown_window_compacts_on_the_providers_error_and_learns_it() {
    let turns = 80;
    let model = long_session::model(turns, WINDOW);
    let f = Fixture::with_config(&config(&model, ""));
    long_session::workspace(&f.ws);
    let mut rpc = StdioServer::start(&f);
    let done = run(&mut rpc, turns);
    assert_all_completed(&done);
    let stats = model.window_stats();
    assert_eq!(stats.refused, 1, "{stats:?}");
    let compactions = auto_compactions(&rpc.events);
    assert!(compactions.len() >= 2, "{compactions:?}");
    assert_eq!(compactions[0]["metadata"]["reason"], "context_length");
    assert_eq!(compactions[0]["metadata"]["window"], WINDOW);
    assert!(compactions[1..]
        .iter()
        .all(|c| c["metadata"]["reason"] == "threshold"));
    rpc.shutdown(9);
}
