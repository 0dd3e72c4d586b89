//! The stop-gap spawn step the Seatbelt and Windows backends use, exercised
//! with real processes on the build host (it is portable tokio code; only
//! the `sandbox-exec` in front of it needs a Mac).
#![cfg(unix)]

use codewhale::host::plain_spawn;
use codewhale::host::{Enforcement, ExecRequest, ExitKind, HostError, StdinSpec};
use codewhale::policy::SandboxMode;
use std::time::Duration;
use tokio::process::Command;

fn sh(script: &str, new_session: bool) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(script);
    if new_session {
        plain_spawn::new_session(&mut c);
    }
    c
}

fn req() -> ExecRequest {
    ExecRequest::new(vec!["/bin/sh".into()])
}

fn enf() -> Enforcement {
    Enforcement::unsandboxed(SandboxMode::WorkspaceWrite, "test")
}

/// Alive = exists and is not a zombie waiting for its reaper.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

async fn wait_dead(pid: i32) -> bool {
    for _ in 0..50 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn exit_code_and_both_streams() {
    let o = plain_spawn::run(
        sh("echo hi; echo err >&2; exit 3", true),
        "sh",
        &req(),
        enf(),
    )
    .await
    .expect("run");
    assert_eq!(o.exit, ExitKind::Code(3));
    assert_eq!(o.stdout.text(), "hi\n");
    assert_eq!(o.stderr.text(), "err\n");
    assert!(!o.timed_out);
    assert_eq!(o.shell_code(), 3);
}

#[tokio::test]
async fn signal_is_reported_as_signal() {
    let o = plain_spawn::run(sh("kill -TERM $$", true), "sh", &req(), enf())
        .await
        .expect("run");
    assert_eq!(o.exit, ExitKind::Signal(15));
    assert_eq!(o.shell_code(), 143);
}

#[tokio::test]
async fn output_is_capped_and_counted() {
    let mut r = req();
    r.output_cap = 1000;
    let o = plain_spawn::run(sh("head -c 100000 /dev/zero", true), "sh", &r, enf())
        .await
        .expect("run");
    assert_eq!(o.stdout.bytes.len(), 1000);
    assert_eq!(o.stdout.total, 100_000);
    assert!(o.stdout.truncated);
}

#[tokio::test]
async fn stdin_bytes_are_fed() {
    let mut r = req();
    r.stdin = StdinSpec::Bytes(b"abc".to_vec());
    let o = plain_spawn::run(sh("cat", true), "sh", &r, enf())
        .await
        .expect("run");
    assert_eq!(o.stdout.text(), "abc");
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let mut r = req();
    r.timeout = Some(Duration::from_millis(300));
    let o = plain_spawn::run(sh("sleep 30 & echo $!; sleep 30", true), "sh", &r, enf())
        .await
        .expect("run");
    assert!(o.timed_out);
    assert_eq!(o.shell_code(), 124);
    assert!(o.duration < Duration::from_secs(10));
    let bg: i32 = o.stdout.text().trim().parse().expect("pid");
    assert!(
        wait_dead(bg).await,
        "background sleep {bg} survived the timeout"
    );
}

#[tokio::test]
async fn background_jobs_die_at_exit_only_with_a_session() {
    // Positive control: without its own session the group kill cannot
    // reach the background job, which survives.
    let o = plain_spawn::run(
        sh("sleep 30 >/dev/null 2>&1 & echo $!", false),
        "sh",
        &req(),
        enf(),
    )
    .await
    .expect("run");
    let survivor: i32 = o.stdout.text().trim().parse().expect("pid");
    assert!(
        alive(survivor),
        "control: the job should survive without a session"
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(survivor),
        nix::sys::signal::Signal::SIGKILL,
    );
    // With a session, nothing is left behind.
    let o = plain_spawn::run(
        sh("sleep 30 >/dev/null 2>&1 & echo $!", true),
        "sh",
        &req(),
        enf(),
    )
    .await
    .expect("run");
    let bg: i32 = o.stdout.text().trim().parse().expect("pid");
    assert!(wait_dead(bg).await, "background job {bg} survived");
}

#[tokio::test]
async fn missing_program_is_not_found() {
    let c = Command::new("/nonexistent/codewhale-no-such-program");
    let e = plain_spawn::run(c, "codewhale-no-such-program", &req(), enf())
        .await
        .expect_err("not found");
    assert!(matches!(e, HostError::NotFound(_)), "{e}");
    assert_eq!(e.exit_code(), 127);
}
