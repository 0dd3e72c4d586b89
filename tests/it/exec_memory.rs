#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The memory file (docs/MEMORY.md): off by default (not in the prompt, no
//! `remember` tool, even with the file present); with `[memory] enabled =
//! true` its text is in the system prompt, `remember` appends a line (the
//! call is in the stream and the receipt lists it), and the metadata says
//! what went in.

use crate::common;

use common::cli::*;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

fn run(f: &Fixture, args: &[&str]) -> std::process::Output {
    let tmp = f.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    f.cmd(args).env("TMPDIR", &tmp).output().unwrap()
}

fn system(model: &ScriptedModel) -> String {
    model.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn memory_is_off_by_default() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    let f = Fixture::new(&model, "");
    std::fs::write(f.cw_home.join("memory.md"), "- MEMORY LINE\n").unwrap();
    let o = run(
        &f,
        &[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "hi",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let meta = &stdout_lines(&o)[0];
    assert!(
        !meta["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("remember")),
        "{meta}"
    );
    assert_eq!(meta["memory"], Value::Null);
    assert!(!system(&model).contains("MEMORY LINE"));
}

#[test]
fn memory_goes_into_the_prompt_and_remember_appends_a_line() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "m1",
                "remember",
                json!({"text": "prefers tabs\nover spaces"}),
            ),
            reply("noted"),
        ],
    );
    let f = Fixture::new(&model, "[memory]\nenabled = true\n");
    std::fs::write(f.cw_home.join("memory.md"), "- MEMORY LINE\n").unwrap();
    let o = run(
        &f,
        &[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "remember tabs",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    let meta = &ev[0];
    assert!(
        meta["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("remember")),
        "{meta}"
    );
    assert_eq!(meta["memory"]["truncated"], false, "{meta}");
    assert_eq!(meta["memory"]["bytes"], 14, "{meta}");
    let sys = system(&model);
    assert!(
        sys.contains("# Memory") && sys.contains("- MEMORY LINE"),
        "{sys}"
    );
    assert_eq!(
        std::fs::read_to_string(f.cw_home.join("memory.md")).unwrap(),
        "- MEMORY LINE\n- prefers tabs over spaces\n"
    );
    let result = ev.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert_eq!(result["status"], "ok", "{result}");
    let r = run(&f, &["receipts", "--last", "--format", "json"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let receipt = String::from_utf8_lossy(&r.stdout).to_string();
    assert!(receipt.contains("remember"), "{receipt}");

    // Without --auto, a headless run gets no answer to the write question:
    // nothing is appended (positive control above).
    let model2 = ScriptedModel::start(
        Wire::OpenAi,
        vec![call("m2", "remember", json!({"text": "x"})), reply("no")],
    );
    let f2 = Fixture::new(&model2, "[memory]\nenabled = true\n");
    let o = run(
        &f2,
        &[
            "exec",
            "--allowed-tools",
            "remember",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "go",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!f2.cw_home.join("memory.md").exists());
}
