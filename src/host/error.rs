//! Host errors. Each maps to one documented exit code of `sandbox run`.

use super::BackendKind;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `backend` could not be set up, and the command did not start (exit
    /// 125). This is the one error a dispatcher may answer by running the
    /// same command under the selection's fallback: nothing ran yet.
    /// `remedy` says how to fix it.
    #[error("sandbox unavailable ({backend}): {reason}{}", remedy.as_ref().map(|r| format!("\n  fix: {r}")).unwrap_or_default())]
    Unavailable {
        backend: BackendKind,
        reason: String,
        remedy: Option<String>,
    },
    /// No backend can enforce the policy here and running unsandboxed was
    /// not allowed (exit 125): every candidate is named with its reason.
    #[error("no sandbox available: {reason}{}", remedy.as_ref().map(|r| format!("\n  fix: {r}")).unwrap_or_default())]
    NoBackend {
        reason: String,
        remedy: Option<String>,
    },
    /// The policy could not be resolved (exit 125).
    #[error("sandbox policy: {0}")]
    Policy(#[from] crate::policy::resolve::ResolveError),
    /// The command was not found (exit 127).
    #[error("command not found: {0}")]
    NotFound(String),
    /// The command exists but could not be executed (exit 126).
    #[error("cannot execute {path}: {reason}")]
    NotExecutable { path: PathBuf, reason: String },
    /// Spawning or supervising failed for another reason (exit 125).
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// A remote backend failed (exit 125, or 75 when transient).
    #[error("{0}")]
    Remote(String),
    /// A remote backend failed in a way that may pass on retry (exit 75).
    #[error("{0}")]
    RemoteTransient(String),
    /// The run was cancelled through its token before a remote backend
    /// reported an exit (local runs return the killed command's outcome).
    #[error("cancelled")]
    Cancelled,
}

impl HostError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HostError::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether this is `backend`'s set-up failure with the command not
    /// started: the only case a fallback may run it elsewhere.
    pub fn is_setup_failure_of(&self, backend: BackendKind) -> bool {
        matches!(self, HostError::Unavailable { backend: b, .. } if *b == backend)
    }

    /// The exit code `sandbox run` uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            HostError::NotFound(_) => crate::exit::NOT_FOUND,
            HostError::NotExecutable { .. } => crate::exit::NOT_EXECUTABLE,
            HostError::RemoteTransient(_) => crate::exit::TEMPFAIL,
            HostError::Cancelled => crate::exit::INTERRUPTED,
            _ => crate::exit::SANDBOX_SETUP,
        }
    }
}
