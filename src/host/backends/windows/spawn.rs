//! Windows spawn step: the command runs with the user's full rights (no OS
//! sandbox exists here), with a UTF-8 prefix for `cmd`/PowerShell and a
//! scrubbed environment, under the minimal Windows supervisor
//! ([`crate::host::process::windows`]: only the direct child is killed at
//! timeout or cancel, no job object yet).

use super::{utf8_command, NO_SANDBOX_NOTICE};
use crate::host::child_env::ChildEnv;
use crate::host::process::windows as supervise;
use crate::host::{Enforcement, ExecOutcome, ExecRequest, HostError};
use crate::policy::SandboxPolicy;

/// Run `req` unsandboxed (selection already allowed it; `why` says why).
pub fn run(
    policy: &SandboxPolicy,
    req: &ExecRequest,
    env: ChildEnv,
    why: &str,
) -> Result<ExecOutcome, HostError> {
    let mut enforcement =
        Enforcement::unsandboxed(policy.mode, &format!("{why}; {NO_SANDBOX_NOTICE}"));
    let wc = utf8_command(&req.argv)
        .ok_or_else(|| HostError::NotFound("(empty command line)".into()))?;
    enforcement.env_removed = env.removed().to_vec();
    let mut cmd = std::process::Command::new(&wc.program);
    cmd.args(&wc.args);
    if let Some(tail) = &wc.raw_tail {
        use std::os::windows::process::CommandExt;
        cmd.raw_arg(tail);
    }
    cmd.env_clear().envs(env.vars());
    cmd.current_dir(req.cwd.clone().unwrap_or_else(|| policy.workspace.clone()));
    let sup = supervise::run(cmd, &wc.program, req)?;
    Ok(sup.into_outcome(enforcement))
}
