//! The OpenSandbox backend: run commands in a remote OpenSandbox sandbox
//! over its real HTTP API (lifecycle server + execd; the OpenAPI files live
//! in `../shared/opensandbox-spec/`).
//!
//! Flow of one [`run`]: find this workspace's sandbox by metadata label or
//! create one (`POST /v1/sandboxes` → 202), poll until `Running`, discover
//! execd (`GET /v1/sandboxes/{id}/endpoints/44772`), wait for `/ping`,
//! renew the expiration, upload the workspace, `POST /command`, sync back
//! changed files through the local write guard, then delete the sandbox
//! (or keep it, by config). [`OpenSandboxSession`] keeps the sandbox for
//! many commands.
//!
//! Security model (see `docs/OPENSANDBOX.md`):
//! - Isolation of the command is the deployment's (container, gVisor,
//!   Kata, …); codewhale cannot verify it and reports `External`.
//! - What codewhale does enforce: deny-read paths and `.gitignore`d files
//!   are never uploaded; the environment is scrubbed like for local
//!   backends; nothing comes back in `read-only`; in `workspace-write`
//!   only regular files come back, and never onto write-protected or
//!   deny-read paths or through symlinks ([`guard`]).
//! - The lifecycle key goes only to the lifecycle server, never to execd;
//!   plain `http://` to a non-loopback host is refused unless allowed.

pub mod command;
pub mod config;
pub mod egress;
pub mod error;
pub mod events;
pub mod execd;
pub mod guard;
mod http;
pub mod lifecycle;
pub mod session;
pub mod sidecar;
pub mod sync;

pub use config::{ConfigError, OpenSandboxConfig};
pub use error::OpenSandboxError;
pub use session::OpenSandboxSession;

use crate::host::{ExecOutcome, ExecRequest, HostError};
use crate::policy::ResolvedPolicy;

/// Run one command: open a session, run, close it (delete unless `keep`).
///
/// The sandbox is closed even when the command fails; a failure to delete
/// is reported only if the command itself succeeded.
pub async fn run(
    cfg: &OpenSandboxConfig,
    resolved: &ResolvedPolicy,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    let env = crate::host::child_env::ChildEnv::for_run(&resolved.env, &req);
    run_with_env(cfg, resolved, req, env).await
}

/// [`run`] with the environment the dispatcher built (the one scrub).
pub async fn run_with_env(
    cfg: &OpenSandboxConfig,
    resolved: &ResolvedPolicy,
    req: ExecRequest,
    env: crate::host::child_env::ChildEnv,
) -> Result<ExecOutcome, HostError> {
    command::precheck(&cfg.remote_workdir, resolved, &req)?;
    let mut session = OpenSandboxSession::open(cfg, resolved).await?;
    let result = session.exec_with_env(resolved, req, env).await;
    let closed = session.close().await;
    let mut outcome = result?;
    if let Err(e) = closed {
        outcome
            .enforcement
            .partial
            .push(crate::host::PartialItem::new(
                crate::host::Shortfall::Remote,
                format!("deleting the sandbox failed: {e}"),
            ));
    }
    Ok(outcome)
}
