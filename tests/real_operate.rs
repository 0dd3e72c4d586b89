#![cfg(not(feature = "nix-build-sandbox"))]
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Operate's background jobs under the real OS sandbox, through `codewhale
//! exec --auto` (Work + Ask approved, `workspace-write`) and the scripted
//! model (docs/OPERATE.md): a background job runs in the same sandbox as
//! a foreground command — its write outside the workspace fails in the
//! kernel and leaves nothing on the host, while the positive control (a
//! background write inside the workspace) succeeds; `job_output` reports
//! what was enforced.
//!
//! NEEDS THE REAL HOST (a real-sandbox test never silently skips).

mod common;

use common::cli::*;
use common::scripted_model::{call, reply, slow, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::time::Duration;

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
