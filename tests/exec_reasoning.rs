#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Reasoning models through `codewhale exec` against the scripted model
//! holding requests to the provider's published rules: DeepSeek's thinking
//! mode refuses (400) a tool-call assistant turn sent back without its
//! `reasoning_content`.

mod common;

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
