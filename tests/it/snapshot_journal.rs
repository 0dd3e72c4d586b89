#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Snapshots from the change journal (issue 29, `src/snapshot/journal.rs`)
//! with real git and real inotify: after a run's first (full) snapshot,
//! the next ones add only the paths that changed, and hold exactly the
//! tree a full `git add -A` of the same workspace gives (checked against a
//! second store that never had a journal); `.env`, deny-read and ignored
//! files stay out; anything the journal cannot vouch for makes the next
//! snapshot a full one; restores stay byte-exact.
#![cfg(target_os = "linux")]

use crate::common;

use codewhale::snapshot::{Label, SnapshotStore, SnapshotWay};
use common::snapshots::{contains, files, full_tree, meta, Fixture};

fn journaled(f: &Fixture, deny: &[&str]) -> SnapshotStore {
    let mut opts = f.opts();
    opts.deny_read = deny.iter().map(|d| f.ws.join(d)).collect();
    let mut s = f.open_with(opts);
    s.enable_journal();
    s
}

fn deep(n: usize) -> String {
    (0..n).map(|i| format!("d{i}/")).collect()
}

#[test]
fn journal_snapshots_hold_what_a_full_add_holds() {
    let f = Fixture::new();
    let depth10 = deep(10);
    f.write(&format!("{depth10}deep.txt"), "DEEP-ONE\n");
    f.write("src/a.rs", "a\n");
    f.write("src/gone.rs", "gone\n");
    f.write("old/dir/x.txt", "x\n");
    f.write("keep.txt", "keep\n");
    f.write(".gitignore", "logs/\n*.tmp\n");
    f.write("logs/.keep", "");
    f.user_repo();
    let deny = ["creds", "fresh/creds"];
    let mut store = journaled(&f, &deny);
    let first = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(
        store.last_way(),
        Some(&SnapshotWay::Full { no_journal: None })
    );
    let before = files(&f.ws, &[".git"]);

    // Every kind of change, at depth 10 too.
    f.write(&format!("{depth10}deep.txt"), "DEEP-TWO\n");
    f.write(&format!("{depth10}new/sub/new.txt"), "NEW-DEEP\n");
    f.write("src/a.rs", "a changed\n");
    std::fs::remove_file(f.ws.join("src/gone.rs")).unwrap();
    std::fs::remove_dir_all(f.ws.join("old")).unwrap();
    f.chmod("keep.txt", 0o755);
    f.write("src/.env", "JOURNAL-SECRET-61\n");
    // A new directory with secrets in it: named file by file, the secrets
    // left out.
    f.write("fresh/ok.txt", "FRESH-OK\n");
    f.write("fresh/.env", "JOURNAL-SECRET-66\n");
    f.write("fresh/.env.d/key", "JOURNAL-SECRET-67\n");
    f.write("fresh/creds/token", "JOURNAL-DENY-68\n");
    f.write("creds/token", "JOURNAL-DENY-62\n");
    f.write("logs/run.log", "JOURNAL-IGNORED-63\n");
    f.write("scratch.tmp", "JOURNAL-IGNORED-64\n");
    f.write("node_modules/p/i.js", "JOURNAL-DEP-65\n");
    // Made and removed between two snapshots: never in the index.
    f.write("flash.txt", "x");
    std::fs::remove_file(f.ws.join("flash.txt")).unwrap();

    let second = store.snapshot(Label::PostTurn(1), meta()).unwrap();
    assert!(
        matches!(store.last_way(), Some(SnapshotWay::Journal { paths, .. }) if *paths > 0),
        "{:?}",
        store.last_way()
    );
    assert_eq!(
        store.get(second).unwrap().tree,
        full_tree(&f, &deny),
        "the journal's tree is the full add's"
    );
    let objects = f.side_objects(&store);
    assert!(contains(&objects, "NEW-DEEP"), "control");
    assert!(contains(&objects, "FRESH-OK"), "control");
    for left_out in [
        "JOURNAL-SECRET-61",
        "JOURNAL-DENY-62",
        "JOURNAL-IGNORED-63",
        "JOURNAL-IGNORED-64",
        "JOURNAL-DEP-65",
        "JOURNAL-SECRET-66",
        "JOURNAL-SECRET-67",
        "JOURNAL-DENY-68",
    ] {
        assert!(
            !contains(&objects, left_out),
            "{left_out} in the side store"
        );
    }

    // No change: still from the journal, the same tree.
    let third = store.snapshot(Label::PreTurn(2), meta()).unwrap();
    assert_eq!(
        store.last_way(),
        Some(&SnapshotWay::Journal {
            paths: 0,
            index: None
        })
    );
    assert_eq!(
        store.get(third).unwrap().tree,
        store.get(second).unwrap().tree
    );

    // Restore byte-exact (the excluded files are left alone, as always).
    store.restore(first).unwrap();
    let mut now = files(&f.ws, &[".git"]);
    for extra in [
        "src/.env",
        "creds/token",
        "logs/run.log",
        "scratch.tmp",
        "node_modules/p/i.js",
        "fresh/.env",
        "fresh/.env.d/key",
        "fresh/creds/token",
    ] {
        assert!(now.remove(extra).is_some(), "{extra}");
    }
    assert_eq!(now, before);
    // The restore's own writes are in the journal: the next snapshot is
    // the restored state.
    let after = store.snapshot(Label::PreTurn(3), meta()).unwrap();
    assert!(matches!(
        store.last_way(),
        Some(SnapshotWay::Journal { .. })
    ));
    assert_eq!(
        store.get(after).unwrap().tree,
        store.get(first).unwrap().tree
    );
}

/// A store without a journal, in its own home, for the same workspace.
struct Plain {
    _home: Fixture,
    store: SnapshotStore,
}

impl Plain {
    fn new(f: &Fixture) -> Plain {
        let home = Fixture::new();
        let mut opts = f.opts();
        opts.codewhale_home = home.home.clone();
        let store = f.open_with(opts);
        Plain { _home: home, store }
    }

    /// Its tree of the workspace now (a full `git add -A`).
    fn tree(&mut self) -> String {
        let id = self.store.snapshot(Label::PreTurn(1), meta()).unwrap();
        self.store.get(id).unwrap().tree.clone()
    }
}

#[test]
fn what_the_journal_cannot_vouch_for_is_a_full_snapshot() {
    let f = Fixture::new();
    f.write("a/b/c.txt", "c\n");
    f.write("e/f.txt", "f\n");
    f.user_repo();
    let mut store = journaled(&f, &[]);
    let mut plain = Plain::new(&f);
    store.snapshot(Label::PreTurn(1), meta()).unwrap();
    plain.tree();

    // A directory moved: the watches below it would name old paths.
    std::fs::rename(f.ws.join("a/b"), f.ws.join("e/b")).unwrap();
    let id = store.snapshot(Label::PreTurn(2), meta()).unwrap();
    match store.last_way() {
        Some(SnapshotWay::Full {
            no_journal: Some(why),
        }) => assert!(why.contains("moved"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(id).unwrap().tree, plain.tree());
    // The journal started over with that full snapshot, under new names.
    f.write("e/b/c.txt", "moved and changed\n");
    let id = store.snapshot(Label::PreTurn(3), meta()).unwrap();
    assert!(matches!(
        store.last_way(),
        Some(SnapshotWay::Journal { .. })
    ));
    assert_eq!(store.get(id).unwrap().tree, plain.tree());

    // A .gitignore changed: what `add -A` picks up changes.
    f.write("e/.gitignore", "new.txt\n");
    f.write("e/new.txt", "now ignored\n");
    let id = store.snapshot(Label::PreTurn(4), meta()).unwrap();
    assert!(matches!(
        store.last_way(),
        Some(SnapshotWay::Full {
            no_journal: Some(_)
        })
    ));
    assert_eq!(store.get(id).unwrap().tree, plain.tree());

    // A hard link: a write through one name is not reported at the other.
    std::fs::hard_link(f.ws.join("e/f.txt"), f.ws.join("a/linked.txt")).unwrap();
    let id = store.snapshot(Label::PreTurn(41), meta()).unwrap();
    match store.last_way() {
        Some(SnapshotWay::Full {
            no_journal: Some(why),
        }) => assert!(why.contains("hard links"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(id).unwrap().tree, plain.tree());
    std::fs::write(f.ws.join("a/linked.txt"), "through the link\n").unwrap();
    let id = store.snapshot(Label::PreTurn(42), meta()).unwrap();
    assert!(matches!(
        store.last_way(),
        Some(SnapshotWay::Full {
            no_journal: Some(_)
        })
    ));
    assert_eq!(store.get(id).unwrap().tree, plain.tree());
    std::fs::remove_file(f.ws.join("a/linked.txt")).unwrap();

    // Many changes at once: a full look is cheaper than naming each.
    for i in 0..1001 {
        f.write(&format!("many/f{i}.txt"), format!("{i}\n"));
    }
    let id = store.snapshot(Label::PreTurn(43), meta()).unwrap();
    match store.last_way() {
        Some(SnapshotWay::Full {
            no_journal: Some(why),
        }) => assert!(why.contains("more than 1000 paths"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(id).unwrap().tree, plain.tree());

    // A negation anywhere: no journal at all (it could re-include a
    // directory the journal does not watch).
    f.write(".gitignore", "*.o\n!keep.o\n");
    store.snapshot(Label::PreTurn(5), meta()).unwrap();
    f.write("x.txt", "x\n");
    let id = store.snapshot(Label::PreTurn(6), meta()).unwrap();
    match store.last_way() {
        Some(SnapshotWay::Full {
            no_journal: Some(why),
        }) => assert!(why.contains("negation"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(id).unwrap().tree, plain.tree());
}

/// A run's first full look is taken ahead, while the model answers
/// (`SnapshotStore::look_ahead`, started by the turn loop as the store
/// opens): it records nothing, and the first snapshot after it continues
/// from it, adding only what changed since — a file changed and one made
/// after the look are in it (the journal ran from the look on), and its
/// tree is the full add's.
#[test]
fn a_look_taken_ahead_records_nothing_and_the_first_snapshot_continues_it() {
    let f = Fixture::new();
    f.write("src/a.rs", "a\n");
    f.write("keep.txt", "keep\n");
    f.write("src/.env", "AHEAD-SECRET-71\n");
    f.user_repo();
    let mut store = journaled(&f, &[]);
    assert!(store.look_ahead().unwrap(), "a new store's first look");
    assert!(store.list().is_empty(), "a look ahead records nothing");
    assert_eq!(
        store.last_way(),
        Some(&SnapshotWay::Full { no_journal: None })
    );
    // The journal continues from it now: nothing more to look at ahead.
    assert!(!store.look_ahead().unwrap());

    // What changes after the look (a command, the user, another process).
    f.write("src/a.rs", "AHEAD-CHANGED-72\n");
    f.write("new/b.rs", "AHEAD-NEW-73\n");
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert!(
        matches!(store.last_way(), Some(SnapshotWay::Journal { paths, .. }) if *paths > 0),
        "{:?}",
        store.last_way()
    );
    assert_eq!(store.get(id).unwrap().tree, full_tree(&f, &[]));
    let objects = f.side_objects(&store);
    assert!(contains(&objects, "AHEAD-CHANGED-72"));
    assert!(contains(&objects, "AHEAD-NEW-73"));
    assert!(!contains(&objects, "AHEAD-SECRET-71"));

    // It restores byte-exactly.
    let state = files(&f.ws, &[".git"]);
    f.write("src/a.rs", "later\n");
    std::fs::remove_file(f.ws.join("new/b.rs")).unwrap();
    store.snapshot(Label::PostTurn(1), meta()).unwrap();
    store.restore(id).unwrap();
    assert_eq!(files(&f.ws, &[".git"]), state);
}

/// Without a journal to continue from it, a look taken ahead would only
/// be taken again: none is taken.
#[test]
fn no_look_is_taken_ahead_for_a_store_without_a_journal() {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    f.user_repo();
    let mut store = f.open();
    assert!(!store.look_ahead().unwrap());
    assert_eq!(store.last_way(), None);
    assert!(store.list().is_empty());
}
