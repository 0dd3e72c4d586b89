//! `tool_call_before` hooks: run the user's commands and turn their output
//! into answers the pure pipeline (gate 3) consumes.
//!
//! Protocol: the hook runs through the shell (`sh -c`, `cmd /C` on Windows)
//! with `CODEWHALE_TOOL_NAME` / `CODEWHALE_TOOL_ARGS` (and the legacy
//! `DEEPSEEK_TOOL_NAME` / `DEEPSEEK_TOOL_ARGS`) set and the call as JSON on
//! stdin.
//! - exit 2: hard deny, whatever stdout says (stderr is the reason);
//! - exit 0 with JSON `{"decision": "deny"|"ask"|"allow", "reason": …}`: that;
//! - exit 0 with empty or non-JSON output: allow;
//! - anything else (another exit code, a timeout, a spawn failure): allow
//!   with a note, unless the hook is `strict`, in which case no verdict
//!   closes: deny. A strict hook's empty/non-JSON output is also no verdict.
//!
//! Hooks come only from the *user* config; the project override's `hooks`
//! key is ignored and reported (see `config::project`). The other events
//! (`tool_call_after`, `session_start`, …) are reserved names: accepted in
//! the config, observation-only, and not run by this module.

use super::call::ToolCall;
use super::verdict::Decision;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

/// Default time a hook may take.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Most bytes of hook output read (the rest is ignored).
const OUTPUT_CAP: usize = 64 * 1024;

/// One configured hook command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    /// Shell command line to run.
    pub command: String,
    /// No verdict (timeout, crash, empty/non-JSON output) → deny.
    #[serde(default)]
    pub strict: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Only for these tools (empty = every tool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

/// `[hooks]` of the user config.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Default timeout for every hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_call_before: Vec<HookSpec>,
    /// Reserved, observation-only events: accepted, not run here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_call_after: Vec<HookSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_start: Vec<HookSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_end: Vec<HookSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_start: Vec<HookSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_end: Vec<HookSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notification: Vec<HookSpec>,
}

/// A hook's answer, as gate 3 consumes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookAnswer {
    /// The hook's command (to name it in the trace).
    pub hook: String,
    pub decision: Decision,
    /// Exit code 2: a deny nothing overrides.
    pub hard: bool,
    /// Goes back to the model on a deny.
    pub reason: String,
}

#[derive(Deserialize)]
struct HookJson {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
}

/// Map a finished hook's exit code and output to an answer (pure; tested
/// directly, and through real processes in `tests/it/authz_hooks.rs`).
pub fn interpret(spec: &HookSpec, code: Option<i32>, stdout: &str, stderr: &str) -> HookAnswer {
    let answer = |decision, hard, reason: String| HookAnswer {
        hook: spec.command.clone(),
        decision,
        hard,
        reason,
    };
    let no_verdict = |why: String| {
        if spec.strict {
            answer(
                Decision::Deny,
                false,
                format!("strict hook gave no verdict ({why}): denied"),
            )
        } else {
            answer(
                Decision::Allow,
                false,
                format!("hook gave no verdict ({why}); allowed"),
            )
        }
    };
    match code {
        Some(2) => {
            let reason = stderr.trim();
            let reason = if reason.is_empty() {
                "hook exited with code 2".to_string()
            } else {
                reason.to_string()
            };
            answer(Decision::Deny, true, reason)
        }
        Some(0) => {
            let out = stdout.trim();
            if out.is_empty() {
                return if spec.strict {
                    no_verdict("empty output".into())
                } else {
                    answer(Decision::Allow, false, "no output".into())
                };
            }
            match serde_json::from_str::<HookJson>(out) {
                Ok(j) => answer(
                    j.decision,
                    false,
                    j.reason
                        .unwrap_or_else(|| format!("hook decided {}", j.decision)),
                ),
                Err(_) if spec.strict => no_verdict("output is not a JSON decision".into()),
                Err(_) => answer(Decision::Allow, false, "non-JSON output".into()),
            }
        }
        Some(c) => no_verdict(format!("exit code {c}")),
        None => no_verdict("killed by a signal".into()),
    }
}

fn shell_command(line: &str) -> tokio::process::Command {
    #[cfg(windows)]
    {
        let mut c = tokio::process::Command::new("cmd");
        c.arg("/C").arg(line);
        c
    }
    #[cfg(not(windows))]
    {
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c").arg(line);
        c.process_group(0);
        c
    }
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(r: Option<R>) -> String {
    let Some(r) = r else { return String::new() };
    let mut buf = Vec::new();
    let _ = r.take(OUTPUT_CAP as u64).read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// Run one hook for `call`.
pub async fn run_one(spec: &HookSpec, default_timeout_ms: u64, call: &ToolCall) -> HookAnswer {
    let args = call.args.to_string();
    let stdin_json = serde_json::to_string(call).unwrap_or_default();
    let mut cmd = shell_command(&spec.command);
    cmd.env("CODEWHALE_TOOL_NAME", &call.tool)
        .env("CODEWHALE_TOOL_ARGS", &args)
        .env("DEEPSEEK_TOOL_NAME", &call.tool)
        .env("DEEPSEEK_TOOL_ARGS", &args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return interpret_failure(spec, format!("could not start: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read stdin closes the pipe early; that is fine.
        let _ = stdin.write_all(stdin_json.as_bytes()).await;
    }
    let out = read_capped(child.stdout.take());
    let err = read_capped(child.stderr.take());
    let timeout = Duration::from_millis(spec.timeout_ms.unwrap_or(default_timeout_ms));
    let pid = child.id();
    let run = async {
        let (o, e) = tokio::join!(out, err);
        let status = child.wait().await;
        (o, e, status)
    };
    match tokio::time::timeout(timeout, run).await {
        Ok((o, e, Ok(status))) => interpret(spec, status.code(), &o, &e),
        Ok((_, _, Err(e))) => interpret_failure(spec, format!("wait failed: {e}")),
        Err(_) => {
            kill_group(pid);
            interpret_failure(spec, format!("timed out after {} ms", timeout.as_millis()))
        }
    }
}

fn interpret_failure(spec: &HookSpec, why: String) -> HookAnswer {
    let mut a = interpret(spec, Some(-1), "", "");
    a.reason = if spec.strict {
        format!("strict hook gave no verdict ({why}): denied")
    } else {
        format!("hook gave no verdict ({why}); allowed")
    };
    a
}

/// Kill the hook and everything it started (it leads its own process group).
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    #[cfg(not(unix))]
    let _ = pid; // kill_on_drop ends the direct child
}

/// Run every `tool_call_before` hook that applies to `call`, in order.
pub async fn run_before(hooks: &HooksConfig, call: &ToolCall) -> Vec<HookAnswer> {
    let default = hooks.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    let mut answers = Vec::new();
    for spec in &hooks.tool_call_before {
        if !spec.tools.is_empty() && !spec.tools.iter().any(|t| t == &call.tool || t == "*") {
            continue;
        }
        answers.push(run_one(spec, default, call).await);
    }
    answers
}

/// [`run_before`] for synchronous callers (the CLI).
pub fn run_before_blocking(
    hooks: &HooksConfig,
    call: &ToolCall,
) -> std::io::Result<Vec<HookAnswer>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(run_before(hooks, call)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn spec(strict: bool) -> HookSpec {
        HookSpec {
            command: "h".into(),
            strict,
            timeout_ms: None,
            tools: vec![],
        }
    }

    #[test]
    fn protocol() {
        let s = spec(false);
        let a = interpret(&s, Some(2), r#"{"decision":"allow"}"#, "nope");
        assert_eq!(
            (a.decision, a.hard, a.reason.as_str()),
            (Decision::Deny, true, "nope")
        );
        let a = interpret(&s, Some(0), r#"{"decision":"deny","reason":"r"}"#, "");
        assert_eq!(
            (a.decision, a.hard, a.reason.as_str()),
            (Decision::Deny, false, "r")
        );
        assert_eq!(
            interpret(&s, Some(0), r#"{"decision":"ask"}"#, "").decision,
            Decision::Ask
        );
        assert_eq!(interpret(&s, Some(0), "", "").decision, Decision::Allow);
        assert_eq!(
            interpret(&s, Some(0), "hello", "").decision,
            Decision::Allow
        );
        assert_eq!(interpret(&s, Some(1), "", "").decision, Decision::Allow);
        let t = spec(true);
        assert_eq!(interpret(&t, Some(0), "", "").decision, Decision::Deny);
        assert_eq!(interpret(&t, Some(0), "hello", "").decision, Decision::Deny);
        assert_eq!(interpret(&t, Some(1), "", "").decision, Decision::Deny);
        assert_eq!(interpret(&t, None, "", "").decision, Decision::Deny);
        assert_eq!(
            interpret(&t, Some(0), r#"{"decision":"allow"}"#, "").decision,
            Decision::Allow
        );
    }
}
