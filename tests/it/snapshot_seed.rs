#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The first snapshot starts from the user's index and objects (issue 29,
//! `src/snapshot/seed.rs`), with real git: what is snapshotted is what the
//! long way would have taken, a restore survives the user's `git gc
//! --prune=now`, and the user's `.git` is never written.
#![cfg(unix)]

use crate::common;

use codewhale::snapshot::seed::NoSeed;
use codewhale::snapshot::{Label, Opened, SnapshotStore};
use common::snapshots::{contains, files, git_at, manifest, meta, Fixture};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// Paths of a snapshot's tree, from the side repository.
fn tree_paths(store: &SnapshotStore, id: u64) -> Vec<String> {
    let rec = store.get(id).unwrap();
    let out = Command::new("git")
        .arg(format!("--git-dir={}", store.git_dir().display()))
        .args(["ls-tree", "-r", "--name-only", "-z", &rec.tree])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// Every file under the user's `.git` with its bytes, mode, mtime and
/// inode; and every directory with its mtime.
fn git_dir_state(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32, i64, i64, u64)> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        let bytes = if m.is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(
            e.path().display().to_string(),
            (bytes, m.mode(), m.mtime(), m.mtime_nsec(), m.ino()),
        );
    }
    out
}

/// Set every file's mtime an hour back, before the user's git indexes
/// them: an entry as new as the index is "racily clean" and git hashes
/// the file again, so a test would never see a blob taken from the user's
/// store.
fn age_files(ws: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in walkdir::WalkDir::new(ws) {
        let e = e.unwrap();
        if e.file_type().is_file() && !e.path().components().any(|c| c.as_os_str() == ".git") {
            std::fs::File::options()
                .write(true)
                .open(e.path())
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
}

/// A user repository with committed files of every kind the store treats
/// specially, then local changes.
fn repo_with_everything(f: &Fixture) {
    f.write("src/main.rs", "fn main() {}\n");
    f.write("src/lib.rs", "pub fn lib() {}\n");
    f.write("docs/readme.md", "read me\n");
    f.write("lib/util.rs", "pub fn util() {}\n");
    f.write(".env", "TRACKED-SECRET-41\n");
    f.write("node_modules/pkg/index.js", "TRACKED-DEPENDENCY-42\n");
    f.write("creds/token.txt", "TRACKED-DENY-READ-43\n");
    f.write("ignored/forced.txt", "FORCED-44\n");
    f.write(".gitignore", "ignored/\n");
    age_files(&f.ws);
    f.user_git(&["init", "-q"]);
    f.user_git(&["add", "-A"]);
    f.user_git(&["add", "-f", "node_modules", "ignored/forced.txt"]);
    f.user_git(&["commit", "-q", "-m", "initial"]);
    // Local changes the user's index does not know about.
    f.write("src/lib.rs", "pub fn lib() { changed() }\n");
    f.write("new.txt", "untracked\n");
    // Untracked files the seeded look finds by name beside `add -u`: the
    // store's rules leave out the secret, the deny-read file and the
    // ignored ones.
    f.write("newdir/keep.txt", "kept\n");
    f.write("newdir/.env", "UNTRACKED-SECRET-45\n");
    f.write("creds/new.txt", "UNTRACKED-DENY-READ-46\n");
    f.write("ignored/new.txt", "UNTRACKED-IGNORED-47\n");
    f.write("build/out.o", "UNTRACKED-BUILD-48\n");
    std::fs::remove_file(f.ws.join("docs/readme.md")).unwrap();
}

#[test]
fn a_seeded_snapshot_holds_what_the_long_way_holds() {
    let f = Fixture::new();
    repo_with_everything(&f);
    let git_before = git_dir_state(&f.ws.join(".git"));

    let mut opts = f.opts();
    opts.deny_read = vec![f.ws.join("creds")];
    let mut store = f.open_with(opts.clone());
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_seeded(&store);
    let seeded = tree_paths(&store, id);
    // Also once the background blob copy, which reads the user's objects,
    // has ended.
    store.finish_copy().unwrap();
    assert!(
        git_dir_state(&f.ws.join(".git")) == git_before,
        "the user's .git changed"
    );

    // The same workspace the long way: a second home, the user's index
    // hidden from the seed by a `.gitattributes` nobody minds.
    let g = Fixture::new();
    let long_home = g.home.clone();
    let mut long_opts = opts.clone();
    long_opts.codewhale_home = long_home;
    std::fs::write(f.ws.join(".git/info/attributes"), "").unwrap();
    let mut long = f.open_with(long_opts);
    let lid = long.snapshot(Label::PreTurn(1), meta()).unwrap();
    std::fs::remove_file(f.ws.join(".git/info/attributes")).unwrap();
    assert_eq!(long.seeded_from_user_index(), Some(false));
    assert!(matches!(long.seed_refusal(), Some(NoSeed::Conversions(_))));
    assert_eq!(seeded, tree_paths(&long, lid), "same paths both ways");
    assert_eq!(
        store.get(id).unwrap().tree,
        long.get(lid).unwrap().tree,
        "same tree both ways"
    );
    for kept in ["src/lib.rs", "new.txt", "newdir/keep.txt"] {
        assert!(
            seeded.contains(&kept.to_string()),
            "{kept} not in {seeded:?}"
        );
    }
    for gone in [
        ".env",
        "node_modules/pkg/index.js",
        "creds/token.txt",
        "ignored/forced.txt",
        "docs/readme.md",
        "newdir/.env",
        "creds/new.txt",
        "ignored/new.txt",
        "build/out.o",
    ] {
        assert!(!seeded.contains(&gone.to_string()), "{gone} in {seeded:?}");
    }
    // Not one byte of what is left out entered the side store, though the
    // user's store holds them all.
    let objects = f.side_objects(&store);
    assert!(contains(&objects, "changed()"), "control");
    assert!(
        contains(&objects, "fn main() {}"),
        "copied from the user's store"
    );
    for secret in [
        "TRACKED-SECRET-41",
        "TRACKED-DEPENDENCY-42",
        "TRACKED-DENY-READ-43",
        "FORCED-44",
        "UNTRACKED-SECRET-45",
        "UNTRACKED-DENY-READ-46",
        "UNTRACKED-IGNORED-47",
        "UNTRACKED-BUILD-48",
    ] {
        assert!(!contains(&objects, secret), "{secret} in the side store");
    }
    // No alternates: the side store stands alone.
    assert!(!store.git_dir().join("objects/info/alternates").exists());
    store.finish_copy().unwrap();
    // Two packs: the snapshot's blobs copied from the user's store, and the
    // user's clean `HEAD` trees copied beside the look for `write-tree` (kept: the
    // trees it reused live there), which hold the clean tree the snapshot
    // reaches (a control) and no tree that names a left-out entry.
    let packs: Vec<_> = std::fs::read_dir(store.git_dir().join("objects/pack"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .collect();
    assert_eq!(packs.len(), 2, "{packs:?}");
    // The side store alone holds every object the snapshot reaches.
    stands_alone(&store, id, 10);
    let side_has = |spec: &str| {
        let oid = String::from_utf8(f.user_git(&["rev-parse", spec]).stdout).unwrap();
        Command::new("git")
            .arg(format!("--git-dir={}", store.git_dir().display()))
            .args(["cat-file", "-e", oid.trim()])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success()
    };
    assert!(
        side_has("HEAD:lib"),
        "control: a clean tree the snapshot reaches"
    );
    for tainted in [
        "HEAD^{tree}",
        "HEAD:creds",
        "HEAD:node_modules",
        "HEAD:ignored",
    ] {
        assert!(!side_has(tainted), "{tainted} in the side store");
    }

    // Restores byte-exactly, and the user's .git was never written (bytes,
    // modes, mtimes, inodes, and no file added or removed; this test made
    // and removed `info/attributes` above, so it is looked at afresh).
    let git_before = git_dir_state(&f.ws.join(".git"));
    let state = files(&f.ws, &[".git"]);
    f.write("src/main.rs", "broken\n");
    store.snapshot(Label::PostTurn(1), meta()).unwrap();
    store.restore(id).unwrap();
    let after = files(&f.ws, &[".git"]);
    let differ: Vec<&String> = state
        .keys()
        .chain(after.keys())
        .filter(|k| state.get(*k) != after.get(*k))
        .collect();
    assert!(differ.is_empty(), "restored differently: {differ:?}");
    assert!(
        git_dir_state(&f.ws.join(".git")) == git_before,
        "the user's .git changed"
    );
}

#[test]
fn a_restore_survives_the_users_gc_prune_now() {
    let f = Fixture::new();
    f.write("a.txt", "VERSION-ONE-51\n");
    f.write("keep.txt", "keep\n");
    age_files(&f.ws);
    f.user_repo();
    f.user_git(&["gc", "-q"]); // packed, as a clone is
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(store.seeded_from_user_index(), Some(true));
    // The copy the snapshot left running has ended (~0.3 s at 100k files;
    // a gc inside that window: the next test).
    store.finish_copy().unwrap();
    let before = files(&f.ws, &[".git"]);
    let blob = String::from_utf8(f.user_git(&["rev-parse", "HEAD:a.txt"]).stdout).unwrap();

    // The user rewrites history and prunes: the old blob is gone from
    // their repository.
    f.write("a.txt", "VERSION-TWO\n");
    f.user_git(&["commit", "-q", "-a", "--amend", "-m", "amended"]);
    f.user_git(&["reflog", "expire", "--expire=now", "--all"]);
    f.user_git(&["gc", "-q", "--prune=now"]);
    let gone = Command::new("git")
        .args(["cat-file", "-e", blob.trim()])
        .current_dir(&f.ws)
        .env("HOME", &f.user_home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(!gone.success(), "the user's gc kept the old blob: no test");

    store.restore(id).unwrap();
    assert_eq!(files(&f.ws, &[".git"]), before);
    assert_eq!(
        std::fs::read(f.ws.join("a.txt")).unwrap(),
        b"VERSION-ONE-51\n"
    );
}

/// `present::missing` answers as git does (`cat-file -e`) on a real
/// repository: objects in a pack (after `gc`), loose ones made since, and
/// ids git has never seen.
#[test]
fn the_pack_index_check_agrees_with_git() {
    use codewhale::snapshot::present::{missing, Oid};
    let f = Fixture::new();
    for i in 0..40 {
        f.write(&format!("d{}/f{i}.txt", i % 4), format!("packed {i}\n"));
    }
    f.user_repo();
    f.user_git(&["gc", "-q"]);
    f.write("loose.txt", "LOOSE-73\n");
    f.user_git(&["add", "loose.txt"]);
    let listed = f.user_git(&["ls-files", "-s"]).stdout;
    let hex_ids: Vec<String> = String::from_utf8(listed)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect();
    assert_eq!(hex_ids.len(), 41);
    let objects = f.ws.join(".git/objects");
    let loose = String::from_utf8(f.user_git(&["rev-parse", ":loose.txt"]).stdout).unwrap();
    let loose = loose.trim();
    assert!(
        objects.join(&loose[..2]).join(&loose[2..]).is_file(),
        "control: one object is loose"
    );
    let packs = std::fs::read_dir(objects.join("pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".idx"))
        .count();
    assert!(packs >= 1, "control: a packed repository");
    let strangers = [
        "0".repeat(40),
        "f".repeat(40),
        format!("{}1", &hex_ids[0][..39]),
    ];
    let mut all: Vec<Oid> = hex_ids
        .iter()
        .chain(strangers.iter())
        .map(|h| {
            let mut o = [0u8; 20];
            hex::decode_to_slice(h, &mut o).unwrap();
            o
        })
        .collect();
    all.sort();
    all.dedup();
    let said: Vec<String> = missing(&objects, &all)
        .expect("version 2 indexes")
        .iter()
        .map(hex::encode)
        .collect();
    let git_says: Vec<String> = all
        .iter()
        .map(hex::encode)
        .filter(|h| {
            !Command::new("git")
                .args(["cat-file", "-e", h])
                .current_dir(&f.ws)
                .env("HOME", &f.user_home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .status()
                .unwrap()
                .success()
        })
        .collect();
    assert_eq!(said, git_says);
    assert!(said.len() >= 2, "control: ids git has never seen: {said:?}");
    assert!(
        said.len() < all.len() - 40,
        "the repository's own are found"
    );
}

/// Wait for the background blob copy of `store` to end, then make it look
/// cut short (a run killed with it, the machine stopped): its pack gone,
/// its output empty. Returns the blob ids it was to copy.
fn cut_the_copy_short(store: &SnapshotStore) -> Vec<String> {
    let dir = store.dir().join(codewhale::snapshot::blobcopy::DIR);
    assert!(
        codewhale::snapshot::blobcopy::wait_for_end(store.dir()),
        "a copy was started"
    );
    let name = std::fs::read_to_string(dir.join("out")).unwrap();
    let name = name.trim();
    assert_eq!(name.len(), 40, "the copy ended with its pack: {name:?}");
    for ext in ["pack", "idx"] {
        std::fs::remove_file(
            store
                .git_dir()
                .join(format!("objects/pack/pack-{name}.{ext}")),
        )
        .unwrap();
    }
    std::fs::write(dir.join("out"), "").unwrap();
    std::fs::read_to_string(dir.join("ids"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every object snapshot `id` reaches, as the side store alone sees it
/// (`rev-list --objects --missing=print`: a missing one as `?ID`).
fn walk(store: &SnapshotStore, id: u64) -> String {
    let commit = &store.get(id).unwrap().commit;
    let walk = Command::new("git")
        .arg(format!("--git-dir={}", store.git_dir().display()))
        .args(["rev-list", "--objects", "--missing=print", commit])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(walk.status.success(), "{walk:?}");
    String::from_utf8(walk.stdout).unwrap()
}

/// The blobs a snapshot names that the side store lacks.
fn missing_in_side(store: &SnapshotStore, id: u64) -> Vec<String> {
    walk(store, id)
        .lines()
        .filter_map(|l| l.strip_prefix('?').map(str::to_string))
        .collect()
}

/// A run killed while its blob copy ran leaves the snapshot naming blobs
/// only the user's store holds: the next open takes the copy again, and
/// the snapshot then stands alone and restores byte-exactly.
#[test]
fn a_blob_copy_cut_short_is_taken_again_at_the_next_open() {
    let f = Fixture::new();
    f.write("a.txt", "COPIED-AGAIN-71\n");
    f.write("src/lib.rs", "pub fn lib() {}\n");
    age_files(&f.ws);
    f.user_repo();
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(store.seeded_from_user_index(), Some(true));
    let ids = cut_the_copy_short(&store);
    let mut lacking = missing_in_side(&store, id);
    lacking.sort();
    let mut want = ids.clone();
    want.sort();
    want.dedup();
    assert_eq!(lacking, want, "control: the snapshot's blobs are not there");
    drop(store);
    let mut again = f.open();
    assert!(
        missing_in_side(&again, id).is_empty(),
        "taken again at open"
    );
    assert!(!again
        .dir()
        .join(codewhale::snapshot::blobcopy::DIR)
        .exists());
    stands_alone(&again, id, 3);
    let before = files(&f.ws, &[".git"]);
    f.write("a.txt", "broken\n");
    again.restore(id).unwrap();
    assert_eq!(files(&f.ws, &[".git"]), before);
}

/// A copy cut short whose blobs the user's repository lost meanwhile (an
/// amend, reflogs expired, `gc --prune=now`): nothing can copy them any
/// more. A restore says so, naming the user's objects directory, and
/// changes nothing in the workspace (every restore says so again: the
/// copy stays pending, see `src/snapshot/blobcopy.rs`).
#[test]
fn a_blob_copy_that_cannot_be_taken_again_is_said_and_nothing_is_restored() {
    let f = Fixture::new();
    f.write("a.txt", "LOST-WITH-THE-GC-72\n");
    f.write("keep.txt", "keep\n");
    age_files(&f.ws);
    f.user_repo();
    f.user_git(&["gc", "-q"]);
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    cut_the_copy_short(&store);
    f.write("a.txt", "VERSION-TWO\n");
    f.user_git(&["commit", "-q", "-a", "--amend", "-m", "amended"]);
    f.user_git(&["reflog", "expire", "--expire=now", "--all"]);
    f.user_git(&["gc", "-q", "--prune=now"]);
    let before = files(&f.ws, &[".git"]);
    let err = store.restore(id).unwrap_err().to_string();
    assert!(
        err.contains("not all in the store") && err.contains(".git/objects"),
        "{err}"
    );
    assert_eq!(files(&f.ws, &[".git"]), before, "nothing restored");
}

#[test]
fn conversions_and_odd_entries_take_the_long_way() {
    // autocrlf in the repository's config: the index holds converted blobs.
    let f = Fixture::new();
    f.write("crlf.txt", "one\r\ntwo\r\n");
    f.user_git(&["init", "-q"]);
    f.user_git(&["config", "core.autocrlf", "input"]);
    f.user_git(&["add", "-A"]);
    f.user_git(&["commit", "-q", "-m", "x"]);
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert!(matches!(store.seed_refusal(), Some(NoSeed::Conversions(_))));
    f.write("crlf.txt", "gone\n");
    store.restore(id).unwrap();
    assert_eq!(
        std::fs::read(f.ws.join("crlf.txt")).unwrap(),
        b"one\r\ntwo\r\n"
    );

    // An assume-unchanged entry: git would not look at the file again.
    let g = Fixture::new();
    g.write("a.txt", "one\n");
    g.user_repo();
    g.user_git(&["update-index", "--assume-unchanged", "a.txt"]);
    g.write("a.txt", "CHANGED-UNDER-ASSUME\n");
    let mut store = g.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(store.seed_refusal(), Some(&NoSeed::UnusualEntries));
    assert!(contains(&g.side_objects(&store), "CHANGED-UNDER-ASSUME"));
    g.write("a.txt", "x\n");
    store.restore(id).unwrap();
    assert_eq!(
        std::fs::read(g.ws.join("a.txt")).unwrap(),
        b"CHANGED-UNDER-ASSUME\n"
    );

    // Not a repository: nothing to seed from.
    let h = Fixture::new();
    h.write("a.txt", "plain\n");
    let mut store = h.open();
    store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(store.seed_refusal(), Some(&NoSeed::NotARepositoryTop));
}

/// The seed reads the copied index in process (`gix-index`), not through
/// `ls-files`: an index of version 4 (prefix-compressed paths) seeds, and
/// its snapshot is the user's own tree, its cache-tree trees taken from
/// the user's store; a skip-worktree entry and a split index (its shared
/// part stays in the user's `.git`) turn the seed down, and the snapshot
/// the long way still holds every file as it is.
#[test]
fn a_version_4_index_seeds_and_skip_worktree_or_split_indexes_do_not() {
    let f = Fixture::new();
    for i in 0..30 {
        f.write(&format!("src/deep/er/m{i:02}.rs"), format!("// {i}\n"));
        f.write(&format!("docs/d{i:02}.md"), format!("doc {i}\n"));
    }
    age_files(&f.ws);
    f.user_repo();
    f.user_git(&["update-index", "--index-version", "4"]);
    let head = String::from_utf8(f.user_git(&["rev-parse", "HEAD^{tree}"]).stdout).unwrap();
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_seeded(&store);
    assert_eq!(store.get(id).unwrap().tree, head.trim());
    stands_alone(&store, id, 60);
    // `write-tree` wrote no tree: each came in the seed's pack.
    let objects = store.git_dir().join("objects");
    let mut loose = Vec::new();
    for d in std::fs::read_dir(&objects).unwrap().flatten() {
        let name = d.file_name().into_string().unwrap();
        if name.len() == 2 {
            for o in std::fs::read_dir(d.path()).unwrap().flatten() {
                loose.push(format!("{name}{}", o.file_name().into_string().unwrap()));
            }
        }
    }
    let kinds: Vec<String> = loose
        .iter()
        .map(|id| {
            let git_dir = format!("--git-dir={}", store.git_dir().display());
            let o = git_at(&f.ws, &f.user_home, &[&git_dir, "cat-file", "-t", id]);
            String::from_utf8(o.stdout).unwrap().trim().to_string()
        })
        .collect();
    assert!(!kinds.iter().any(|k| k == "tree"), "{loose:?} {kinds:?}");
    assert!(kinds.iter().any(|k| k == "commit"), "control: {kinds:?}");

    for (how, args) in [
        (
            "skip-worktree",
            &["update-index", "--skip-worktree", "a.txt"][..],
        ),
        ("split index", &["update-index", "--split-index"][..]),
    ] {
        let g = Fixture::new();
        g.write("a.txt", "one\n");
        g.write("b/c.txt", "two\n");
        g.user_repo();
        g.user_git(args);
        g.write("b/c.txt", "CHANGED-AFTER\n");
        let mut store = g.open();
        let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
        assert_eq!(store.seeded_from_user_index(), Some(false), "{how}");
        match (how, store.seed_refusal()) {
            ("skip-worktree", Some(NoSeed::UnusualEntries)) => {}
            ("split index", Some(NoSeed::Index(why))) => assert!(why.contains("index"), "{why}"),
            (_, other) => panic!("{how}: {other:?}"),
        }
        assert!(contains(&g.side_objects(&store), "CHANGED-AFTER"), "{how}");
        assert_eq!(tree_paths(&store, id), ["a.txt", "b/c.txt"], "{how}");
    }
}

/// The user's per-user files are read from the directories the store is
/// given, never the process's `$HOME`: an excludes file there leaves its
/// files out of the snapshot (the side repository's own `ls-files -o`
/// and the seed's `ls-files -i` both read it), an attributes file there
/// turns the seed down; the same workspace with a home that has neither
/// is the control.
#[test]
fn the_users_excludes_and_attributes_come_from_the_given_home() {
    let with = |excludes: Option<&str>, attributes: bool| {
        let f = Fixture::new();
        f.write("keep.txt", "kept\n");
        f.write("tracked.log", "tracked log\n");
        f.user_repo();
        f.write("new.log", "untracked log\n");
        f.write("new.txt", "untracked text\n");
        let conf = f.user_home.join(".config/git");
        std::fs::create_dir_all(&conf).unwrap();
        if let Some(x) = excludes {
            std::fs::write(conf.join("ignore"), x).unwrap();
        }
        if attributes {
            std::fs::write(conf.join("attributes"), "*.txt text\n").unwrap();
        }
        let mut store = f.open();
        let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
        let seed = store.seed_refusal().cloned();
        (tree_paths(&store, id), seed, f)
    };
    let (plain, seed, _f) = with(None, false);
    assert_eq!(seed, None, "seeded");
    assert_eq!(plain, ["keep.txt", "new.log", "new.txt", "tracked.log"]);
    // `*.log` ignored: the untracked log and, as the seed drops what the
    // ignore rules name, the tracked one too (as `add -A` into an empty
    // side index would).
    let (ignored, seed, _f) = with(Some("*.log\n"), false);
    assert_eq!(seed, None, "seeded");
    assert_eq!(ignored, ["keep.txt", "new.txt"]);
    let (_, seed, _f) = with(None, true);
    assert!(
        matches!(seed, Some(NoSeed::Conversions(ref why)) if why.contains(".config/git/attributes")),
        "{seed:?}"
    );
}

/// Delete the loose object of `path`'s committed blob from the user's
/// store (a repository damaged by hand).
fn lose_committed_blob(f: &Fixture, path: &str) {
    let out = f.user_git(&["rev-parse", &format!("HEAD:{path}")]);
    let blob = String::from_utf8(out.stdout).unwrap().trim().to_string();
    std::fs::remove_file(f.ws.join(".git/objects").join(&blob[..2]).join(&blob[2..])).unwrap();
}

/// A blob the user's store lost turns the seed down only when the
/// snapshot would keep its file: a tracked `.env` (never snapshotted)
/// whose blob is gone still seeds, and nothing of it is copied.
#[test]
fn a_lost_blob_of_an_entry_the_store_drops_still_seeds() {
    let f = Fixture::new();
    f.write("a.txt", "KEPT-61\n");
    f.write("conf/.env", "SECRET-WHOSE-BLOB-IS-GONE\n");
    age_files(&f.ws);
    f.user_repo();
    lose_committed_blob(&f, "conf/.env");
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_seeded(&store);
    assert_eq!(tree_paths(&store, id), ["a.txt"]);
    let objects = f.side_objects(&store);
    assert!(contains(&objects, "KEPT-61"), "control");
    assert!(!contains(&objects, "SECRET-WHOSE-BLOB-IS-GONE"));
}

/// A seed abandoned after the user's trees were copied ahead (a blob the
/// user's store lost: the copy fails) drops that tree pack *before* the
/// full look that follows, so the full look writes every tree itself: the
/// snapshot stands alone in the side store and restores byte-exactly.
#[test]
fn a_seed_abandoned_after_its_trees_were_copied_leaves_a_whole_snapshot() {
    let f = Fixture::new();
    f.write("a.txt", "KEPT-IN-THE-WORKSPACE-61\n");
    f.write("src/lib.rs", "pub fn lib() {}\n");
    f.write("src/deep/x.rs", "x\n");
    // Older than the user's index: `add -u` hashes none of them again (a
    // racy entry would be, and its blob would be in the side store anyway).
    age_files(&f.ws);
    f.user_repo();
    lose_committed_blob(&f, "a.txt");
    let mut store = f.open();
    let id = store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert!(
        matches!(store.seed_refusal(), Some(NoSeed::Copy(_))),
        "{:?}",
        store.seed_refusal()
    );
    // The tree pack went, the trees are the full look's own.
    let packs = std::fs::read_dir(store.git_dir().join("objects/pack"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(packs, 0, "no pack of the seed is left");
    stands_alone(&store, id, 5);
    let before = files(&f.ws, &[".git"]);
    f.write("a.txt", "broken\n");
    std::fs::remove_dir_all(f.ws.join("src")).unwrap();
    store.restore(id).unwrap();
    assert_eq!(files(&f.ws, &[".git"]), before);
}

#[test]
fn a_later_store_for_the_same_workspace_keeps_its_index() {
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    f.user_repo();
    let mut store = f.open();
    store.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(store.seeded_from_user_index(), Some(true));
    drop(store);
    let mut again = f.open();
    again.snapshot(Label::PreTurn(2), meta()).unwrap();
    assert_eq!(
        again.seeded_from_user_index(),
        None,
        "seeded once per store"
    );
    let _ = manifest(&f.ws, &[".git"]);
}

/// The packs of `store`'s side repository.
fn pack_count(store: &SnapshotStore) -> usize {
    std::fs::read_dir(store.git_dir().join("objects/pack"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
        .unwrap_or(0)
}

/// Every object snapshot `id`'s commit reaches is in the side store alone
/// (more than `at_least` of them: a control that the walk saw the tree).
fn stands_alone(store: &SnapshotStore, id: u64, at_least: usize) {
    store.finish_copy().expect("the blob copy");
    let listed = walk(store, id);
    assert!(listed.lines().count() > at_least, "control: {listed}");
    assert!(
        !listed.lines().any(|l| l.starts_with('?')),
        "missing: {listed}"
    );
}

#[test]
fn a_seed_prepared_at_open_is_the_seed_taken_at_the_snapshot() {
    let f = Fixture::new();
    repo_with_everything(&f);
    let mut opts = f.opts();
    opts.deny_read = vec![f.ws.join("creds")];
    let mut late = f.open_with(opts.clone());
    let lid = late.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_eq!(late.seeded_from_user_index(), Some(true));

    let g = Fixture::new();
    let mut early_opts = opts.clone();
    early_opts.codewhale_home = g.home.clone();
    early_opts.seed_at_open = true;
    let mut early = f.open_with(early_opts.clone());
    let store_dir = early.git_dir().parent().unwrap().to_path_buf();
    assert!(store_dir.join("index").exists(), "seeded by open");
    assert!(store_dir.join("seed-pending").exists());
    // The user's trees are copied only once the seed is used (beside its
    // look): an unused seed leaves no pack behind.
    assert_eq!(pack_count(&early), 0, "nothing copied at open");
    let eid = early.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_seeded(&early);
    assert!(!store_dir.join("seed-pending").exists(), "used");
    early.finish_copy().unwrap();
    assert_eq!(pack_count(&early), 2, "the trees' pack and the blobs'");
    assert_eq!(early.get(eid).unwrap().tree, late.get(lid).unwrap().tree);
    stands_alone(&early, eid, 3);
}

#[test]
fn two_runs_opening_a_new_store_at_once_never_snapshot_a_half_seed() {
    let f = Fixture::new();
    repo_with_everything(&f);
    let mut opts = f.opts();
    opts.seed_at_open = true;
    // Both open before either snapshots: the second clears the first's
    // seed and seeds again; the first then finds its mark gone.
    let mut a = f.open_with(opts.clone());
    let mut b = f.open_with(opts.clone());
    let ia = a.snapshot(Label::PreTurn(1), meta()).unwrap();
    let ib = b.snapshot(Label::PreTurn(1), meta()).unwrap();
    b.reload().unwrap();
    stands_alone(&b, ia, 3);
    stands_alone(&b, ib, 3);
    assert_eq!(b.get(ia).unwrap().tree, b.get(ib).unwrap().tree);
    // Exactly one of them seeded; no mark is left.
    let dir = b.git_dir().parent().unwrap().to_path_buf();
    assert!(!dir.join("seed-pending").exists());
    assert_eq!(a.seeded_from_user_index(), Some(true));
    assert_eq!(b.seeded_from_user_index(), None);

    // And the first restores byte-exactly.
    let before = files(&f.ws, &[".git"]);
    f.write("src/main.rs", "broken\n");
    b.restore(ia).unwrap();
    assert_eq!(files(&f.ws, &[".git"]), before);
}

#[test]
fn a_refused_workspace_keeps_nothing_a_seed_at_open_made() {
    let f = Fixture::new();
    for i in 0..20 {
        f.write(&format!("d/f{i}.txt"), "x\n");
    }
    f.user_repo();
    let mut opts = f.opts();
    opts.seed_at_open = true;
    opts.max_workspace_entries = 5;
    match SnapshotStore::open(&f.ws, opts.clone()).unwrap() {
        Opened::Disabled(d) => assert!(d.to_string().contains("5"), "{d}"),
        Opened::Ready(_) => panic!("over the entry limit, yet ready"),
    }
    let stores = f.home.join("snapshots");
    let left: Vec<_> = walkdir::WalkDir::new(&stores)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().to_path_buf())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Control: under the limit the same options seed at open.
    opts.max_workspace_entries = 1000;
    let store = f.open_with(opts);
    assert!(store.git_dir().parent().unwrap().join("index").exists());
}

/// `open_ahead` (the agent's way): refusals decided on the calling thread,
/// nothing left behind; the store built on a thread is the store `open`
/// builds — its seeded first snapshot has the same tree.
#[test]
fn a_store_opened_ahead_refuses_at_once_and_builds_what_open_builds() {
    use codewhale::snapshot::OpenedAhead;
    let f = Fixture::new();
    repo_with_everything(&f);
    let mut opts = f.opts();
    opts.seed_at_open = true;
    opts.deny_read = vec![f.ws.join("creds")];

    let mut refused = opts.clone();
    refused.max_workspace_entries = 2;
    match SnapshotStore::open_ahead(&f.ws, refused).unwrap() {
        OpenedAhead::Disabled(d) => assert!(d.to_string().contains('2'), "{d}"),
        OpenedAhead::Opening(_) => panic!("over the entry limit, yet opening"),
    }
    assert!(
        !f.home.join("snapshots").exists(),
        "a refusal writes nothing"
    );

    let mut late = f.open_with(opts.clone());
    let lid = late.snapshot(Label::PreTurn(1), meta()).unwrap();

    let g = Fixture::new();
    let mut ahead_opts = opts.clone();
    ahead_opts.codewhale_home = g.home.clone();
    let opening = open_ahead_ok(&f.ws, ahead_opts);
    let dir = opening.dir().to_path_buf();
    let mut early = opening.wait().unwrap();
    assert_eq!(early.git_dir().parent().unwrap(), dir);
    let eid = early.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert_seeded(&early);
    assert_eq!(early.get(eid).unwrap().tree, late.get(lid).unwrap().tree);
    stands_alone(&early, eid, 3);
}

/// A store that cannot be built (here a file where its directory goes)
/// is an error when joined, not a refusal at open, and not a panic.
#[test]
fn a_store_opened_ahead_that_cannot_be_built_says_why_when_joined() {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    f.user_repo();
    let mut opts = f.opts();
    opts.seed_at_open = true;
    let ws = std::fs::canonicalize(&f.ws).unwrap();
    let dir = codewhale::snapshot::layout::store_dir(&opts.codewhale_home, &ws);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    std::fs::write(&dir, "in the way\n").unwrap();
    let opening = open_ahead_ok(&f.ws, opts.clone());
    let err = opening.wait().unwrap_err().to_string();
    assert!(err.contains("cannot create snapshot store"), "{err}");
    // Control: with the way clear the same options build a store.
    std::fs::remove_file(&dir).unwrap();
    assert!(open_ahead_ok(&f.ws, opts).wait().is_ok());
}

/// A first snapshot seeded from the user's index (else why not).
fn assert_seeded(store: &SnapshotStore) {
    assert_eq!(
        store.seeded_from_user_index(),
        Some(true),
        "{:?}",
        store.seed_refusal()
    );
}

/// `open_ahead` for a workspace it must not refuse: the store being built.
fn open_ahead_ok(
    ws: &Path,
    opts: codewhale::snapshot::SnapshotOptions,
) -> codewhale::snapshot::Opening {
    match SnapshotStore::open_ahead(ws, opts).unwrap() {
        codewhale::snapshot::OpenedAhead::Opening(o) => o,
        codewhale::snapshot::OpenedAhead::Disabled(d) => panic!("refused: {d}"),
    }
}
