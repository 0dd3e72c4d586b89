#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale restore` reads its trust through `config::load`: `trust =
//! true`, or the Full Access approval posture — which a project override
//! can take away (it may only tighten) but never grant.
#![cfg(unix)]

use crate::common;

use assert_cmd::Command;
use codewhale::snapshot::{Label, SnapshotMeta};
use common::snapshots::Fixture;

fn cw(f: &Fixture) -> Command {
    let mut c = Command::cargo_bin("codewhale").unwrap();
    c.env("CODEWHALE_HOME", &f.home)
        .env("HOME", &f.user_home)
        .env_remove("GIT_DIR")
        .current_dir(&f.ws);
    c
}

/// One request that edits a file; returns the pre-request snapshot id.
fn one_request(f: &Fixture) -> String {
    f.write("a.txt", "original\n");
    f.user_repo();
    let mut store = f.open();
    let meta = SnapshotMeta {
        session_id: Some("sess-1".into()),
        request: Some(1),
        ..Default::default()
    };
    let pre = store.snapshot(Label::PreTurn(1), meta.clone()).unwrap();
    f.write("a.txt", "edited\n");
    store.snapshot(Label::PostTurn(1), meta).unwrap();
    pre.to_string()
}

fn a_txt(f: &Fixture) -> String {
    std::fs::read_to_string(f.ws.join("a.txt")).unwrap()
}

#[test]
fn full_access_trusts_a_restore_unless_the_project_tightens_it() {
    let f = Fixture::new();
    let n = one_request(&f);
    std::fs::write(
        f.home.join("config.toml"),
        "approval_policy = \"full-access\"\n",
    )
    .unwrap();
    // A project override asking for `ask` takes Full Access (and so the
    // trust) away: refused, nothing changed.
    std::fs::create_dir_all(f.ws.join(".codewhale")).unwrap();
    std::fs::write(
        f.ws.join(".codewhale/config.toml"),
        "approval_policy = \"ask\"\n",
    )
    .unwrap();
    let out = cw(&f).args(["restore", &n]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("needs trust"), "{err}");
    assert_eq!(a_txt(&f), "edited\n");
    // Without the override, Full Access is trust.
    std::fs::remove_dir_all(f.ws.join(".codewhale")).unwrap();
    let out = cw(&f).args(["restore", &n]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(a_txt(&f), "original\n");
}

#[test]
fn a_project_override_cannot_grant_trust() {
    let f = Fixture::new();
    let n = one_request(&f);
    std::fs::create_dir_all(f.ws.join(".codewhale")).unwrap();
    std::fs::write(
        f.ws.join(".codewhale/config.toml"),
        "trust = true\napproval_policy = \"full-access\"\n",
    )
    .unwrap();
    let out = cw(&f).args(["restore", &n]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("needs trust"), "{err}");
    assert_eq!(a_txt(&f), "edited\n");
}
