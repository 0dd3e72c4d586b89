#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The `openai-responses` wire through `codewhale exec`: the built-in
//! `openai` provider's reasoning model (gpt-5.6) goes to `/v1/responses`
//! with `store: false`, asks for encrypted reasoning and carries each
//! reasoning item into the next request, unchanged, before its call; the
//! streamed events become the same tool calls and results as over Chat
//! Completions.

use crate::common;

use common::cli::*;
use common::scripted_model::{
    call, encrypted, think_call, think_reply, Faithful, ScriptedModel, Wire,
};
use serde_json::{json, Value};

#[test]
fn openai_reasoning_model_uses_responses_and_carries_encrypted_reasoning() {
    let r1 = "Read hello.txt \"first\".\n";
    let model = ScriptedModel::start_faithful(
        Wire::Responses,
        vec![
            think_call(r1, "c1", "read_file", json!({"path": "hello.txt"})),
            call("c2", "read_file", json!({"path": "other.txt"})),
            think_reply("Both read.", "Both say hello."),
        ],
        Faithful {
            responses_reasoning: true,
            ..Faithful::default()
        },
    );
    // The built-in `openai` id at the scripted server; no `kind`: the
    // catalogue's wire for gpt-5.6 applies.
    let f = Fixture::with_config(&format!(
        "[providers.openai]\nbase_url = \"{}\"\napi_key = \"k\"\n",
        model.base_url()
    ));
    std::fs::write(f.ws.join("hello.txt"), "hello world\n").unwrap();
    std::fs::write(f.ws.join("other.txt"), "hello again\n").unwrap();
    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "openai",
        "--reasoning-effort",
        "high",
        "--output-format",
        "stream-json",
        "read both",
    ]);
    let reqs = model.requests();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert_eq!(r.path, "/v1/responses");
        assert_eq!(r.body["store"], false);
        assert_eq!(r.body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(r.body["reasoning"], json!({"effort": "high"}));
        assert_eq!(r.body["model"], "gpt-5.6");
        assert_eq!(r.authorization.as_deref(), Some("Bearer k"));
    }
    let rs = json!({"type": "reasoning", "id": "rs_c1",
                    "summary": [{"type": "summary_text", "text": r1}],
                    "encrypted_content": encrypted(r1)});
    for r in &reqs[1..] {
        let input: &Vec<Value> = r.body["input"].as_array().unwrap();
        let at = input
            .iter()
            .position(|i| *i == rs)
            .expect("reasoning item carried");
        assert_eq!(input[at + 1]["type"], "function_call");
        assert_eq!(input[at + 1]["call_id"], "r-c1");
        let out = input
            .iter()
            .find(|i| i["type"] == "function_call_output" && i["call_id"] == "r-c1")
            .unwrap();
        assert!(
            out["output"].as_str().unwrap().contains("hello world"),
            "{out}"
        );
    }
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["wire"], "openai-responses");
    let uses: Vec<&str> = of_type(&ev, "tool_use")
        .iter()
        .map(|e| e["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(uses, ["r-c1", "c2"]);
    let u = of_type(&ev, "turn_usage");
    assert_eq!(
        (
            u[0]["input_tokens"].clone(),
            u[0]["cached_input_tokens"].clone(),
            u[0]["reasoning_tokens"].clone()
        ),
        (json!(100), json!(60), json!(20))
    );
}
