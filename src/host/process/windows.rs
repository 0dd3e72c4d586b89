//! The minimal Windows supervisor: no OS sandbox exists there (every run is
//! labelled `unsandboxed`), so this only honours the request — stdin,
//! per-stream output caps while streaming, tee, timeout and the cancel
//! token — and kills the direct child at timeout or cancel. What it does
//! not do (documented in docs/WINDOWS.md): a job object, so a grandchild
//! the command started can outlive it.

use crate::host::request::{CapturedOutput, ExecRequest, ExitKind, StdinSpec};
use crate::host::HostError;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What supervision observed.
#[derive(Debug)]
pub struct Supervised {
    pub exit: ExitKind,
    pub timed_out: bool,
    pub duration: Duration,
    pub stdout: CapturedOutput,
    pub stderr: CapturedOutput,
}

impl Supervised {
    /// The run's outcome with its report (as the Unix supervisor's).
    pub fn into_outcome(self, enforcement: crate::host::Enforcement) -> crate::host::ExecOutcome {
        crate::host::ExecOutcome {
            exit: self.exit,
            timed_out: self.timed_out,
            duration: self.duration,
            stdout: self.stdout,
            stderr: self.stderr,
            enforcement,
        }
    }
}

/// How often the child, the timeout and the cancel token are looked at.
const POLL: Duration = Duration::from_millis(20);
/// How long reader threads get to finish after the child is gone.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

fn reader(
    mut r: impl Read + Send + 'static,
    cap: usize,
    mut tee: Option<Box<dyn Write + Send>>,
) -> std::sync::mpsc::Receiver<CapturedOutput> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = CapturedOutput::default();
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.total += n as u64;
            let room = cap.saturating_sub(out.bytes.len());
            out.bytes.extend_from_slice(&buf[..n.min(room)]);
            out.truncated |= n > room;
            if let Some(t) = tee.as_mut() {
                if t.write_all(&buf[..n]).is_err() {
                    tee = None;
                }
            }
        }
        let _ = tx.send(out);
    });
    rx
}

fn spawn(cmd: &mut Command, program: &str) -> Result<Child, HostError> {
    cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => HostError::NotFound(program.to_string()),
        std::io::ErrorKind::PermissionDenied => HostError::NotExecutable {
            path: program.into(),
            reason: e.to_string(),
        },
        _ => HostError::io(format!("spawning {program}"), e),
    })
}

/// Spawn `cmd` (program, args, env and cwd set by the caller) and supervise
/// it per `req`. `program` names the command in errors.
pub fn run(mut cmd: Command, program: &str, req: &ExecRequest) -> Result<Supervised, HostError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(match req.stdin {
        StdinSpec::Null => Stdio::null(),
        StdinSpec::Bytes(_) => Stdio::piped(),
        StdinSpec::Inherit => Stdio::inherit(),
    });
    let start = Instant::now();
    let mut child = spawn(&mut cmd, program)?;
    if let (StdinSpec::Bytes(bytes), Some(mut w)) = (&req.stdin, child.stdin.take()) {
        let bytes = bytes.clone();
        // A command that does not read its input closes the pipe early.
        std::thread::spawn(move || {
            let _ = w.write_all(&bytes);
        });
    }
    let tee = |on: bool, out: bool| -> Option<Box<dyn Write + Send>> {
        match (on, out) {
            (false, _) => None,
            (true, true) => Some(Box::new(std::io::stdout())),
            (true, false) => Some(Box::new(std::io::stderr())),
        }
    };
    let out = child
        .stdout
        .take()
        .map(|r| reader(r, req.output_cap, tee(req.tee, true)));
    let err = child
        .stderr
        .take()
        .map(|r| reader(r, req.output_cap, tee(req.tee, false)));
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(HostError::io(format!("waiting for {program}"), e)),
        }
        let cancelled = req.cancel.as_ref().is_some_and(|c| c.is_cancelled());
        let expired = req.timeout.is_some_and(|t| start.elapsed() >= t);
        if cancelled || expired {
            timed_out = expired && !cancelled;
            let _ = child.kill();
            break child
                .wait()
                .map_err(|e| HostError::io(format!("waiting for {program}"), e))?;
        }
        std::thread::sleep(POLL);
    };
    let collect = |rx: Option<std::sync::mpsc::Receiver<CapturedOutput>>| {
        rx.and_then(|rx| rx.recv_timeout(DRAIN_GRACE).ok())
            .unwrap_or_default()
    };
    Ok(Supervised {
        exit: ExitKind::Code(status.code().unwrap_or(1)),
        timed_out,
        duration: start.elapsed(),
        stdout: collect(out),
        stderr: collect(err),
    })
}
