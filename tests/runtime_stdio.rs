#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale app-server --stdio`: JSON-RPC 2.0 over a real process's
//! stdin/stdout, and the drift guard that pins its method list and the
//! event envelope to the snapshot fixtures in tests/fixtures/runtime/.
#![cfg(unix)]

mod common;

use common::cli::Fixture;
use common::scripted_model::{reply, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn fixture(name: &str) -> Value {
    let p = format!(
        "{}/tests/fixtures/runtime/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn stdio(f: &Fixture) -> std::process::Child {
    let tmp = f.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    f.cmd(&["app-server", "--stdio", "-C", f.ws.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .env("XDG_RUNTIME_DIR", &tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn probe_errors_keep_the_server_serving_and_stdout_is_json_only() {
    let f = Fixture::with_config("");
    let mut child = stdio(&f);
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
        m.starts_with("thread/") || m.starts_with("turn/") || m.starts_with("approval/")
    }));
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
    let f = Fixture::with_config(&format!(
        "provider = \"custom\"\n[providers.custom]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"k\"\nmodel = \"scripted\"\n",
        model.base_url()
    ));
    let mut child = stdio(&f);
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut read = || -> Value {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    };
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"thread/start","params":{{"title":"s"}}}}"#
    )
    .unwrap();
    let t = read();
    let thread = t["result"]["thread"]["id"].as_str().unwrap().to_string();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"thread/subscribe","params":{{"thread_id":"{thread}"}}}}"#).unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"turn/start","params":{{"thread_id":"{thread}","prompt":"hi"}}}}"#).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    let mut replies = 0;
    while !events
        .iter()
        .any(|e: &Value| e["event"] == "turn.completed")
    {
        assert!(Instant::now() < deadline);
        let m = read();
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
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":9,"method":"shutdown"}}"#).unwrap();
    assert_eq!(read()["id"], 9);
    assert!(child.wait().unwrap().success());
}
