//! Host errors. Each maps to one documented exit code of `sandbox run`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The sandbox could not be set up (exit 125). `remedy` says how to fix it.
    #[error("sandbox unavailable ({backend}): {reason}{}", remedy.as_ref().map(|r| format!("\n  fix: {r}")).unwrap_or_default())]
    Unavailable {
        backend: String,
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
    /// The filesystem changed between resolving the policy and locking the
    /// writable roots (a concurrent run's placeholder); resolve again.
    #[error("{0} changed while the sandbox was being planned")]
    Stale(PathBuf),
}

impl HostError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HostError::Io {
            context: context.into(),
            source,
        }
    }

    /// The exit code `sandbox run` uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            HostError::NotFound(_) => crate::exit::NOT_FOUND,
            HostError::NotExecutable { .. } => crate::exit::NOT_EXECUTABLE,
            HostError::RemoteTransient(_) => crate::exit::TEMPFAIL,
            _ => crate::exit::SANDBOX_SETUP,
        }
    }
}
