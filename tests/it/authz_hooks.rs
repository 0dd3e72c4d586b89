#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! tool_call_before hooks run as real processes; their answers drive gate 3.
#![cfg(unix)]

use crate::common;
use codewhale::authz::hooks::{run_before, HookSpec, HooksConfig};
use codewhale::authz::{
    Approval, DecidedBy, Decision, Gate, Mode, Posture, SessionGrants, ToolCall,
};
use common::authz::*;
use std::path::Path;

fn spec(cmd: &str, strict: bool) -> HookSpec {
    HookSpec {
        command: cmd.to_string(),
        strict,
        timeout_ms: None,
        tools: vec![],
    }
}

fn run(specs: Vec<HookSpec>, timeout_ms: Option<u64>) -> Vec<codewhale::authz::HookAnswer> {
    let cfg = HooksConfig {
        timeout_ms,
        tool_call_before: specs,
        ..HooksConfig::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run_before(&cfg, &ToolCall::shell("git status", WS)))
}

#[test]
fn exit_two_is_a_hard_deny_whatever_stdout_says() {
    let a = run(
        vec![spec(
            r#"echo '{"decision":"allow"}'; echo 'policy says no' >&2; exit 2"#,
            false,
        )],
        None,
    );
    assert_eq!(a[0].decision, Decision::Deny);
    assert!(a[0].hard);
    assert_eq!(a[0].reason, "policy says no");
    // It decides the pipeline even for a read-only command that would run.
    let v = verdict_with(
        "git status",
        &Posture::new(Mode::Work, Approval::FullAccess),
        &rules(""),
        &a,
        &SessionGrants::default(),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.decided_by, DecidedBy::Hook);
    assert_eq!(v.gate, Gate::Hooks);
    // Positive control: without the hook it is allowed.
    let ok = verdict_with(
        "git status",
        &Posture::new(Mode::Work, Approval::FullAccess),
        &rules(""),
        &[],
        &SessionGrants::default(),
    );
    assert_eq!(ok.decision, Decision::Allow);
}

#[test]
fn json_decisions_and_silence() {
    let a = run(
        vec![
            spec(
                r#"echo '{"decision":"deny","reason":"not on Fridays"}'"#,
                false,
            ),
            spec(r#"echo '{"decision":"ask"}'"#, false),
            spec("true", false),
            spec("echo not json", false),
            spec("exit 1", false),
        ],
        None,
    );
    let d: Vec<Decision> = a.iter().map(|x| x.decision).collect();
    assert_eq!(
        d,
        vec![
            Decision::Deny,
            Decision::Ask,
            Decision::Allow,
            Decision::Allow,
            Decision::Allow
        ]
    );
    assert_eq!(a[0].reason, "not on Fridays");
    assert!(!a[0].hard);
    // Folded: deny > ask > allow, and the reason goes back.
    let v = verdict_with(
        "ls",
        &Posture::default(),
        &rules(""),
        &a,
        &SessionGrants::default(),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert!(v.reason.contains("not on Fridays"));
    // A hook's ask is a hold: a rules-file allow does not waive it.
    let v = verdict_with(
        "ls",
        &Posture::default(),
        &rules("[[rules]]\ntool='shell'\ncommand='ls'\naction='allow'\n"),
        &a[1..2],
        &SessionGrants::default(),
    );
    assert!(v.is_hold(), "{}", v.render());
}

#[test]
fn strict_hooks_fail_closed() {
    let a = run(
        vec![
            spec("true", true),
            spec("echo nonsense", true),
            spec("exit 3", true),
            spec("/nonexistent/hook", true),
        ],
        None,
    );
    for x in &a {
        assert_eq!(x.decision, Decision::Deny, "{x:?}");
    }
    // Positive control: a strict hook that answers is obeyed.
    let ok = run(vec![spec(r#"echo '{"decision":"allow"}'"#, true)], None);
    assert_eq!(ok[0].decision, Decision::Allow);
}

#[test]
fn environment_and_stdin_reach_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("seen");
    let cmd = format!(
        "printf '%s|%s|%s|%s\\n' \"$CODEWHALE_TOOL_NAME\" \"$CODEWHALE_TOOL_ARGS\" \"$DEEPSEEK_TOOL_NAME\" \"$DEEPSEEK_TOOL_ARGS\" > {o}; cat >> {o}",
        o = out.display()
    );
    let a = run(vec![spec(&cmd, false)], None);
    assert_eq!(a[0].decision, Decision::Allow);
    let seen = std::fs::read_to_string(&out).unwrap();
    let first = seen.lines().next().unwrap();
    assert_eq!(
        first,
        r#"shell|{"command":"git status"}|shell|{"command":"git status"}"#
    );
    assert!(seen.contains("\"tool\":\"shell\""), "{seen}");
}

fn alive(pid: i32) -> bool {
    // Signal 0: existence check. A zombie is reaped quickly by init in CI containers,
    // so also look at /proc state where available.
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s.split_whitespace().nth(2).is_none_or(|st| st != "Z"),
        Err(_) => true,
    }
}

#[test]
fn timeouts_kill_the_hook_tree_and_follow_strictness() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let cmd = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let a = run(vec![spec(&cmd, false)], Some(500));
    assert_eq!(a[0].decision, Decision::Allow);
    assert!(a[0].reason.contains("timed out"), "{}", a[0].reason);
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild (sleep) was killed with the group.
    let mut gone = false;
    for _ in 0..50 {
        if !alive(pid) {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(gone, "sleep {pid} survived the hook timeout");
    let mut strict = spec("sleep 30", true);
    strict.timeout_ms = Some(300);
    let b = run(vec![strict], None);
    assert_eq!(b[0].decision, Decision::Deny);
    assert!(b[0].reason.contains("timed out"));
}

#[test]
fn tool_filter_limits_which_calls_run_the_hook() {
    let mut s = spec("exit 2", false);
    s.tools = vec!["write_file".into()];
    assert!(run(vec![s], None).is_empty());
    let _ = Path::new(WS);
}
