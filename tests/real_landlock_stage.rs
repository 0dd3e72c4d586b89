#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The landlock tier's forked stage (`host/backends/landlock/stage/`), through
//! the library as the agent uses it: concurrent runs in one process (the
//! stage shares codewhale's memory, so this is where a mistake would
//! show), cancellation taking down a `setsid` daemon, signal exits.

use codewhale::host::run_blocking;
use codewhale::host::{
    BackendChoice, CancelToken, ExecOutcome, ExecRequest, ExitKind, HostSettings,
};
use codewhale::policy::{SandboxMode, SandboxPolicy};
use std::time::{Duration, Instant};

fn settings() -> HostSettings {
    HostSettings {
        backend: BackendChoice::Landlock,
        ..HostSettings::default()
    }
}

fn sh_req(script: &str) -> ExecRequest {
    ExecRequest::new(vec!["sh".into(), "-c".into(), script.into()])
}

fn run(policy: &SandboxPolicy, req: &ExecRequest) -> ExecOutcome {
    run_blocking(policy, &settings(), req).unwrap_or_else(|e| {
        panic!("the landlock tier must run here (a skipped sandbox test is a failure): {e}")
    })
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn concurrent_runs_each_get_their_own_output_and_files() {
    let t = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(t.path()).unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    std::fs::create_dir(ws.join("out")).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let policy = policy.clone();
            std::thread::spawn(move || {
                let mut outs = Vec::new();
                for j in 0..5 {
                    let out = run(
                        &policy,
                        &sh_req(&format!(
                            "echo run-{i}-{j}; echo err-{i}-{j} >&2; echo {i}{j} > out/f-{i}-{j}; exit {}",
                            (i + j) % 3
                        )),
                    );
                    outs.push((i, j, out));
                }
                outs
            })
        })
        .collect();
    for h in handles {
        for (i, j, out) in h.join().unwrap() {
            assert_eq!(out.exit, ExitKind::Code((i + j) % 3), "{out:?}");
            assert_eq!(out.stdout.text(), format!("run-{i}-{j}\n"));
            assert_eq!(out.stderr.text(), format!("err-{i}-{j}\n"));
            let f = ws.join(format!("out/f-{i}-{j}"));
            assert_eq!(std::fs::read_to_string(f).unwrap(), format!("{i}{j}\n"));
        }
    }
}

#[test]
fn cancel_takes_down_the_tree_including_a_setsid_daemon() {
    let t = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(t.path()).unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    let token = CancelToken::new();
    let mut req = sh_req("setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' & sleep 300");
    req.cancel = Some(token.clone());
    let canceller = {
        let ws = ws.clone();
        std::thread::spawn(move || {
            // Cancel once the daemon is up (its pid file is written).
            let deadline = Instant::now() + Duration::from_secs(10);
            while !ws.join("daemon.pid").exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(50));
            token.cancel();
        })
    };
    let started = Instant::now();
    let out = run(&policy, &req);
    canceller.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "cancel did not end the run"
    );
    assert!(!matches!(out.exit, ExitKind::Code(0)), "{out:?}");
    let pid: i32 = std::fs::read_to_string(ws.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Control: the pid was a real process; it must be gone now.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "the setsid daemon {pid} survived the cancel");
}

#[test]
fn a_signal_exit_is_reported_as_the_signal() {
    let t = tempfile::tempdir().unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, t.path());
    let out = run(&policy, &sh_req("kill -TERM $$"));
    assert_eq!(out.exit, ExitKind::Signal(libc::SIGTERM), "{out:?}");
    // Control: a plain exit code stays a code.
    let out = run(&policy, &sh_req("exit 7"));
    assert_eq!(out.exit, ExitKind::Code(7), "{out:?}");
}

#[test]
fn stdin_bytes_reach_the_command() {
    let t = tempfile::tempdir().unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, t.path());
    let mut req = ExecRequest::new(vec!["cat".into()]);
    req.stdin = codewhale::host::StdinSpec::Bytes(b"through the pipe\n".to_vec());
    let out = run(&policy, &req);
    assert_eq!(out.exit, ExitKind::Code(0), "{out:?}");
    assert_eq!(out.stdout.text(), "through the pipe\n");
    // Control: the default stdin is empty (/dev/null), not ours.
    let out = run(&policy, &ExecRequest::new(vec!["cat".into()]));
    assert_eq!(out.exit, ExitKind::Code(0), "{out:?}");
    assert_eq!(out.stdout.text(), "");
}

#[test]
fn the_cli_leaves_no_per_run_directory_behind() {
    let t = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_codewhale"))
        .args(["sandbox", "run", "--backend", "landlock", "-C"])
        .arg(t.path())
        .args(["--", "sh", "-c", r#"touch "$TMPDIR/x" && echo "$TMPDIR""#])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        dir.contains("codewhale-run-"),
        "control: the run had its own TMPDIR: {dir:?}"
    );
    assert!(
        !std::path::Path::new(&dir).exists(),
        "{dir} outlived the codewhale process"
    );
}

#[test]
fn leftovers_of_killed_processes_are_swept() {
    let ws = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // A pid that existed and is gone (reaped), and one that is alive (us).
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let stale = tmp.path().join(format!("codewhale-run-{dead}-stale"));
    let live = tmp
        .path()
        .join(format!("codewhale-run-{}-live", std::process::id()));
    for d in [&stale, &live] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("f"), "x").unwrap();
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_codewhale"))
        .args(["sandbox", "run", "--backend", "landlock", "-C"])
        .arg(ws.path())
        .args(["--", "true"])
        .env("TMPDIR", tmp.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!stale.exists(), "the dead process's directory was kept");
    assert!(
        live.exists(),
        "control: a live process's directory was removed"
    );
}
