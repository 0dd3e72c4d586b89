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

/// A scoped writer's guard: its scope (a directory and a single file) is
/// writable, opened for real; the rest of the workspace is readable but
/// not writable; the single file's siblings stay out of reach; a missing
/// scope directory is made only where the parent's guard may write.
#[test]
fn a_write_scope_confines_the_file_tools_with_positive_controls() {
    let f = fixture();
    fs::create_dir_all(f.ws.join("src")).unwrap();
    fs::write(f.ws.join("one.md"), "one").unwrap();
    fs::write(f.ws.join("two.md"), "two").unwrap();
    let facts = HostFacts {
        homes: vec![f.home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &f.ws);
    p.write_scope = Some(vec!["src".into(), "one.md".into()]);
    let g = FsGuard::new(&resolve(&p, &facts).unwrap());
    // Positive controls: the scope's directory and its single file.
    let mut o = g.open_write("src/new/x.rs", WriteOpen::Create).unwrap();
    std::io::Write::write_all(&mut o.file, b"x").unwrap();
    assert_eq!(fs::read_to_string(f.ws.join("src/new/x.rs")).unwrap(), "x");
    let mut o = g.open_write("one.md", WriteOpen::Edit).unwrap();
    o.file.set_len(0).unwrap();
    std::io::Write::write_all(&mut o.file, b"ONE").unwrap();
    assert_eq!(fs::read_to_string(f.ws.join("one.md")).unwrap(), "ONE");
    // Outside the scope: refused, nothing changed; still readable.
    for raw in ["two.md", "ok.txt", "other/x"] {
        let e = g.open_write(raw, WriteOpen::Create).unwrap_err();
        assert!(
            matches!(e, OpenError::Denied(GuardError::OutsideWritable { .. })),
            "{raw}: {e}"
        );
    }
    assert_eq!(fs::read_to_string(f.ws.join("two.md")).unwrap(), "two");
    assert!(!f.ws.join("other").exists());
    assert!(g.open_read("two.md").is_ok());
    assert!(g.open_read(".env").is_err());
    // make_dir: inside the scope it makes; outside it is refused.
    assert!(g.make_dir("src/made/deep").is_ok());
    assert!(f.ws.join("src/made/deep").is_dir());
    assert!(g.make_dir("elsewhere").is_err());
    assert!(!f.ws.join("elsewhere").exists());
    // The unscoped guard makes a scope directory anywhere in the workspace.
    let whole = guard(&f, SandboxMode::WorkspaceWrite);
    assert!(whole.make_dir("pkg/new").is_ok());
    assert!(f.ws.join("pkg/new").is_dir());
    assert!(whole.make_dir(".git/hooks/x").is_err());
}
