#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale serve --acp` and `codewhale serve --mcp` driven by published
//! Python clients nobody here wrote: the `agent-client-protocol` SDK and
//! the `mcp` SDK 1.x and 2.x, installed (pinned) by ci/setup into
//! `~/.cache/codewhale-ci/venv` (or `$CODEWHALE_CI_VENV`). A missing venv FAILS these
//! tests: run `ci/setup`.
#![cfg(unix)]

use crate::common;

use common::cli::Fixture;
use common::scripted_model::{reply, verdict, ScriptedModel, Step, Wire};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

/// The Python of venv `name` (`mcp1`: mcp 1.x + agent-client-protocol;
/// `mcp2`: mcp 2.x), or a failure that says how to make it.
fn venv_python(name: &str) -> PathBuf {
    let root = crate::common::ci_cache_dir("CODEWHALE_CI_VENV", "venv");
    let py = root.join(name).join("bin/python");
    assert!(
        py.is_file(),
        "{} is missing: run ci/setup (it creates the pinned Python venvs the serve --acp/--mcp tests need)",
        py.display()
    );
    py
}

fn client(name: &str) -> String {
    format!("{}/tests/clients/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Run a client script with the fixture's clean environment; its last
/// stdout line is its JSON report.
fn run_client(f: &Fixture, venv: &str, script: &str) -> (Value, String) {
    run_client_with(f, venv, script, &[])
}

/// [`run_client`] with more arguments after the binary and the workspace.
fn run_client_with(f: &Fixture, venv: &str, script: &str, extra: &[&str]) -> (Value, String) {
    let tmp = f.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let o = Command::new(venv_python(venv))
        .arg(client(script))
        .arg(env!("CARGO_BIN_EXE_codewhale"))
        .arg(&f.ws)
        .args(extra)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &f.home)
        .env("CODEWHALE_HOME", &f.cw_home)
        .env("TMPDIR", &tmp)
        .env("XDG_RUNTIME_DIR", &tmp)
        .current_dir(&f.ws)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        o.status.success(),
        "{script} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        o.status
    );
    let last = stdout.lines().last().unwrap_or("");
    let v = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{script}: last line not JSON ({e}): {stdout}\n{stderr}"));
    (v, stderr)
}

fn of<'a>(updates: &'a Value, kind: &str) -> Vec<&'a Value> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn runtime_events(f: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(f.cw_home.join("runtime/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn acp_python_sdk_drives_a_session_with_a_rejected_permission_and_a_cancel() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // Prompt 1: text, then a write outside the workspace (gate 4
            // asks; the editor rejects it).
            Step::Reply {
                text: "I will write it.".into(),
                calls: vec![(
                    "c1".into(),
                    "write_file".into(),
                    json!({"path": "../outside.txt", "content": "no\n"}).to_string(),
                )],
            },
            reply("Could not write outside."),
            // Prompt 2: streams, then hangs until cancelled.
            Step::Hang {
                text: "thinking".into(),
            },
        ],
    );
    let f = Fixture::with_config(&format!(
        "provider = \"custom\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ));
    let (out, stderr) = run_client(&f, "mcp1", "acp_client.py");

    assert_eq!(out["init_v1"], 1);
    assert_eq!(out["init_v99"], 1, "an unsupported version is answered 1");
    assert_eq!(out["load_session"], true);
    assert_eq!(out["auth_methods"][0]["id"], "codewhale-provider-key");
    assert_eq!(out["modes"], json!(["plan", "work", "operate"]));
    assert_eq!(out["current_mode"], "work");

    // Prompt 1: chunks, the tool call with its real path, the question,
    // the failed (rejected) call, end_turn.
    let u1 = &out["updates1"];
    let text: String = of(u1, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(text.contains("I will write it."), "{text}");
    assert!(text.contains("Could not write outside."), "{text}");
    let calls = of(u1, "tool_call");
    assert_eq!(calls.len(), 1, "{u1}");
    assert_eq!(calls[0]["toolCallId"], "c1");
    assert_eq!(calls[0]["title"], "../outside.txt");
    assert_eq!(calls[0]["kind"], "edit");
    assert_eq!(
        calls[0]["locations"][0]["path"],
        f.ws.join("../outside.txt").to_str().unwrap()
    );
    let perm = &out["permissions"][0];
    assert_eq!(perm["tool_call"]["toolCallId"], "c1");
    let opts: Vec<&str> = perm["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(opts, ["allow_once", "allow_always", "reject_once"]);
    let kinds: Vec<&str> = perm["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    let done = of(u1, "tool_call_update");
    assert_eq!(done.last().unwrap()["status"], "failed", "{u1}");
    assert_eq!(out["stop1"], "end_turn");
    // The rejection held on the host, and the runtime recorded it once.
    assert!(!f.root.join("outside.txt").exists());
    let evs = runtime_events(&f);
    let decided: Vec<_> = evs
        .iter()
        .filter(|e| e["event"] == "approval.decided")
        .collect();
    assert_eq!(decided.len(), 1, "{evs:?}");
    assert_eq!(decided[0]["payload"]["decision"], "deny");

    // Listed, cancelled, replayed.
    assert_eq!(out["listed"].as_array().unwrap().len(), 1);
    assert_eq!(out["stop2"], "cancelled");
    assert!(of(&out["updates2"], "agent_message_chunk")
        .iter()
        .any(|u| u["content"]["text"] == "thinking"));
    let turns: Vec<_> = evs
        .iter()
        .filter(|e| e["event"] == "turn.completed")
        .map(|e| e["payload"]["turn"]["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(turns, ["completed", "interrupted"]);
    let replayed = out["replayed"].as_array().unwrap();
    for k in [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
    ] {
        assert!(
            replayed.iter().any(|r| r == k),
            "{k} not replayed: {replayed:?}"
        );
    }
    // stdout was protocol-only: the SDK parses every line as JSON-RPC
    // and would have failed on anything else (the agent's notes go to
    // stderr, which the SDK keeps to itself).
    let _ = stderr;
}

/// The editor's `mcpServers` in `session/new`: the stdio server (our
/// write_note fixture, named "My Notes" by the editor) is started under
/// the sandbox for that session, gate 8 asks about its tool (the editor
/// allows once) and the call writes the file; the http entry is refused on
/// its own (`mcpCapabilities.http` is false); a second session without
/// servers is not offered the tool.
#[test]
fn acp_python_sdk_sees_auto_reviews_pause_and_selects_it_again() {
    let write = |id: &str, p: &std::path::Path| Step::Reply {
        text: String::new(),
        calls: vec![(
            id.into(),
            "write_file".into(),
            json!({"path": p.display().to_string(), "content": "reviewed\n"}).to_string(),
        )],
    };
    let f = Fixture::with_config("");
    let shared = f.root.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // Prompt 1: three writes the reviewer denies; the third pauses.
            write("d1", &shared.join("1")),
            write("d2", &shared.join("2")),
            write("d3", &shared.join("3")),
            // Prompt 2, after the editor switched Auto-Review on again.
            write("d4", &shared.join("4")),
            reply("done"),
        ],
    );
    std::fs::write(
        f.cw_home.join("config.toml"),
        format!(
            "provider = \"custom\"\napproval_policy = \"auto-review\"\n\
             [providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n\
             [sandbox]\nwritable_roots = [\"{}\"]\n",
            model.kind(),
            model.base_url(),
            shared.display()
        ),
    )
    .unwrap();
    model.reviews(vec![
        verdict("high", "deny", "no"),
        verdict("high", "deny", "no"),
        verdict("high", "deny", "no"),
        verdict("low", "allow", "a text file in a writable root"),
    ]);
    let (out, stderr) = run_client(&f, "mcp1", "acp_auto_review.py");
    assert_eq!(
        out["options_new"],
        json!({"auto_review": true}),
        "{out}\n{stderr}"
    );
    // The paused turn's prompt fails with the breaker's reason, and the
    // pause reaches the editor as the option switched off.
    assert!(
        out["prompt1_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("auto-review paused: 3 reviewer denials in a row")),
        "{out}"
    );
    let u1 = out["option_updates1"].as_array().unwrap();
    assert_eq!(u1.len(), 1, "{out}");
    assert_eq!(u1[0]["configOptions"][0]["id"], "auto_review");
    assert_eq!(u1[0]["configOptions"][0]["currentValue"], false);
    assert!(
        out["off_refused"]
            .as_str()
            .is_some_and(|e| e.contains("switched off only by its breaker")),
        "{out}"
    );
    assert_eq!(
        out["options_after_on"],
        json!({"auto_review": true}),
        "{out}"
    );
    // Prompt 2 was reviewed again (not asked): the allow wrote.
    assert_eq!(out["permissions"], 0, "{out}");
    assert_eq!(out["stop2"], "end_turn", "{out}");
    assert_eq!(model.review_requests().len(), 4);
    assert_eq!(
        std::fs::read_to_string(shared.join("4")).unwrap(),
        "reviewed\n"
    );
    for n in ["1", "2", "3"] {
        assert!(!shared.join(n).exists());
    }
}

#[test]
fn acp_session_new_mcp_servers_are_started_and_offered_in_that_session_only() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            common::scripted_model::call(
                "c1",
                "mcp__My-Notes__write_note",
                json!({"path": "editor-note.txt", "text": "from the editor's server\n"}),
            ),
            reply("noted"),
            common::scripted_model::call(
                "c2",
                "mcp__My-Notes__write_note",
                json!({"path": "elsewhere.txt", "text": "no\n"}),
            ),
            reply("not here"),
        ],
    );
    let f = Fixture::with_config(&format!(
        "provider = \"custom\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ));
    let script = format!(
        "{}/tests/fixtures/mcp/write_note.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let (out, _) = run_client_with(&f, "mcp1", "acp_mcp_client.py", &[&script]);
    // Only stdio is claimed (the SDK fills in its other flags as false).
    let caps = &out["mcp_capabilities"];
    assert_eq!(caps["http"], false, "{caps}");
    assert_eq!(caps["sse"], false, "{caps}");
    let report = &out["new_meta"]["codewhale/mcpServers"];
    assert_eq!(report[0]["status"], "accepted", "{report}");
    assert_eq!(report[0]["server"], "My-Notes", "{report}");
    assert_eq!(report[1]["status"], "refused", "{report}");
    assert!(
        report[1]["error"]
            .as_str()
            .unwrap()
            .contains("mcpServers[1] `web`: http MCP servers are not supported"),
        "{report}"
    );
    // (The agent's stderr note about it stays with the SDK, which keeps
    // the agent's stderr to itself.)

    // Asked (readOnlyHint is not trusted), allowed once, written.
    let perm = &out["permissions"][0];
    assert_eq!(perm["toolCallId"], "c1", "{perm}");
    let calls = of(&out["updates1"], "tool_call");
    assert_eq!(calls[0]["toolCallId"], "c1");
    let done = of(&out["updates1"], "tool_call_update");
    assert_eq!(
        done.last().unwrap()["status"],
        "completed",
        "{}",
        out["updates1"]
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("editor-note.txt")).unwrap(),
        "from the editor's server\n"
    );
    // The first request offered the editor's tool; it ran under the
    // sandbox (the item records how).
    let reqs = model.requests();
    let offered = |i: usize| -> Vec<String> {
        reqs[i].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect()
    };
    assert!(offered(0).contains(&"mcp__My-Notes__write_note".to_string()));
    let evs = runtime_events(&f);
    let item = evs
        .iter()
        .find(|e| e["event"] == "item.completed" && e["payload"]["item"]["kind"] == "mcp_tool_call")
        .unwrap_or_else(|| panic!("no mcp_tool_call item: {evs:?}"));
    let enforcement = item["payload"]["item"]["metadata"]["enforcement"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        enforcement.contains("mcp server `My-Notes`: workspace-write, network off"),
        "{item}"
    );

    // The other session: not offered, the call is refused, nothing written.
    assert!(!offered(2).contains(&"mcp__My-Notes__write_note".to_string()));
    assert!(!f.ws.join("elsewhere.txt").exists());
    assert_eq!(out["stop2"], "end_turn");
}

#[test]
fn mcp_python_sdk_1x_initializes_lists_calls_and_gets_denials() {
    let f = Fixture::with_config("");
    let (out, _) = run_client(&f, "mcp1", "mcp1_client.py");
    assert_eq!(out["protocol_version"], "2025-06-18");
    assert_eq!(out["server"], "codewhale");
    let tools = out["tools"].as_object().unwrap();
    let names: Vec<&str> = tools.keys().map(String::as_str).collect();
    for n in [
        "read",
        "search",
        "edit",
        "write",
        "shell",
        "codewhale_sandbox_run",
    ] {
        assert!(names.contains(&n), "{names:?}");
        assert_eq!(tools[n]["type"], "object", "{n}");
    }
    // A write inside the workspace ran (positive control) …
    assert_eq!(out["write"]["is_error"], false, "{}", out["write"]);
    assert_eq!(
        std::fs::read_to_string(f.ws.join("hello.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(out["read"]["is_error"], false);
    assert!(out["read"]["text"].as_str().unwrap().starts_with("hi\n"));
    // … one outside would ask: denied with the reason, nothing written.
    let o = &out["outside"];
    assert_eq!(o["is_error"], true, "{o}");
    assert_eq!(o["structured"]["authorization"]["outcome"], "no_response");
    assert!(
        o["text"]
            .as_str()
            .unwrap()
            .contains("outside the workspace"),
        "{o}"
    );
    assert!(!f.root.join("outside.txt").exists());
    // A command ran in the OS sandbox and says how.
    let r = &out["run"];
    assert_eq!(r["is_error"], false, "{r}");
    assert!(r["text"].as_str().unwrap().contains("hi"), "{r}");
    let sb = &r["structured"]["sandbox"];
    assert_eq!(sb["mode"], "workspace-write");
    assert!(sb["backend"].is_string(), "{sb}");
    assert!(sb["level"].is_string(), "{sb}");
    // Bad arguments and an unknown tool are named.
    assert!(out["bad_args"]["text"]
        .as_str()
        .unwrap()
        .contains("argument `content`"));
    assert_eq!(out["unknown"]["code"], -32602);
    assert!(out["unknown"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown tool `no_such_tool`"));
}

#[test]
fn mcp_python_sdk_2x_falls_back_to_initialize_after_server_discover() {
    let f = Fixture::with_config("");
    std::fs::write(f.ws.join("hello.txt"), "hi\n").unwrap();
    let (out, stderr) = run_client(&f, "mcp2", "mcp2_client.py");
    // The probe was refused (our -32601) and the handshake-era
    // `initialize` followed.
    assert!(
        stderr.contains("server/discover answered -32601"),
        "{stderr}"
    );
    assert_eq!(out["discovered"], false);
    assert_eq!(out["initialized"], true);
    assert_eq!(out["protocol_version"], "2025-11-25");
    assert_eq!(out["tools"].as_array().unwrap().len(), 6);
    assert_eq!(out["read_is_error"], false);
    assert!(out["read_text"].as_str().unwrap().starts_with("hi\n"));
}
