#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! End to end without a shell command (passes without the real execution
//! host): `exec` edits one file and creates another with the edit tools, and
//! asks for a command that is not available in the run (it must not run);
//! then `undo --last` restores the workspace byte for byte without touching
//! the user's `.git`, and `receipts` shows all of it.

mod receipt_support;
mod support;

use receipt_support::*;
use serde_json::{json, Value};
use support::scripted_model::{call, reply, ScriptedModel, Wire};
use support::*;

#[test]
fn edits_then_undo_and_receipt() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "e1",
                "edit_file",
                json!({"path": "src/parse.rs", "old_string": "old()", "new_string": "new()\n// fixed"}),
            ),
            call(
                "w1",
                "write_file",
                json!({"path": "notes.md", "content": "one\ntwo\n"}),
            ),
            call("x1", "shell", json!({"command": "rm -rf build"})),
            reply("Done."),
        ],
    );
    let f = Fixture::new(&model, "");
    std::fs::create_dir_all(f.ws.join("src")).unwrap();
    std::fs::write(f.ws.join("src/parse.rs"), "fn a() { old() }\n").unwrap();
    std::fs::create_dir_all(f.ws.join("build")).unwrap();
    std::fs::write(f.ws.join("build/keep"), "k").unwrap();
    user_repo(&f.ws, &f.home);
    let before = tree(&f.ws);
    let git_before = tree(&f.ws.join(".git"));

    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--disallowed-tools",
        "shell",
        "--output-format",
        "stream-json",
        "fix the parser\nand write notes",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["snapshots"]["enabled"], true, "{}", ev[0]);
    // The edits happened and the denied command did not run.
    assert_eq!(
        std::fs::read_to_string(f.ws.join("src/parse.rs")).unwrap(),
        "fn a() { new()\n// fixed }\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("notes.md")).unwrap(),
        "one\ntwo\n"
    );
    assert!(f.ws.join("build/keep").exists(), "the denied rm ran");

    // The session records the snapshots and the diffs.
    let session = f.session_files().pop().expect("session file");
    let recs = records(&session);
    assert_seq_contiguous(&recs);
    let labels: Vec<&str> = of_type(&recs, "snapshot")
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "pre-turn:1",
            "tool:e1",
            "post-turn:1",
            "pre-turn:2",
            "tool:w1",
            "post-turn:2"
        ]
    );
    assert!(of_type(&recs, "snapshot")
        .iter()
        .all(|r| r["error"].is_null() && r["request"] == 1));
    let status = of_type(&recs, "snapshots");
    assert_eq!(status.len(), 1);
    assert_eq!(status[0]["enabled"], true);
    let diffs = of_type(&recs, "file_changes");
    assert_eq!(diffs.iter().filter(|r| r["call_id"].is_null()).count(), 2);
    assert_eq!(diffs.iter().filter(|r| r["call_id"] == "e1").count(), 1);

    // Receipt JSON: valid, lists the edits and the call that did not run.
    let o = f.run(&["receipts", "--last", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&r);
    assert_eq!(r["schema"], "codewhale.receipt/v2");
    assert_eq!(r["title"], "fix the parser…");
    assert_eq!(r["totals"]["files_changed"], 2);
    assert_eq!(r["totals"]["lines_added"], 4);
    assert_eq!(r["totals"]["lines_removed"], 1);
    assert_eq!(r["totals"]["commands_run"], 0);
    assert_eq!(r["totals"]["commands_not_run"], 1);
    let acts = r["actions"].as_array().unwrap();
    assert_eq!(acts.len(), 3, "{r:#}");
    assert_eq!(acts[0]["kind"], "file_change");
    assert_eq!(acts[0]["files"][0]["path"], "src/parse.rs");
    assert_eq!(acts[0]["files"][0]["added_lines"], 2);
    assert_eq!(acts[0]["files"][0]["removed_lines"], 1);
    assert_eq!(acts[1]["files"][0]["path"], "notes.md");
    assert_eq!(acts[1]["files"][0]["change"], "added");
    assert_eq!(acts[2]["kind"], "command");
    assert_eq!(acts[2]["command"], "rm -rf build");
    assert_eq!(acts[2]["status"], "blocked_before_start");
    assert_eq!(acts[2]["decided_by"], "posture");
    assert!(acts[2]["exit_code"].is_null());

    // Same session, same receipt; read-only (the session file is unchanged).
    let session_bytes = std::fs::read(&session).unwrap();
    let md1 = f.run(&["receipts", "--format", "md"]);
    let md2 = f.run(&["receipts", session.file_stem().unwrap().to_str().unwrap()]);
    assert_eq!(md1.stdout, md2.stdout);
    assert_eq!(std::fs::read(&session).unwrap(), session_bytes);
    let md = String::from_utf8(md1.stdout).unwrap();
    assert!(
        md.contains("did not run `rm -rf build` · denied by the posture"),
        "{md}"
    );
    insta::assert_snapshot!("receipt_e2e_md", normalise(&md, &f.root));

    // --turn 2 narrows to the second edit.
    let o = f.run(&["receipts", "--last", "--turn", "2", "--format", "json"]);
    let t2: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&t2);
    assert_eq!(t2["actions"].as_array().unwrap().len(), 1);
    assert_eq!(t2["totals"]["files_changed"], 1);
    let o = f.run(&["receipts", "--last", "--turn", "9"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no turn 9"), "{}", stderr(&o));

    // Undo brings the workspace back byte for byte, the user's .git untouched.
    let o = f.run(&["undo", "--last"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(tree(&f.ws), before, "workspace not restored byte for byte");
    assert_eq!(
        tree(&f.ws.join(".git")),
        git_before,
        "the user's .git changed"
    );
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
