//! The execution host: every command codewhale runs goes through here.
//!
//! `ExecRequest` + `SandboxPolicy` → backend → `ExecOutcome` + `Enforcement`.
//! The host never knows about models, prompts or gates; its clients (the
//! CLI, the agent loop, doctor) never spawn processes themselves.

pub mod backend;
pub mod backends;
pub mod enforcement;
pub mod error;
pub mod plain_spawn;
pub mod process;
pub mod request;
pub mod seccomp;
pub mod select;
pub mod select_auto;

// The backends' public faces, at their old short paths.
pub use backends::{opensandbox, seatbelt, windows};

pub use backend::{BackendChoice, BackendKind};
pub use enforcement::{Enforcement, EnforcementLevel};
pub use error::HostError;
pub use request::{CancelToken, CapturedOutput, ExecOutcome, ExecRequest, ExitKind, StdinSpec};

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
    run_local(policy, settings, req).await
}

/// Linux: selection and the blocking supervision run on a blocking thread.
#[cfg(target_os = "linux")]
async fn run_local(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    /// Cancels the run when dropped before it finished (the caller's
    /// future was dropped: Ctrl-C, a `select!`), since a blocking task
    /// cannot be aborted from outside.
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
    let policy = policy.clone();
    let settings = settings.clone();
    let out = tokio::task::spawn_blocking(move || select::run_blocking(&policy, &settings, &req))
        .await
        .map_err(|e| HostError::io("host task", std::io::Error::other(e.to_string())))?;
    guard.0 = None;
    out
}

/// macOS: Seatbelt for the sandboxed modes (`auto` or `seatbelt`); the
/// no-sandbox modes run plainly and are labelled so.
#[cfg(target_os = "macos")]
async fn run_local(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    if policy.mode.is_sandboxed() {
        return match settings.backend {
            BackendChoice::Auto | BackendChoice::Seatbelt => {
                seatbelt::spawn::run(policy, req).await
            }
            BackendChoice::None if settings.allow_unsandboxed => {
                plain_unsandboxed(policy, req, "--backend none requested").await
            }
            other => Err(HostError::Unavailable {
                backend: format!("{other:?}").to_lowercase(),
                reason: "this backend does not exist on macOS".into(),
                remedy: Some("use --backend auto (Seatbelt) on macOS".into()),
            }),
        };
    }
    plain_unsandboxed(
        policy,
        req,
        "no sandbox by request (danger-full-access / external-sandbox)",
    )
    .await
}

/// Windows: no OS sandbox; `windows::run` refuses the sandboxed modes
/// unless `allow_unsandboxed` and labels every run `unsandboxed`.
#[cfg(windows)]
async fn run_local(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    windows::run(policy, settings.allow_unsandboxed, req).await
}

/// Any other OS: no backend exists; refuse unless explicitly unsandboxed.
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
async fn run_local(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    if policy.mode.is_sandboxed() && !settings.allow_unsandboxed {
        return Err(HostError::Unavailable {
            backend: "auto".into(),
            reason: format!("no sandbox backend exists for {}", std::env::consts::OS),
            remedy: Some(
                "pass --allow-unsandboxed to run without one (labelled unsandboxed)".into(),
            ),
        });
    }
    plain_unsandboxed(policy, req, "no sandbox backend on this OS").await
}

/// Run without any sandbox (scrubbed environment, labelled `unsandboxed`).
#[cfg(all(unix, not(target_os = "linux")))]
async fn plain_unsandboxed(
    policy: &SandboxPolicy,
    req: ExecRequest,
    why: &str,
) -> Result<ExecOutcome, HostError> {
    let (program, args) = req
        .argv
        .split_first()
        .ok_or_else(|| HostError::NotFound("(empty command line)".into()))?;
    let base: Vec<(String, String)> = match &req.env {
        Some(e) => e.clone().into_iter().collect(),
        None => std::env::vars().collect(),
    };
    let env = policy.env.apply(base);
    let mut enforcement = Enforcement::unsandboxed(policy.mode, why);
    enforcement.env_removed = env.removed.clone();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).env_clear().envs(&env.vars);
    cmd.current_dir(req.cwd.clone().unwrap_or_else(|| policy.workspace.clone()));
    let program = program.clone();
    plain_spawn::run(cmd, &program, &req, enforcement).await
}
