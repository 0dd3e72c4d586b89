#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Receipts and undo with real shell commands through the execution host
//! under the sandbox: the shared scenario (`common::receipt_scenario`, also
//! run by `receipt_e2e` without the host), an interrupted turn, and the
//! landlock tier's partial items reaching every receipt format.

mod common;

use common::cli::*;
use common::receipts::*;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

/// The receipts + undo scenario with the real host: the shell call runs
/// under the sandbox, its file is in the receipt and undo removes it.
#[test]
fn shell_created_file_is_in_the_receipt_and_undone() {
    common::receipt_scenario::run(common::receipt_scenario::Host::Real);
}

/// Ctrl-C while a command runs: the turn is closed with a `post-turn`
/// snapshot, so the receipt still shows what the turn changed, the command
/// as interrupted and the turn as not finished.
#[cfg(unix)]
#[test]
fn interrupted_turn_keeps_its_changes() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![common::scripted_model::Step::Reply {
            text: String::new(),
            calls: vec![
                (
                    "w1".into(),
                    "write_file".into(),
                    json!({"path": "made.txt", "content": "m\n"}).to_string(),
                ),
                (
                    "s1".into(),
                    "shell".into(),
                    json!({"command": "sleep 30"}).to_string(),
                ),
            ],
        }],
    );
    let f = Fixture::new(&model, "");
    let child = f
        .cmd(&[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "go",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = f
            .session_files()
            .first()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_default();
        if text.contains("\"label\":\"tool:s1\"") {
            break;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let recs = records(&f.session_files().pop().unwrap());
    let labels: Vec<&str> = of_type(&recs, "snapshot")
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["pre-turn:1", "tool:w1", "tool:s1", "post-turn:1"]);

    let o = f.run(&["receipts", "--format", "json"]);
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&r);
    let acts = r["actions"].as_array().unwrap();
    assert_eq!(acts[0]["files"][0]["path"], "made.txt");
    assert_eq!(acts[1]["call_id"], "s1");
    assert_eq!(acts[1]["status"], "interrupted");
    assert_eq!(acts[2]["kind"], "failed_turn");
    assert_eq!(r["totals"]["files_changed"], 1);
    assert_eq!(r["source"]["status"], "interrupted");
}

/// A command under the landlock tier (`--backend landlock`, no namespaces):
/// a write-protected path inside the workspace (`.git/hooks`) is one the
/// tier yields by default (`protect_in_writable = "yield"`,
/// docs/LANDLOCK.md). The host's report says so, and that report — backend,
/// level and each item with its reason — reaches stream-json, the session
/// record and both receipt formats instead of being flattened to the label.
#[test]
fn landlock_tier_partial_items_reach_the_receipt() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "s1",
                "shell",
                json!({"command": "printf made > made.txt; cat ../home/.ssh/id_rsa || echo unreadable"}),
            ),
            reply("Done."),
        ],
    );
    let f = Fixture::new(&model, "");
    std::fs::write(f.ws.join("README"), "r\n").unwrap();
    user_repo(&f.ws, &f.home);
    std::fs::create_dir_all(f.home.join(".ssh")).unwrap();
    std::fs::write(f.home.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
    let o = f.run(&[
        "exec",
        "--auto",
        "--backend",
        "landlock",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "make a file",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let ev = stdout_lines(&o);
    let s1 = ev
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "s1")
        .expect("tool_result for s1")
        .clone();
    // The landlock tier really ran the command: the workspace write landed
    // (positive control) and the deny-read key stayed unreadable.
    assert_eq!(s1["status"], "ok", "the landlock tier must run here: {s1}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("made.txt")).unwrap(),
        "made"
    );
    let out = s1["output"].as_str().unwrap();
    assert!(
        out.contains("unreadable") && !out.contains("PRIVATE KEY"),
        "{out}"
    );
    let hooks = f.ws.join(".git/hooks").display().to_string();
    let yielded = |e: &Value| {
        e["partial"].as_array().is_some_and(|p| {
            p.iter().any(|i| {
                i["item"] == "write-protect"
                    && i["path"] == hooks.as_str()
                    && i["reason"].as_str().is_some_and(|r| r.contains("writable"))
            })
        })
    };
    let e = &s1["enforced"];
    assert_eq!(e["backend"], "landlock", "{e}");
    assert_eq!(e["level"], "partial", "{e}");
    assert!(yielded(e), "stream-json lacks the yielded .git/hooks: {e}");

    let recs = records(&f.session_files().pop().unwrap());
    let r = of_type(&recs, "tool_result")
        .into_iter()
        .find(|r| r["call_id"] == "s1")
        .unwrap();
    assert_eq!(r["v"], 2);
    assert!(yielded(&r["enforced"]), "session record: {r}");

    let o = f.run(&["receipts", "--last", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    validate(&r);
    let cmd = r["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["call_id"] == "s1")
        .unwrap()
        .clone();
    assert_eq!(cmd["enforced"]["backend"], "landlock", "{cmd}");
    assert_eq!(cmd["enforced"]["level"], "partial", "{cmd}");
    assert!(yielded(&cmd["enforced"]), "json receipt: {cmd}");

    let o = f.run(&["receipts", "--last", "--format", "md"]);
    let md = String::from_utf8(o.stdout).unwrap();
    let line = md
        .lines()
        .find(|l| l.contains("ran `printf made"))
        .unwrap_or_else(|| panic!("no command line: {md}"));
    assert!(line.ends_with("· sandbox: landlock partial"), "{line}");
    let bullet = format!(
        "   - landlock partial: write-protect `{hooks}`: write-protected inside writable root"
    );
    assert!(md.contains(&bullet), "no {bullet:?} in {md}");
}
