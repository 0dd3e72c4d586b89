#![cfg(not(feature = "nix-build-sandbox"))]
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The snapshot store's change journal (`src/snapshot/journal.rs`, issue
//! 29) sees what a *sandboxed* command changes: host-side inotify on the
//! workspace's directories reports writes made through bwrap's bind mounts
//! and under Landlock alike (the same inodes), so the snapshot after the
//! command adds only the journal's paths and still holds exactly what a
//! full `git add -A` of the workspace holds — including a file changed at
//! depth 10 and a directory made there — and undoing restores the tree
//! byte-exact. A real sandbox in both tiers; nothing simulated.

mod common;

use codewhale::snapshot::{Label, Opened, SnapshotOptions, SnapshotStore, SnapshotWay, UserDirs};
use common::sandbox::*;
use common::snapshots::{ls_tree, meta};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

fn open(fx: &Fx, home: &str) -> SnapshotStore {
    let mut opts = SnapshotOptions::new(fx.root.join(home));
    opts.homes = vec![fx.home.clone()];
    opts.user_dirs = UserDirs::at_home(&fx.home);
    match SnapshotStore::open(&fx.ws, opts).unwrap() {
        Opened::Ready(s) => *s,
        Opened::Disabled(d) => panic!("snapshots unexpectedly disabled: {d}"),
    }
}

/// Every file under `root` but `.git`, with its bytes.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            (rel, fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn the_journal_sees_a_sandboxed_change_at_depth_10_and_undo_is_byte_exact() {
    let deep = "d0/d1/d2/d3/d4/d5/d6/d7/d8/d9";
    for tier in tiers() {
        let case = Case {
            tier,
            mode: Mode::Ww,
        };
        let fx = Fx::new();
        fs::create_dir_all(fx.ws.join(deep)).unwrap();
        fs::write(fx.ws.join(deep).join("deep.txt"), "DEEP-ORIGINAL\n").unwrap();
        fs::write(fx.ws.join("top.txt"), "TOP-ORIGINAL\n").unwrap();
        fx.git(&fx.ws, &["add", "-A"]);
        fx.git(&fx.ws, &["commit", "-qm", "tree"]);

        let mut store = open(&fx, "cw-journal");
        store.enable_journal();
        let first = store.snapshot(Label::PreTurn(1), meta()).unwrap();
        assert_eq!(
            store.last_way(),
            Some(&SnapshotWay::Full { no_journal: None }),
            "[{case}]"
        );
        let before = files(&fx.ws);

        let script = format!(
            "printf 'DEEP-CHANGED\\n' > {deep}/deep.txt && mkdir {deep}/new && \
             printf 'NEW\\n' > {deep}/new/n.txt && rm top.txt"
        );
        let r = fx.sh(&case, &script);
        assert!(r.ok(), "[{case}] {r:?}");
        assert_eq!(r.enforcement()["backend"], case.tier.name, "[{case}] {r:?}");
        // Positive control: the host sees the sandbox's writes.
        assert_eq!(
            fs::read_to_string(fx.ws.join(deep).join("deep.txt")).unwrap(),
            "DEEP-CHANGED\n",
            "[{case}]"
        );
        assert!(!fx.ws.join("top.txt").exists(), "[{case}]");

        let second = store.snapshot(Label::PostTurn(1), meta()).unwrap();
        assert!(
            matches!(store.last_way(), Some(SnapshotWay::Journal { paths, .. }) if *paths >= 3),
            "[{case}] {:?}",
            store.last_way()
        );
        // What a store without a journal takes of the same tree.
        let mut plain = open(&fx, "cw-plain");
        let p = plain.snapshot(Label::PreTurn(1), meta()).unwrap();
        assert_eq!(
            ls_tree(&store, &store.get(second).unwrap().tree),
            ls_tree(&plain, &plain.get(p).unwrap().tree),
            "[{case}]"
        );
        assert_eq!(
            store.get(second).unwrap().tree,
            plain.get(p).unwrap().tree,
            "[{case}] the journal's snapshot is the full add's"
        );
        let changes = store.diff(first, second).unwrap();
        let mut changed: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        changed.sort();
        assert_eq!(
            changed,
            vec![
                &format!("{deep}/deep.txt") as &str,
                &format!("{deep}/new/n.txt"),
                "top.txt"
            ],
            "[{case}]"
        );

        store.restore(first).unwrap();
        assert_eq!(files(&fx.ws), before, "[{case}] undo is byte-exact");
        assert!(!fx.ws.join(deep).join("new").join("n.txt").exists());
    }
}

/// The store's keeper (`src/snapshot/keeper.rs`) listens on `journal.sock`
/// in the store, under `~/.codewhale`: a sandboxed command must not reach
/// it (a `reset` from one would make the next snapshot miss changes) —
/// with the network off seccomp refuses the socket; with it on, bwrap's
/// mask over `~/.codewhale` leaves no socket file, and under Landlock
/// (which does not govern `connect`) the keeper answers nothing without
/// its key, which deny-read keeps from the command. The same script from
/// outside the sandbox reads the key and gets the keeper's answer
/// (positive control), in both tiers.
#[test]
fn a_sandboxed_command_cannot_reach_the_stores_keeper() {
    for tier in tiers() {
        let case = Case {
            tier,
            mode: Mode::Ww,
        };
        let fx = Fx::new();
        fs::write(fx.ws.join("a.txt"), "A\n").unwrap();
        fx.git(&fx.ws, &["add", "-A"]);
        fx.git(&fx.ws, &["commit", "-qm", "tree"]);
        // The store where the sandboxed command's own codewhale keeps it.
        let mut opts = SnapshotOptions::new(fx.home.join(".codewhale"));
        opts.homes = vec![fx.home.clone()];
        opts.user_dirs = UserDirs::at_home(&fx.home);
        opts.keeper = Some(env!("CARGO_BIN_EXE_codewhale").into());
        let mut store = match SnapshotStore::open(&fx.ws, opts).unwrap() {
            Opened::Ready(s) => *s,
            Opened::Disabled(d) => panic!("snapshots unexpectedly disabled: {d}"),
        };
        store.enable_journal();
        store.snapshot(Label::PreTurn(1), meta()).unwrap();
        let sock = store.dir().join("journal.sock");
        assert!(sock.exists(), "[{case}] the keeper is listening");
        let key_file = store.dir().join("journal.key");
        // What a command would try: read the key (deny-read keeps it from
        // it), then ask with whatever it has.
        let script = format!(
            "python3 - <<'PY'\n\
             import socket\n\
             try:\n    key = open({key_file:?}).read().strip()\n    print('KEY READ')\n\
             except OSError as e:\n    key = '0' * 64\n    print('KEY REFUSED', e.errno)\n\
             s = socket.socket(socket.AF_UNIX)\n\
             try:\n    s.connect({sock:?})\n    s.sendall(('cw-journal-2 ' + key + ' ping\\n').encode())\n    print('ANSWER', s.recv(64))\n\
             except OSError as e:\n    print('REFUSED', e.errno)\n\
             PY"
        );
        let outside = fx.unsandboxed(&script);
        assert!(
            outside.stdout.contains("KEY READ") && outside.stdout.contains("ANSWER b'ok\\n'"),
            "[{case}] positive control: {outside:?}"
        );
        // Network off: seccomp refuses the socket itself (EPERM).
        let inside = fx.sh(&case, &script);
        assert!(
            inside.stderr.contains("Operation not permitted") && !inside.stdout.contains("ANSWER"),
            "[{case}] {inside:?}"
        );
        // Network on: a socket can be made, and the mask over
        // `~/.codewhale` leaves nothing to connect to (ENOENT).
        // Network on: a socket can be made. Under bwrap the mask over
        // `~/.codewhale` leaves nothing to connect to; under Landlock the
        // connect itself is not governed, but the key cannot be read, and
        // without it the keeper does nothing.
        let inside = fx.run(&case, &["--network=on"], &["sh", "-c", &script]);
        assert!(inside.stdout.contains("KEY REFUSED"), "[{case}] {inside:?}");
        assert!(
            !inside.stdout.contains("ANSWER b'ok"),
            "[{case}] the keeper answered a sandboxed command: {inside:?}"
        );
        assert!(
            inside.stdout.contains("REFUSED 2") || inside.stdout.contains("ANSWER b\"err not a"),
            "[{case}] {inside:?}"
        );
        // The keeper still serves the run.
        fs::write(fx.ws.join("a.txt"), "B\n").unwrap();
        store.snapshot(Label::PostTurn(1), meta()).unwrap();
        assert_eq!(
            store.last_way(),
            Some(&SnapshotWay::Journal {
                paths: 1,
                index: None
            }),
            "[{case}]"
        );
    }
}
