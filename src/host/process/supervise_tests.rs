//! Real-process tests of supervision (no sandbox needed).

use super::*;
use std::os::fd::FromRawFd;

fn req(timeout_ms: Option<u64>) -> ExecRequest {
    let mut r = ExecRequest::new(vec![]);
    r.timeout = timeout_ms.map(Duration::from_millis);
    r
}

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script);
    c
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn output_flood_is_capped_while_streaming() {
    let mut r = req(Some(1000));
    r.output_cap = 4096;
    let out = run(Command::new("yes"), Vec::new(), &r).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.stdout.bytes.len(), 4096);
    assert!(out.stdout.truncated);
    assert!(out.stdout.total > 1_000_000, "{}", out.stdout.total);
    assert!(out.stdout.text().contains("output truncated"));
}

#[test]
fn small_output_is_kept_whole() {
    let out = run(
        sh("echo hello; echo oops >&2; exit 3"),
        Vec::new(),
        &req(None),
    )
    .unwrap();
    assert_eq!(out.exit, ExitKind::Code(3));
    assert_eq!(out.stdout.bytes, b"hello\n");
    assert_eq!(out.stderr.bytes, b"oops\n");
    assert!(!out.stdout.truncated);
}

#[test]
fn signal_exit_is_reported() {
    let out = run(sh("kill -TERM $$"), Vec::new(), &req(None)).unwrap();
    assert_eq!(out.exit, ExitKind::Signal(libc::SIGTERM));
    assert_eq!(out.exit.shell_code(), 143);
}

#[test]
fn timeout_kills_the_whole_group() {
    let started = Instant::now();
    let out = run(
        sh("sleep 100 & echo $!; sleep 100"),
        Vec::new(),
        &req(Some(300)),
    )
    .unwrap();
    assert!(out.timed_out);
    assert!(started.elapsed() < Duration::from_secs(5));
    let bg: i32 = String::from_utf8_lossy(&out.stdout.bytes)
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(bg), "background sleep {bg} survived the timeout");
}

#[test]
fn background_jobs_do_not_survive_a_normal_exit() {
    let out = run(sh("sleep 100 & echo $!"), Vec::new(), &req(Some(10_000))).unwrap();
    assert!(!out.timed_out);
    let bg: i32 = String::from_utf8_lossy(&out.stdout.bytes)
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(bg), "background sleep {bg} survived");
}

#[test]
fn child_gets_a_new_session_without_terminal() {
    let out = run(sh("cat /proc/$$/stat; echo $$"), Vec::new(), &req(None)).unwrap();
    let text = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
    let mut lines = text.lines();
    let stat = lines.next().unwrap();
    let pid: i64 = lines.next().unwrap().trim().parse().unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // After "comm)": state ppid pgrp session tty_nr
    assert_eq!(fields[2].parse::<i64>().unwrap(), pid, "pgrp");
    assert_eq!(fields[3].parse::<i64>().unwrap(), pid, "session");
    assert_eq!(fields[4], "0", "controlling tty");
}

/// An fd without CLOEXEC in this process: leaked by a plain spawn (the
/// positive control), not by ours.
#[test]
fn inheritable_fds_do_not_leak() {
    let f = std::fs::File::open("/proc/self/status").unwrap();
    // SAFETY: dup of a live fd; the new fd is owned below.
    let raw = unsafe { libc::dup(f.as_raw_fd()) };
    assert!(raw > 2);
    // SAFETY: raw is a fresh fd we own.
    let owned = unsafe { OwnedFd::from_raw_fd(raw) };
    let script = format!("test -e /proc/self/fd/{raw} && echo leaked || echo clean");
    let control = sh(&script).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&control.stdout).trim(), "leaked");
    let out = run(sh(&script), Vec::new(), &req(None)).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout.bytes).trim(), "clean");
    // And an fd we pass on purpose does arrive.
    let out = run(sh(&script), vec![owned], &req(None)).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout.bytes).trim(), "leaked");
}

#[test]
fn stdin_bytes_are_delivered() {
    let mut r = req(None);
    r.stdin = StdinSpec::Bytes(b"from stdin".to_vec());
    let out = run(Command::new("cat"), Vec::new(), &r).unwrap();
    assert_eq!(out.stdout.bytes, b"from stdin");
}

/// The parent-death signal follows the forking *thread*. A child forked by
/// a thread that then exits is killed (control: a plain spawn with the same
/// PR_SET_PDEATHSIG); one forked via the spawner survives.
#[test]
fn a_finished_thread_does_not_kill_the_child() {
    let control = std::thread::spawn(|| {
        let mut c = sh("sleep 1; exit 7");
        // SAFETY: prctl only, between fork and exec.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                Ok(())
            });
        }
        c.spawn().unwrap()
    })
    .join()
    .unwrap();
    let ours = std::thread::spawn(|| spawn(sh("sleep 1; exit 7"), Vec::new(), true).unwrap())
        .join()
        .unwrap();
    let mut control = control;
    let mut ours = ours;
    assert_eq!(control.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(ours.wait().unwrap().code(), Some(7));
}

#[test]
fn cancel_kills_the_whole_group_and_returns() {
    let token = crate::host::CancelToken::new();
    let mut r = req(None);
    r.cancel = Some(token.clone());
    let t = token.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        t.cancel();
    });
    let started = Instant::now();
    let out = run(sh("sleep 100 & echo $!; sleep 100"), Vec::new(), &r).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cancel was not noticed"
    );
    assert!(!out.timed_out);
    assert_eq!(out.exit, ExitKind::Signal(libc::SIGKILL));
    let bg: i32 = String::from_utf8_lossy(&out.stdout.bytes)
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(bg), "background sleep {bg} survived the cancel");
    // Control: an uncancelled token changes nothing.
    let mut r = req(None);
    r.cancel = Some(crate::host::CancelToken::new());
    let out = run(sh("echo ok"), Vec::new(), &r).unwrap();
    assert_eq!(out.exit, ExitKind::Code(0));
}
