#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
#![cfg(unix)]
//! Cancellation through the public host API: the token (and dropping the
//! `host::run` future) stops a long command within a second, killing its
//! whole process group, through the one Unix supervisor
//! (`host::process::supervise`) that the macOS Seatbelt backend uses too
//! (checked for `aarch64-apple-darwin` by `ci/cross-check`).

use codewhale::host::{CancelToken, ExecRequest, HostSettings};
use codewhale::policy::{SandboxMode, SandboxPolicy};
use std::time::{Duration, Instant};

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn eventually_dead(pid: i32) -> bool {
    (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        !alive(pid)
    })
}

fn long_command(dir: &std::path::Path) -> ExecRequest {
    let pidfile = dir.join("bg.pid");
    let mut req = ExecRequest::new(vec![
        "sh".into(),
        "-c".into(),
        format!("sleep 60 & echo $! > {}; sleep 60", pidfile.display()),
    ]);
    req.timeout = Some(Duration::from_secs(120));
    req
}

fn bg_pid(dir: &std::path::Path) -> i32 {
    let f = dir.join("bg.pid");
    for _ in 0..200 {
        if let Some(p) = std::fs::read_to_string(&f)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return p;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the command never started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_long_command_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    // No sandbox: the path that is the same on every Unix (the sandboxed
    // tiers add their own stage in front of the same supervisor).
    let policy = SandboxPolicy::new(SandboxMode::DangerFullAccess, dir.path());
    let settings = HostSettings::default();
    let token = CancelToken::new();
    let mut req = long_command(dir.path());
    req.cancel = Some(token.clone());
    let d = dir.path().to_path_buf();
    let run = tokio::spawn(async move { codewhale::host::run(&policy, &settings, req).await });
    let bg = tokio::task::spawn_blocking(move || bg_pid(&d))
        .await
        .unwrap();
    assert!(alive(bg), "control: the background job runs before cancel");
    let t = Instant::now();
    token.cancel();
    let out = run.await.unwrap().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    assert!(!out.timed_out);
    assert!(
        eventually_dead(bg),
        "background job {bg} survived the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_cancels_it() {
    let dir = tempfile::tempdir().unwrap();
    let policy = SandboxPolicy::new(SandboxMode::DangerFullAccess, dir.path());
    let settings = HostSettings::default();
    let req = long_command(dir.path());
    let d = dir.path().to_path_buf();
    let run = codewhale::host::run(&policy, &settings, req);
    let watch = tokio::task::spawn_blocking(move || bg_pid(&d));
    // The run future is dropped when the timeout fires.
    let r = tokio::time::timeout(Duration::from_millis(500), run).await;
    assert!(r.is_err(), "the command should still be running");
    let bg = watch.await.unwrap();
    assert!(eventually_dead(bg), "background job {bg} survived the drop");
}
