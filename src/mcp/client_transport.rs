//! Starting one MCP server under the codewhale sandbox, and the stdio
//! stream rmcp speaks over.
//!
//! The server is a host run like any command ([`crate::host::run`]): the
//! same selection, backend, environment scrubbing and enforcement; only
//! its stdin/stdout are pipes we keep ([`crate::host::ServerStdio`])
//! instead of captured output, and the run lasts as long as the server.
//! rmcp is handed the pipes as an `AsyncRead`/`AsyncWrite` pair, so its
//! own child-process transport (an unsandboxed `tokio::process` spawn) is
//! never used.
//!
//! Between the server's stdout and rmcp sits a line filter: the stdio
//! transport allows only JSON-RPC messages on stdout, so any other line is
//! counted and its first few kept for the status (`mcp list`) instead of
//! reaching the protocol decoder.

use super::config::ServerEntry;
use crate::host::{CancelToken, ExecOutcome, HostError, HostSettings};
#[cfg(unix)]
use crate::host::{ExecRequest, ServerStdio};
use crate::policy::SandboxPolicy;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Bytes of a server's stderr kept in memory for the failure report (all
/// of it goes to the log file).
pub const STDERR_CAP: usize = 64 * 1024;
/// Longest accepted protocol line; a longer line is dropped as junk.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Non-protocol stdout lines kept as samples.
const JUNK_SAMPLES: usize = 3;
/// Characters kept of each sample.
const SAMPLE_CHARS: usize = 200;

/// The sandbox policy a server runs under: `workspace-write` by default
/// (`read-only` if its entry says so, and never looser than a sandboxed
/// run's own mode); the toolchain caches npx/uvx/pip need are writable;
/// network only if the entry allows it (no allowlist proxy); the entry's
/// `env` is set after the environment scrubbing. A server is sandboxed
/// even when the run itself is not.
pub fn server_policy(base: &SandboxPolicy, entry: &ServerEntry) -> SandboxPolicy {
    let mut p = base.clone();
    let wanted = entry.sandbox().mode();
    p.mode = if base.mode.is_sandboxed() {
        wanted.tighten(base.mode)
    } else {
        wanted
    };
    p.network = entry.network;
    p.egress = None;
    p.caches.npm = true;
    p.caches.xdg_cache = true;
    p.caches.pip = true;
    // `${VAR}` references expanded from codewhale's environment; a start
    // with an unset one fails in `run_server` before this policy is used.
    let env =
        super::env_expand::expand_from_process(&entry.env).unwrap_or_else(|_| entry.env.clone());
    p.env.set.extend(env);
    p
}

/// What was seen on a server's stdout besides protocol messages.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StdoutJunk {
    pub lines: u64,
    pub samples: Vec<String>,
}

impl StdoutJunk {
    fn record(&mut self, line: &[u8]) {
        self.lines += 1;
        if self.samples.len() < JUNK_SAMPLES {
            let s = String::from_utf8_lossy(line);
            self.samples
                .push(s.trim_end().chars().take(SAMPLE_CHARS).collect());
        }
    }

    /// One line for a status or an error.
    pub fn describe(&self) -> Option<String> {
        (self.lines > 0).then(|| {
            format!(
                "wrote {} non-protocol line(s) to stdout (first: {:?})",
                self.lines,
                self.samples.first().cloned().unwrap_or_default()
            )
        })
    }
}

/// A started server: the stream to hand rmcp, and its host run.
pub struct Started {
    /// rmcp reads the filtered stdout here.
    pub read: tokio::io::DuplexStream,
    /// rmcp writes requests here (the server's stdin).
    pub write: Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
    /// The host run; it ends when the server exits or `cancel` fires.
    pub run: tokio::task::JoinHandle<Result<ExecOutcome, HostError>>,
    pub cancel: CancelToken,
    pub junk: Arc<Mutex<StdoutJunk>>,
}

/// Start `argv` under `policy` with piped stdio; stderr is appended to
/// `stderr_log`; `cancel` stops it (the host kills its whole tree). Must
/// be called inside a tokio runtime.
#[cfg(unix)]
pub fn start(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    argv: Vec<String>,
    stderr_log: Option<PathBuf>,
    cancel: CancelToken,
) -> Result<Started, HostError> {
    let pipe = || {
        crate::host::process::os::pipe_cloexec()
            .map_err(|e| HostError::io("creating the server's stdio pipes", e))
    };
    let (child_in, our_in) = pipe()?;
    let (our_out, child_out) = pipe()?;
    let write = tokio::net::unix::pipe::Sender::from_owned_fd(our_in)
        .map_err(|e| HostError::io("the server's stdin pipe", e))?;
    let from_server = tokio::net::unix::pipe::Receiver::from_owned_fd(our_out)
        .map_err(|e| HostError::io("the server's stdout pipe", e))?;
    let mut req = ExecRequest::new(argv);
    req.output_cap = STDERR_CAP;
    req.cancel = Some(cancel.clone());
    req.stdio = Some(ServerStdio {
        stdin: Arc::new(child_in),
        stdout: Arc::new(child_out),
        stderr_log,
    });
    let policy = policy.clone();
    let settings = settings.clone();
    // The request (holding the child's pipe ends) is dropped when the run
    // ends, so the filter below sees EOF then.
    let run = tokio::spawn(async move { crate::host::run(&policy, &settings, req).await });
    let junk = Arc::new(Mutex::new(StdoutJunk::default()));
    let (read, filter_side) = tokio::io::duplex(256 * 1024);
    tokio::spawn(filter(from_server, filter_side, junk.clone()));
    Ok(Started {
        read,
        write: Box::new(write),
        run,
        cancel,
        junk,
    })
}

/// No piped server runs off Unix yet (the Windows host has no sandbox and
/// no piped-stdio path).
#[cfg(not(unix))]
pub fn start(
    _policy: &SandboxPolicy,
    _settings: &HostSettings,
    _argv: Vec<String>,
    _stderr_log: Option<PathBuf>,
    _cancel: CancelToken,
) -> Result<Started, HostError> {
    Err(HostError::Unavailable {
        backend: crate::host::BackendKind::None,
        reason: "MCP servers are started only on Unix hosts (Linux, macOS)".into(),
        remedy: None,
    })
}

/// Whether `line` is a JSON-RPC message (an object with `"jsonrpc"`).
pub fn is_protocol_line(line: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<serde_json::Value>(line),
        Ok(serde_json::Value::Object(m)) if m.contains_key("jsonrpc")
    )
}

/// Copy protocol lines from the server to rmcp; count the rest.
#[cfg_attr(not(unix), allow(dead_code))]
async fn filter(
    from: impl tokio::io::AsyncRead + Unpin,
    mut to: tokio::io::DuplexStream,
    junk: Arc<Mutex<StdoutJunk>>,
) {
    let mut reader = tokio::io::BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut too_long = false;
        // read_until, bounded: an endless line is dropped, not buffered.
        loop {
            let buf = match reader.fill_buf().await {
                Ok(b) => b,
                Err(_) => return,
            };
            if buf.is_empty() {
                if line.is_empty() {
                    return;
                }
                break;
            }
            let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..=i], true),
                None => (buf, false),
            };
            let n = chunk.len();
            if line.len() + n <= MAX_LINE {
                line.extend_from_slice(chunk);
            } else {
                too_long = true;
            }
            reader.consume(n);
            if done {
                break;
            }
        }
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        if !too_long && is_protocol_line(trimmed) {
            if to.write_all(trimmed).await.is_err() || to.write_all(b"\n").await.is_err() {
                return;
            }
        } else if let Ok(mut j) = junk.lock() {
            j.record(if too_long {
                b"(a line longer than 16 MiB)"
            } else {
                trimmed
            });
        }
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::policy::SandboxMode;

    #[test]
    fn protocol_lines_are_json_rpc_objects() {
        assert!(is_protocol_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(!is_protocol_line(b"Server listening on stdio"));
        assert!(!is_protocol_line(br#"{"hello":1}"#));
        assert!(!is_protocol_line(b"[1,2]"));
    }

    #[test]
    fn server_policy_is_sandboxed_with_caches_and_entry_network() {
        let mut e = ServerEntry::new("node", vec![]);
        e.env.insert("GITHUB_TOKEN".into(), "t".into());
        let mut base = SandboxPolicy::new(SandboxMode::DangerFullAccess, "/ws");
        base.caches = crate::policy::CachePolicy::none();
        let p = server_policy(&base, &e);
        assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
        assert!(!p.network);
        assert!(p.caches.npm && p.caches.xdg_cache && p.caches.pip);
        assert_eq!(p.env.set["GITHUB_TOKEN"], "t");
        e.network = true;
        assert!(server_policy(&base, &e).network);
        // A read-only run keeps its servers read-only.
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        assert_eq!(server_policy(&ro, &e).mode, SandboxMode::ReadOnly);
    }

    #[tokio::test]
    async fn filter_passes_protocol_and_counts_junk() {
        let (r, w) = crate::host::process::os::pipe_cloexec().unwrap();
        let from = tokio::net::unix::pipe::Receiver::from_owned_fd(r).unwrap();
        let mut tx = tokio::net::unix::pipe::Sender::from_owned_fd(w).unwrap();
        let (mut read, side) = tokio::io::duplex(4096);
        let junk = Arc::new(Mutex::new(StdoutJunk::default()));
        let task = tokio::spawn(filter(from, side, junk.clone()));
        tx.write_all(b"hello there\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\nnot json\n")
            .await
            .unwrap();
        drop(tx);
        task.await.unwrap();
        let mut got = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut read, &mut got)
            .await
            .unwrap();
        assert_eq!(got, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        let j = junk.lock().unwrap().clone();
        assert_eq!(j.lines, 2);
        assert_eq!(j.samples, vec!["hello there", "not json"]);
        assert!(j.describe().unwrap().contains("2 non-protocol line(s)"));
    }
}
