//! Errors of the OpenSandbox backend and the one place they become
//! [`HostError`]s.
//!
//! Every variant names the call that failed (`POST /v1/sandboxes`,
//! `POST /command`, …) so a user can tell the lifecycle server from execd and
//! an auth problem from a missing sandbox. Transient failures (connection
//! refused, timeouts, 5xx, 429) map to `HostError::RemoteTransient`, which the
//! CLI turns into exit 75 (EX_TEMPFAIL); everything else is exit 125.

use crate::host::HostError;

#[derive(Debug, thiserror::Error)]
pub enum OpenSandboxError {
    /// The server could not be reached, or the connection broke.
    #[error("{call}: cannot reach {url}: {detail}")]
    Connect {
        call: String,
        url: String,
        detail: String,
    },
    /// 401/403: the key or token is missing, wrong, or lacks permission.
    #[error("{call}: HTTP {status} ({code}): {message}{}", hint_auth(*status))]
    Auth {
        call: String,
        status: u16,
        code: String,
        message: String,
    },
    /// 404: the sandbox (or file) is gone.
    #[error("{call}: HTTP 404 ({code}): {message}")]
    NotFound {
        call: String,
        code: String,
        message: String,
    },
    /// 409: the sandbox is in a state that does not allow the call.
    #[error("{call}: HTTP 409 state conflict ({code}): {message}")]
    Conflict {
        call: String,
        code: String,
        message: String,
    },
    /// Any other non-success status; `transient` for 5xx and 429.
    #[error("{call}: HTTP {status} ({code}): {message}")]
    Status {
        call: String,
        status: u16,
        code: String,
        message: String,
        transient: bool,
    },
    /// The server answered something the protocol does not allow.
    #[error("{call}: unexpected reply: {detail}")]
    Protocol { call: String, detail: String },
    /// The sandbox reached `Failed` or `Terminated` while we waited for it.
    #[error("sandbox {id} is {state}: {reason}")]
    SandboxDead {
        id: String,
        state: String,
        reason: String,
    },
    /// Waiting for `Running` or for execd's `/ping` took too long.
    #[error("{what} did not happen within {secs} s")]
    NotReady { what: String, secs: u64 },
    /// The request cannot be expressed remotely (stdin bytes, cwd outside the workspace).
    #[error("{0}")]
    Unsupported(String),
    /// Local filesystem work of the workspace sync failed.
    #[error("workspace sync: {context}: {source}")]
    Sync {
        context: String,
        source: std::io::Error,
    },
}

fn hint_auth(status: u16) -> &'static str {
    if status == 401 {
        "\n  fix: set [opensandbox] api_key or OPEN_SANDBOX_API_KEY (lifecycle), execd_access_token (execd)"
    } else {
        ""
    }
}

impl OpenSandboxError {
    /// Whether retrying later may succeed (exit 75 rather than 125).
    pub fn is_transient(&self) -> bool {
        match self {
            OpenSandboxError::Connect { .. } | OpenSandboxError::NotReady { .. } => true,
            OpenSandboxError::Status { transient, .. } => *transient,
            _ => false,
        }
    }

    /// Whether the sandbox itself is gone (worth recreating once).
    pub fn is_gone(&self) -> bool {
        matches!(self, OpenSandboxError::NotFound { .. })
    }

    pub fn sync(context: impl Into<String>, source: std::io::Error) -> Self {
        OpenSandboxError::Sync {
            context: context.into(),
            source,
        }
    }
}

impl From<OpenSandboxError> for HostError {
    fn from(e: OpenSandboxError) -> Self {
        let msg = format!("opensandbox: {e}");
        if e.is_transient() {
            HostError::RemoteTransient(msg)
        } else {
            HostError::Remote(msg)
        }
    }
}
