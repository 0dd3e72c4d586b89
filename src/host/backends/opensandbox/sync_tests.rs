use super::*;
use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
use std::fs;

fn resolved(ws: &Path, home: &Path) -> ResolvedPolicy {
    let facts = HostFacts {
        homes: vec![home.to_path_buf()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    resolve(&SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws), &facts).unwrap()
}

fn names(tar: &[u8]) -> Vec<String> {
    let mut a = tar::Archive::new(tar);
    let mut v: Vec<String> = a
        .entries()
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches('/')
                .to_string()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn upload_skips_ignored_denied_and_large() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::create_dir_all(ws.join("target/debug")).unwrap();
    fs::write(ws.join(".gitignore"), "target/\n*.log\n").unwrap();
    fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    fs::write(ws.join("target/debug/big"), "x").unwrap();
    fs::write(ws.join("run.log"), "x").unwrap();
    fs::write(ws.join(".env"), "SECRET=1").unwrap();
    fs::write(ws.join(".env.example"), "SECRET=").unwrap();
    fs::write(ws.join("huge.bin"), vec![0u8; 2048]).unwrap();
    let r = resolved(&ws, &t.path().join("home"));
    let a = build_upload(&r, 1024, 1 << 20, None).unwrap();
    assert_eq!(
        names(&a.tar),
        vec![".env.example", ".gitignore", "src", "src/main.rs"]
    );
    assert_eq!(a.files, 3);
    assert_eq!(a.hashes["src/main.rs"], sha256_hex(b"fn main() {}"));
    let skipped: Vec<String> = a
        .skipped
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert!(skipped.contains(&".env".to_string()), "{skipped:?}");
    assert!(skipped.contains(&"huge.bin".to_string()), "{skipped:?}");
    let err = build_upload(&r, 1024, 10, None).unwrap_err();
    assert!(err.contains("max_upload_bytes"), "{err}");
    // Incremental: only what differs from the known remote state travels.
    fs::write(ws.join("src/main.rs"), "fn main() { changed() }").unwrap();
    let b = build_upload(&r, 1024, 1 << 20, Some(&a.hashes)).unwrap();
    assert_eq!(b.files, 1);
    assert!(names(&b.tar).contains(&"src/main.rs".to_string()));
    assert!(!names(&b.tar).contains(&".gitignore".to_string()));
    assert_eq!(b.hashes.len(), 3);
}

#[test]
fn manifest_parsing() {
    let h = "a".repeat(64);
    let lines: Vec<String> = vec![
        format!("{h}  ./f"),
        format!("{h}  ./dir/two  spaces"),
        format!("\\{h}  ./odd\\nname"),
        EXEC_MARKER.to_string(),
        "./dir/two  spaces".to_string(),
    ];
    let m = parse_manifest(&lines);
    assert_eq!(m.files.len(), 2);
    assert_eq!(m.files["dir/two  spaces"], h);
    assert!(m.executable.contains("dir/two  spaces"));
    assert_eq!(m.unreadable.len(), 1);
}

#[test]
fn plan_sorts_changes() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let r = resolved(&ws, &t.path().join("home"));
    let guard = WriteGuard::new(&r);
    let mut baseline = Baseline::new();
    baseline.insert("same".into(), "1".into());
    baseline.insert("changed".into(), "1".into());
    baseline.insert("gone".into(), "1".into());
    baseline.insert(".envrc".into(), "1".into());
    let mut remote = Manifest::default();
    for (p, h) in [
        ("same", "1"),
        ("changed", "2"),
        ("new", "3"),
        (".git/hooks/pre-commit", "4"),
        ("build/out.o", "5"),
    ] {
        remote.files.insert(p.into(), h.into());
    }
    let plan = plan_back(&baseline, &remote, &guard, &|p: &str| {
        p.starts_with("build/")
    });
    assert_eq!(plan.write, vec!["changed".to_string(), "new".to_string()]);
    assert_eq!(plan.delete, vec!["gone".to_string()]);
    let refused: Vec<&str> = plan.refused.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(refused, vec![".git/hooks/pre-commit", ".envrc"]);
    assert_eq!(plan.skipped.len(), 1);
}

#[test]
fn remote_scripts_quote_paths() {
    assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    let c = extract_command("/tmp/x.tar", "/work space", true, &[]);
    assert!(c.starts_with("rm -rf '/work space' && "), "{c}");
    assert!(c.contains("tar -xf '/tmp/x.tar' -C '/work space'"), "{c}");
    let c = extract_command("/tmp/x.tar", "/w", false, &["a b".to_string()]);
    assert!(!c.contains("rm -rf"), "{c}");
    assert!(c.contains("(cd '/w' && rm -f -- './a b')"), "{c}");
    assert!(manifest_command("/w").starts_with("cd '/w' && find . -type f"));
}
