use super::*;
use std::fs;

fn sh(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository with a commit, a tracked change, an untracked file, an
/// untracked `.env`, an ignored file and a binary file.
fn repo(t: &Path) -> PathBuf {
    let ws = t.join("ws");
    fs::create_dir_all(ws.join("src")).unwrap();
    sh(&ws, &["init", "-q", "-b", "main"]);
    fs::write(ws.join("src/lib.txt"), "one\ntwo\n").unwrap();
    fs::write(ws.join(".gitignore"), "ignored.txt\n").unwrap();
    fs::write(ws.join("logo.bin"), [0u8, 1, 2, 255]).unwrap();
    sh(&ws, &["add", "-A"]);
    sh(&ws, &["commit", "-q", "-m", "init"]);
    fs::write(ws.join("src/lib.txt"), "one\nTWO\n").unwrap();
    fs::write(ws.join("notes.txt"), "untracked\n").unwrap();
    fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    fs::write(ws.join("ignored.txt"), "ignored\n").unwrap();
    ws
}

#[test]
fn a_checkout_has_the_uncommitted_state_and_returns_the_childs_change() {
    let t = tempfile::tempdir().unwrap();
    let ws = repo(t.path());
    let home = t.path().join("cw");
    let c = Checkout::create(&home, &ws, &[]).unwrap();
    let co = c.workspace().to_path_buf();
    assert!(co.starts_with(home.join("worktrees")));
    assert_eq!(
        fs::read_to_string(co.join("src/lib.txt")).unwrap(),
        "one\nTWO\n"
    );
    assert_eq!(
        fs::read_to_string(co.join("notes.txt")).unwrap(),
        "untracked\n"
    );
    assert!(!co.join(".env").exists(), "a .env was copied");
    assert!(!co.join("ignored.txt").exists());
    // The user's repository knows nothing of it.
    assert_eq!(sh(&ws, &["worktree", "list"]).lines().count(), 1);
    // Nothing changed yet: an empty diff.
    assert_eq!(c.diff().unwrap(), ChildDiff::default());
    // The child's changes.
    fs::write(co.join("src/lib.txt"), "one\nTWO\nthree\n").unwrap();
    fs::write(co.join("new.txt"), "new\n").unwrap();
    fs::remove_file(co.join("notes.txt")).unwrap();
    fs::write(co.join("logo.bin"), [9u8, 0, 9]).unwrap();
    fs::write(co.join("empty.txt"), "").unwrap();
    let d = c.diff().unwrap();
    let mut files: Vec<String> = d.files.iter().map(|p| p.display().to_string()).collect();
    files.sort();
    assert_eq!(
        files,
        [
            "empty.txt",
            "logo.bin",
            "new.txt",
            "notes.txt",
            "src/lib.txt"
        ]
    );
    assert!(
        d.diff.contains("+++ b/src/lib.txt") && d.diff.contains("+three"),
        "{}",
        d.diff
    );
    assert!(d.diff.contains("+++ b/new.txt") && d.diff.contains("--- a/notes.txt"));
    assert!(!d.diff.contains("logo.bin"), "{}", d.diff);
    let omitted: Vec<_> = d
        .omitted
        .iter()
        .map(|o| o.path.display().to_string())
        .collect();
    assert_eq!(omitted, ["logo.bin", "empty.txt"], "{:?}", d.omitted);
    // The user's workspace is untouched.
    assert_eq!(
        fs::read_to_string(ws.join("src/lib.txt")).unwrap(),
        "one\nTWO\n"
    );
    assert!(ws.join("notes.txt").exists() && !ws.join("new.txt").exists());
    let root = c.root().to_path_buf();
    drop(c);
    assert!(!root.exists(), "checkout left behind");
    assert_eq!(
        fs::read_dir(home.join("worktrees")).unwrap().count(),
        0,
        "lock left behind"
    );
}

#[test]
fn a_workspace_in_a_subdirectory_gets_paths_relative_to_it() {
    let t = tempfile::tempdir().unwrap();
    let ws = repo(t.path());
    let c = Checkout::create(&t.path().join("cw"), &ws.join("src"), &[]).unwrap();
    assert!(c.workspace().ends_with("src"));
    fs::write(c.workspace().join("lib.txt"), "changed\n").unwrap();
    let d = c.diff().unwrap();
    assert_eq!(d.files, [PathBuf::from("lib.txt")]);
    assert!(d.diff.contains("+++ b/lib.txt"), "{}", d.diff);
}

#[test]
fn deny_listed_files_are_not_brought_in() {
    let t = tempfile::tempdir().unwrap();
    let ws = repo(t.path());
    fs::write(ws.join("secret.txt"), "s\n").unwrap();
    let deny = [fs::canonicalize(ws.join("secret.txt")).unwrap()];
    let c = Checkout::create(&t.path().join("cw"), &ws, &deny).unwrap();
    assert!(!c.workspace().join("secret.txt").exists());
    assert!(c.workspace().join("notes.txt").exists());
}

#[test]
fn not_a_repository_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("plain");
    fs::create_dir_all(&ws).unwrap();
    let e = Checkout::create(&t.path().join("cw"), &ws, &[])
        .err()
        .unwrap();
    assert!(matches!(e, WorktreeError::NotARepo(_)), "{e}");
    assert!(e.to_string().contains("needs a git repository"), "{e}");
    assert!(
        !t.path().join("cw/worktrees").exists()
            || fs::read_dir(t.path().join("cw/worktrees")).unwrap().count() == 0
    );
}

#[test]
fn a_diff_over_the_bound_is_an_error_naming_its_size() {
    let t = tempfile::tempdir().unwrap();
    let ws = repo(t.path());
    let c = Checkout::create(&t.path().join("cw"), &ws, &[]).unwrap();
    let big: String = (0..MAX_DIFF_BYTES / 10 + 10)
        .map(|i| format!("{i:09}\n"))
        .collect();
    fs::write(c.workspace().join("big.txt"), big).unwrap();
    let e = c.diff().err().unwrap();
    match e {
        WorktreeError::TooLarge { size } => assert!(size > MAX_DIFF_BYTES),
        e => panic!("{e}"),
    }
}

#[cfg(unix)]
#[test]
fn a_leftover_whose_lock_is_free_is_removed_at_the_next_start() {
    let t = tempfile::tempdir().unwrap();
    let ws = repo(t.path());
    let home = t.path().join("cw");
    let dir = home.join("worktrees");
    fs::create_dir_all(dir.join("dead/src")).unwrap();
    fs::write(dir.join("dead.lock"), "").unwrap();
    // A live one (its lock held) stays.
    let live = Checkout::create(&home, &ws, &[]).unwrap();
    assert!(!dir.join("dead").exists() && !dir.join("dead.lock").exists());
    let other = Checkout::create(&home, &ws, &[]).unwrap();
    assert!(live.root().exists() && other.root().exists());
}

#[test]
fn the_diff_has_a_and_b_prefixes_whatever_the_git_config() {
    let t = tempfile::tempdir().unwrap();
    let ws = repo(t.path());
    let c = Checkout::create(&t.path().join("cw"), &ws, &[]).unwrap();
    // As a user's global config would say (set where the host git reads it).
    sh(c.root(), &["config", "diff.mnemonicPrefix", "true"]);
    sh(c.root(), &["config", "diff.noprefix", "true"]);
    fs::write(c.workspace().join("src/lib.txt"), "x\n").unwrap();
    let d = c.diff().unwrap();
    assert!(
        d.diff.contains("--- a/src/lib.txt\n+++ b/src/lib.txt\n"),
        "{}",
        d.diff
    );
}
