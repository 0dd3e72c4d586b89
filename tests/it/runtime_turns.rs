#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! What a runtime-driven turn does beyond `exec`, through the real
//! `codewhale app-server --http` on loopback (reqwest as the client, the
//! scripted model server as the provider): steering, compaction, `remember`
//! as a session rule, the `ask_user` tool and client-executed tools, the
//! thread's system prompt and history replay (tool calls included), the
//! router and cost in turn records and `/v1/usage`, undo snapshots, and an
//! SSE reconnect mid-turn from a Python standard-library client.
#![cfg(unix)]

use crate::common;

use common::cli::Fixture;
use common::runtime::{
    api, count, events_until, first, fixture, new_thread, new_turn, python_http_client,
    turn_receipt, until_completed, Server,
};
use common::scripted_model::{call, reply, reply_with_usage, ScriptedModel, Step, Wire};
use serde_json::{json, Value};

/// A thread body: auto-approved, offering the client tool `open_in_editor`.
fn editor_thread() -> Value {
    json!({"auto_approve": true, "client_tools": [{
        "name": "open_in_editor",
        "description": "Open a file in the user's editor",
        "parameters": {"type": "object", "properties": {"file": {"type": "string"}}}
    }]})
}

fn body_text(model: &ScriptedModel, i: usize) -> String {
    model.requests()[i].body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_history_system_prompt_and_remember() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // Turn 1: a question (outside the workspace: gate 4 asks); the
            // client steers while it waits, then approves with `remember`.
            call(
                "c1",
                "write_file",
                json!({"path": "../o1.txt", "content": "a"}),
            ),
            // The same kind again: passes by session rule, no question.
            call(
                "c2",
                "write_file",
                json!({"path": "../o2.txt", "content": "b"}),
            ),
            reply("first answer"),
            // Turn 2: the history carries turn 1's calls and results.
            reply("second answer"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "20"]);
    let thread = new_thread(
        &s,
        json!({"system_prompt": "Always answer in haiku (thread-rule-5521)."}),
    )
    .await;
    let turn = new_turn(&s, &thread, "write two files").await;
    let evs = events_until(&s, &thread, 0, |e| count(e, "approval.required") == 1).await;
    let approval = first(&evs, "approval.required")["payload"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();

    let (code, b) = api(
        &s,
        "POST",
        &format!("/v1/threads/{thread}/turns/{turn}/steer"),
        Some(json!({"prompt": "also mention steer-marker-9931"})),
    )
    .await;
    assert_eq!(code, 202, "{b}");
    assert_eq!(b["item"]["kind"], "user_message");
    assert_eq!(b["item"]["metadata"]["steered"], true);
    let (code, b) = api(
        &s,
        "POST",
        &format!("/v1/threads/{thread}/turns/turn_nope/steer"),
        Some(json!({"prompt": "x"})),
    )
    .await;
    assert_eq!(code, 404, "{b}");

    let (code, b) = api(
        &s,
        "POST",
        &format!("/v1/approvals/{approval}"),
        Some(json!({"decision": "allow", "remember": true})),
    )
    .await;
    assert_eq!(code, 200, "{b}");
    let all = until_completed(&s, &thread, 1).await;
    assert_eq!(count(&all, "turn.steered"), 1);
    assert_eq!(
        count(&all, "approval.required"),
        1,
        "the second write_file passed by the session rule"
    );
    let items: Vec<&Value> = all
        .iter()
        .filter(|e| e["event"] == "item.failed" || e["event"] == "item.completed")
        .map(|e| &e["payload"]["item"])
        .collect();
    let c2 = items
        .iter()
        .find(|i| i["metadata"]["call_id"] == "c2")
        .unwrap();
    assert_eq!(
        c2["metadata"]["approval"]["decided_by"], "session rule",
        "{c2}"
    );
    // Positive control: the first one was the person's answer.
    let c1 = items
        .iter()
        .find(|i| i["metadata"]["call_id"] == "c1")
        .unwrap();
    assert_eq!(c1["metadata"]["approval"]["decided_by"], "you", "{c1}");
    assert!(!f.root.join("o1.txt").exists() && !f.root.join("o2.txt").exists());
    // The steered input reached the model on its next request, and the
    // thread's system prompt is in every request.
    let first_req = body_text(&model, 0);
    assert!(first_req.contains("thread-rule-5521"), "{first_req}");
    assert!(!first_req.contains("steer-marker-9931"));
    assert!(body_text(&model, 1).contains("steer-marker-9931"));
    // The last record of the steered item says the loop read it.
    let steered = all
        .iter()
        .rev()
        .filter(|e| e["event"] == "item.completed")
        .find(|e| e["payload"]["item"]["metadata"]["steered"] == true)
        .unwrap();
    assert_eq!(steered["payload"]["item"]["metadata"]["delivered"], true);

    // Turn 2: the model is sent turn 1 in full — the calls, their results
    // and the steered message — and the turn is no longer steerable.
    let (code, _) = api(
        &s,
        "POST",
        &format!("/v1/threads/{thread}/turns/{turn}/steer"),
        Some(json!({"prompt": "late"})),
    )
    .await;
    assert_eq!(code, 400, "a completed turn cannot be steered");
    new_turn(&s, &thread, "and now?").await;
    until_completed(&s, &thread, 2).await;
    let req = &model.requests()[3].body;
    let msgs = req["messages"].as_array().unwrap();
    let assistant_calls: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .collect();
    assert_eq!(assistant_calls.len(), 2, "{req}");
    assert_eq!(assistant_calls[0]["tool_calls"][0]["id"], "c1");
    let tool_results: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_results.len(), 2, "{req}");
    assert_eq!(tool_results[1]["tool_call_id"], "c2");
    let text = req.to_string();
    assert!(text.contains("steer-marker-9931") && text.contains("first answer"));
    assert!(text.contains("thread-rule-5521"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_answers_reach_the_model_and_are_never_stored() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "q1",
                "ask_user",
                json!({"questions": [{"id": "color", "question": "Which colour?", "options": ["red", "blue"]}]}),
            ),
            reply("noted"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "20"]);
    let thread = new_thread(&s, json!({})).await;
    new_turn(&s, &thread, "ask me").await;
    let evs = events_until(&s, &thread, 0, |e| count(e, "user_input.required") == 1).await;
    let req = first(&evs, "user_input.required");
    assert_eq!(req["payload"]["questions"][0]["question"], "Which colour?");
    assert_eq!(req["payload"]["tool_call_id"], "q1");
    let input = req["payload"]["input_id"].as_str().unwrap().to_string();
    let (_, d) = api(&s, "GET", &format!("/v1/threads/{thread}"), None).await;
    assert_eq!(d["pending_user_inputs"][0]["id"], input.as_str());
    // Wrong thread: 404 and nothing reaches the turn.
    let (code, _) = api(
        &s,
        "POST",
        &format!("/v1/user-input/thr_other/{input}"),
        Some(json!({"answers": []})),
    )
    .await;
    assert_eq!(code, 404);
    let answer = json!({"answers": [{"id": "color", "label": "ultramarine-7731", "value": "ultramarine-7731"}]});
    let path = format!("/v1/user-input/{thread}/{input}");
    let (code, b) = api(&s, "POST", &path, Some(answer.clone())).await;
    assert_eq!(code, 200, "{b}");
    assert_eq!(b["response_redacted"], true);
    let (code, _) = api(&s, "POST", &path, Some(answer)).await;
    assert_eq!(code, 404, "settled once");
    let all = until_completed(&s, &thread, 1).await;
    assert_eq!(count(&all, "user_input.answered"), 1);
    assert_eq!(
        first(&all, "user_input.answered")["payload"]["response_redacted"],
        true
    );
    assert_eq!(
        first(&all, "turn.completed")["payload"]["turn"]["status"],
        "completed"
    );
    // The model got the answer; no record kept it.
    assert!(body_text(&model, 1).contains("ultramarine-7731"));
    let log = std::fs::read_to_string(f.cw_home.join("runtime/events.jsonl")).unwrap();
    assert!(log.contains("user_input.answered") && !log.contains("ultramarine-7731"));
    for sf in f.session_files() {
        let text = std::fs::read_to_string(&sf).unwrap();
        assert!(!text.contains("ultramarine-7731"), "{}", sf.display());
        assert!(text.contains("response_redacted"), "{}", sf.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_executed_tool_is_requested_and_resolved_once() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("e1", "open_in_editor", json!({"file": "src/main.rs"})),
            reply("opened"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "20"]);
    // Bad tool definitions are refused by field.
    let (code, b) = api(
        &s,
        "POST",
        "/v1/threads",
        Some(json!({"client_tools": [{"name": "shell"}]})),
    )
    .await;
    assert_eq!(code, 400, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("client_tools[0].name"),
        "{b}"
    );
    let thread = new_thread(&s, editor_thread()).await;
    let turn = new_turn(&s, &thread, "open it").await;
    let evs = events_until(&s, &thread, 0, |e| count(e, "tool_call.requested") == 1).await;
    let req = first(&evs, "tool_call.requested");
    assert_eq!(req["payload"]["tool"], "open_in_editor");
    assert_eq!(req["payload"]["arguments"]["file"], "src/main.rs");
    let call_id = req["payload"]["call_id"].as_str().unwrap().to_string();
    // The model was offered the tool.
    assert!(body_text(&model, 0).contains("open_in_editor"));
    let path = format!("/v1/threads/{thread}/turns/{turn}/tool-calls/{call_id}/result");
    let (code, _) = api(
        &s,
        "POST",
        &format!("/v1/threads/{thread}/turns/turn_x/tool-calls/{call_id}/result"),
        Some(json!({"output": "x"})),
    )
    .await;
    assert_eq!(code, 404, "wrong route");
    let (code, b) = api(
        &s,
        "POST",
        &path,
        Some(json!({"output": "editor-result-4410", "success": true})),
    )
    .await;
    assert_eq!(code, 202, "{b}");
    let (code, _) = api(&s, "POST", &path, Some(json!({"output": "again"}))).await;
    assert_eq!(code, 404, "a duplicate result");
    let all = until_completed(&s, &thread, 1).await;
    let resolved = first(&all, "tool_call.resolved");
    assert_eq!(resolved["payload"]["result_accepted"], true);
    assert!(!resolved.to_string().contains("editor-result-4410"));
    assert_eq!(count(&all, "tool_call.resolved"), 1);
    assert!(body_text(&model, 1).contains("editor-result-4410"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_summarises_through_the_model_and_replaces_history() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            reply("old answer"),
            reply("SUMMARY-of-thread-6620"),
            reply("after compaction"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({})).await;
    let (code, b) = api(&s, "POST", &format!("/v1/threads/{thread}/compact"), None).await;
    assert_eq!(code, 400, "nothing to compact yet: {b}");
    new_turn(&s, &thread, "original-prompt-1187").await;
    until_completed(&s, &thread, 1).await;
    let (code, b) = api(&s, "POST", &format!("/v1/threads/{thread}/compact"), None).await;
    assert_eq!(code, 202, "{b}");
    let all = until_completed(&s, &thread, 2).await;
    let item = all
        .iter()
        .filter(|e| e["event"] == "item.completed")
        .map(|e| &e["payload"]["item"])
        .find(|i| i["kind"] == "context_compaction")
        .unwrap();
    assert_eq!(item["metadata"]["summary"], "SUMMARY-of-thread-6620");
    // The summary request carried the history, without tools.
    let sreq = &model.requests()[1].body;
    assert!(sreq.to_string().contains("original-prompt-1187"));
    assert!(sreq
        .get("tools")
        .is_none_or(|t| t.as_array().is_none_or(|a| a.is_empty())));
    new_turn(&s, &thread, "next").await;
    until_completed(&s, &thread, 3).await;
    let next = body_text(&model, 2);
    assert!(next.contains("SUMMARY-of-thread-6620"), "{next}");
    assert!(
        !next.contains("original-prompt-1187"),
        "replaced by the summary"
    );
}

fn router_fixture(a: &ScriptedModel, b: &ScriptedModel) -> Fixture {
    Fixture::with_config(&format!(
        "model = \"auto\"\n\
         [providers.a]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"ka\"\n\
         [providers.b]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"kb\"\n\
         price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n\
         [router]\ncheap = \"a/m-cheap\"\nstrong = \"b/m-strong\"\nretries_per_model = 0\n\
         [router.rules]\nplan = \"cheap\"\n",
        a.base_url(),
        b.base_url()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_choice_and_cost_are_in_the_turn_and_usage() {
    let a = ScriptedModel::start(
        Wire::OpenAi,
        vec![Step::Status {
            code: 503,
            retry_after: None,
            body: "{\"error\":\"scripted 503\"}".into(),
        }],
    );
    let b = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply_with_usage(
            "strong answered",
            json!({"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}),
        )],
    );
    let f = router_fixture(&a, &b);
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({"model": "auto", "mode": "chat"})).await;
    new_turn(&s, &thread, "hi").await;
    let all = until_completed(&s, &thread, 1).await;
    let t = &first(&all, "turn.completed")["payload"]["turn"];
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["effective_provider"], "b", "{t}");
    assert_eq!(t["effective_model"], "m-strong");
    assert_eq!(t["routing"][0]["kind"], "plan");
    assert_eq!(t["routing"][0]["model"], "m-cheap", "the choice");
    assert!(t["routing"][0]["reason"].as_str().unwrap().contains("plan"));
    assert_eq!(t["routing"][0]["used_model"], "m-strong", "the fallback");
    assert_eq!(t["usage"]["input_tokens"], 1000);
    // The context in use: the answering request's prompt plus answer.
    assert_eq!(t["context_tokens"], 1500, "{t}");
    // 1000 in at $1/M + 500 out at $2/M.
    let cost = t["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.002).abs() < 1e-9, "{t}");
    let (_, u) = api(&s, "GET", "/v1/usage?group_by=provider", None).await;
    assert_eq!(u["buckets"][0]["key"], "b", "{u}");
    assert_eq!(u["buckets"][0]["cost"], "0.002000 USD");
    assert_eq!(u["totals"]["unpriced"], 0);

    // The scripted provider of the other tests has no price: unknown.
    let m = ScriptedModel::start(Wire::OpenAi, vec![reply("x")]);
    let f2 = fixture(&m);
    let s2 = Server::start(&f2, &[]);
    let th = new_thread(&s2, json!({"mode": "chat"})).await;
    new_turn(&s2, &th, "hi").await;
    until_completed(&s2, &th, 1).await;
    let (_, u) = api(&s2, "GET", "/v1/usage?group_by=model", None).await;
    assert_eq!(u["buckets"][0]["key"], "scripted", "{u}");
    assert_eq!(u["buckets"][0]["cost"], "unknown", "{u}");
    assert_eq!(u["totals"]["cost"], "unknown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_listed_from_the_undo_store() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "w1",
                "write_file",
                json!({"path": "made.txt", "content": "hello\n"}),
            ),
            reply("written"),
        ],
    );
    let f = fixture(&model);
    std::fs::write(f.ws.join("keep.txt"), "keep\n").unwrap();
    let s = Server::start(&f, &[]);
    let (code, b) = api(&s, "GET", "/v1/snapshots?limit=0", None).await;
    assert_eq!(code, 400, "{b}");
    assert!(b["error"]["message"].as_str().unwrap().starts_with("limit"));
    let thread = new_thread(&s, json!({"auto_approve": true})).await;
    new_turn(&s, &thread, "write").await;
    until_completed(&s, &thread, 1).await;
    assert_eq!(
        std::fs::read_to_string(f.ws.join("made.txt")).unwrap(),
        "hello\n"
    );
    let (code, list) = api(&s, "GET", "/v1/snapshots", None).await;
    assert_eq!(code, 200, "{list}");
    let list = list.as_array().unwrap();
    assert!(!list.is_empty(), "the turn's snapshots are listed");
    let labels: Vec<&str> = list.iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert!(
        labels
            .iter()
            .any(|l| l.starts_with("tool:") || l.starts_with("pre-") || l.starts_with("post-")),
        "{labels:?}"
    );
    assert!(list[0]["timestamp"].as_i64().unwrap() > 1_700_000_000);
    // The same store `codewhale restore --list` reads.
    let o = f.cmd(&["restore", "--list", "--json"]).output().unwrap();
    let cli: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        cli["snapshots"].as_array().unwrap().len(),
        list.len().min(20)
    );
    let (_, one) = api(&s, "GET", "/v1/snapshots?limit=1", None).await;
    assert_eq!(one.as_array().unwrap().len(), 1);
    assert_eq!(one[0]["id"], list[0]["id"], "newest first");
}

/// A Python standard-library client drops its SSE connection mid-turn
/// (while an approval is pending) and reconnects with `Last-Event-ID`:
/// together the two connections hold every durable event exactly once.
#[test]
fn python_client_reconnects_mid_turn_without_gaps_or_duplicates() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "r1",
                "write_file",
                json!({"path": "../r.txt", "content": "x"}),
            ),
            reply("after reconnect"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "30"]);
    let v = python_http_client("runtime_reconnect.py", &s);
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["before_drop"].as_u64().unwrap() >= 1);
    assert!(v["after_reconnect"].as_u64().unwrap() >= 1);
}

/// The server is killed while a turn waits for an approval; the next start
/// closes the turn as `interrupted` with its terminal events durable (the
/// request canceled, `turn.completed`), closes the turn's session file the
/// way `exec` does, and the thread takes a new turn with higher seqs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_servers_open_turn_is_closed_durably_on_the_next_start() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "k1",
                "write_file",
                json!({"path": "../k.txt", "content": "x"}),
            ),
            reply("back again"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "60"]);
    let thread = new_thread(&s, json!({})).await;
    let turn = new_turn(&s, &thread, "go").await;
    let before = events_until(&s, &thread, 0, |e| count(e, "approval.required") == 1).await;
    let last_before = before.last().unwrap()["seq"].as_u64().unwrap();
    drop(s); // SIGKILL

    let s = Server::start(&f, &[]);
    let (_, d) = api(&s, "GET", &format!("/v1/threads/{thread}"), None).await;
    let t = d["turns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == turn.as_str())
        .unwrap();
    assert_eq!(t["status"], "interrupted", "{t}");
    assert_eq!(t["error"], "Interrupted by process restart");
    assert!(d["pending_approvals"].as_array().unwrap().is_empty());
    let all = events_until(&s, &thread, last_before, |e| {
        count(e, "turn.completed") == 1
    })
    .await;
    assert_eq!(all[0]["previous_seq"], last_before);
    assert_eq!(count(&all, "approval.canceled"), 1, "{all:#?}");
    let done = first(&all, "turn.completed");
    assert_eq!(done["payload"]["turn"]["status"], "interrupted");
    // The turn's session file is closed too (receipts read it).
    let sid = t["session_id"].as_str().unwrap();
    let sf = f.cw_home.join("sessions").join(format!("{sid}.jsonl"));
    let text = std::fs::read_to_string(&sf).unwrap();
    assert!(text.contains("\"type\":\"thread_completed\""), "{text}");
    // The thread goes on; new seqs are higher than anything before.
    new_turn(&s, &thread, "again").await;
    let after = until_completed(&s, &thread, 2).await;
    let last = after.last().unwrap();
    assert_eq!(last["payload"]["turn"]["status"], "completed");
    assert!(last["seq"].as_u64().unwrap() > done["seq"].as_u64().unwrap());
}

/// Server turns choose their provider the way `exec` does: with nothing
/// configured and no key, a local Ollama (here the scripted server's
/// `/api/tags` at `OLLAMA_HOST`) answers, and the turn says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_turns_use_the_ollama_fallback_like_exec() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("hi from ollama")]);
    let f = Fixture::with_config("");
    let s = Server::start_env(
        &f,
        &[],
        &[("OLLAMA_HOST", format!("http://127.0.0.1:{}", model.port))],
    );
    let thread = new_thread(&s, json!({"mode": "chat"})).await;
    new_turn(&s, &thread, "hi").await;
    let all = until_completed(&s, &thread, 1).await;
    let t = &first(&all, "turn.completed")["payload"]["turn"];
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["effective_provider"], "ollama", "{t}");
    assert_eq!(t["effective_model"], "scripted-llama:latest");
    let note = all
        .iter()
        .filter(|e| e["event"] == "item.completed")
        .map(|e| &e["payload"]["item"])
        .find(|i| i["kind"] == "status")
        .unwrap();
    assert!(
        note["metadata"]["notes"][0]
            .as_str()
            .unwrap()
            .contains("using the local Ollama"),
        "{note}"
    );
    assert_eq!(model.requests()[0].body["model"], "scripted-llama:latest");
}

/// `dirty` in the thread summary and the workspace status is git's view:
/// an untracked file makes the workspace dirty; a commit makes it clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_dirty_follows_git() {
    let f = Fixture::with_config("");
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(&f.ws)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git (installed by ci/setup)");
        assert!(o.status.success(), "{args:?}: {o:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("new.txt"), "x\n").unwrap();
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({})).await;
    let summary = |v: &Value| -> Value {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == thread.as_str())
            .unwrap()
            .clone()
    };
    let (_, v) = api(&s, "GET", "/v1/threads/summary", None).await;
    let item = summary(&v);
    assert_eq!(item["dirty"], true, "{item}");
    assert_eq!(item["branch"], "main");
    git(&["add", "new.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "x",
    ]);
    let (_, v) = api(&s, "GET", "/v1/threads/summary", None).await;
    let item = summary(&v);
    assert_eq!(item["dirty"], false, "{item}");
    assert_eq!(item["head"].as_str().unwrap().len(), 7);
    let (_, w) = api(&s, "GET", "/v1/workspace/status", None).await;
    assert_eq!(w["dirty"], false, "{w}");
}

/// A question and a client tool call nobody answers end, after
/// `--approval-timeout`, with their one terminal event each and a
/// `no_response` error the model reads on its next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_questions_and_client_calls_time_out_for_the_model() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "u1",
                "ask_user",
                json!({"questions": [{"id": "q", "question": "Anyone?"}]}),
            ),
            call("u2", "open_in_editor", json!({"file": "a.rs"})),
            reply("gave up waiting"),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "1"]);
    let thread = new_thread(&s, editor_thread()).await;
    new_turn(&s, &thread, "wait for me").await;
    let all = until_completed(&s, &thread, 1).await;
    assert_eq!(count(&all, "user_input.required"), 1);
    assert_eq!(count(&all, "user_input.canceled"), 1, "{all:#?}");
    assert_eq!(count(&all, "user_input.answered"), 0);
    assert_eq!(count(&all, "tool_call.requested"), 1);
    assert_eq!(count(&all, "tool_call.timeout"), 1, "{all:#?}");
    assert_eq!(count(&all, "tool_call.resolved"), 0);
    assert_eq!(
        first(&all, "turn.completed")["payload"]["turn"]["status"],
        "completed"
    );
    let after_question = body_text(&model, 1);
    assert!(
        after_question.contains("ask_user: nobody answered within 1 s"),
        "{after_question}"
    );
    let after_call = body_text(&model, 2);
    assert!(
        after_call.contains("open_in_editor: the client returned no result within 1 s"),
        "{after_call}"
    );
}

/// A config with two providers: `alpha` (the default, model-a at `a`) and
/// `beta` (model-b at `b`).
fn two_providers(a: &ScriptedModel, b: &ScriptedModel) -> Fixture {
    Fixture::with_config(&format!(
        "provider = \"alpha\"\n\
         [providers.alpha]\nbase_url = \"{}\"\nmodel = \"model-a\"\n\
         [providers.beta]\nbase_url = \"{}\"\nmodel = \"model-b\"\n",
        a.base_url(),
        b.base_url()
    ))
}

/// `PATCH /v1/threads/{id}` with `provider` (what the TUI's `/provider`
/// does through the runtime) sets the provider of the thread's next turn,
/// resolved as `exec --provider ID` resolves it; `""` goes back to the
/// configured one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patching_a_threads_provider_switches_its_next_turn() {
    let a = ScriptedModel::start(Wire::OpenAi, vec![reply("from a"), reply("from a again")]);
    let b = ScriptedModel::start(Wire::OpenAi, vec![reply("from b")]);
    let f = two_providers(&a, &b);
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({"mode": "chat"})).await;
    new_turn(&s, &thread, "one").await;
    until_completed(&s, &thread, 1).await;
    let (code, t) = api(
        &s,
        "PATCH",
        &format!("/v1/threads/{thread}"),
        Some(json!({"provider": "beta"})),
    )
    .await;
    assert_eq!(code, 200, "{t}");
    assert_eq!(t["thread"]["provider"], "beta", "{t}");
    new_turn(&s, &thread, "two").await;
    let all = until_completed(&s, &thread, 2).await;
    let done: Vec<&Value> = all
        .iter()
        .filter(|e| e["event"] == "turn.completed")
        .collect();
    assert_eq!(done[1]["payload"]["turn"]["effective_provider"], "beta");
    assert_eq!(done[1]["payload"]["turn"]["effective_model"], "model-b");
    assert_eq!(b.requests().len(), 1);
    assert_eq!(b.requests()[0].body["model"], "model-b");
    let (code, t) = api(
        &s,
        "PATCH",
        &format!("/v1/threads/{thread}"),
        Some(json!({"provider": ""})),
    )
    .await;
    assert_eq!(code, 200, "{t}");
    assert!(t["thread"].get("provider").is_none(), "{t}");
    new_turn(&s, &thread, "three").await;
    until_completed(&s, &thread, 3).await;
    assert_eq!(a.requests().len(), 2, "back on the configured provider");
    let (code, t) = api(
        &s,
        "PATCH",
        &format!("/v1/threads/{thread}"),
        Some(json!({"provider": "no such/id"})),
    )
    .await;
    assert_eq!(code, 400, "{t}");
}

/// `POST /v1/threads` takes `provider` as PATCH does: the thread's first
/// turn already runs on it (with that provider's default model, not the
/// server's default one); a malformed id is a 400 naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_thread_can_name_its_provider() {
    let a = ScriptedModel::start(Wire::OpenAi, vec![reply("from a")]);
    let b = ScriptedModel::start(Wire::OpenAi, vec![reply("from b")]);
    let f = two_providers(&a, &b);
    let s = Server::start(&f, &[]);
    let (code, t) = api(
        &s,
        "POST",
        "/v1/threads",
        Some(json!({"mode": "chat", "provider": "beta"})),
    )
    .await;
    assert_eq!(code, 201, "{t}");
    assert_eq!(t["thread"]["provider"], "beta", "{t}");
    let thread = t["thread"]["id"].as_str().unwrap().to_string();
    new_turn(&s, &thread, "one").await;
    let all = until_completed(&s, &thread, 1).await;
    let done = first(&all, "turn.completed");
    assert_eq!(done["payload"]["turn"]["effective_provider"], "beta");
    assert_eq!(done["payload"]["turn"]["effective_model"], "model-b");
    assert_eq!(b.requests().len(), 1);
    assert!(a.requests().is_empty());
    let (code, e) = api(
        &s,
        "POST",
        "/v1/threads",
        Some(json!({"provider": "no such/id"})),
    )
    .await;
    assert_eq!(code, 400, "{e}");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("provider"), "{e}");
    // `""` is the configured provider, as in PATCH.
    let (code, t) = api(&s, "POST", "/v1/threads", Some(json!({"provider": ""}))).await;
    assert_eq!(code, 201, "{t}");
    assert!(t["thread"].get("provider").is_none(), "{t}");
}

/// `POST …/interrupt` while the answer streams: the turn ends
/// `interrupted` with the real cause (a client's request, not "Ctrl-C") in
/// `turn.interrupt_requested`, the turn's error, the session file and the
/// receipt; the cut agent message is `interrupted` (event log and GET),
/// never `completed`; and the receipt's posture is the interactive one a
/// client answers under, not exec's `headless`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_interrupt_is_recorded_as_such_and_cuts_the_message() {
    let text: String = (1..=60).map(|i| format!("line {i}\n")).collect();
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![common::scripted_model::trickle(
            &text,
            60,
            std::time::Duration::from_millis(50),
        )],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({})).await;
    let turn = new_turn(&s, &thread, "answer slowly").await;
    events_until(&s, &thread, 0, |e| count(e, "item.delta") >= 2).await;
    let (code, b) = api(
        &s,
        "POST",
        &format!("/v1/threads/{thread}/turns/{turn}/interrupt"),
        None,
    )
    .await;
    assert_eq!(code, 202, "{b}");
    let all = until_completed(&s, &thread, 1).await;
    let asked = first(&all, "turn.interrupt_requested");
    assert_eq!(asked["payload"]["cause"], "client", "{asked}");
    let done = first(&all, "turn.completed");
    assert_eq!(done["payload"]["turn"]["status"], "interrupted");
    let reason = "interrupted by a runtime client (interrupt request)";
    assert_eq!(done["payload"]["turn"]["error"], reason, "{done}");
    // The cut message: interrupted in the log, never completed.
    let msg_events: Vec<&Value> = all
        .iter()
        .filter(|e| {
            e["payload"]["item"]["kind"] == "agent_message"
                && e["event"] != "item.started"
                && e["event"] != "item.delta"
        })
        .collect();
    assert_eq!(msg_events.len(), 1, "{msg_events:#?}");
    assert_eq!(msg_events[0]["event"], "item.interrupted");
    assert_eq!(msg_events[0]["payload"]["item"]["status"], "interrupted");
    let (_, d) = api(&s, "GET", &format!("/v1/threads/{thread}"), None).await;
    let msg = d["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "agent_message")
        .unwrap();
    assert_eq!(msg["status"], "interrupted", "{msg}");
    let (code, r) = turn_receipt(&s, &thread, &turn).await;
    assert_eq!(code, 200, "{r}");
    let rs = r.to_string();
    assert!(rs.contains(reason), "{rs}");
    assert!(!rs.contains("Ctrl-C"), "{rs}");
    assert_eq!(r["postures"]["approval"], "Work + Ask (interactive)", "{r}");
}
