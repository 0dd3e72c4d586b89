//! The execution host: every command codewhale runs goes through here.
//!
//! `ExecRequest` + `SandboxPolicy` → backend → `ExecOutcome` + `Enforcement`.
//! The host never knows about models, prompts or gates; its clients (the
//! CLI, the agent loop, doctor) never spawn processes themselves.

pub mod backend;
pub mod enforcement;
pub mod error;
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
pub mod opensandbox;
pub mod plain_spawn;
pub mod request;
pub mod seatbelt;
pub mod select;
pub mod select_auto;
#[cfg(target_os = "linux")]
pub mod supervise;
pub mod windows;

pub use backend::{BackendChoice, BackendKind};
pub use enforcement::{Enforcement, EnforcementLevel};
pub use error::HostError;
pub use request::{CapturedOutput, ExecOutcome, ExecRequest, ExitKind, StdinSpec};

use crate::policy::SandboxPolicy;
use std::path::PathBuf;

/// Host-wide settings that are not part of the policy (which backend, where
/// bwrap lives, whether running unsandboxed is acceptable).
#[derive(Clone, Debug, Default)]
pub struct HostSettings {
    pub backend: BackendChoice,
    /// `[sandbox] bwrap_path`; otherwise bwrap is looked up on `PATH`.
    pub bwrap_path: Option<PathBuf>,
    /// Run unsandboxed when no backend is available (labelled as such).
    pub allow_unsandboxed: bool,
    /// `[opensandbox]`: required when the backend is `opensandbox`.
    pub opensandbox: Option<opensandbox::OpenSandboxConfig>,
    /// The codewhale binary bwrap re-executes as the in-sandbox helper
    /// stage; `None` = this executable (set it when embedding the host in
    /// another binary, e.g. tests).
    pub helper_exe: Option<PathBuf>,
}

/// Run one command under `policy`.
///
/// Selection and dispatch live in [`select`]; the blocking work runs on a
/// blocking thread, while the process itself is forked from the host's
/// long-lived spawner thread (see [`supervise`]) so a retiring tokio worker
/// cannot take a running sandbox down with it.
pub async fn run(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    if settings.backend == BackendChoice::Opensandbox && policy.mode.is_sandboxed() {
        let cfg = settings
            .opensandbox
            .as_ref()
            .ok_or_else(|| HostError::Unavailable {
                backend: "opensandbox".into(),
                reason: "no [opensandbox] configuration".into(),
                remedy: Some(
                    "add an [opensandbox] section with url (and api_key or OPEN_SANDBOX_API_KEY) to the config".into(),
                ),
            })?;
        let resolved = crate::policy::resolve(policy, &crate::policy::HostFacts::detect())?;
        return opensandbox::run(cfg, &resolved, req).await;
    }
    let policy = policy.clone();
    let settings = settings.clone();
    tokio::task::spawn_blocking(move || select::run_blocking(&policy, &settings, &req))
        .await
        .map_err(|e| HostError::io("host task", std::io::Error::other(e.to_string())))?
}
