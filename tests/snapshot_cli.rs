#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale undo` and `codewhale restore` as a user runs them.
#![cfg(unix)]

mod common;

use assert_cmd::Command;
use codewhale::snapshot::{Label, SnapshotMeta};
use common::snapshots::{files, Fixture};

fn cw(f: &Fixture) -> Command {
    let mut c = Command::cargo_bin("codewhale").unwrap();
    c.env("CODEWHALE_HOME", &f.home)
        .env("HOME", &f.user_home)
        .env_remove("GIT_DIR")
        .current_dir(&f.ws);
    c
}

fn meta(request: u64) -> SnapshotMeta {
    SnapshotMeta {
        session_id: Some("sess-1".into()),
        request: Some(request),
        ..Default::default()
    }
}

/// One request that edits a file and creates another.
fn one_request(f: &Fixture) -> (u64, u64) {
    f.write("a.txt", "original\n");
    f.user_repo();
    let mut store = f.open();
    let pre = store.snapshot(Label::PreTurn(1), meta(1)).unwrap();
    f.write("a.txt", "edited\n");
    f.write("made-by-shell.txt", "x\n");
    let post = store.snapshot(Label::PostTurn(1), meta(1)).unwrap();
    (pre, post)
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn undo_last_reverts_the_request_without_trust() {
    let f = Fixture::new();
    f.write("a.txt", "original\n");
    let before = files(&f.ws, &[".git"]);
    one_request(&f);
    assert_ne!(files(&f.ws, &[".git"]), before);
    let out = cw(&f).args(["undo", "--last"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Undid request 1 of session sess-1"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("removed made-by-shell.txt"),
        "{}",
        stdout(&out)
    );
    assert_eq!(files(&f.ws, &[".git"]), before);
    // Nothing left to undo: a clear message and exit 1.
    let out = cw(&f).args(["undo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nothing to undo"), "{}", stderr(&out));
}

#[test]
fn restore_requires_trust() {
    let f = Fixture::new();
    let (pre, _) = one_request(&f);
    let edited = files(&f.ws, &[".git"]);
    let n = pre.to_string();

    let out = cw(&f).args(["restore", &n]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("needs trust") && stderr(&out).contains("config.toml"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        files(&f.ws, &[".git"]),
        edited,
        "an untrusted restore changes nothing"
    );

    std::fs::write(f.home.join("config.toml"), "trust = \"yes\"\n").unwrap();
    let out = cw(&f).args(["restore", &n]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("config.toml: key `trust` must be true or false"),
        "{}",
        stderr(&out)
    );

    std::fs::write(f.home.join("config.toml"), "trust = true\n[other]\nx = 1\n").unwrap();
    let out = cw(&f).args(["restore", &n]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("a.txt")).unwrap(),
        "original\n"
    );
    assert!(!f.ws.join("made-by-shell.txt").exists());

    // --trust works without config, and the printed pre-restore id undoes it.
    std::fs::remove_file(f.home.join("config.toml")).unwrap();
    let text = stdout(&out);
    let back = text
        .lines()
        .find_map(|l| l.strip_prefix("To take this restore back: codewhale restore "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no undo hint in {text}"))
        .to_string();
    let out = cw(&f).args(["restore", &back, "--trust"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(files(&f.ws, &[".git"]), edited);
}

#[test]
fn restore_list_text_and_json() {
    let f = Fixture::new();
    one_request(&f);
    let out = cw(&f).args(["restore", "--list"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("pre-turn:1") && text.contains("post-turn:1") && text.contains("sess-1 #1"),
        "{text}"
    );
    let out = cw(&f)
        .args(["restore", "--list", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["label"], "pre-turn:1");
    assert_eq!(snaps[0]["meta"]["session_id"], "sess-1");
    // Bad usage is clap's exit 2.
    let out = cw(&f).args(["restore"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn refused_workspace_says_snapshots_are_off() {
    let f = Fixture::new();
    let out = cw(&f)
        .args(["undo", "-C"])
        .arg(&f.user_home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("snapshots are off") && stderr(&out).contains("home directory"),
        "{}",
        stderr(&out)
    );
    let out = cw(&f)
        .args(["restore", "--list", "-C", "/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("snapshots are off"),
        "{}",
        stderr(&out)
    );
}
