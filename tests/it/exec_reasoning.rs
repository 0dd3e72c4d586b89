#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Reasoning models through `codewhale exec` against the scripted model
//! holding requests to the provider's published rules: DeepSeek's thinking
//! mode refuses (400) a tool-call assistant turn sent back without its
//! `reasoning_content`.

use crate::common;

use common::cli::*;
use common::scripted_model::{think_call, think_reply, Faithful, ScriptedModel, Wire};
use serde_json::{json, Value};

/// The assistant message that made call `id` in a recorded request.
fn assistant_with_call<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["role"] == "assistant"
                && m["tool_calls"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["id"] == id))
        })
        .unwrap_or_else(|| panic!("no assistant message with call {id} in {body}"))
}

/// The default provider's failure (issue #35): with DeepSeek in thinking
/// mode the second request of every tool loop was answered 400 because the
/// first turn's `reasoning_content` was dropped. Now each tool-call turn's
/// reasoning goes back byte for byte in every later request.
#[test]
fn deepseek_thinking_tool_loop_sends_reasoning_back_unchanged() {
    // Reasoning with what a re-encoding would change: quotes, escapes,
    // non-ASCII, trailing spaces and newlines.
    let r1 = "The user wants the greeting. \"hello.txt\" first…\n\tthen réfléchir  \n";
    let r2 = "Read it: 'hello world'. Now a second file \\ path.\n\n";
    let model = ScriptedModel::start_faithful(
        Wire::OpenAi,
        vec![
            think_call(r1, "c1", "read_file", json!({"path": "hello.txt"})),
            think_call(r2, "c2", "read_file", json!({"path": "other.txt"})),
            think_reply("All read.", "Both files say hello."),
        ],
        Faithful {
            deepseek_thinking: true,
            ..Faithful::default()
        },
    );
    let f = Fixture::new(&model, "");
    std::fs::write(f.ws.join("hello.txt"), "hello world\n").unwrap();
    std::fs::write(f.ws.join("other.txt"), "hello again\n").unwrap();
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "read both files",
    ]);
    let reqs = model.requests();
    let statuses: Vec<_> = reqs.iter().map(|r| r.body["messages"].clone()).collect();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}\nrequests: {statuses:#?}",
        stderr(&o)
    );
    assert_eq!(reqs.len(), 3, "one request per step, none refused");
    assert_eq!(model.steps_left(), 0);
    // Request 2 carries turn 1's reasoning; request 3 both, byte-identical.
    assert_eq!(
        assistant_with_call(&reqs[1].body, "c1")["reasoning_content"],
        json!(r1)
    );
    for id_r in [("c1", r1), ("c2", r2)] {
        assert_eq!(
            assistant_with_call(&reqs[2].body, id_r.0)["reasoning_content"].as_str(),
            Some(id_r.1),
            "{}",
            reqs[2].body
        );
    }
    let ev = stdout_lines(&o);
    let usage = of_type(&ev, "turn_usage");
    assert_eq!(usage[0]["reasoning_tokens"], 20, "{:?}", usage[0]);
    assert_eq!(ev.last().unwrap()["status"], "completed");

    // The session file keeps the reasoning (a later turn of the thread
    // sends it back), in its own record.
    let recs = records(&f.session_files()[0]);
    let kept: Vec<&Value> = of_type(&recs, "reasoning");
    assert_eq!(kept.len(), 3, "{recs:#?}");
    assert_eq!(kept[0]["parts"][0]["text"], json!(r1));
}

/// Anthropic with thinking: each thinking block (text and signature)
/// comes back byte-identical at the head of its assistant message in every
/// later request of the tool loop; the budget is the catalogue's for the
/// configured effort. On the old code request 2 lost the block (400).
#[test]
fn anthropic_thinking_blocks_go_back_verbatim_through_the_tool_loop() {
    let r1 = "I should read \"hello.txt\" first —\nthen decide.  ";
    let r2 = "It says hello world.\tNext: other.txt\n";
    let model = ScriptedModel::start_faithful(
        Wire::Anthropic,
        vec![
            think_call(r1, "c1", "read_file", json!({"path": "hello.txt"})),
            think_call(r2, "c2", "read_file", json!({"path": "other.txt"})),
            think_reply("Done.", "Both say hello."),
        ],
        Faithful {
            anthropic_thinking: true,
            ..Faithful::default()
        },
    );
    let f = Fixture::new(&model, "thinking = true\n");
    std::fs::write(f.ws.join("hello.txt"), "hello world\n").unwrap();
    std::fs::write(f.ws.join("other.txt"), "hello again\n").unwrap();
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--reasoning-effort",
        "low",
        "--output-format",
        "stream-json",
        "read both files",
    ]);
    let reqs = model.requests();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        // `low` on a custom provider with `thinking = true`: the built-in
        // budget table's 4,096, with the answer's 8,192 on top.
        assert_eq!(
            r.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert_eq!(r.body["max_tokens"], 4096 + 8192);
    }
    let block = |t: &str| json!({"type": "thinking", "thinking": t, "signature": common::scripted_model::signature(t)});
    // Request 2: turn 1's assistant message starts with its block.
    assert_eq!(reqs[1].body["messages"][1]["content"][0], block(r1));
    // Request 3: both blocks, unchanged.
    assert_eq!(reqs[2].body["messages"][1]["content"][0], block(r1));
    assert_eq!(reqs[2].body["messages"][3]["content"][0], block(r2));
    // The receipt carries no reasoning.
    let r = f.run(&["receipts", "--last", "--format", "json"]);
    let receipt = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(!receipt.contains("I should read"), "{receipt}");
}

/// `reasoning_effort` from each layer, mapped onto DeepSeek's wire: the
/// `thinking` switch and `reasoning_effort` low/high/max.
#[test]
fn reasoning_effort_layers_map_onto_deepseek() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            think_reply("r", "a"),
            think_reply("r", "b"),
            think_reply("r", "c"),
            think_reply("r", "d"),
        ],
    );
    // The built-in `deepseek` id (catalogue model deepseek-flash, whose
    // control is DeepSeek's), pointed at the scripted server.
    let f = Fixture::with_config(&format!(
        "provider = \"deepseek\"\nreasoning_effort = \"max\"\n[providers.deepseek]\nbase_url = \"{}\"\napi_key = \"k\"\n",
        model.base_url()
    ));
    let run = |args: &[&str]| {
        let mut a = vec!["exec"];
        a.extend_from_slice(args);
        a.push("hi");
        let o = f.run(&a);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    run(&[]);
    run(&["--reasoning-effort", "medium"]);
    run(&["--reasoning-effort", "none"]);
    std::fs::create_dir_all(f.ws.join(".codewhale")).unwrap();
    std::fs::write(
        f.ws.join(".codewhale/config.toml"),
        "reasoning_effort = \"minimal\"\n",
    )
    .unwrap();
    run(&[]);
    let got: Vec<(Value, Value)> = model
        .requests()
        .iter()
        .map(|r| {
            (
                r.body["thinking"].clone(),
                r.body["reasoning_effort"].clone(),
            )
        })
        .collect();
    let on = json!({"type": "enabled"});
    assert_eq!(
        got,
        vec![
            (on.clone(), json!("max")),
            (on.clone(), json!("high")),
            (json!({"type": "disabled"}), Value::Null),
            (on, json!("low")),
        ]
    );
}

/// A bad value is refused naming where it came from: the config file,
/// line and key, or the flag.
#[test]
fn a_bad_reasoning_effort_names_its_file_line_and_key_or_flag() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![]);
    let f = Fixture::new(&model, "");
    let cfg = f.cw_home.join("config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("reasoning_effort = \"hgh\"\n{text}")).unwrap();
    let o = f.run(&["exec", "--provider", "custom", "hi"]);
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        err.contains("config.toml") && err.contains("line 1") && err.contains("reasoning_effort"),
        "{err}"
    );
    std::fs::write(&cfg, text).unwrap();
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--reasoning-effort",
        "hgh",
        "hi",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--reasoning-effort") && err.contains("hgh"),
        "{err}"
    );
    assert_eq!(model.requests().len(), 0);
}

/// OpenAI's `reasoning_effort` goes to a custom provider only when it
/// says the model reasons (`thinking = true`).
#[test]
fn openai_effort_only_for_models_that_reason() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![think_reply("r", "a"), think_reply("r", "b")],
    );
    let f = Fixture::new(&model, "");
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--reasoning-effort",
        "xhigh",
        "hi",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cfg = f.cw_home.join("config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}thinking = true\n")).unwrap();
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--reasoning-effort",
        "xhigh",
        "hi",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = model.requests();
    assert!(r[0].body.get("reasoning_effort").is_none(), "{}", r[0].body);
    assert_eq!(r[1].body["reasoning_effort"], "xhigh");
    assert!(r[1].body.get("thinking").is_none());
}
