use super::*;
use crate::agent::tools::guard::FsGuard;
use crate::agent::tools::{patch, ToolStatus};
use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
use serde_json::json;
use std::fs;
use std::path::PathBuf;

fn setup() -> (tempfile::TempDir, PathBuf, FsGuard) {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::write(
        ws.join("src/a.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    fs::write(ws.join("dup.txt"), "x x\n").unwrap();
    fs::write(ws.join(".env"), "TOKEN=secret-in-env\n").unwrap();
    let facts = HostFacts {
        homes: vec![home],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let r = resolve(
        &SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws),
        &facts,
    )
    .unwrap();
    (t, ws, FsGuard::new(&r))
}

fn unwrap_both(r: Result<ToolOutput, ToolOutput>) -> ToolOutput {
    r.unwrap_or_else(|e| e)
}

#[test]
fn read_file_and_its_denial() {
    let (_t, ws, g) = setup();
    let ok = unwrap_both(read_file(&json!({"path": "src/a.rs"}), &g));
    assert_eq!(ok.status, ToolStatus::Ok);
    assert!(ok.content.contains("println"));
    let part = unwrap_both(read_file(
        &json!({"path": "src/a.rs", "offset": 2, "limit": 1}),
        &g,
    ));
    assert_eq!(part.content, "    println!(\"hi\");");
    let denied = unwrap_both(read_file(&json!({"path": ".env"}), &g));
    assert_eq!(denied.status, ToolStatus::Denied);
    assert!(!denied.content.contains("secret-in-env"));
    assert!(denied.sandbox_denied.is_some());
    let missing = unwrap_both(read_file(&json!({"path": "nope"}), &g));
    assert_eq!(missing.error_category, Some("not_found"));
    let _ = ws;
}

#[test]
fn search_skips_denied_files_with_positive_control() {
    let (_t, ws, g) = setup();
    fs::write(ws.join("src/b.rs"), "secret-in-env is mentioned here\n").unwrap();
    let out = unwrap_both(search(&json!({"pattern": "secret-in-env"}), &g));
    assert!(out.content.contains("src/b.rs:1:"), "{}", out.content);
    assert!(!out.content.contains("TOKEN="), "{}", out.content);
    let out = unwrap_both(search(&json!({"pattern": "println", "glob": "*.rs"}), &g));
    assert!(out.content.contains("src/a.rs:2:"), "{}", out.content);
}

#[test]
fn list_dir_lists() {
    let (_t, _ws, g) = setup();
    let out = unwrap_both(list_dir(&json!({}), &g));
    assert!(out.content.lines().any(|l| l == "src/"), "{}", out.content);
    let key_dir = unwrap_both(list_dir(&json!({"path": "../home/.ssh"}), &g));
    assert_eq!(key_dir.status, ToolStatus::Denied);
}

#[test]
fn write_file_inside_and_refusals_leave_host_untouched() {
    let (_t, ws, g) = setup();
    let ok = unwrap_both(write_file(
        &json!({"path": "new/x.txt", "content": "hello"}),
        &g,
    ));
    assert_eq!(ok.status, ToolStatus::Ok);
    assert_eq!(fs::read_to_string(ws.join("new/x.txt")).unwrap(), "hello");
    assert_eq!(ok.files_touched, vec![ws.join("new/x.txt")]);
    let hook = unwrap_both(write_file(
        &json!({"path": ".git/hooks/pre-commit", "content": "evil"}),
        &g,
    ));
    assert_eq!(hook.status, ToolStatus::Denied);
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    let out = unwrap_both(write_file(
        &json!({"path": "../outside.txt", "content": "x"}),
        &g,
    ));
    assert_eq!(out.status, ToolStatus::Denied);
    assert!(!ws.parent().unwrap().join("outside.txt").exists());
}

#[test]
fn edit_file_exact_once() {
    let (_t, ws, g) = setup();
    let ok = unwrap_both(edit_file(
        &json!({"path": "src/a.rs", "old_string": "\"hi\"", "new_string": "\"hello\""}),
        &g,
    ));
    assert_eq!(ok.status, ToolStatus::Ok, "{}", ok.content);
    assert!(fs::read_to_string(ws.join("src/a.rs"))
        .unwrap()
        .contains("\"hello\""));
    let zero = unwrap_both(edit_file(
        &json!({"path": "src/a.rs", "old_string": "absent", "new_string": "y"}),
        &g,
    ));
    assert_eq!(zero.error_category, Some("no_match"));
    let many = unwrap_both(edit_file(
        &json!({"path": "dup.txt", "old_string": "x", "new_string": "y"}),
        &g,
    ));
    assert_eq!(many.error_category, Some("multiple_matches"));
    assert!(many.content.contains("2 times"));
    assert_eq!(fs::read_to_string(ws.join("dup.txt")).unwrap(), "x x\n");
}

#[test]
fn apply_patch_multi_file_create_and_all_or_nothing() {
    let (_t, ws, g) = setup();
    let p = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,3 @@\n fn main() {\n-    println!(\"hi\");\n+    println!(\"patched\");\n }\n--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+new file\n";
    let ok = unwrap_both(patch::apply_patch(&json!({"patch": p}), &g));
    assert_eq!(ok.status, ToolStatus::Ok, "{}", ok.content);
    assert!(fs::read_to_string(ws.join("src/a.rs"))
        .unwrap()
        .contains("patched"));
    assert_eq!(
        fs::read_to_string(ws.join("notes.md")).unwrap(),
        "new file\n"
    );
    assert_eq!(ok.files_touched.len(), 2);
    // Second file does not apply: the first must not change either.
    let bad = "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-new file\n+changed\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-not there\n+x\n";
    let err = unwrap_both(patch::apply_patch(&json!({"patch": bad}), &g));
    assert_eq!(
        err.error_category,
        Some("patch_does_not_apply"),
        "{}",
        err.content
    );
    assert_eq!(
        fs::read_to_string(ws.join("notes.md")).unwrap(),
        "new file\n"
    );
    // A patch aimed at a protected path is refused before anything is written.
    let hook = "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+evil\n";
    let denied = unwrap_both(patch::apply_patch(&json!({"patch": hook}), &g));
    assert_eq!(denied.status, ToolStatus::Denied);
    assert!(!ws.join(".git/hooks/post-checkout").exists());
}

#[test]
fn symlinks_inside_the_workspace_still_work_for_every_tool() {
    let (_t, ws, g) = setup();
    std::os::unix::fs::symlink("src/a.rs", ws.join("alias.rs")).unwrap();
    std::os::unix::fs::symlink("src", ws.join("srclink")).unwrap();
    let r = unwrap_both(read_file(&json!({"path": "alias.rs"}), &g));
    assert_eq!(r.status, ToolStatus::Ok, "{}", r.content);
    assert!(r.content.contains("println"));
    let e = unwrap_both(edit_file(
        &json!({"path": "alias.rs", "old_string": "\"hi\"", "new_string": "\"via link\""}),
        &g,
    ));
    assert_eq!(e.status, ToolStatus::Ok, "{}", e.content);
    assert_eq!(e.files_touched, vec![ws.join("src/a.rs")]);
    assert!(ws.join("alias.rs").is_symlink(), "the link itself stays");
    let w = unwrap_both(write_file(
        &json!({"path": "srclink/new/b.rs", "content": "b\n"}),
        &g,
    ));
    assert_eq!(w.status, ToolStatus::Ok, "{}", w.content);
    assert_eq!(fs::read_to_string(ws.join("src/new/b.rs")).unwrap(), "b\n");
    // Deleting through apply_patch removes the named file, not a target.
    let del = "--- a/srclink/new/b.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n";
    let d = unwrap_both(patch::apply_patch(&json!({"patch": del}), &g));
    assert_eq!(d.status, ToolStatus::Ok, "{}", d.content);
    assert!(!ws.join("src/new/b.rs").exists());
}

#[test]
fn edits_carry_the_files_real_unified_diff() {
    let (_t, ws, g) = setup();
    fs::write(ws.join("notes.txt"), "TODO: say hello\n").unwrap();
    let e = unwrap_both(edit_file(
        &json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"}),
        &g,
    ));
    assert_eq!(
        e.diff.as_deref().map(String::as_str),
        Some("--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-TODO: say hello\n+DONE: say hello\n")
    );
    let w = unwrap_both(write_file(
        &json!({"path": "fresh.txt", "content": "one\n"}),
        &g,
    ));
    assert!(
        w.diff
            .as_deref()
            .unwrap()
            .starts_with("--- /dev/null\n+++ b/fresh.txt\n"),
        "{:?}",
        w.diff
    );
    let w = unwrap_both(write_file(
        &json!({"path": "notes.txt", "content": "DONE: say hello\nbye\n"}),
        &g,
    ));
    assert!(
        w.diff
            .as_deref()
            .unwrap()
            .contains(" DONE: say hello\n+bye\n"),
        "{:?}",
        w.diff
    );
    let p = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1 @@\n DONE: say hello\n-bye\n";
    let o = unwrap_both(patch::apply_patch(&json!({"patch": p}), &g));
    assert!(
        o.diff.as_deref().unwrap().contains("-bye\n"),
        "{:?}",
        o.diff
    );
    // A refused edit has no diff.
    let d = unwrap_both(write_file(&json!({"path": ".env", "content": "x"}), &g));
    assert!(d.diff.is_none());
}
