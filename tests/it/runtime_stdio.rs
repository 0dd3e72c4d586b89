#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale app-server --stdio`: JSON-RPC 2.0 over a real process's
//! stdin/stdout, and the drift guard that pins its method list and the
//! event envelope to the snapshot fixtures in tests/fixtures/runtime/.
#![cfg(unix)]

use crate::common;

use common::cli::Fixture;
use common::runtime::{dirs, fixture as model_fixture, python_client, stdio_command, StdioServer};
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::io::Write;
use std::time::{Duration, Instant};

fn fixture(name: &str) -> Value {
    let p = format!(
        "{}/tests/fixtures/runtime/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn probe_errors_keep_the_server_serving_and_stdout_is_json_only() {
    let f = Fixture::with_config("");
    let mut child = stdio_command(&f).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"healthz"}"#,
        r#"this is not json"#,
        r#"{"jsonrpc":"1.0","id":2,"method":"healthz"}"#,
        r#"[1,2]"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"no/such"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"capabilities"}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"thread/capabilities"}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"thread/read","params":{"thread_id":"thr_nope"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"thread/start","params":{"bogus":1}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"shutdown"}"#,
    ];
    for l in input {
        writeln!(stdin, "{l}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let replies: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {l}")))
        .collect();
    assert_eq!(replies.len(), input.len(), "{text}");
    assert_eq!(replies[0]["result"]["status"], "ok");
    assert_eq!(replies[1]["error"]["code"], -32700);
    assert_eq!(replies[1]["id"], Value::Null);
    assert_eq!(replies[2]["error"]["code"], -32600);
    assert_eq!(replies[3]["error"]["code"], -32600);
    assert_eq!(replies[4]["error"]["code"], -32601);
    assert_eq!(replies[4]["id"], 3);
    // Drift guard: the advertised methods are the pinned snapshot.
    let pinned = fixture("methods.json");
    assert_eq!(
        replies[5]["result"], pinned,
        "method list drifted from tests/fixtures/runtime/methods.json"
    );
    let fam = replies[6]["result"]["methods"].as_array().unwrap();
    assert!(fam.iter().all(|m| {
        let m = m.as_str().unwrap();
        ["thread/", "turn/", "approval/", "user_input/", "tool_call/"]
            .iter()
            .any(|p| m.starts_with(p))
    }));
    assert!(fam.contains(&json!("turn/steer")) && fam.contains(&json!("thread/compact")));
    assert!(fam.contains(&json!("turn/start")));
    assert_eq!(replies[7]["error"]["code"], -32004);
    assert_eq!(replies[8]["error"]["code"], -32602);
    assert!(replies[8]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("bogus"));
    assert_eq!(replies[9]["result"]["shutting_down"], true);
}

#[test]
fn event_schema_matches_the_pinned_snapshot() {
    let pinned = fixture("events.json");
    let names: Vec<&str> = pinned["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        codewhale::runtime::EVENT_NAMES,
        "event names drifted"
    );
    let rec = codewhale::runtime::LogRecord {
        seq: 2,
        schema: "codewhale.runtime-events".into(),
        v: 1,
        ts: "t".into(),
        event: "turn.started".into(),
        thread_id: None,
        turn_id: None,
        item_id: None,
        payload: json!({}),
    };
    let env = rec.envelope(1);
    let mut keys: Vec<&String> = env.as_object().unwrap().keys().collect();
    keys.sort();
    let want: Vec<String> = pinned["envelope_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, want.iter().collect::<Vec<_>>(), "envelope drifted");
    assert_eq!(env["schema_version"], pinned["schema_version"]);
}

#[test]
fn a_turn_over_stdio_streams_events_as_notifications() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("Hello over stdio.")]);
    let f = model_fixture(&model);
    let mut rpc = StdioServer::start(&f);
    rpc.send(r#"{"jsonrpc":"2.0","id":1,"method":"thread/start","params":{"title":"s"}}"#);
    let t = rpc.read();
    let thread = t["result"]["thread"]["id"].as_str().unwrap().to_string();
    rpc.send(&format!(r#"{{"jsonrpc":"2.0","id":2,"method":"thread/subscribe","params":{{"thread_id":"{thread}"}}}}"#));
    rpc.send(&format!(r#"{{"jsonrpc":"2.0","id":3,"method":"turn/start","params":{{"thread_id":"{thread}","prompt":"hi"}}}}"#));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    let mut replies = 0;
    while !events
        .iter()
        .any(|e: &Value| e["event"] == "turn.completed")
    {
        assert!(Instant::now() < deadline);
        let m = rpc.read();
        if m["method"] == "event" {
            events.push(m["params"].clone());
        } else {
            assert!(m.get("result").is_some(), "{m}");
            replies += 1;
        }
    }
    assert_eq!(replies, 2);
    let done = events.last().unwrap();
    assert_eq!(done["payload"]["turn"]["status"], "completed");
    let text: String = events
        .iter()
        .filter(|e| e["event"] == "item.delta")
        .map(|e| e["payload"]["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Hello over stdio.");
    rpc.shutdown(9);
}

/// The steer, compact, user-input and client-tool methods mirror HTTP:
/// unknown ids are -32004, a finished turn cannot be steered (-32602), and
/// a compaction is a turn whose item holds the model's summary.
#[test]
fn steer_compact_and_answers_over_stdio() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply("first"), reply("stdio-summary-3301")],
    );
    let f = model_fixture(&model);
    let mut rpc = StdioServer::start(&f);
    rpc.send(r#"{"jsonrpc":"2.0","id":1,"method":"thread/start","params":{}}"#);
    let thread = rpc.reply_to(1)["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"thread/subscribe","params":{{"thread_id":"{thread}"}}}}"#
    ));
    rpc.reply_to(2);
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"turn/start","params":{{"thread_id":"{thread}","prompt":"hi"}}}}"#
    ));
    let turn = rpc.reply_to(3)["result"]["turn"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut n = 10;
    while !rpc.events.iter().any(|e| e["event"] == "turn.completed") {
        rpc.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{n},"method":"healthz"}}"#
        ));
        rpc.reply_to(n);
        n += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"turn/steer","params":{{"thread_id":"{thread}","turn_id":"{turn}","prompt":"late"}}}}"#
    ));
    assert_eq!(rpc.reply_to(4)["error"]["code"], -32602);
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"user_input/answer","params":{{"thread_id":"{thread}","input_id":"input_nope","answers":[]}}}}"#
    ));
    assert_eq!(rpc.reply_to(5)["error"]["code"], -32004);
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tool_call/result","params":{{"thread_id":"{thread}","turn_id":"{turn}","call_id":"call_nope","output":"x"}}}}"#
    ));
    assert_eq!(rpc.reply_to(6)["error"]["code"], -32004);
    rpc.send(&format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"thread/compact","params":{{"thread_id":"{thread}"}}}}"#
    ));
    assert!(rpc.reply_to(7)["result"]["turn"]["id"].is_string());
    while rpc
        .events
        .iter()
        .filter(|e| e["event"] == "turn.completed")
        .count()
        < 2
    {
        rpc.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{n},"method":"healthz"}}"#
        ));
        rpc.reply_to(n);
        n += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = rpc
        .events
        .iter()
        .filter(|e| e["event"] == "item.completed")
        .map(|e| &e["payload"]["item"])
        .find(|i| i["kind"] == "context_compaction")
        .unwrap();
    assert_eq!(summary["metadata"]["summary"], "stdio-summary-3301");
    rpc.shutdown(8);
}

/// The stdio transport as a client nobody here wrote sees it: a Python
/// standard-library script (tests/clients/runtime_stdio_client.py, written
/// against docs/RUNTIME_API.md and the JSON-RPC 2.0 spec) starts the
/// server itself, survives bad lines, denies an approval, answers a client
/// tool call and follows the notifications to `turn.completed`.
#[test]
fn python_stdlib_stdio_client_agrees() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // Outside the workspace: gate 4 asks; the client denies.
            call(
                "s1",
                "write_file",
                json!({"path": "../stdio-outside.txt", "content": "x"}),
            ),
            call("s2", "open_in_editor", json!({"file": "README.md"})),
            reply("stdio done"),
        ],
    );
    let f = model_fixture(&model);
    let (tmp, xdg) = dirs(&f);
    let v = python_client(
        "runtime_stdio_client.py",
        &[
            OsStr::new(env!("CARGO_BIN_EXE_codewhale")),
            f.ws.as_os_str(),
        ],
        &[
            ("HOME", f.home.as_os_str()),
            ("CODEWHALE_HOME", f.cw_home.as_os_str()),
            ("TMPDIR", tmp.as_os_str()),
            ("XDG_RUNTIME_DIR", xdg.as_os_str()),
        ],
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["exit"], 0);
    assert_eq!(v["last"], "turn.completed");
    // The round trips were real: the denial and the client's tool output
    // reached the model, and nothing was written outside the workspace.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3, "three model requests");
    assert!(reqs[2]
        .body
        .to_string()
        .contains("editor-output-stdio-5810"));
    assert!(reqs[0].body.to_string().contains("open_in_editor"));
    assert!(!f.root.join("stdio-outside.txt").exists());
}
