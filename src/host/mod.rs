//! The execution host: every command codewhale runs goes through here.
//!
//! `ExecRequest` + `SandboxPolicy` → backend → `ExecOutcome` + `Enforcement`.
//! The host never knows about models, prompts or gates; its clients (the
//! CLI, the agent loop, doctor) never spawn processes themselves.

pub mod backend;
pub mod backends;
pub mod child_env;
pub mod dispatch;
#[cfg(unix)]
pub mod egress;
pub mod enforcement;
pub mod error;
pub mod explain;
pub mod hints;
#[cfg(unix)]
pub mod integrity;
pub mod preview;
pub mod process;
pub mod request;
pub mod seccomp;
pub mod select;

// The backends' public faces, at their short paths.
pub use backends::{opensandbox, seatbelt, windows};

pub use backend::{BackendChoice, BackendKind};
/// The bwrap tier's in-sandbox helper stage (the hidden `__sandbox-helper`
/// subcommand and the small `codewhale-sandbox-helper` binary).
#[cfg(target_os = "linux")]
pub use backends::bwrap::helper::main as helper_main;
pub use dispatch::run_blocking;
pub use enforcement::{
    Enforcement, EnforcementLevel, EnforcementSummary, LandlockStatus, Namespace, NetworkEnforcer,
    PartialItem, Shortfall,
};
pub use error::HostError;
pub use preview::{expected, Expected};
pub use request::{
    CancelToken, CapturedOutput, ExecOutcome, ExecRequest, ExitKind, ServerStdio, StdinSpec,
};
pub use select::{select, Selection};

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

/// Run one command under `policy`, for async callers.
///
/// The same [`dispatch`] as [`run_blocking`]: OpenSandbox is awaited here;
/// every local backend runs on a blocking thread, while the process itself
/// is forked from the host's long-lived spawner thread (see
/// [`process::supervise`]) so a retiring tokio worker cannot take a running
/// sandbox down with it. The request's cancel token is created when absent
/// and cancelled if this future is dropped before the run ends (Ctrl-C, a
/// `select!`), since a blocking run cannot be aborted from outside.
pub async fn run(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    /// Cancels the run when dropped before it finished.
    struct CancelOnDrop(Option<CancelToken>);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            if let Some(t) = self.0.take() {
                t.cancel();
            }
        }
    }
    let mut req = req;
    let token = req.cancel.get_or_insert_with(CancelToken::new).clone();
    let mut guard = CancelOnDrop(Some(token));
    // The same selection the dispatcher makes: only the remote backend is
    // awaited here, everything local runs on a blocking thread.
    let remote = dispatch::selection(policy, settings)?.backend == BackendKind::Opensandbox;
    let out = if remote {
        dispatch::run_opensandbox(policy, settings, req).await
    } else {
        let policy = policy.clone();
        let settings = settings.clone();
        tokio::task::spawn_blocking(move || dispatch::run_blocking(&policy, &settings, &req))
            .await
            .map_err(|e| HostError::io("host task", std::io::Error::other(e.to_string())))?
    };
    guard.0 = None;
    out
}
