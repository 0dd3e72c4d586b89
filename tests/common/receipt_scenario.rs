//! The one receipts + undo scenario, run twice: without the execution host
//! (the shell tool is not offered, so nothing needs a sandbox) and with the
//! real host (the shell command runs under the sandbox and creates a file
//! only the turn snapshots can see). Both runs use the same script, the
//! same workspace and the same checks; only what the shell call does and
//! what follows from it differ, and each run pins its own Markdown receipt.
//!
//! The script: edit `src/parse.rs`, write `notes.md`, run a shell command
//! that writes `third.txt`, then ask for `apply_patch`, which is disallowed
//! in both runs and must not run. Afterwards `receipts` (JSON, Markdown,
//! `--turn`) and `undo --last` are checked against the workspace: restored
//! byte for byte, the user's `.git` untouched.

use super::cli::*;
use super::filters::Filters;
use super::receipts::{tree, user_repo, validate};
use super::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

/// Whether the shell call may run, i.e. whether the real host is needed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Host {
    /// `--disallowed-tools shell,apply_patch`: no command runs.
    Absent,
    /// `--disallowed-tools apply_patch`: the shell call runs in the sandbox.
    Real,
}

const SHELL: &str = "sh -c 'printf \"three\\n\" > third.txt'";

/// Run the scenario; panics with the first difference.
pub fn run(host: Host) {
    let real = host == Host::Real;
    // One wire per run, so both wires carry the whole scenario.
    let wire = if real { Wire::Anthropic } else { Wire::OpenAi };
    let model = ScriptedModel::start(
        wire,
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
            call("s1", "shell", json!({ "command": SHELL })),
            call(
                "p1",
                "apply_patch",
                json!({"patch": "--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+x\n"}),
            ),
            reply("Done."),
        ],
    );
    let f = Fixture::new(&model, "");
    std::fs::create_dir_all(f.ws.join("src")).unwrap();
    std::fs::write(f.ws.join("src/parse.rs"), "fn a() { old() }\n").unwrap();
    user_repo(&f.ws, &f.home);
    let before = tree(&f.ws);
    let git_before = tree(&f.ws.join(".git"));

    let disallowed = if real {
        "apply_patch"
    } else {
        "shell,apply_patch"
    };
    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--disallowed-tools",
        disallowed,
        "--output-format",
        "stream-json",
        "fix the parser\nand write notes",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["snapshots"]["enabled"], true, "{}", ev[0]);
    let s1 = ev
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "s1")
        .expect("tool_result for s1");
    if real {
        assert_eq!(
            s1["status"], "ok",
            "the shell command did not run through the sandbox: {s1}"
        );
    } else {
        assert_ne!(s1["status"], "ok", "a disallowed shell call ran: {s1}");
    }
    // The edits happened; the shell's file exists only where it may run;
    // the disallowed patch never applied.
    assert_eq!(
        std::fs::read_to_string(f.ws.join("src/parse.rs")).unwrap(),
        "fn a() { new()\n// fixed }\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("notes.md")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(f.ws.join("third.txt").exists(), real, "third.txt");
    assert!(!f.ws.join("x").exists(), "the disallowed apply_patch ran");

    // The session records the snapshots: one pair per request around every
    // tool that may change the workspace, and the diffs.
    let session = f.session_files().pop().expect("session file");
    let recs = records(&session);
    assert_seq_contiguous(&recs);
    let labels: Vec<&str> = of_type(&recs, "snapshot")
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    let mut want = vec![
        "pre-turn:1",
        "tool:e1",
        "post-turn:1",
        "pre-turn:2",
        "tool:w1",
        "post-turn:2",
    ];
    if real {
        want.extend(["pre-turn:3", "tool:s1", "post-turn:3"]);
    }
    assert_eq!(labels, want);
    assert!(of_type(&recs, "snapshot")
        .iter()
        .all(|r| r["error"].is_null() && r["request"] == 1));

    // Receipt JSON: valid, every action in order, totals that add up.
    let o = f.run(&["receipts", "--last", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&r);
    assert_eq!(r["schema"], "codewhale.receipt/v3");
    assert_eq!(r["title"], "fix the parser…");
    let acts = r["actions"].as_array().unwrap();
    let ids: Vec<&str> = acts
        .iter()
        .map(|a| a["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["e1", "w1", "s1", "p1"], "{r:#}");
    assert_eq!(acts[0]["kind"], "file_change");
    assert_eq!(acts[0]["files"][0]["path"], "src/parse.rs");
    assert_eq!(acts[0]["files"][0]["added_lines"], 2);
    assert_eq!(acts[0]["files"][0]["removed_lines"], 1);
    assert_eq!(acts[1]["files"][0]["path"], "notes.md");
    assert_eq!(acts[1]["files"][0]["change"], "added");
    let cmd = &acts[2];
    assert_eq!(cmd["kind"], "command");
    assert_eq!(cmd["command"], SHELL);
    if real {
        assert_eq!(cmd["status"], "succeeded");
        assert_eq!(cmd["exit_code"], 0);
        assert_eq!(cmd["files"][0]["path"], "third.txt");
        assert_eq!(cmd["files"][0]["change"], "added");
        assert!(!r["postures"]["enforcement"].as_array().unwrap().is_empty());
    } else {
        assert_eq!(cmd["status"], "blocked_before_start");
        assert_eq!(cmd["decided_by"], "posture");
        assert!(cmd["exit_code"].is_null());
    }
    assert_eq!(acts[3]["status"], "blocked_before_start");
    let t = &r["totals"];
    assert_eq!(t["files_changed"], if real { 3 } else { 2 });
    assert_eq!(t["lines_added"], if real { 5 } else { 4 });
    assert_eq!(t["lines_removed"], 1);
    assert_eq!(t["commands_run"], if real { 1 } else { 0 });
    // The patch is not a command; the disallowed shell call is one.
    assert_eq!(t["commands_not_run"], if real { 0 } else { 1 });

    // Same session, same receipt, and reading it is read-only.
    let session_bytes = std::fs::read(&session).unwrap();
    let md1 = f.run(&["receipts", "--format", "md"]);
    let md2 = f.run(&["receipts", session.file_stem().unwrap().to_str().unwrap()]);
    assert_eq!(md1.stdout, md2.stdout);
    assert_eq!(std::fs::read(&session).unwrap(), session_bytes);
    let md = String::from_utf8(md1.stdout).unwrap();
    assert!(md.contains("did not apply a patch"), "{md}");
    if real {
        assert!(md.contains("   - created `third.txt` (+1 −0)"), "{md}");
    } else {
        assert!(
            md.contains(&format!("did not run `{SHELL}` · denied by the posture")),
            "{md}"
        );
    }
    // The backend, its level and what it did not enforce are the host's to
    // word (bwrap here, the landlock tier with bubblewrap hidden); the
    // landlock receipt test pins those.
    let mut filters = Filters::new().path(&f.root, "[ROOT]");
    if real {
        filters = filters
            .pattern(
                r"\(enforcement: [^)]*\) · ",
                "(enforcement: [ENFORCEMENT]) · ",
            )
            .pattern(
                r" · sandbox: [a-z]+(?: [a-z]+)?\n",
                " · sandbox: [SANDBOX]\n",
            )
            .pattern(
                r"(?m)^   - (?:bwrap|landlock|seatbelt|opensandbox|unsandboxed)[^\n]*\n",
                "",
            );
    }
    let name = if real {
        "receipt_scenario_real_host_md"
    } else {
        "receipt_scenario_no_host_md"
    };
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| filters.bind(|| insta::assert_snapshot!(name, md)));

    // --turn 2 narrows to the second edit; a turn that does not exist is an
    // error naming it.
    let o = f.run(&["receipts", "--last", "--turn", "2", "--format", "json"]);
    let t2: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&t2);
    assert_eq!(t2["actions"].as_array().unwrap().len(), 1);
    assert_eq!(t2["totals"]["files_changed"], 1);
    let o = f.run(&["receipts", "--last", "--turn", "9"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no turn 9"), "{}", stderr(&o));

    // Undo brings the workspace back byte for byte (the shell-made file
    // too), the user's .git untouched.
    let o = f.run(&["undo", "--last"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(
        !f.ws.join("third.txt").exists(),
        "undo left the shell-made file"
    );
    assert_eq!(tree(&f.ws), before, "workspace not restored byte for byte");
    assert_eq!(
        tree(&f.ws.join(".git")),
        git_before,
        "the user's .git changed"
    );
}
