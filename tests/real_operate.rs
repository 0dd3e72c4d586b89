#![cfg(not(feature = "nix-build-sandbox"))]
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Operate's background jobs under the real OS sandbox, through `codewhale
//! exec --auto` (Work + Ask approved, `workspace-write`) and the scripted
//! model (docs/OPERATE.md): a background job runs in the same sandbox as
//! a foreground command — its write outside the workspace fails in the
//! kernel and leaves nothing on the host, while the positive control (a
//! background write inside the workspace) succeeds; `job_output` reports
//! what was enforced;
//! - Operate end to end in a PTY (the real TUI): the to-do list renders
//!   above the input and follows the model's updates, two children's model
//!   requests overlap in time, and a background `sleep 5; echo done` job's
//!   output is read after other work.
//!
//! NEEDS THE REAL HOST (a real-sandbox test never silently skips).

mod common;

use common::cli::*;
use common::pty::{provider_config, FreshHome, Pty};
use common::scripted_model::{call, lane, reply, slow, ScriptedModel, Step, Wire};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

fn result<'a>(ev: &'a [Value], id: &str) -> &'a Value {
    ev.iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}: {ev:#?}"))
}

#[test]
fn a_background_job_runs_in_the_sandbox() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "b1",
                "shell",
                json!({"command": "echo pwned > \"$HOME/outside.txt\"", "background": true}),
            ),
            call(
                "b2",
                "shell",
                json!({"command": "echo inside > inside.txt", "background": true}),
            ),
            slow(
                Duration::from_millis(1500),
                call("r1", "job_output", json!({"id": "job-1"})),
            ),
            call("r2", "job_output", json!({"id": "job-2"})),
            reply("done"),
        ],
    );
    let f = Fixture::new(&model, "");
    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "write in the background",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    for id in ["b1", "b2"] {
        let b = result(&ev, id);
        assert_eq!(b["status"], "ok", "{b}");
        assert!(
            b["output"]
                .as_str()
                .unwrap()
                .contains("started background job"),
            "{b}"
        );
    }
    // Outside the workspace: refused by the kernel, nothing on the host.
    let r1 = result(&ev, "r1");
    assert_ne!(r1["exit_code"], 0, "{r1}");
    assert_ne!(r1["exit_code"], Value::Null, "{r1}");
    let enf = r1["enforcement"].as_str().unwrap_or("");
    assert!(enf.starts_with("sandboxed"), "{r1}");
    assert!(
        !f.home.join("outside.txt").exists(),
        "a background job wrote outside the workspace"
    );
    let out = r1["output"].as_str().unwrap();
    assert!(
        out.contains("Read-only file system")
            || out.contains("Permission denied")
            || out.contains("No such file or directory"),
        "{out}"
    );
    // Positive control: inside the workspace the same kind of job writes.
    let r2 = result(&ev, "r2");
    assert_eq!(r2["exit_code"], 0, "{r2}");
    assert!(r2["enforcement"]
        .as_str()
        .unwrap_or("")
        .starts_with("sandboxed"));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("inside.txt")).unwrap(),
        "inside\n"
    );
}

/// The tool result the model was sent for call `id`, and the request
/// index (in arrival order) that carried it first.
fn sent_result(model: &ScriptedModel, id: &str) -> (usize, String) {
    model
        .requests()
        .iter()
        .enumerate()
        .find_map(|(i, r)| {
            r.body["messages"]
                .as_array()?
                .iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
                .and_then(|m| m["content"].as_str().map(|c| (i, c.to_string())))
        })
        .unwrap_or_else(|| panic!("no tool result {id} was sent"))
}

#[test]
fn operate_end_to_end_in_a_pty() {
    let todo = |s: [&str; 3]| {
        call(
            &format!("t-{}", s.join("-")),
            "todo",
            json!({"items": [
                {"id": "1", "text": "survey the two parts", "status": s[0]},
                {"id": "2", "text": "slow check in the background", "status": s[1]},
                {"id": "3", "text": "other work", "status": s[2]},
            ]}),
        )
    };
    let parent = vec![
        todo(["in_progress", "pending", "pending"]),
        // Two children in one response: they run in parallel.
        Step::Reply {
            text: String::new(),
            calls: vec![
                (
                    "c1".into(),
                    "agent".into(),
                    json!({"role": "explore", "prompt": "CHILD-MARK survey part one"}).to_string(),
                ),
                (
                    "c2".into(),
                    "agent".into(),
                    json!({"role": "explore", "prompt": "CHILD-MARK survey part two"}).to_string(),
                ),
            ],
        },
        call(
            "bg",
            "shell",
            json!({"command": "sleep 5; echo done", "background": true}),
        ),
        call("o1", "shell", json!({"command": "echo other work"})),
        todo(["done", "in_progress", "done"]),
        // The model thinks a while: the job finishes meanwhile.
        slow(
            Duration::from_millis(5500),
            call("r1", "job_output", json!({"id": "job-1"})),
        ),
        todo(["done", "done", "done"]),
        reply("goal complete"),
    ];
    let children = vec![
        slow(Duration::from_millis(1500), reply("part surveyed")),
        slow(Duration::from_millis(1500), reply("part surveyed")),
    ];
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane("parent", None, parent),
            lane("child", Some("CHILD-MARK"), children),
        ],
    );
    let home = FreshHome::new(&provider_config(model.kind(), &model.base_url()));
    let t = Pty::spawn(
        home.command(Path::new(env!("CARGO_BIN_EXE_codewhale"))),
        30,
        100,
    );
    t.wait_for("Ask codewhale", Duration::from_secs(20));
    // Work → Operate.
    t.send(b"\t");
    t.wait_for("Operate", Duration::from_secs(5));
    t.type_text("finish the survey");
    t.send(b"\r");
    // The list renders above the input as the model keeps it.
    let s = t.wait_for("to-do 0/3", Duration::from_secs(30));
    assert!(s.contains("[~] survey the two parts"), "{s}");
    assert!(s.contains("[ ] other work"), "{s}");
    // Questions (commands in Ask) are answered `y`; the turn runs to its end.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut saw_two_done = false;
    while !t.screen().contains("goal complete") {
        let s = t.screen();
        saw_two_done |= s.contains("to-do 2/3");
        if s.contains("approval needed") {
            t.send(b"y");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = t.wait_idle(Duration::from_secs(30));
    assert!(saw_two_done, "the list never showed its update");
    assert!(s.contains("to-do 3/3"), "{s}");
    assert!(s.contains("[x] other work"), "{s}");
    // Two children's model requests were in flight at once.
    assert_eq!(model.lane_left("child"), 0);
    assert!(
        model.peak_in_flight("child") >= 2,
        "children's requests did not overlap (peak {})",
        model.peak_in_flight("child")
    );
    // The job's output was read after the other work, finished.
    let (other_at, other) = sent_result(&model, "o1");
    assert!(other.contains("other work"), "{other}");
    let (read_at, read) = sent_result(&model, "r1");
    assert!(read_at > other_at, "read before the other work");
    assert!(
        read.contains("finished") && read.contains("exit code: 0") && read.contains("\ndone"),
        "{read}"
    );
    let (_, started) = sent_result(&model, "bg");
    assert!(
        started.contains("started background job job-1"),
        "{started}"
    );
    // Operate's prompt reached the parent only.
    let reqs = model.requests();
    let first = reqs
        .iter()
        .find(|r| r.lane.as_deref() == Some("parent"))
        .unwrap();
    assert!(first.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Mode: Operate"));
    t.send(b"\x04");
}
