#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale exec` as a client of the runtime: its run is a thread in the
//! shared event log (same id as its session, so `receipts` finds it), and a
//! run killed mid-turn is repaired by the next start (torn tail cut, its
//! seq skipped, the turn `interrupted`). The exec outputs themselves are
//! pinned by tests/exec_*.rs, unchanged.
#![cfg(unix)]

use crate::common;

use common::cli::*;
use common::runtime::cmd;
use common::scripted_model::{call, reply, ScriptedModel, Step, Wire};
use serde_json::{json, Value};
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn log_path(f: &Fixture) -> std::path::PathBuf {
    f.cw_home.join("runtime").join("events.jsonl")
}

fn events(f: &Fixture) -> Vec<Value> {
    let text = std::fs::read_to_string(log_path(f)).expect("runtime log");
    assert!(text.ends_with('\n'));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn an_exec_run_is_one_thread_with_items_and_its_receipt_is_found_by_thread_id() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("c1", "read_file", json!({"path": "hello.txt"})),
            call(
                "c2",
                "write_file",
                json!({"path": "new.txt", "content": "x\n"}),
            ),
            reply("All done, the file is written."),
        ],
    );
    let f = Fixture::new(&model, "");
    std::fs::write(f.ws.join("hello.txt"), "hello\n").unwrap();
    let o = cmd(
        &f,
        &[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "go",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stream = stdout_lines(&o);
    let thread = stream[0]["thread"].as_str().unwrap().to_string();

    let ev = events(&f);
    let seqs: Vec<u64> = ev.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(ev.iter().all(|e| e["thread_id"] == thread.as_str()));
    assert_eq!(ev[0]["event"], "thread.started");
    assert_eq!(ev[0]["payload"]["thread"]["id"], thread.as_str());
    assert_eq!(ev[0]["payload"]["thread"]["auto_approve"], true);
    assert_eq!(ev[0]["payload"]["thread"]["mode"], "agent");
    let last = ev.last().unwrap();
    assert_eq!(last["event"], "turn.completed");
    assert_eq!(last["payload"]["turn"]["status"], "completed");
    assert_eq!(last["payload"]["turn"]["effective_provider"], "custom");
    assert_eq!(last["payload"]["turn"]["usage"]["input_tokens"], 300);
    assert_eq!(last["payload"]["turn"]["usage"]["output_tokens"], 60);

    let done = |kind: &str| -> Vec<&Value> {
        ev.iter()
            .filter(|e| e["event"] == "item.completed" || e["event"] == "item.failed")
            .map(|e| &e["payload"]["item"])
            .filter(|i| i["kind"] == kind)
            .collect()
    };
    assert_eq!(done("user_message")[0]["metadata"]["text"], "go");
    let read = done("tool_call");
    assert_eq!(read.len(), 1);
    assert_eq!(read[0]["metadata"]["call_id"], "c1");
    assert_eq!(read[0]["metadata"]["status"], "ok");
    assert_eq!(read[0]["metadata"]["approval"]["outcome"], "allow");
    assert!(
        read[0]["metadata"].get("output").is_none(),
        "output stays in the session file"
    );
    let write = done("file_change");
    assert_eq!(write[0]["metadata"]["tool"], "write_file");
    assert!(f.ws.join("new.txt").exists());
    // The streamed answer: coalesced deltas that add up to the final text.
    let msg = done("agent_message");
    assert_eq!(msg[0]["metadata"]["text"], "All done, the file is written.");
    let deltas: Vec<&str> = ev
        .iter()
        .filter(|e| e["event"] == "item.delta")
        .map(|e| e["payload"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas.concat(), "All done, the file is written.");
    assert!(!deltas.is_empty() && deltas.len() <= 2, "{deltas:?}");

    // `receipts` finds the run by the runtime's thread id.
    let r = cmd(&f, &["receipts", &thread, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(receipt["source"]["session_id"], thread.as_str());
}

#[test]
fn killed_mid_turn_then_torn_tail_is_cut_interrupted_and_seqs_go_up() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![Step::Hang {
            text: "thinking".into(),
        }],
    );
    let f = Fixture::new(&model, "");
    let mut child = cmd(
        &f,
        &[
            "exec",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "hi",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(log_path(&f).exists()
        && std::fs::read_to_string(log_path(&f))
            .unwrap()
            .contains("turn.started")
        && model.requests().len() == 1)
    {
        assert!(Instant::now() < deadline, "never got mid-turn");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The streamed fragment must be durable before the kill (32 ms bound).
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let before = events(&f);
    let turn_id = before
        .iter()
        .find(|e| e["event"] == "turn.started")
        .unwrap()["turn_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!before.iter().any(|e| e["event"] == "turn.completed"));
    assert!(
        before
            .iter()
            .any(|e| e["event"] == "item.delta" && e["payload"]["delta"] == "thinking"),
        "the ticker published the waiting text without another fragment"
    );
    let last_seq = before.last().unwrap()["seq"].as_u64().unwrap();
    // A torn append that even parses as JSON (SIGKILL cannot be aimed
    // between write and newline, so the test writes the fragment itself).
    let fragment = format!(
        r#"{{"seq":{},"schema":"codewhale.runtime-events","v":1,"ts":"2026-01-01T00:00:00.000Z","event":"item.delta","thread_id":null,"turn_id":null,"item_id":null,"payload":{{}}}}"#,
        last_seq + 1
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(&f))
        .unwrap()
        .write_all(fragment.as_bytes())
        .unwrap();

    let model2 = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    std::fs::write(
        f.cw_home.join("config.toml"),
        format!(
            "[providers.custom]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"k\"\nmodel = \"scripted\"\n",
            model2.base_url()
        ),
    )
    .unwrap();
    let o = cmd(&f, &["exec", "--provider", "custom", "again"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("removed {} uncommitted byte(s)", fragment.len())),
        "{err}"
    );
    assert!(
        err.contains(&format!("turn {turn_id} marked interrupted")),
        "{err}"
    );

    let after = events(&f);
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "committed events unchanged"
    );
    let text = std::fs::read_to_string(log_path(&f)).unwrap();
    assert!(!text.contains(&fragment), "the fragment is gone");
    let new = &after[before.len()..];
    assert_eq!(new[0]["event"], "runtime.recovered");
    assert_eq!(new[0]["payload"]["skipped_seq"], last_seq + 1);
    assert!(
        new.iter()
            .all(|e| e["seq"].as_u64().unwrap() > last_seq + 1),
        "the torn seq is never reused"
    );
    let closed = new
        .iter()
        .find(|e| e["event"] == "turn.completed" && e["turn_id"] == turn_id.as_str())
        .expect("the killed turn is closed");
    assert_eq!(closed["payload"]["turn"]["status"], "interrupted");
    assert_eq!(
        closed["payload"]["turn"]["error"],
        "Interrupted by process restart"
    );
    let item = new
        .iter()
        .find(|e| e["event"] == "item.interrupted")
        .expect("its open message item is interrupted");
    assert_eq!(item["payload"]["item"]["metadata"]["text"], "thinking");
    // The second run completed as a thread of its own.
    let last = after.last().unwrap();
    assert_eq!(last["event"], "turn.completed");
    assert_eq!(last["payload"]["turn"]["status"], "completed");
    assert_ne!(last["thread_id"], closed["thread_id"]);
}
