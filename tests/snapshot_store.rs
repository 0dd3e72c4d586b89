#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Snapshot / modify / undo / restore with real git on real files.
#![cfg(unix)]

mod common;

use codewhale::snapshot::{ChangeKind, Label, SnapshotError, SnapshotMeta, UndoScope};
use common::snapshots::{files, Fixture};
use std::process::Command;

fn meta(session: &str, request: u64) -> SnapshotMeta {
    SnapshotMeta {
        session_id: Some(session.into()),
        request: Some(request),
        turn: Some(request),
        ..Default::default()
    }
}

/// A varied starting tree: text, binary, executable, nested, symlink.
fn seed(f: &Fixture) {
    f.write("a.txt", "one\ntwo\nthree\n");
    f.write("bin.dat", [0u8, 159, 146, 150, 255, 0, 1]);
    f.write("run.sh", "#!/bin/sh\necho hi\n");
    f.chmod("run.sh", 0o755);
    f.write("src/lib/deep.rs", "fn main() {}\n");
    f.write("crlf.txt", "a\r\nb\r\n");
    f.write(".gitattributes", "* text=auto eol=lf\n");
    std::os::unix::fs::symlink("a.txt", f.ws.join("link")).unwrap();
}

#[test]
fn undo_restores_bytes_modes_creations_and_deletions() {
    let f = Fixture::new();
    seed(&f);
    let before = files(&f.ws, &[]);
    let mut store = f.open();
    store.snapshot(Label::PreTurn(1), meta("s1", 1)).unwrap();

    // The request: edit, delete, create (nested), chmod both ways, retarget a symlink.
    f.write("a.txt", "one\nTWO\n");
    std::fs::remove_file(f.ws.join("bin.dat")).unwrap();
    std::fs::remove_dir_all(f.ws.join("src")).unwrap();
    f.write("new/dir/created.txt", "fresh\n");
    f.chmod("run.sh", 0o644);
    f.write("crlf.txt", "changed\n");
    f.chmod("a.txt", 0o755);
    std::fs::remove_file(f.ws.join("link")).unwrap();
    std::os::unix::fs::symlink("run.sh", f.ws.join("link")).unwrap();
    let post = store.snapshot(Label::PostTurn(1), meta("s1", 1)).unwrap();
    assert_ne!(
        files(&f.ws, &[]),
        before,
        "control: the request changed the tree"
    );

    let out = store.undo(&UndoScope::Last).unwrap();
    assert_eq!(out.plan.target, 1);
    assert_eq!(
        files(&f.ws, &[]),
        before,
        "undo must restore byte-for-byte with modes"
    );
    assert!(
        !f.ws.join("new").exists(),
        "created directories are removed"
    );
    let kinds: Vec<_> = out
        .restore
        .changes
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert!(kinds.contains(&("new/dir/created.txt", ChangeKind::Deleted)));
    assert!(kinds.contains(&("bin.dat", ChangeKind::Added)));
    // The undo itself is undoable: back to the post-turn state.
    store.restore(out.restore.pre_restore).unwrap();
    assert_eq!(store.diff(post, out.restore.pre_restore).unwrap(), vec![]);
    assert!(f.ws.join("new/dir/created.txt").exists());
}

#[test]
fn restore_then_undo_the_restore() {
    let f = Fixture::new();
    seed(&f);
    let mut store = f.open();
    let s1 = store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    let state1 = files(&f.ws, &[]);
    f.write("a.txt", "second state\n");
    f.write("extra.txt", "extra\n");
    let s2 = store.snapshot(Label::PostTurn(1), meta("s", 1)).unwrap();
    let state2 = files(&f.ws, &[]);
    // Unsnapshotted work after s2 is captured by the pre-restore snapshot.
    f.write("late.txt", "late\n");
    let state3 = files(&f.ws, &[]);

    let r = store.restore(s1).unwrap();
    assert_eq!(files(&f.ws, &[]), state1);
    let pre = store.get(r.pre_restore).unwrap();
    assert_eq!(pre.label, Label::PreRestore(s1));

    let back = store.restore(r.pre_restore).unwrap();
    assert_eq!(
        files(&f.ws, &[]),
        state3,
        "restoring pre-restore undoes the restore"
    );
    assert_eq!(
        store.get(back.pre_restore).unwrap().tree,
        store.get(s1).unwrap().tree
    );
    store.restore(s2).unwrap();
    assert_eq!(files(&f.ws, &[]), state2);
}

#[test]
fn second_undo_walks_back_one_request_and_scopes_by_session() {
    let f = Fixture::new();
    f.write("f", "v0\n");
    let mut store = f.open();
    let v0 = files(&f.ws, &[]);
    store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    f.write("f", "v1\n");
    store.snapshot(Label::PostTurn(1), meta("s", 1)).unwrap();
    let v1 = files(&f.ws, &[]);
    // Request 2 spans two turns and a tool call: one undo reverts all of it.
    store.snapshot(Label::PreTurn(2), meta("s", 2)).unwrap();
    store
        .snapshot(Label::Tool("call_1".into()), meta("s", 2))
        .unwrap();
    f.write("f", "v2a\n");
    store.snapshot(Label::PostTurn(2), meta("s", 2)).unwrap();
    store.snapshot(Label::PreTurn(3), meta("s", 2)).unwrap();
    f.write("g", "v2b\n");
    store.snapshot(Label::PostTurn(3), meta("s", 2)).unwrap();

    let u1 = store.undo(&UndoScope::Last).unwrap();
    assert_eq!(u1.plan.request.request, 2);
    assert_eq!(files(&f.ws, &[]), v1);
    let u2 = store.undo(&UndoScope::Session("s".into())).unwrap();
    assert_eq!(u2.plan.request.request, 1);
    assert_eq!(files(&f.ws, &[]), v0);
    assert!(matches!(
        store.undo(&UndoScope::Last),
        Err(SnapshotError::NothingToUndo { .. })
    ));
    assert!(matches!(
        store.undo(&UndoScope::Session("other".into())),
        Err(SnapshotError::NothingToUndo { .. })
    ));
}

#[test]
fn diff_reports_kinds_lines_modes_and_binaries() {
    let f = Fixture::new();
    seed(&f);
    let mut store = f.open();
    let a = store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    f.write("a.txt", "one\nTWO\nthree\nfour\n");
    f.write("added.txt", "x\ny\n");
    std::fs::remove_file(f.ws.join("src/lib/deep.rs")).unwrap();
    f.chmod("run.sh", 0o644);
    f.write("bin.dat", [1u8, 0, 2, 0, 3]);
    let b = store.snapshot(Label::PostTurn(1), meta("s", 1)).unwrap();
    let d = store.diff(a, b).unwrap();
    let get = |p: &str| {
        d.iter()
            .find(|c| c.path == p)
            .unwrap_or_else(|| panic!("{p} in {d:?}"))
    };
    assert_eq!(
        (
            get("a.txt").kind,
            get("a.txt").added_lines,
            get("a.txt").removed_lines
        ),
        (ChangeKind::Modified, 2, 1)
    );
    assert_eq!(
        (get("added.txt").kind, get("added.txt").added_lines),
        (ChangeKind::Added, 2)
    );
    assert_eq!(
        (
            get("src/lib/deep.rs").kind,
            get("src/lib/deep.rs").removed_lines
        ),
        (ChangeKind::Deleted, 1)
    );
    assert!(get("run.sh").mode_changed && get("run.sh").added_lines == 0);
    assert!(get("bin.dat").binary);
    assert_eq!(d.len(), 5, "{d:?}");
    assert_eq!(store.diff(b, b).unwrap(), vec![]);
    assert!(matches!(
        store.diff(a, 999),
        Err(SnapshotError::NoSuchSnapshot { id: 999, .. })
    ));
}

fn side_refs(f: &Fixture, store: &codewhale::snapshot::SnapshotStore) -> usize {
    let _ = f;
    let out = Command::new("git")
        .arg(format!("--git-dir={}", store.git_dir().display()))
        .args(["for-each-ref", "refs/codewhale/"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn no_change_snapshot_reuses_the_commit() {
    let f = Fixture::new();
    seed(&f);
    let mut store = f.open();
    let a = store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    let b = store.snapshot(Label::PostTurn(1), meta("s", 1)).unwrap();
    assert_ne!(a, b);
    assert_eq!(store.get(a).unwrap().commit, store.get(b).unwrap().commit);
    assert_eq!(side_refs(&f, &store), 1);
    f.write("a.txt", "changed\n");
    let c = store.snapshot(Label::PreTurn(2), meta("s", 2)).unwrap();
    assert_ne!(store.get(b).unwrap().commit, store.get(c).unwrap().commit);
    assert_eq!(
        side_refs(&f, &store),
        2,
        "control: a change makes a new commit"
    );
}

#[test]
fn keeps_the_newest_fifty_and_survives_reopen() {
    let f = Fixture::new();
    let mut store = f.open();
    for i in 1..=60u64 {
        f.write("counter.txt", format!("{i}\n"));
        store.snapshot(Label::PreTurn(i), meta("s", i)).unwrap();
    }
    let ids: Vec<u64> = store.list().iter().map(|r| r.id).collect();
    assert_eq!(ids, (11..=60).collect::<Vec<_>>());
    assert_eq!(side_refs(&f, &store), 50);
    assert!(matches!(
        store.restore(5),
        Err(SnapshotError::NoSuchSnapshot { id: 5, .. })
    ));
    drop(store);
    let mut store = f.open();
    assert_eq!(store.list().len(), 50);
    store.restore(11).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("counter.txt")).unwrap(),
        "11\n"
    );
    // Ids are never reused after pruning: the pre-restore snapshot is 61.
    assert_eq!(store.list().last().unwrap().id, 61);
}

#[test]
fn size_cap_prunes_oldest_and_collects_garbage() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.max_store_bytes = 600 * 1024;
    opts.size_check_every = 1;
    let mut store = f.open_with(opts);
    // Incompressible 256 KiB per snapshot.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 1..=4u64 {
        let bytes: Vec<u8> = (0..256 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        f.write("blob.bin", &bytes);
        store.snapshot(Label::PreTurn(i), meta("s", i)).unwrap();
        assert!(
            store.store_bytes() <= 600 * 1024 || store.list().len() == 1,
            "after snapshot {i}: {} bytes, {} snapshots",
            store.store_bytes(),
            store.list().len()
        );
    }
    assert!(store.list().len() < 4, "control: the cap pruned something");
    let newest = store.list().last().unwrap().id;
    assert_eq!(newest, 4);
    // What is kept still restores.
    let oldest_kept = store.list().first().unwrap().id;
    store.restore(oldest_kept).unwrap();
}

#[test]
fn two_writers_on_one_store_lose_no_record() {
    let f = Fixture::new();
    f.write("seed", "x");
    let stores: Vec<_> = (0..2).map(|_| f.open()).collect();
    let ws = f.ws.clone();
    let handles: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(w, mut store)| {
            let ws = ws.clone();
            std::thread::spawn(move || {
                for i in 0..10u64 {
                    std::fs::write(ws.join(format!("w{w}-{i}")), "x").unwrap();
                    store
                        .snapshot(Label::PreTurn(i), meta(&format!("s{w}"), i))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut store = f.open();
    store.reload().unwrap();
    let ids: Vec<u64> = store.list().iter().map(|r| r.id).collect();
    assert_eq!(ids, (1..=20).collect::<Vec<_>>());
    // The last snapshot has every file both writers made.
    let last = store.list().last().unwrap().id;
    store.restore(last).unwrap();
    for w in 0..2 {
        for i in 0..10 {
            assert!(f.ws.join(format!("w{w}-{i}")).exists());
        }
    }
}

#[test]
fn resolved_policy_deny_read_is_excluded_after_open() {
    use codewhale::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
    let f = Fixture::new();
    f.write("secret.txt", "DENY-READ-FROM-POLICY-7");
    f.write("plain.txt", "PLAIN-CONTROL-8");
    let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &f.ws);
    policy.extra_deny_read.push("secret.txt".into());
    let facts = HostFacts {
        homes: vec![f.user_home.clone()],
        ..Default::default()
    };
    let resolved = resolve(&policy, &facts).unwrap();
    let mut store = f.open();
    store.exclude_resolved_policy(&resolved);
    store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    let objects = f.side_objects(&store);
    assert!(common::snapshots::contains(&objects, "PLAIN-CONTROL-8"));
    assert!(!common::snapshots::contains(
        &objects,
        "DENY-READ-FROM-POLICY-7"
    ));
}

#[test]
fn nested_repositories_do_not_break_snapshots() {
    let f = Fixture::new();
    f.write("top.txt", "top\n");
    f.write("unborn/file.txt", "u\n");
    f.write("committed/file.txt", "c\n");
    for (dir, commit) in [("unborn", false), ("committed", true)] {
        let run = |args: &[&str]| {
            let st = Command::new("git")
                .args(args)
                .current_dir(f.ws.join(dir))
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
                .output()
                .unwrap();
            assert!(
                st.status.success(),
                "{}",
                String::from_utf8_lossy(&st.stderr)
            );
        };
        run(&["init", "-q"]);
        if commit {
            run(&["add", "-A"]);
            run(&["commit", "-qm", "c"]);
        }
    }
    let mut store = f.open();
    let a = store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    let rec = store.get(a).unwrap();
    assert!(
        rec.warnings.iter().any(|w| w.contains("unborn")),
        "{:?}",
        rec.warnings
    );
    f.write("top.txt", "changed\n");
    f.write("committed/file.txt", "inner change\n");
    store.snapshot(Label::PostTurn(1), meta("s", 1)).unwrap();
    store.undo(&UndoScope::Last).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("top.txt")).unwrap(),
        "top\n"
    );
    // A nested repository is recorded as a pointer only: its files are its own.
    assert_eq!(
        std::fs::read_to_string(f.ws.join("committed/file.txt")).unwrap(),
        "inner change\n"
    );
    assert!(f.ws.join("unborn/file.txt").exists());
}

#[test]
fn file_and_directory_swaps_restore_both_ways() {
    let f = Fixture::new();
    f.write("x", "file x\n");
    f.write("d/inner.txt", "inner\n");
    let mut store = f.open();
    let a = store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    let state_a = files(&f.ws, &[]);
    std::fs::remove_file(f.ws.join("x")).unwrap();
    f.write("x/y", "now a dir\n");
    std::fs::remove_dir_all(f.ws.join("d")).unwrap();
    f.write("d", "now a file\n");
    let b = store.snapshot(Label::PostTurn(1), meta("s", 1)).unwrap();
    let state_b = files(&f.ws, &[]);
    store.restore(a).unwrap();
    assert_eq!(files(&f.ws, &[]), state_a);
    store.restore(b).unwrap();
    assert_eq!(files(&f.ws, &[]), state_b);
}

#[test]
fn unreadable_files_are_skipped_with_a_warning_not_a_failure() {
    let f = Fixture::new();
    f.write("ok.txt", "fine\n");
    f.write("locked.txt", "private\n");
    f.chmod("locked.txt", 0o000);
    let readable = std::fs::read(f.ws.join("locked.txt")).is_ok(); // root can read it
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta("s", 1)).unwrap();
    let rec = store.get(id).unwrap().clone();
    let objects = f.side_objects(&store);
    assert!(common::snapshots::contains(&objects, "fine\n"));
    if readable {
        assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
        assert!(common::snapshots::contains(&objects, "private\n"));
    } else {
        assert!(
            rec.warnings.iter().any(|w| w.contains("locked.txt")),
            "{:?}",
            rec.warnings
        );
    }
    f.chmod("locked.txt", 0o644);
}
