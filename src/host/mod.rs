//! The execution host: every command codewhale runs goes through here.
//!
//! `ExecRequest` + `SandboxPolicy` → backend → `ExecOutcome` + `Enforcement`.
//! The host never knows about models, prompts or gates; its clients (the
//! CLI, the agent loop, doctor) never spawn processes themselves.

pub mod backend;
pub mod enforcement;
pub mod error;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
pub mod opensandbox;
pub mod plain_spawn;
pub mod request;
pub mod seatbelt;
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
}

/// Run one command under `policy`.
///
/// PLACEHOLDER until the bubblewrap backend lands: always reports the
/// sandbox as unavailable.
pub async fn run(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    let _ = (policy, settings, req);
    Err(HostError::Unavailable {
        backend: "auto".into(),
        reason: "no backend is built yet".into(),
        remedy: None,
    })
}
