//! A minimal, portable spawn step shared by the macOS (Seatbelt) and Windows
//! (no sandbox) backends **until the host's process supervision lands**.
//!
//! It honours every field of [`ExecRequest`] (stdin, timeout, per-stream
//! output caps, tee) and, on unix, runs the command in its own session and
//! kills that whole process group at exit or timeout. What it does not do
//! (the supervision's job): fd hygiene beyond stdio (Rust already sets
//! `O_CLOEXEC` on its own fds), survivors that called `setsid` themselves,
//! and job objects on Windows (there only the direct child is killed).

use super::{
    CapturedOutput, Enforcement, ExecOutcome, ExecRequest, ExitKind, HostError, StdinSpec,
};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;

/// How long to wait for the output pipes to close after the command exited
/// and its group was killed (a grandchild in another session may hold them).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Read `r` to EOF, keeping at most `cap` bytes and counting the rest.
pub async fn capture<R, W>(
    mut r: R,
    cap: usize,
    mut tee: Option<W>,
) -> std::io::Result<CapturedOutput>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut out = CapturedOutput::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        out.total += n as u64;
        let room = cap.saturating_sub(out.bytes.len());
        out.bytes.extend_from_slice(&buf[..n.min(room)]);
        if n > room {
            out.truncated = true;
        }
        if let Some(t) = tee.as_mut() {
            // Forwarding is best effort: a closed terminal must not kill the run.
            if t.write_all(&buf[..n]).await.is_err() {
                tee = None;
            }
        }
    }
    Ok(out)
}

/// Put the command in a new session (unix), so the whole tree can be
/// killed and it has no controlling terminal to inject keystrokes into.
pub fn new_session(cmd: &mut Command) {
    #[cfg(unix)]
    {
        // SAFETY: the closure runs in the forked child before exec and only
        // calls setsid(2), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // The child called setsid(), so its pid is its process group id.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    #[cfg(not(unix))]
    let _ = pid;
}

fn exit_kind(status: std::process::ExitStatus) -> ExitKind {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return ExitKind::Signal(sig);
        }
    }
    ExitKind::Code(status.code().unwrap_or(1))
}

/// Spawn `cmd` (program, args, env and cwd already set by the backend) and
/// supervise it per `req`. `program` names the command in errors.
pub async fn run(
    mut cmd: Command,
    program: &str,
    req: &ExecRequest,
    enforcement: Enforcement,
) -> Result<ExecOutcome, HostError> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd.stdin(match req.stdin {
        StdinSpec::Null => Stdio::null(),
        StdinSpec::Bytes(_) => Stdio::piped(),
        StdinSpec::Inherit => Stdio::inherit(),
    });
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => HostError::NotFound(program.to_string()),
        std::io::ErrorKind::PermissionDenied => HostError::NotExecutable {
            path: program.into(),
            reason: e.to_string(),
        },
        _ => HostError::io(format!("spawning {program}"), e),
    })?;
    let pid = child.id();
    if let (StdinSpec::Bytes(bytes), Some(mut w)) = (&req.stdin, child.stdin.take()) {
        let bytes = bytes.clone();
        tokio::spawn(async move {
            // A command that does not read its input closes the pipe early.
            let _ = w.write_all(&bytes).await;
        });
    }
    let cap = req.output_cap;
    let out = child.stdout.take().map(|r| {
        let tee = req.tee.then(tokio::io::stdout);
        tokio::spawn(capture(r, cap, tee))
    });
    let err = child.stderr.take().map(|r| {
        let tee = req.tee.then(tokio::io::stderr);
        tokio::spawn(capture(r, cap, tee))
    });
    let wait_err = |e| HostError::io(format!("waiting for {program}"), e);
    let (status, timed_out) = match req.timeout {
        Some(t) => match tokio::time::timeout(t, child.wait()).await {
            Ok(s) => (s.map_err(wait_err)?, false),
            Err(_) => {
                kill_group(pid);
                let _ = child.start_kill();
                (child.wait().await.map_err(wait_err)?, true)
            }
        },
        None => (child.wait().await.map_err(wait_err)?, false),
    };
    // No survivors: background jobs left in the command's group die with it.
    kill_group(pid);
    let collect = |h: Option<tokio::task::JoinHandle<std::io::Result<CapturedOutput>>>| async move {
        match h {
            Some(h) => match tokio::time::timeout(PIPE_GRACE, h).await {
                Ok(Ok(Ok(c))) => c,
                _ => CapturedOutput::default(),
            },
            None => CapturedOutput::default(),
        }
    };
    let stdout = collect(out).await;
    let stderr = collect(err).await;
    Ok(ExecOutcome {
        exit: exit_kind(status),
        timed_out,
        duration: start.elapsed(),
        stdout,
        stderr,
        enforcement,
    })
}
