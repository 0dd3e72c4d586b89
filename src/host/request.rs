//! The request and outcome of one command run.

use super::Enforcement;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Default cap on captured output per stream.
pub const DEFAULT_OUTPUT_CAP: usize = 1024 * 1024;

/// Stops a running command from another task or thread: the supervisor
/// notices within ~50 ms and kills the command's whole tree, then returns
/// normally (so clean-up, e.g. bwrap's placeholders, still runs before the
/// caller goes on). `host::run` also cancels when its future is dropped.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether `other` is a clone of this token (the same flag): a turn's
    /// background jobs are the ones started under its token.
    pub fn same(&self, other: &CancelToken) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What the command reads on stdin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StdinSpec {
    /// `/dev/null` (the default: headless runs never block on input).
    #[default]
    Null,
    /// These bytes, then EOF.
    Bytes(Vec<u8>),
    /// The caller's own stdin (interactive `sandbox run`).
    Inherit,
}

/// One end of a server process's stdio pipe, as the host hands it to the
/// child (an fd on Unix; on Windows piped server stdio is refused).
#[cfg(unix)]
pub type StdioEnd = std::os::fd::OwnedFd;
#[cfg(not(unix))]
pub type StdioEnd = std::convert::Infallible;

/// The stdio of a long-lived server process (an MCP server): instead of
/// the run's stdin and a captured stdout, the child's fd 0 and fd 1 are
/// these pipe ends, whose other ends the caller keeps and speaks the
/// protocol over while the run lasts. The run ends when the child exits or
/// the request's cancel token is cancelled. stderr is still captured (up
/// to the output cap, for the failure report) and, with `stderr_log`,
/// appended to that file as it arrives.
///
/// Shared (`Arc`) so the request stays `Clone`; the host gives the child
/// duplicates and the originals close when the request is dropped after
/// the run, so the caller's read end sees EOF once the run is over.
#[derive(Clone, Debug)]
pub struct ServerStdio {
    /// The read end of the pipe the caller writes requests into.
    pub stdin: std::sync::Arc<StdioEnd>,
    /// The write end of the pipe the caller reads responses from.
    pub stdout: std::sync::Arc<StdioEnd>,
    /// Append the child's stderr here while it runs.
    pub stderr_log: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    /// Working directory (defaults to the policy's workspace when `None`).
    pub cwd: Option<PathBuf>,
    /// Base environment before the policy's scrubbing; `None` = this
    /// process's environment.
    pub env: Option<BTreeMap<String, String>>,
    pub stdin: StdinSpec,
    pub timeout: Option<Duration>,
    /// Bytes kept per stream; the rest is counted and dropped.
    pub output_cap: usize,
    /// Forward output live to this process's stdout/stderr while capturing.
    pub tee: bool,
    /// Cancel the run from elsewhere (see [`CancelToken`]).
    pub cancel: Option<CancelToken>,
    /// A server process: its stdin/stdout are these pipes instead of
    /// [`Self::stdin`] and a captured stdout (see [`ServerStdio`]).
    pub stdio: Option<ServerStdio>,
}

impl ExecRequest {
    pub fn new(argv: Vec<String>) -> Self {
        ExecRequest {
            argv,
            cwd: None,
            env: None,
            stdin: StdinSpec::Null,
            timeout: None,
            output_cap: DEFAULT_OUTPUT_CAP,
            tee: false,
            cancel: None,
            stdio: None,
        }
    }
}

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "value")]
pub enum ExitKind {
    Code(i32),
    Signal(i32),
}

impl ExitKind {
    /// Shell-style code: the code itself, or 128+N for a signal.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitKind::Code(c) => c,
            ExitKind::Signal(s) => 128 + s,
        }
    }
}

/// Bounded capture of one output stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedOutput {
    #[serde(with = "lossy")]
    pub bytes: Vec<u8>,
    /// Total bytes the command wrote (kept or not).
    pub total: u64,
    pub truncated: bool,
}

impl CapturedOutput {
    /// The captured text, with a marker if bytes were dropped.
    pub fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.truncated {
            s.push_str(&format!(
                "\n[… output truncated: {} of {} bytes kept]",
                self.bytes.len(),
                self.total
            ));
        }
        s
    }
}

mod lossy {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(b))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(String::deserialize(d)?.into_bytes())
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExecOutcome {
    pub exit: ExitKind,
    pub timed_out: bool,
    #[serde(with = "millis")]
    pub duration: Duration,
    pub stdout: CapturedOutput,
    pub stderr: CapturedOutput,
    pub enforcement: Enforcement,
}

impl ExecOutcome {
    /// The exit code `sandbox run` returns (124 on timeout).
    pub fn shell_code(&self) -> i32 {
        if self.timed_out {
            crate::exit::TIMEOUT
        } else {
            self.exit.shell_code()
        }
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
