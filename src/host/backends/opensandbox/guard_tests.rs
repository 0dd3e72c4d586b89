use super::*;
use crate::policy::{resolve, HostFacts, SandboxPolicy};
use std::fs;

fn setup(mode: SandboxMode) -> (tempfile::TempDir, WriteGuard) {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::write(ws.join(".env"), "SECRET=1").unwrap();
    let facts = HostFacts {
        homes: vec![t.path().join("home")],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let r = resolve(&SandboxPolicy::new(mode, &ws), &facts).unwrap();
    (t, WriteGuard::new(&r))
}

#[test]
fn protected_deny_read_and_tricks_are_refused() {
    let (_t, g) = setup(SandboxMode::WorkspaceWrite);
    for bad in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".GIT/Hooks/post-checkout",
        ".envrc",
        ".vscode/tasks.json",
        ".codewhale/config.toml",
        ".env",
        "sub/.git/hooks/pre-push",
        "sub/.git",
        "../escape",
        "/etc/passwd",
        "a/../../b",
        "",
    ] {
        assert!(g.check(bad).is_err(), "{bad} should be refused");
    }
    // Positive control: ordinary files, git objects and refs are fine.
    for ok in [
        "f",
        "src/main.rs",
        ".git/objects/ab/cdef",
        ".git/refs/heads/main",
        ".env.example",
        "./g",
    ] {
        assert!(
            g.check(ok).is_ok(),
            "{ok} should be allowed: {:?}",
            g.check(ok)
        );
    }
}

#[cfg(unix)]
#[test]
fn symlinks_are_never_followed() {
    let (t, g) = setup(SandboxMode::WorkspaceWrite);
    let outside = t.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, g.workspace().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("target.txt"), g.workspace().join("filelink")).unwrap();
    assert!(g.write("link/x", b"pwned", false).is_err());
    assert!(g.write("filelink", b"pwned", false).is_err());
    assert!(!outside.join("x").exists());
    assert!(!outside.join("target.txt").exists());
    // Positive control: a real directory works.
    let p = g.write("real/x", b"ok", true).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"ok");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o755
    );
}

#[cfg(unix)]
#[test]
fn existing_mode_is_kept_and_delete_works() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, g) = setup(SandboxMode::WorkspaceWrite);
    let f = g.workspace().join("script.sh");
    fs::write(&f, "old").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o700)).unwrap();
    g.write("script.sh", b"new", false).unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), "new");
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o700
    );
    g.delete("script.sh").unwrap();
    assert!(!f.exists());
    assert!(g.delete(".git/hooks/pre-commit").is_err());
}

#[test]
fn full_access_keeps_only_table_rules() {
    let (_t, g) = setup(SandboxMode::DangerFullAccess);
    assert!(g.check("sub/.git/hooks/x").is_ok());
    assert!(g.check("../x").is_err());
}

/// A scoped writer's sync-back lands only inside its scope.
#[test]
fn a_write_scope_bounds_the_sync_back() {
    let t = tempfile::tempdir().unwrap();
    let ws = fs::canonicalize(t.path()).unwrap().join("ws");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::write(ws.join("one.md"), "x").unwrap();
    let facts = HostFacts {
        homes: vec![t.path().join("home")],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    p.write_scope = Some(vec!["src".into(), "one.md".into()]);
    let g = WriteGuard::new(&resolve(&p, &facts).unwrap());
    for ok in ["src/a.rs", "src/deep/b.rs", "one.md"] {
        assert!(g.check(ok).is_ok(), "{ok}");
    }
    for bad in ["two.md", "srcx/a.rs", "README.md"] {
        let e = g.check(bad).unwrap_err();
        assert!(e.contains("write scope"), "{bad}: {e}");
    }
}
