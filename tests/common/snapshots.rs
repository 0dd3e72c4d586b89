//! Shared helpers for the snapshot integration tests: temp workspaces with
//! a real user repository, and byte-exact manifests of directory trees.
#![allow(dead_code)]

use codewhale::snapshot::{
    Label, Opened, SnapshotMeta, SnapshotOptions, SnapshotStore, SnapshotWay, UserDirs,
};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    /// `$CODEWHALE_HOME` for the test.
    pub home: PathBuf,
    /// A fake user home (never the real `$HOME`).
    pub user_home: PathBuf,
    /// The workspace.
    pub ws: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("cwhome");
        let user_home = tmp.path().join("userhome");
        let ws = tmp.path().join("ws");
        for d in [&home, &user_home, &ws] {
            std::fs::create_dir_all(d).unwrap();
        }
        let ws = std::fs::canonicalize(ws).unwrap();
        Fixture {
            tmp,
            home,
            user_home,
            ws,
        }
    }

    pub fn opts(&self) -> SnapshotOptions {
        let mut o = SnapshotOptions::new(&self.home);
        o.homes = vec![self.user_home.clone()];
        // The user's git reads its global config, attributes and excludes
        // from the fake home, never the machine's.
        o.user_dirs = UserDirs::at_home(&self.user_home);
        o
    }

    pub fn open(&self) -> SnapshotStore {
        self.open_with(self.opts())
    }

    pub fn open_with(&self, opts: SnapshotOptions) -> SnapshotStore {
        match SnapshotStore::open(&self.ws, opts).unwrap() {
            Opened::Ready(s) => *s,
            Opened::Disabled(d) => panic!("snapshots unexpectedly disabled: {d}"),
        }
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    pub fn chmod(&self, rel: &str, mode: u32) {
        std::fs::set_permissions(self.ws.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A real user repository in the workspace with one commit, run with
    /// an isolated HOME so the test machine's git config plays no part.
    pub fn user_repo(&self) {
        self.user_git(&["init", "-q"]);
        self.user_git(&["add", "-A"]);
        self.user_git(&["commit", "-q", "-m", "initial", "--allow-empty"]);
    }

    pub fn user_git(&self, args: &[&str]) -> std::process::Output {
        git_at(&self.ws, &self.user_home, args)
    }

    /// Every object's content in the side repository, concatenated.
    pub fn side_objects(&self, store: &SnapshotStore) -> Vec<u8> {
        // Whatever the seed's background copy brings in is there first.
        store.finish_copy().expect("the blob copy");
        let out = Command::new("git")
            .arg(format!("--git-dir={}", store.git_dir().display()))
            .args(["cat-file", "--batch-all-objects", "--batch"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success());
        out.stdout
    }
}

/// `git ARGS` in `dir` as the user would run it, with an isolated `HOME`
/// (`home`) so the test machine's git config plays no part; it must
/// succeed.
pub fn git_at(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("the snapshot tests need the git binary on PATH");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What a path is, byte-exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Symlink(PathBuf),
    Dir { mode: u32 },
}

/// Every entry under `root` (relative path → content and mode), skipping
/// top-level names in `skip`.
pub fn manifest(root: &Path, skip: &[&str]) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e
            .path()
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let top = rel.split('/').next().unwrap_or("");
        if skip.contains(&top) {
            continue;
        }
        let meta = std::fs::symlink_metadata(e.path()).unwrap();
        let node = if meta.file_type().is_symlink() {
            Node::Symlink(std::fs::read_link(e.path()).unwrap())
        } else if meta.is_dir() {
            Node::Dir {
                mode: meta.permissions().mode() & 0o7777,
            }
        } else {
            Node::File {
                bytes: std::fs::read(e.path()).unwrap(),
                mode: meta.permissions().mode() & 0o7777,
            }
        };
        out.insert(rel, node);
    }
    out
}

/// Files and symlinks only (what snapshots restore; empty dirs are not tracked).
pub fn files(root: &Path, skip: &[&str]) -> BTreeMap<String, Node> {
    manifest(root, skip)
        .into_iter()
        .filter(|(_, n)| !matches!(n, Node::Dir { .. }))
        .collect()
}

pub fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The metadata the snapshot tests record (session `s`, request 1).
pub fn meta() -> SnapshotMeta {
    SnapshotMeta {
        session_id: Some("s".into()),
        request: Some(1),
        ..Default::default()
    }
}

/// The tree a store without a journal (its own home) takes of `f.ws` now,
/// with `deny` (workspace-relative) as its deny-read list: what a journal's
/// or a keeper's snapshot must equal.
pub fn full_tree(f: &Fixture, deny: &[&str]) -> String {
    let g = Fixture::new();
    let mut opts = f.opts();
    opts.codewhale_home = g.home.clone();
    opts.keeper = None;
    opts.deny_read = deny.iter().map(|d| f.ws.join(d)).collect();
    let mut s = f.open_with(opts);
    let id = s.snapshot(Label::PreTurn(1), meta()).unwrap();
    assert!(matches!(s.last_way(), Some(SnapshotWay::Full { .. })));
    s.get(id).unwrap().tree.clone()
}

/// `git ls-tree -r TREE` in `store`'s side repository: what a snapshot
/// holds, readable in a failed assertion.
pub fn ls_tree(store: &SnapshotStore, tree: &str) -> String {
    let out = Command::new("git")
        .arg(format!("--git-dir={}", store.git_dir().display()))
        .args(["ls-tree", "-r", tree])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git ls-tree {tree}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
