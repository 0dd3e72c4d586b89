#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! A nested repository in the workspace runs nothing on the host through
//! the undo store (`SnapshotStore::drop_embedded`, docs/UNDO.md).
//!
//! Found while testing the seeded first look (session 15): once `git add`
//! has put a nested repository in an index as a gitlink, the next `git
//! add` refreshing that gitlink runs `git status --porcelain=2` inside the
//! nested repository (git's `is_submodule_modified`, submodule.c), with
//! that repository's configuration and attributes: a clean filter they
//! name runs on a file whose stat data changed. A sandboxed command can
//! make such a repository; the store's git runs on the host.
#![cfg(unix)]

use crate::common;

use codewhale::snapshot::Label;
use common::snapshots::{git_at, meta, Fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// `evil/`: a repository whose config names a clean filter (a script that
/// leaves `marker` behind) for every file, as a sandboxed command could
/// write it.
fn hostile_nested_repo(f: &Fixture, marker: &Path) {
    let script = f.tmp.path().join("filter.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.write("evil/f.txt", "data\n");
    let evil = f.ws.join("evil");
    git_at(&evil, &f.user_home, &["init", "-q"]);
    git_at(&evil, &f.user_home, &["add", "f.txt"]);
    git_at(&evil, &f.user_home, &["commit", "-q", "-m", "n"]);
    let script = script.to_str().unwrap();
    git_at(&evil, &f.user_home, &["config", "filter.x.clean", script]);
    f.write("evil/.gitattributes", "* filter=x\n");
}

/// Change `evil/f.txt` keeping its size, with a new mtime: git must read
/// it (through the filter) to know whether it changed.
fn touch_same_size(f: &Fixture, content: &str, age_secs: u64) {
    let p = f.ws.join("evil/f.txt");
    std::fs::write(&p, content).unwrap();
    let t = SystemTime::now() - Duration::from_secs(age_secs);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// Two `git add -A` in a side repository of our own, as the store ran them
/// before: the filter runs (the positive control for the test below).
#[test]
fn a_plain_side_add_runs_the_nested_repositorys_filter() {
    let f = Fixture::new();
    let marker = f.tmp.path().join("ran-control");
    f.write("a.txt", "a\n");
    hostile_nested_repo(&f, &marker);
    let side = f.tmp.path().join("side.git");
    let ws = f.ws.to_str().unwrap().to_string();
    let add = |f: &Fixture| {
        let gd = format!("--git-dir={}", side.display());
        let wt = format!("--work-tree={ws}");
        let mut args = vec![gd.as_str(), wt.as_str()];
        args.extend(["add", "-A", "--ignore-errors", "--", "."]);
        let _ = Command::new("git")
            .args(&args)
            .current_dir(&f.ws)
            .env("HOME", &f.user_home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_INDEX_FILE", f.tmp.path().join("side-index"))
            .output()
            .unwrap();
    };
    git_at(
        f.tmp.path(),
        &f.user_home,
        &["init", "-q", "--bare", "side.git"],
    );
    add(&f);
    touch_same_size(&f, "datb\n", 100);
    add(&f);
    touch_same_size(&f, "datc\n", 50);
    add(&f);
    assert!(
        marker.exists(),
        "git no longer runs a status inside a gitlink: the store test below proves nothing"
    );
}

#[test]
fn the_store_never_runs_a_nested_repositorys_filter() {
    for journal in [false, true] {
        let f = Fixture::new();
        let marker = f.tmp.path().join("ran");
        f.write("a.txt", "a\n");
        f.user_repo();
        hostile_nested_repo(&f, &marker);
        let mut store = f.open();
        if journal {
            store.enable_journal();
        }
        let first = store.snapshot(Label::PreTurn(1), meta()).unwrap();
        for (i, content) in ["datb\n", "datc\n", "datd\n"].iter().enumerate() {
            touch_same_size(&f, content, 100 - 10 * i as u64);
            f.write("a.txt", format!("a{i}\n"));
            store
                .snapshot(Label::PostTurn(i as u64 + 1), meta())
                .unwrap();
        }
        // A store opened afresh (a later run): its full look too.
        drop(store);
        touch_same_size(&f, "date\n", 20);
        let mut again = f.open();
        let last = again.snapshot(Label::PreTurn(9), meta()).unwrap();
        assert!(
            !marker.exists(),
            "journal {journal}: the store ran the nested repository's filter"
        );
        // The nested repository is not in the snapshots; the rest is.
        for id in [first, last] {
            let tree = again.get(id).unwrap().tree.clone();
            let listing = common::snapshots::ls_tree(&again, &tree);
            assert!(listing.contains("a.txt"), "control: {listing}");
            assert!(!listing.contains("evil"), "journal {journal}: {listing}");
        }
        for id in [first, last] {
            let warnings = &again.get(id).unwrap().warnings;
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("nested repository not snapshotted: evil")),
                "journal {journal}, snapshot {id}: {warnings:?}"
            );
        }
        // A restore leaves it alone.
        let before = std::fs::read(f.ws.join("evil/f.txt")).unwrap();
        again.restore(first).unwrap();
        assert_eq!(std::fs::read(f.ws.join("evil/f.txt")).unwrap(), before);
        assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"a\n");
        assert!(
            !marker.exists(),
            "journal {journal}: restore ran the filter"
        );
    }
}

/// A nested repository whose name git's warning cannot carry back (not
/// UTF-8) fails the snapshot instead of staying in the side index; the
/// same repository under a plain name is snapshotted around (the control).
#[test]
fn a_nested_repository_named_in_bytes_fails_the_snapshot() {
    use std::os::unix::ffi::OsStrExt;
    for (name, fails) in [(&b"n\xffx"[..], true), (&b"plain"[..], false)] {
        let f = Fixture::new();
        f.write("a.txt", "a\n");
        let nested = f.ws.join(std::ffi::OsStr::from_bytes(name));
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("f.txt"), "data\n").unwrap();
        git_at(&nested, &f.user_home, &["init", "-q"]);
        git_at(&nested, &f.user_home, &["add", "f.txt"]);
        git_at(&nested, &f.user_home, &["commit", "-q", "-m", "n"]);
        // No user repository: the long way, `git add -A`.
        let mut store = f.open();
        let r = store.snapshot(Label::PreTurn(1), meta());
        if fails {
            let e = r.expect_err("a gitlink it cannot name");
            assert!(e.to_string().contains("does not carry back"), "{e}");
        } else {
            let id = r.unwrap();
            let tree = store.get(id).unwrap().tree.clone();
            let listing = common::snapshots::ls_tree(&store, &tree);
            assert!(
                listing.contains("a.txt") && !listing.contains("plain"),
                "{listing}"
            );
        }
    }
}
