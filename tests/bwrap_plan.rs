#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Planner tests for the bwrap backend: a matrix of policies resolved
//! against real fixture trees, checked by property and by snapshot (paths
//! under the fixture are redacted to `[TMP]`). Pure: runs on every OS.

use codewhale::host::backends::bwrap::{plan, BwrapOptions, BwrapPlan, PlanError};
use codewhale::host::Namespace;
use codewhale::policy::resolve::{PathEntry, PathKind};
use codewhale::policy::{resolve, HostFacts, ResolvedPolicy, SandboxMode, SandboxPolicy};
use std::fs;
use std::path::{Path, PathBuf};

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
}

fn fixture() -> Fixture {
    // The fixture lives under target/tmp, inside this checkout's own git
    // repository: git's ceiling keeps resolution from taking the fixture's
    // `.env` for a file of that repository (policy::git_view). Set once,
    // before any test resolves.
    static CEILING: std::sync::Once = std::sync::Once::new();
    CEILING.call_once(|| std::env::set_var("GIT_CEILING_DIRECTORIES", env!("CARGO_TARGET_TMPDIR")));
    // Prefer target/tmp; an unprivileged CI user may not be able to write
    // there, then the OS temp dir (see `args` for what that changes).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
    fs::write(home.join(".netrc"), "machine x").unwrap();
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::write(ws.join(".git/config"), "[core]").unwrap();
    fs::write(ws.join(".env"), "SECRET=1").unwrap();
    fs::write(ws.join(".env.example"), "SECRET=").unwrap();
    Fixture {
        _dir: dir,
        root,
        home,
        ws,
    }
}

fn resolved(f: &Fixture, mode: SandboxMode, network: bool) -> ResolvedPolicy {
    let mut p = SandboxPolicy::new(mode, &f.ws);
    p.network = network;
    let facts = HostFacts {
        homes: vec![f.home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let mut r = resolve(&p, &facts).unwrap();
    // Keep the snapshot independent of the machine: only fixture paths,
    // plus one fixed host entry.
    r.deny_read.retain(|e| e.path.starts_with(&f.root));
    r.deny_read.push(PathEntry {
        path: "/etc/shadow".into(),
        kind: PathKind::File,
        target: None,
        dir_hint: false,
        reason: "password hashes".into(),
    });
    r
}

fn opts(cwd: &Path) -> BwrapOptions {
    BwrapOptions {
        bwrap: "/usr/bin/bwrap".into(),
        cwd: cwd.to_path_buf(),
        helper: Some((
            "/opt/codewhale/bin/codewhale".into(),
            vec!["__sandbox-helper".into(), "--spec".into(), "{}".into()],
        )),
        command: vec!["sh".into(), "-c".into(), "true".into()],
        egress_dir: None,
    }
}

/// The argv with the fixture root redacted to `[TMP]`. When the fixture
/// lives under `/tmp`, the planner re-binds it through the private `/tmp`
/// (`--ro-bind-try [TMP]/… [TMP]/…`); those triples depend on where the
/// fixture is, so they are dropped here and tested on their own in
/// `tmp_workspace_is_shown_through_the_private_tmp`.
fn args(p: &BwrapPlan, f: &Fixture) -> Vec<String> {
    let tmp = f.root.to_string_lossy().into_owned();
    let all: Vec<String> = p
        .argv
        .iter()
        .map(|a| a.to_string_lossy().replace(&tmp, "[TMP]"))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < all.len() {
        if all[i] == "--ro-bind-try" && all.get(i + 1).is_some_and(|a| a.starts_with("[TMP]")) {
            i += 3;
            continue;
        }
        out.push(all[i].clone());
        i += 1;
    }
    out
}

/// Index of the first `flag a b` triple (or `flag a` pair) in `argv`.
fn find(argv: &[String], seq: &[&str]) -> Option<usize> {
    argv.windows(seq.len())
        .position(|w| w.iter().zip(seq).all(|(a, b)| a == b))
}

#[test]
fn read_only_network_off() {
    let f = fixture();
    let p = plan(&resolved(&f, SandboxMode::ReadOnly, false), &opts(&f.ws)).unwrap();
    let a = args(&p, &f);
    assert!(!a.contains(&"--share-net".to_string()));
    assert!(
        !a.contains(&"--bind".to_string()),
        "RO binds nothing writable"
    );
    assert!(p.namespaces.contains(&Namespace::Net));
    // Deny-read: directory → empty read-only tmpfs, file → an empty
    // read-only regular file (bwrap copies it from a data fd).
    let ssh = find(&a, &["--tmpfs", "[TMP]/home/.ssh"]).unwrap();
    assert_eq!(a[ssh + 2..ssh + 4], ["--remount-ro", "[TMP]/home/.ssh"]);
    let data = |p: &str| find(&a, &["--ro-bind-data", "@data-fd", p]);
    assert!(data("[TMP]/home/.netrc").is_some());
    assert!(data("[TMP]/ws/.env").is_some());
    assert!(data("[TMP]/ws/.env.example").is_none());
    assert!(p.data.iter().all(|d| d.content.is_empty()));
    assert!(!a.contains(&"/dev/null".to_string()));
    insta::assert_yaml_snapshot!("read_only_network_off", a);
}

#[test]
fn workspace_write_network_off_orders_mounts() {
    let f = fixture();
    let p = plan(
        &resolved(&f, SandboxMode::WorkspaceWrite, false),
        &opts(&f.ws),
    )
    .unwrap();
    let a = args(&p, &f);
    let root = find(&a, &["--ro-bind", "/", "/"]).unwrap();
    let tmp = find(&a, &["--tmpfs", "/tmp"]).unwrap();
    let ws = find(&a, &["--bind", "[TMP]/ws", "[TMP]/ws"]).unwrap();
    let git = find(&a, &["--bind", "[TMP]/ws/.git", "[TMP]/ws/.git"]).unwrap();
    let hooks = find(
        &a,
        &["--ro-bind", "[TMP]/ws/.git/hooks", "[TMP]/ws/.git/hooks"],
    )
    .unwrap();
    let config = find(
        &a,
        &["--ro-bind", "[TMP]/ws/.git/config", "[TMP]/ws/.git/config"],
    )
    .unwrap();
    let env = find(&a, &["--ro-bind-data", "@data-fd", "[TMP]/ws/.env"]).unwrap();
    // Later mounts win: root < tmp < writable < pinned ancestors < masks < protected.
    assert!(root < tmp && tmp < ws && ws < git && git < env && env < hooks && hooks < config);
    // Missing protected paths get no mount at all (bwrap would create the
    // mount point in the user's workspace on the host for the whole run)…
    assert!(!a.iter().any(|x| x == "[TMP]/ws/.envrc"), "{a:?}");
    assert!(!a.iter().any(|x| x == "[TMP]/ws/.vscode"), "{a:?}");
    assert!(!a
        .iter()
        .any(|x| x.contains("empty-file") || x.contains("empty-dir")));
    // …they are held by the after-run integrity check instead.
    assert!(p.guarded_after.contains(&f.ws.join(".envrc")));
    assert!(p.guarded_after.contains(&f.ws.join(".vscode")));
    // Existing ones are mounted read-only and not guarded after.
    assert!(!p.guarded_after.contains(&f.ws.join(".git/hooks")));
    assert!(p.protected.contains(&f.ws.join(".git/hooks")));
    // The command comes last, after the helper.
    let dashdash = a.iter().rposition(|x| x == "--").unwrap();
    assert_eq!(a[dashdash + 1..], ["sh", "-c", "true"]);
    assert_eq!(a[dashdash - 4], "/opt/codewhale/bin/codewhale");
    insta::assert_yaml_snapshot!("workspace_write_network_off", a);
}

#[test]
fn network_on_shares_the_net_namespace_only() {
    let f = fixture();
    let p = plan(
        &resolved(&f, SandboxMode::WorkspaceWrite, true),
        &opts(&f.ws),
    )
    .unwrap();
    let a = args(&p, &f);
    assert_eq!(a.iter().filter(|x| *x == "--share-net").count(), 1);
    assert!(!p.namespaces.contains(&Namespace::Net));
    assert!(p.namespaces.contains(&Namespace::User) && p.namespaces.contains(&Namespace::Pid));
    insta::assert_yaml_snapshot!("workspace_write_network_on", a);
}

#[test]
fn symlinked_protected_path_is_refused() {
    let f = fixture();
    fs::write(f.root.join("decoy"), "decoy").unwrap();
    std::os::unix::fs::symlink(f.root.join("decoy"), f.ws.join(".envrc")).unwrap();
    let err = plan(
        &resolved(&f, SandboxMode::WorkspaceWrite, false),
        &opts(&f.ws),
    )
    .unwrap_err();
    assert!(
        matches!(err, PlanError::SymlinkedProtectedPath { ref path, .. } if path == &f.ws.join(".envrc"))
    );
    assert!(err.to_string().contains("symlink"), "{err}");
    // Read-only mode has no writable roots: nothing to refuse.
    assert!(plan(&resolved(&f, SandboxMode::ReadOnly, false), &opts(&f.ws)).is_ok());
}

#[test]
fn symlinked_git_dir_is_refused() {
    let f = fixture();
    fs::rename(f.ws.join(".git"), f.root.join("real.git")).unwrap();
    std::os::unix::fs::symlink(f.root.join("real.git"), f.ws.join(".git")).unwrap();
    let err = plan(
        &resolved(&f, SandboxMode::WorkspaceWrite, false),
        &opts(&f.ws),
    )
    .unwrap_err();
    assert!(
        matches!(err, PlanError::SymlinkedProtectedPath { ref path, .. } if path == &f.ws.join(".git")),
        "{err}"
    );
}

#[test]
fn missing_git_dir_is_guarded_after_the_run_not_created() {
    let f = fixture();
    fs::remove_dir_all(f.ws.join(".git")).unwrap();
    let p = plan(
        &resolved(&f, SandboxMode::WorkspaceWrite, false),
        &opts(&f.ws),
    )
    .unwrap();
    let a = args(&p, &f);
    assert!(
        !a.iter().any(|x| x.starts_with("[TMP]/ws/.git")),
        "no mount point may be created for a missing .git: {a:?}"
    );
    assert!(p.guarded_after.contains(&f.ws.join(".git/hooks")));
    assert!(p.guarded_after.contains(&f.ws.join(".git/config")));
    insta::assert_yaml_snapshot!("workspace_write_missing_git", a);
}

#[test]
fn git_worktree_pointer_is_protected() {
    let f = fixture();
    let main = f.root.join("main");
    fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
    fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
    fs::remove_dir_all(f.ws.join(".git")).unwrap();
    fs::write(
        f.ws.join(".git"),
        format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
    )
    .unwrap();
    let p = plan(
        &resolved(&f, SandboxMode::WorkspaceWrite, false),
        &opts(&f.ws),
    )
    .unwrap();
    let a = args(&p, &f);
    assert!(find(&a, &["--ro-bind", "[TMP]/ws/.git", "[TMP]/ws/.git"]).is_some());
    assert!(!a.iter().any(|x| x.starts_with("[TMP]/ws/.git/")), "{a:?}");
    insta::assert_yaml_snapshot!("workspace_write_git_worktree", a);
}

#[test]
fn tmp_workspace_is_shown_through_the_private_tmp() {
    let f = fixture();
    let mut r = resolved(&f, SandboxMode::ReadOnly, false);
    r.workspace = "/tmp/project".into();
    let p = plan(&r, &opts(Path::new("/tmp/project"))).unwrap();
    let a: Vec<String> = p
        .argv
        .iter()
        .map(|x| x.to_string_lossy().into_owned())
        .collect();
    let tmp = find(&a, &["--tmpfs", "/tmp"]).unwrap();
    let ws = find(&a, &["--ro-bind-try", "/tmp/project", "/tmp/project"]).unwrap();
    assert!(tmp < ws);
}
