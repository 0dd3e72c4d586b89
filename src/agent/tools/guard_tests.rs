use super::*;
use crate::policy::{resolve, HostFacts, SandboxPolicy};
use std::fs;

struct Fixture {
    _t: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    let outside = root.join("outside");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(ws.join("ok.txt"), "fine").unwrap();
    fs::write(ws.join(".env"), "SECRET=1").unwrap();
    Fixture {
        _t: t,
        home,
        ws,
        outside,
    }
}

fn guard(f: &Fixture, mode: SandboxMode) -> FsGuard {
    let facts = HostFacts {
        homes: vec![f.home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    FsGuard::new(&resolve(&SandboxPolicy::new(mode, &f.ws), &facts).unwrap())
}

#[test]
fn deny_read_with_positive_control() {
    let f = fixture();
    let g = guard(&f, SandboxMode::WorkspaceWrite);
    assert!(g.check_read("ok.txt").is_ok());
    let key = f.home.join(".ssh/id_rsa");
    assert!(matches!(
        g.check_read(key.to_str().unwrap()),
        Err(GuardError::DenyRead { .. })
    ));
    assert!(matches!(
        g.check_read(".env"),
        Err(GuardError::DenyRead { .. })
    ));
    // A .env created after resolution is still denied by name.
    assert!(matches!(
        g.check_read("sub/.env.local"),
        Err(GuardError::DenyRead { .. })
    ));
    assert!(g.check_read(".env.example").is_ok());
}

#[test]
fn symlink_into_deny_read_is_denied() {
    let f = fixture();
    std::os::unix::fs::symlink(f.home.join(".ssh"), f.ws.join("innocent")).unwrap();
    let g = guard(&f, SandboxMode::WorkspaceWrite);
    let e = g.check_read("innocent/id_rsa").unwrap_err();
    assert!(matches!(e, GuardError::DenyRead { .. }), "{e}");
    // Lexical `..` tricks land on the same check.
    assert!(g.check_read("sub/../../home/.ssh/id_rsa").is_err());
}

#[test]
fn writes_stay_in_writable_roots_with_positive_control() {
    let f = fixture();
    let g = guard(&f, SandboxMode::WorkspaceWrite);
    assert_eq!(
        g.check_write("new/dir/file.rs").unwrap(),
        f.ws.join("new/dir/file.rs")
    );
    let out = f.outside.join("x");
    assert!(matches!(
        g.check_write(out.to_str().unwrap()),
        Err(GuardError::OutsideWritable { .. })
    ));
    assert!(matches!(
        g.check_write("../outside/x"),
        Err(GuardError::OutsideWritable { .. })
    ));
}

#[test]
fn symlink_out_of_workspace_is_not_writable() {
    let f = fixture();
    std::os::unix::fs::symlink(&f.outside, f.ws.join("link")).unwrap();
    let g = guard(&f, SandboxMode::WorkspaceWrite);
    assert!(matches!(
        g.check_write("link/evil"),
        Err(GuardError::OutsideWritable { .. })
    ));
}

#[test]
fn protected_paths_refuse_writes() {
    let f = fixture();
    let g = guard(&f, SandboxMode::WorkspaceWrite);
    for p in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".envrc",
        ".codewhale/config.toml",
        ".vscode/settings.json",
    ] {
        assert!(
            matches!(g.check_write(p), Err(GuardError::WriteProtected { .. })),
            "{p}: {:?}",
            g.check_write(p)
        );
    }
    assert!(
        g.check_write(".git/objects/ab").is_ok(),
        "objects stay writable"
    );
}

#[test]
fn read_only_writes_nothing_full_access_checks_nothing() {
    let f = fixture();
    let ro = guard(&f, SandboxMode::ReadOnly);
    assert!(ro.check_read("ok.txt").is_ok());
    assert!(matches!(
        ro.check_write("ok.txt"),
        Err(GuardError::ReadOnly { .. })
    ));
    let full = guard(&f, SandboxMode::DangerFullAccess);
    assert!(full
        .check_write(f.outside.join("x").to_str().unwrap())
        .is_ok());
    assert!(full.check_read(".env").is_ok());
}
