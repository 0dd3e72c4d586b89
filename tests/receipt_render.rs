#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Receipts of a recorded session (`tests/receipt_fixtures/session.jsonl`:
//! edits, commands approved by you / the posture, a sandbox denial, calls
//! denied by you, held by the floor and left without response, secrets,
//! a bidi override, an interrupted turn): the Markdown snapshot, the JSON
//! checked against the documented schema, and what must never appear.

mod common;

use codewhale::receipt::{self, MAX_ACTIONS};
use common::receipts::validate;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/receipt_fixtures/session.jsonl")
}

fn json_of(path: &Path, turn: Option<u32>) -> Value {
    let r = receipt::from_file(path, turn).expect("receipt");
    serde_json::to_value(&r).expect("json")
}

/// The session file path differs per checkout; show it relative.
fn md_of(path: &Path, turn: Option<u32>) -> String {
    let r = receipt::from_file(path, turn).expect("receipt");
    receipt::render_markdown(&r).replace(env!("CARGO_MANIFEST_DIR"), "[CRATE]")
}

#[test]
fn markdown_of_a_recorded_session() {
    insta::assert_snapshot!("receipt_recorded_md", md_of(&fixture(), None));
}

#[test]
fn markdown_of_one_turn() {
    insta::assert_snapshot!("receipt_recorded_turn2_md", md_of(&fixture(), Some(2)));
}

#[test]
fn json_matches_the_schema_and_the_record() {
    let v = json_of(&fixture(), None);
    validate(&v);
    assert_eq!(v["schema"], "codewhale.receipt/v3");
    assert_eq!(v["title"], "Fix the parser bug…");
    assert_eq!(v["source"]["session_id"], "20261129T101500-0123456789ab");
    assert_eq!(v["source"]["status"], "interrupted");
    assert_eq!(v["postures"]["approval"], "headless");
    assert_eq!(v["postures"]["enforcement"].as_array().unwrap().len(), 1);
    let t = &v["totals"];
    assert_eq!(t["files_changed"], 3);
    assert_eq!(t["lines_added"], 5);
    assert_eq!(t["lines_removed"], 6);
    assert_eq!(t["commands_run"], 3);
    assert_eq!(t["commands_not_run"], 3);
    assert_eq!(t["reads"], 1);
    assert_eq!(t["failed_turns"], 1);
    assert_eq!(
        t["approvals"],
        json!({"asked": 4, "approved": 2, "denied": 1, "no_response": 1})
    );
    let a = v["actions"].as_array().unwrap();
    let by = |id: &str| a.iter().find(|x| x["call_id"] == id).unwrap().clone();
    assert_eq!(by("s1")["status"], "succeeded");
    assert_eq!(by("s1")["decided_by"], "you");
    assert_eq!(by("s1")["exit_code"], 0);
    assert_eq!(by("s1")["files"][0]["path"], "target-report.txt");
    // A v1 session has the label only: the receipt says nothing it did not record.
    assert!(by("s1")["enforcement"]
        .as_str()
        .is_some_and(|l| l.starts_with("bwrap")));
    assert_eq!(by("s1")["enforced"], serde_json::Value::Null);
    assert_eq!(by("s2")["status"], "failed");
    assert_eq!(by("s2")["decided_by"], "sandbox");
    assert_eq!(by("s3")["status"], "stopped_at_approval");
    assert_eq!(by("s3")["decided_by"], "you");
    assert_eq!(by("s4")["status"], "blocked_before_start");
    assert_eq!(by("s4")["decided_by"], "floor");
    assert_eq!(by("s5")["decided_by"], "no_response");
    assert_eq!(by("rd")["kind"], "approval");
    assert_eq!(by("rd")["status"], "blocked_before_start");
    assert_eq!(by("s6")["files"][0]["change"], "deleted");
    assert_eq!(a.last().unwrap()["kind"], "failed_turn");
    assert_eq!(v["omitted_actions"], 0);
    assert!(v["claim_ceiling"]
        .as_str()
        .unwrap()
        .contains("not a safety certification"));
}

#[test]
fn secrets_raw_output_and_controls_never_appear() {
    let md = md_of(&fixture(), None);
    let js = serde_json::to_string(&json_of(&fixture(), None)).unwrap();
    for text in [&md, &js] {
        for banned in [
            "SECRETSECRET",
            "0123456789abcdefABCDEF",
            "test result: ok",
            "fn parse()",
            "\u{202e}",
            "stack",
        ] {
            assert!(!text.contains(banned), "{banned:?} leaked");
        }
    }
    assert!(
        md.contains("\\u{202e}"),
        "the bidi override is shown escaped"
    );
    let v = json_of(&fixture(), None);
    let long = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["call_id"] == "s6")
        .unwrap()["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(long.chars().count(), 200);
    assert!(long.ends_with('…'));
}

#[test]
fn read_only_and_deterministic() {
    let t = tempfile::tempdir().unwrap();
    let copy = t.path().join("s.jsonl");
    std::fs::copy(fixture(), &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let listing = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    };
    let files_before = listing(t.path());
    let a = receipt::from_file(&copy, None).unwrap();
    let b = receipt::from_file(&copy, None).unwrap();
    assert_eq!(a, b);
    assert_eq!(receipt::render_markdown(&a), receipt::render_markdown(&b));
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    assert_eq!(
        listing(t.path()),
        files_before,
        "building a receipt wrote a file"
    );
}

#[test]
fn beyond_the_action_limit_is_counted_not_listed() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("big.jsonl");
    let mut lines = Vec::new();
    let mut seq = 0;
    let mut push = |turn: u32, ev: Value| {
        seq += 1;
        let mut r = json!({"schema": "codewhale.session", "v": 1, "seq": seq,
            "ts": "2026-11-29T10:00:00Z", "thread": "big", "turn": turn});
        r.as_object_mut()
            .unwrap()
            .extend(ev.as_object().unwrap().clone());
        lines.push(r.to_string());
    };
    push(
        0,
        json!({"type": "thread_started", "cwd": "/w", "provider": "p", "model": "m",
        "approval": "headless", "sandbox": "read-only", "codewhale_version": "0"}),
    );
    push(0, json!({"type": "user_message", "text": "many"}));
    let n = MAX_ACTIONS + 5;
    for i in 0..n {
        let id = format!("c{i}");
        push(
            1,
            json!({"type": "tool_call", "call_id": id, "tool": "shell", "args": {"command": "ls"}}),
        );
        push(
            1,
            json!({"type": "approval", "call_id": id, "decision": "deny", "outcome": "deny",
            "decided_by": "rule", "gate": 5, "reason": "r"}),
        );
    }
    push(
        0,
        json!({"type": "thread_completed", "status": "completed"}),
    );
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let v = json_of(&path, None);
    validate(&v);
    assert_eq!(v["actions"].as_array().unwrap().len(), MAX_ACTIONS);
    assert_eq!(v["omitted_actions"], 5);
    assert_eq!(v["totals"]["actions"], n as u64);
    assert_eq!(v["totals"]["commands_not_run"], n as u64);
    assert_eq!(v["postures"]["snapshots"]["enabled"], Value::Null);
    let md = receipt::render_markdown(&receipt::from_file(&path, None).unwrap());
    assert!(md.contains("…and 5 more action(s) not listed"), "{md}");
}

#[test]
fn bad_input_is_named() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("bad.jsonl");
    std::fs::write(&p, "{\"not\": \"a record\"}\n").unwrap();
    let e = receipt::from_file(&p, None).unwrap_err().to_string();
    assert!(e.contains("bad.jsonl") && e.contains("line 1"), "{e}");
    let e = receipt::from_file(&fixture(), Some(7))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no turn 7"), "{e}");
    let e = receipt::find_session(t.path(), "nope")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no session nope"), "{e}");
}

#[test]
fn last_session_is_the_one_started_last() {
    let t = tempfile::tempdir().unwrap();
    let e = receipt::last_session(t.path()).unwrap_err().to_string();
    assert!(e.contains("no sessions"), "{e}");
    let newer = t.path().join("20261129T101501-bbbbbbbbbbbb.jsonl");
    let older = t.path().join("20261129T101500-aaaaaaaaaaaa.jsonl");
    std::fs::write(&newer, "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Written after the newer one (as a recovery would): still older.
    std::fs::write(&older, "").unwrap();
    assert_eq!(receipt::last_session(t.path()).unwrap(), newer);
}

/// A call the posture refused (Plan mode) says why in the Markdown too,
/// not only in the JSON: "denied by the posture" alone names nobody to
/// ask and nothing to change.
#[test]
fn a_posture_denial_shows_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20261201T100000-00000000000a.jsonl");
    let rec = |seq: u32, turn: u32, body: Value| {
        let mut v = json!({"schema": "codewhale.session", "v": 1, "seq": seq,
                           "ts": format!("2026-12-01T10:00:{seq:02}.000Z"),
                           "thread": "20261201T100000-00000000000a", "turn": turn});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        v.to_string()
    };
    let why = "Plan mode: only read-only shell commands run";
    let lines = [
        rec(
            1,
            0,
            json!({"type": "thread_started", "cwd": "/repo", "provider": "p", "model": "m",
                   "approval": "Plan + Ask (interactive)", "sandbox": "read-only",
                   "codewhale_version": "0.1.0"}),
        ),
        rec(2, 0, json!({"type": "user_message", "text": "make x"})),
        rec(3, 1, json!({"type": "turn_started"})),
        rec(
            4,
            1,
            json!({"type": "tool_call", "call_id": "s1", "tool": "shell",
                   "args": {"command": "touch x"}}),
        ),
        rec(
            5,
            1,
            json!({"type": "approval", "call_id": "s1", "decision": "deny", "outcome": "deny",
                   "decided_by": "posture", "gate": 2, "reason": why}),
        ),
        rec(
            6,
            1,
            json!({"type": "tool_result", "call_id": "s1", "tool": "shell", "status": "not_run",
                   "exit_code": null, "duration_ms": 0, "files_touched": [],
                   "error_category": "not_approved", "enforcement": null,
                   "output": "not run", "truncated": false}),
        ),
        rec(7, 1, json!({"type": "turn_completed"})),
        rec(
            8,
            0,
            json!({"type": "thread_completed", "status": "completed"}),
        ),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let md = md_of(&path, None);
    assert!(
        md.contains(&format!(
            "did not run `touch x` · denied by the posture: {why}"
        )),
        "{md}"
    );
    assert!(md.contains("posture `Plan + Ask (interactive)`"), "{md}");
}
