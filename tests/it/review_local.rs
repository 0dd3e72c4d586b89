//! `codewhale review` of a local git working tree: uncommitted changes
//! with an untracked new file, and `--base REF`; the reviewer is
//! read-only (the tree and the index are as they were) and its run is a
//! session like any other.

use crate::common;
use common::cli::{stderr, Fixture};
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn git(ws: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", ws)
        .output()
        .expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn repo(fx: &Fixture) {
    git(&fx.ws, &["init", "-q"]);
    std::fs::write(fx.ws.join("a.txt"), "one\ntwo\n").unwrap();
    git(&fx.ws, &["add", "a.txt"]);
    git(&fx.ws, &["commit", "-q", "-m", "first"]);
    std::fs::write(fx.ws.join("a.txt"), "one\nTWO\n").unwrap();
    std::fs::write(fx.ws.join("new.txt"), "hello untracked\n").unwrap();
}

#[test]
fn the_working_tree_with_an_untracked_file() {
    let answer = json!({
        "summary": "The new file needs a test.",
        "findings": [{"path": "new.txt", "line": 1, "severity": "medium", "title": "untested", "body": "Add a test."}]
    });
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("c1", "read_file", json!({"path": "new.txt"})),
            reply(&answer.to_string()),
        ],
    );
    let fx = Fixture::new(&model, "");
    repo(&fx);
    let status = git(&fx.ws, &["status", "--porcelain"]);
    let o = fx.run(&["review", "--provider", "custom", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"]["kind"], "working_tree");
    assert_eq!(v["findings"][0]["path"], "new.txt");
    // The untracked file is part of what the reviewer was shown.
    let first = model.requests()[0].body.to_string();
    assert!(first.contains("new.txt: Added"), "{first}");
    assert!(first.contains("+hello untracked"), "{first}");
    assert!(first.contains("-two") && first.contains("+TWO"), "{first}");
    // The run was read-only and is a session like any other, with what
    // the reviewer read.
    assert_eq!(git(&fx.ws, &["status", "--porcelain"]), status);
    // The temporary index (in .git here: this fixture's TMPDIR does not
    // exist) is gone.
    let left: Vec<_> = std::fs::read_dir(fx.ws.join(".git"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("codewhale-review-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let session = std::fs::read_to_string(v["session"].as_str().unwrap()).unwrap();
    assert!(
        session.contains("read_file") && session.contains(r#""sandbox":"read-only""#),
        "{session}"
    );
    // …and its receipt says what the reviewer read (one read, no change).
    let r = fx.run(&["receipts", "--last", "--format", "json"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(receipt["postures"]["sandbox"], "read-only", "{receipt}");
    assert_eq!(receipt["totals"]["reads"], 1, "{receipt}");
    assert_eq!(receipt["totals"]["files_changed"], 0, "{receipt}");

    // Markdown by default.
    let model2 = ScriptedModel::start(Wire::OpenAi, vec![reply(&answer.to_string())]);
    let fx2 = Fixture::new(&model2, "");
    repo(&fx2);
    let o = fx2.run(&["review", "--provider", "custom"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.starts_with("# codewhale review: working tree"), "{md}");
    assert!(
        md.contains("### [medium] untested") && md.contains("`new.txt:1`"),
        "{md}"
    );
}

#[test]
fn base_ref_and_nothing_to_review() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply(r#"{"summary":"fine","findings":[]}"#)],
    );
    let fx = Fixture::new(&model, "");
    repo(&fx);
    git(&fx.ws, &["add", "-A"]);
    git(&fx.ws, &["commit", "-q", "-m", "second"]);
    // Clean tree: nothing to review, no model call.
    let o = fx.run(&["review", "--provider", "custom", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(model.requests().is_empty());
    // Since the first commit: both files.
    let o = fx.run(&[
        "review",
        "--provider",
        "custom",
        "--base",
        "HEAD~1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"], json!({"kind": "base", "base": "HEAD~1"}));
    let first = model.requests()[0].body.to_string();
    assert!(first.contains("Changed files (2)"), "{first}");
}
