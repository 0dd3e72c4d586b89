#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Receipts and undo end to end without the real execution host: the
//! shared scenario (`common::receipt_scenario`, also run by
//! `real_receipts` with the host) and the snapshots-off case.

mod common;

use common::cli::*;
use common::receipts::*;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

/// The receipts + undo scenario without the execution host: the shell
/// call is disallowed, so the receipt lists it as not run.
#[test]
fn edits_then_undo_and_receipt() {
    common::receipt_scenario::run(common::receipt_scenario::Host::Absent);
}

#[test]
fn snapshots_off_is_said_everywhere_and_the_run_goes_on() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "w1",
                "write_file",
                json!({"path": "a.txt", "content": "x\n"}),
            ),
            reply("ok"),
        ],
    );
    let f = Fixture::new(&model, "");
    // The home directory is always refused as a snapshot workspace.
    let o = f
        .cmd(&[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "go",
        ])
        .current_dir(&f.home)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stderr(&o).contains("snapshots are off"), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["snapshots"]["enabled"], false);
    assert!(ev[0]["snapshots"]["reason"]
        .as_str()
        .unwrap()
        .contains("snapshots are off"));
    assert_eq!(
        std::fs::read_to_string(f.home.join("a.txt")).unwrap(),
        "x\n"
    );
    let recs = records(&f.session_files().pop().unwrap());
    let s = of_type(&recs, "snapshots");
    assert_eq!(s[0]["enabled"], false);
    assert!(of_type(&recs, "snapshot").is_empty());

    let o = f.run(&["receipts", "--format", "json"]);
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&r);
    assert_eq!(r["postures"]["snapshots"]["enabled"], false);
    assert!(r["not_recorded"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("snapshots were off")));
    assert_eq!(r["actions"][0]["files"][0]["path"], "a.txt");
    assert_eq!(r["actions"][0]["files"][0]["change"], "unknown");
    assert!(r["totals"]["lines_added"].is_null());
}
