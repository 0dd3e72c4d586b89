#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Journal snapshots built without the side index (`src/snapshot/treebuild.rs`)
//! hold exactly the tree the index way gives, and the tree a full `git add
//! -A` gives, after any sequence of changes: random writes, removals,
//! executable bits, symlinks, files turned into directories and back,
//! ignored files and a tracked one ignored later, `.env` and deny-read paths — and
//! restores in between, which bring the index up to a built tree before
//! `read-tree -u` (a stale index would leave a built-in file behind).
//! Three stores (own homes) watch one workspace with real git and real
//! inotify.
#![cfg(target_os = "linux")]

use crate::common;

use codewhale::snapshot::{Label, SnapshotStore, SnapshotWay};
use common::snapshots::{full_tree, ls_tree, meta, Fixture};
use proptest::prelude::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const DENY: &[&str] = &["deny"];

/// Paths the random changes pick from: two levels of directories, with
/// ignored (`logs/`, `*.tmp`), secret, deny-read and dependency names.
const DIRS: &[&str] = &[
    "",
    "a/",
    "a/b/",
    "c/",
    "logs/",
    "deny/",
    "node_modules/",
    "a/f1/",
];
const NAMES: &[&str] = &["f1", "f2", "x.tmp", ".env", "b", "keep.tmp"];

#[derive(Clone, Debug)]
enum Op {
    Write { path: usize, body: u8, exec: bool },
    Remove { path: usize },
    RemoveDir { dir: usize },
    Symlink { path: usize, target: u8 },
    Snapshot,
    Restore { back: usize },
}

fn path(i: usize) -> String {
    format!(
        "{}{}",
        DIRS[i / NAMES.len() % DIRS.len()],
        NAMES[i % NAMES.len()]
    )
}

fn op() -> impl Strategy<Value = Op> {
    let n = DIRS.len() * NAMES.len();
    prop_oneof![
        5 => (0..n, any::<u8>(), any::<bool>()).prop_map(|(path, body, exec)| Op::Write { path, body, exec }),
        2 => (0..n).prop_map(|path| Op::Remove { path }),
        1 => (1..DIRS.len()).prop_map(|dir| Op::RemoveDir { dir }),
        1 => (0..n, any::<u8>()).prop_map(|(path, target)| Op::Symlink { path, target }),
        2 => Just(Op::Snapshot),
        1 => (0..4usize).prop_map(|back| Op::Restore { back }),
    ]
}

/// Make `rel`'s parent directories, removing a file or symlink in the way.
fn make_room(ws: &Path, rel: &str) {
    let mut dir = ws.to_path_buf();
    for c in Path::new(rel).parent().unwrap().components() {
        dir.push(c);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&dir).unwrap();
        }
    }
    std::fs::create_dir_all(ws.join(rel).parent().unwrap()).unwrap();
    let p = ws.join(rel);
    match std::fs::symlink_metadata(&p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).unwrap(),
        Ok(_) => std::fs::remove_file(&p).unwrap(),
        Err(_) => {}
    }
}

fn apply(ws: &Path, op: &Op) {
    match op {
        Op::Write {
            path: i,
            body,
            exec,
        } => {
            let rel = path(*i);
            make_room(ws, &rel);
            std::fs::write(ws.join(&rel), format!("{rel} {body}\n")).unwrap();
            let mode = if *exec { 0o755 } else { 0o644 };
            std::fs::set_permissions(ws.join(&rel), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        Op::Remove { path: i } => {
            let p = ws.join(path(*i));
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).unwrap(),
                Ok(_) => std::fs::remove_file(&p).unwrap(),
                Err(_) => {}
            }
        }
        Op::RemoveDir { dir } => {
            let p = ws.join(DIRS[*dir]);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(&p).unwrap();
            }
        }
        Op::Symlink { path: i, target } => {
            let rel = path(*i);
            make_room(ws, &rel);
            std::os::unix::fs::symlink(format!("../t{target}"), ws.join(&rel)).unwrap();
        }
        Op::Snapshot | Op::Restore { .. } => {}
    }
}

fn store(f: &Fixture, home: &str, build_trees: bool) -> SnapshotStore {
    let mut opts = f.opts();
    opts.codewhale_home = f.tmp.path().join(home);
    opts.keeper = None;
    opts.build_trees = build_trees;
    opts.deny_read = DENY.iter().map(|d| f.ws.join(d)).collect();
    let mut s = f.open_with(opts);
    s.enable_journal();
    s
}

fn tree(s: &SnapshotStore, id: u64) -> String {
    s.get(id).unwrap().tree.clone()
}

/// `git ls-tree -r` of snapshot `id`, for a readable failure.
fn listing(s: &SnapshotStore, id: u64) -> String {
    ls_tree(s, &tree(s, id))
}

/// Snapshot both journaled stores and check them against each other and
/// against a full add; how many built (not through the index).
fn compare(
    built: &mut SnapshotStore,
    indexed: &mut SnapshotStore,
    f: &Fixture,
) -> ((u64, u64), bool) {
    let b = built.snapshot(Label::PostTurn(1), meta()).unwrap();
    let way = built.last_way().cloned();
    let i = indexed.snapshot(Label::PostTurn(1), meta()).unwrap();
    assert_eq!(
        listing(built, b),
        listing(indexed, i),
        "built {way:?} vs the index way {:?}; the workspace: {:?}",
        indexed.last_way(),
        common::snapshots::files(&f.ws, &[".git"])
            .keys()
            .collect::<Vec<_>>()
    );
    assert_eq!(tree(built, b), tree(indexed, i));
    // A store of its own sees a tracked ignored file as ignored.
    if !listing(built, b).contains(".tmp\n") {
        assert_eq!(
            tree(built, b),
            full_tree(f, DENY),
            "built {way:?} vs a full add"
        );
    }
    let was_built = matches!(way, Some(SnapshotWay::Journal { index: None, .. }));
    ((b, i), was_built)
}

fn run(ops: &[Op]) -> usize {
    let f = Fixture::new();
    f.write(".gitignore", "logs/\n");
    f.write("a/f1", "one\n");
    f.write("a/b/f2", "two\n");
    f.write("c/keep.tmp", "tracked though ignored\n");
    f.write("logs/x", "ignored\n");
    f.user_repo();
    let mut built = store(&f, "h-built", true);
    let mut indexed = store(&f, "h-index", false);
    let (first, _) = compare(&mut built, &mut indexed, &f);
    // Tracked, then ignored (a `.gitignore` change: a full look in
    // both): the index way updates it, so must the build.
    f.write(".gitignore", "logs/\n*.tmp\n");
    let (second, _) = compare(&mut built, &mut indexed, &f);
    assert!(listing(&built, second.0).contains("\tc/keep.tmp\n"));
    let mut ids = vec![first, second];
    let mut builds = 0;
    for op in ops {
        match op {
            Op::Snapshot => {
                let (id, b) = compare(&mut built, &mut indexed, &f);
                ids.push(id);
                builds += usize::from(b);
            }
            Op::Restore { back } => {
                // Not back to before the `.gitignore` change: files it
                // ignores, which restore leaves alone, would count again.
                let (target, target_i) = ids[ids.len().saturating_sub(1 + back).max(1)];
                built.restore(target).unwrap();
                // The other store too: a restore makes what it restores
                // tracked, ignored or not, and the two must agree on that.
                indexed.restore(target_i).unwrap();
                let (id, b) = compare(&mut built, &mut indexed, &f);
                assert_eq!(
                    listing(&built, id.0),
                    listing(&built, target),
                    "the restored tree"
                );
                ids.push(id);
                builds += usize::from(b);
            }
            other => apply(&f.ws, other),
        }
    }
    let (_, b) = compare(&mut built, &mut indexed, &f);
    builds + usize::from(b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_built_tree_is_the_index_ways_tree(ops in prop::collection::vec(op(), 1..14)) {
        run(&ops);
    }
}

/// A plain edit is built, not taken through the index (so the property
/// above compares the two ways, not the index way with itself).
#[test]
fn plain_edits_are_built() {
    let ops = [
        Op::Write {
            path: 0,
            body: 1,
            exec: false,
        },
        Op::Snapshot,
        Op::Write {
            path: 14,
            body: 2,
            exec: true,
        },
        Op::Remove { path: 0 },
        Op::Snapshot,
        Op::Symlink { path: 7, target: 3 },
    ];
    assert_eq!(run(&ops), 3);
}
