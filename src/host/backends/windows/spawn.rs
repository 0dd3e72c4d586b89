//! Windows spawn step: the command runs with the user's full rights (no OS
//! sandbox exists here), with a UTF-8 prefix for `cmd`/PowerShell and a
//! scrubbed environment. Uses the stop-gap [`plain_spawn`] supervision
//! (only the direct child is killed at timeout: no job object yet).

use super::{run_decision, utf8_command, RunDecision, TargetOs};
use crate::host::{plain_spawn, ExecOutcome, ExecRequest, HostError};
use crate::policy::SandboxPolicy;

/// Run `req` unsandboxed, if [`run_decision`] allows it.
pub async fn run(
    policy: &SandboxPolicy,
    allow_unsandboxed: bool,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    let mut enforcement = match run_decision(TargetOs::Windows, policy.mode, allow_unsandboxed)? {
        RunDecision::Unsandboxed(e) => *e,
        RunDecision::UseBackend => {
            return Err(HostError::Unavailable {
                backend: "none".into(),
                reason: "internal: Windows has no sandbox backend".into(),
                remedy: None,
            })
        }
    };
    let wc = utf8_command(&req.argv)
        .ok_or_else(|| HostError::NotFound("(empty command line)".into()))?;
    let base: Vec<(String, String)> = match &req.env {
        Some(e) => e.clone().into_iter().collect(),
        None => std::env::vars().collect(),
    };
    let env = policy.env.apply(base);
    enforcement.env_removed = env.removed.clone();
    let mut cmd = tokio::process::Command::new(&wc.program);
    cmd.args(&wc.args);
    if let Some(tail) = &wc.raw_tail {
        cmd.raw_arg(tail);
    }
    cmd.env_clear().envs(&env.vars);
    cmd.current_dir(req.cwd.clone().unwrap_or_else(|| policy.workspace.clone()));
    plain_spawn::run(cmd, &wc.program, &req, enforcement).await
}
