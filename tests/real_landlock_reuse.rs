#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The landlock tier reuses a prepared ruleset across runs of the same
//! policy (`host/backends/landlock/cache.rs`). These runs go through the
//! library, as the agent's tool calls do (one process, many runs), and
//! check that reuse never carries a stale ruleset into the next run: a
//! `.env` one run creates is unreadable in the next, and a file one run
//! creates in a carved directory is readable in the next (the cached
//! grants would miss it).

use codewhale::host::run_blocking;
use codewhale::host::{BackendChoice, ExecOutcome, ExecRequest, ExitKind, HostSettings};
use codewhale::policy::{SandboxMode, SandboxPolicy};

fn sh(policy: &SandboxPolicy, script: &str) -> ExecOutcome {
    let settings = HostSettings {
        backend: BackendChoice::Landlock,
        ..HostSettings::default()
    };
    let req = ExecRequest::new(vec!["sh".into(), "-c".into(), script.into()]);
    run_blocking(policy, &settings, &req).unwrap_or_else(|e| {
        panic!("the landlock tier must run here (a skipped sandbox test is a failure): {e}")
    })
}

fn ok(out: &ExecOutcome) -> bool {
    out.exit == ExitKind::Code(0)
}

/// `cat .env` got nothing of the file: under the mask (the default where
/// a mount namespace is available) it reads the empty file mounted over
/// it; under the carve+opener fallback the open fails. Which one ran is in
/// the report, so each is held to its own behaviour.
fn denied(out: &ExecOutcome) -> bool {
    use codewhale::host::enforcement::DenyReadStrategy;
    let secret = out.stdout.text().contains("s3cret");
    match out.enforcement.deny_read_strategy {
        Some(DenyReadStrategy::Mask) => ok(out) && out.stdout.text().is_empty() && !secret,
        Some(DenyReadStrategy::CarveOpener) => !ok(out) && !secret,
        _ => false,
    }
}

#[test]
fn reuse_never_carries_a_stale_ruleset_into_the_next_run() {
    let t = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(t.path()).unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);

    // Run 1: no .env yet, the workspace root is writable.
    let out = sh(
        &policy,
        "echo TOKEN=s3cret > .env && echo hello > notes.txt",
    );
    assert!(ok(&out), "{out:?}");
    assert_eq!(out.enforcement.backend.to_string(), "landlock");
    assert!(ws.join(".env").is_file() && ws.join("notes.txt").is_file());

    // Run 2: the new .env is withheld now ...
    let out = sh(&policy, "cat .env");
    assert!(
        denied(&out),
        "the .env written by the previous run was readable: {out:?}"
    );
    // ... and its sibling, created before this plan, is granted (control).
    let out = sh(&policy, "cat notes.txt");
    assert!(ok(&out), "{out:?}");
    assert_eq!(out.stdout.text(), "hello\n");

    // Run 3: nothing changed, the same prepared ruleset serves again and
    // still denies and grants the same.
    let out = sh(&policy, "cat .env");
    assert!(denied(&out), "{out:?}");
    let out = sh(&policy, "cat notes.txt");
    assert!(ok(&out), "{out:?}");

    // A file created by a host process in the carved workspace root since
    // the last plan: the cached grants do not cover it, the directory's
    // mtime changed, so the next run plans again and can read it.
    std::fs::write(ws.join("later.txt"), "later\n").unwrap();
    let out = sh(&policy, "cat later.txt");
    assert!(ok(&out), "a stale ruleset was reused: {out:?}");
    assert_eq!(out.stdout.text(), "later\n");
}

#[test]
fn every_run_gets_an_empty_tmpdir() {
    let t = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(t.path()).unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    let out = sh(&policy, r#"echo left > "$TMPDIR/f" && ls "$TMPDIR""#);
    assert!(ok(&out), "{out:?}");
    assert_eq!(out.stdout.text(), "f\n", "control: TMPDIR is writable");
    let out = sh(&policy, r#"ls -A "$TMPDIR"; test ! -e "$TMPDIR/f""#);
    assert!(ok(&out), "a file from the previous run survived: {out:?}");
    assert_eq!(out.stdout.text(), "");
}
