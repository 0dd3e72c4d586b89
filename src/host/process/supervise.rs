//! Process supervision shared by every local backend.
//!
//! Invariants:
//! - The child starts a new session (`setsid`): it has no controlling
//!   terminal, so it cannot inject keystrokes into ours, and it leads its
//!   own process group, which is killed as a whole.
//! - Every process is spawned from one long-lived spawner thread, or from
//!   the main thread when that is the caller (the one-shot CLI). The
//!   parent-death signal (`PR_SET_PDEATHSIG`, also what bwrap's
//!   `--die-with-parent` uses) fires when the *thread* that forked the child
//!   exits; a short-lived tokio worker would otherwise kill a running
//!   sandbox when the runtime retires it.
//! - No file descriptor beyond stdio reaches the child unless listed in
//!   `keep_fds` (a `close_range(CLOSE_RANGE_CLOEXEC)` sweep in `pre_exec`).
//! - Output caps are enforced while streaming: bytes past the cap are
//!   counted and dropped, so an endless `yes` costs constant memory.
//! - The calling thread supervises alone: it polls both output pipes and a
//!   pidfd (no reader threads, no hand-offs on the hot path).
//! - On timeout the whole process group gets SIGKILL; after the child exits
//!   the group is killed too (a leftover background job does not survive),
//!   before the child is reaped so its pid cannot have been reused.

use crate::host::request::{CapturedOutput, ExecRequest, ExitKind, StdinSpec};
use crate::host::HostError;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long to wait for output pipes to close after the child is gone
/// (a process that escaped the group could hold them open for ever).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What supervision observed.
#[derive(Debug)]
pub struct Supervised {
    pub pid: u32,
    pub exit: ExitKind,
    pub timed_out: bool,
    pub duration: Duration,
    pub stdout: CapturedOutput,
    pub stderr: CapturedOutput,
}

impl Supervised {
    /// The run's outcome with the backend's report: what every local
    /// backend returns, built in one place.
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

/// A spawn request: the command, and for a light spawn the fds to pass.
struct Job {
    cmd: Command,
    light_keep: Option<Vec<RawFd>>,
    reply: mpsc::Sender<std::io::Result<Child>>,
}

/// The long-lived spawner thread (see the module docs for why).
fn spawner() -> Result<&'static Mutex<mpsc::Sender<Job>>, HostError> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    if let Some(s) = SPAWNER.get() {
        return Ok(s);
    }
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("codewhale-spawner".into())
        .spawn(move || {
            while let Ok(mut job) = rx.recv() {
                let result = do_spawn(&mut job.cmd, job.light_keep.as_deref());
                let _ = job.reply.send(result);
            }
        })
        .map_err(|e| HostError::io("starting the spawner thread", e))?;
    // A racing initialiser may win; its thread is equally long-lived.
    Ok(SPAWNER.get_or_init(|| Mutex::new(tx)))
}

/// Serialises the spawns that un-mark fds in this process (see
/// [`light_spawn`]): those from the spawner thread and from the main thread.
static SPAWN_LOCK: Mutex<()> = Mutex::new(());

fn do_spawn(cmd: &mut Command, light_keep: Option<&[RawFd]>) -> std::io::Result<Child> {
    match light_keep {
        None => cmd.spawn(),
        Some(keep) => {
            let _serial = SPAWN_LOCK.lock().unwrap_or_else(|p| p.into_inner());
            light_spawn(cmd, keep)
        }
    }
}

use super::os;

/// Spawn `cmd` on the spawner thread — or right here on the main thread
/// (one-shot CLI runs: no thread to start, no hand-off).
fn spawn_on_spawner(mut cmd: Command, light_keep: Option<Vec<RawFd>>) -> Result<Child, HostError> {
    if os::is_main_thread() {
        return do_spawn(&mut cmd, light_keep.as_deref())
            .map_err(|e| HostError::io("spawning the command", e));
    }
    let (reply_tx, reply_rx) = mpsc::channel();
    {
        let tx = spawner()?
            .lock()
            .map_err(|_| HostError::io("spawner", std::io::Error::other("poisoned lock")))?;
        tx.send(Job {
            cmd,
            light_keep,
            reply: reply_tx,
        })
        .map_err(|_| HostError::io("spawner", std::io::Error::other("spawner thread gone")))?;
    }
    match reply_rx.recv() {
        Ok(r) => r.map_err(|e| HostError::io("spawning the command", e)),
        Err(_) => Err(HostError::io(
            "spawner",
            std::io::Error::other("spawner thread gone"),
        )),
    }
}

/// A spawn without `pre_exec`, so std can use `posix_spawn` (no copy of
/// our page tables): used for bwrap, which makes its own session for the
/// command and arms its own parent-death signal. fd hygiene is done in
/// this process instead of the child: every fd from 3 up is marked
/// close-on-exec, the passed fds are un-marked for the spawn only. It runs
/// under [`SPAWN_LOCK`] (from the spawner thread or the main thread), so no
/// other spawn of the host's can inherit the passed fds. (The landlock
/// tier's stage inherits everything by its clone and closes what is not
/// its own before it starts the command.)
fn light_spawn(cmd: &mut Command, keep: &[RawFd]) -> std::io::Result<Child> {
    fd_sweep(keep)?;
    let r = cmd.spawn();
    for &fd in keep {
        // SAFETY: re-marking fds we were handed; they are closed right after.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    r
}

/// Mark every fd from 3 up close-on-exec, then clear the flag on `keep`.
/// Async-signal-safe: [`prepare`] runs it between fork and exec; the light
/// spawn runs it in codewhale itself, under [`SPAWN_LOCK`], and re-marks
/// `keep` right after its spawn.
fn fd_sweep(keep: &[RawFd]) -> std::io::Result<()> {
    os::cloexec_from_3();
    for &fd in keep {
        // SAFETY: clearing FD_CLOEXEC on an fd the caller handed to us.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Install the child-side setup on `cmd`: new session, parent-death
/// signal (when `parent_death`), fd sweep keeping only `keep_fds`.
pub fn prepare(cmd: &mut Command, keep_fds: Vec<RawFd>, parent_death: bool) {
    // SAFETY: getpid is always safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure only makes async-signal-safe system calls
    // (setsid, prctl, getppid, close_range/fcntl) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Where the OS has a parent-death signal (Linux) it is armed;
            // elsewhere the group kill at the end of the run is the bound.
            if parent_death && os::set_parent_death_signal()? && libc::getppid() != parent {
                // The parent died between fork and prctl.
                libc::_exit(125);
            }
            fd_sweep(&keep_fds)
        });
    }
}

/// One captured output stream, read without blocking from the poll loop.
struct Stream {
    fd: Option<OwnedFd>,
    out: CapturedOutput,
    tee: Option<Box<dyn Write>>,
}

impl Stream {
    fn new(fd: Option<OwnedFd>, tee: Option<Box<dyn Write>>) -> Stream {
        if let Some(f) = &fd {
            set_nonblocking(f.as_raw_fd());
        }
        Stream {
            fd,
            out: CapturedOutput::default(),
            tee,
        }
    }

    /// Read what is available now; bytes past `cap` are counted and
    /// dropped (the cap holds while streaming). Closes the stream at EOF.
    fn drain(&mut self, cap: usize, buf: &mut [u8]) {
        let Some(fd) = &self.fd else { return };
        // Bounded per call, so an endless writer cannot starve the loop's
        // timeout and exit checks.
        for _ in 0..16 {
            // SAFETY: reading into a live buffer of the given length.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                if e.kind() != std::io::ErrorKind::WouldBlock {
                    self.fd = None;
                }
                return;
            }
            if n == 0 {
                self.fd = None;
                return;
            }
            let n = n as usize;
            if let Some(t) = self.tee.as_mut() {
                if t.write_all(&buf[..n]).and_then(|_| t.flush()).is_err() {
                    self.tee = None;
                }
            }
            self.out.total += n as u64;
            let keep = cap.saturating_sub(self.out.bytes.len()).min(n);
            self.out.bytes.extend_from_slice(&buf[..keep]);
            if keep < n {
                self.out.truncated = true;
            }
        }
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl flag changes on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// An fd that becomes readable when `pid` exits (not reaped): a pidfd, or
/// (kernels before 5.3, other Unixes) a pipe fed by a waiter thread.
fn exit_notifier(pid: i32) -> Result<OwnedFd, HostError> {
    if let Some(fd) = os::pidfd_open(pid) {
        return Ok(fd);
    }
    let (r, w) = os::pipe_cloexec().map_err(|e| HostError::io("creating the exit pipe", e))?;
    std::thread::spawn(move || {
        wait_exited_no_reap(pid);
        drop(w);
    });
    Ok(r)
}

fn kill_group(pid: i32) {
    // SAFETY: kill with a negative pid signals the process group the child
    // leads (it called setsid); ESRCH when it is already empty is fine.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Block until `pid` has exited, without reaping it (`WNOWAIT`), so the
/// group can still be killed safely by its number.
fn wait_exited_no_reap(pid: i32) {
    loop {
        // SAFETY: siginfo_t is plain data; waitid writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child with a valid out pointer.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Spawn `cmd` from the spawner thread, passing `keep_fds` (our copies are
/// closed afterwards). The child survives the exit of the calling thread.
///
/// With `parent_death` the child gets the full setup of [`prepare`] (new
/// session, `PR_SET_PDEATHSIG`, fd sweep in the child). Without it — for
/// bwrap — it gets its own process group and a [`light_spawn`]: bwrap arms
/// its own parent-death signal (`--die-with-parent`) once its sandbox child
/// can proceed, and puts the command in a new session itself. Killing bwrap
/// earlier, while its child waits for the uid map, would orphan that child
/// blocked for ever; un-armed, bwrap finishes starting and the helper's
/// lifeline then takes the sandbox down.
pub fn spawn(
    mut cmd: Command,
    keep_fds: Vec<OwnedFd>,
    parent_death: bool,
) -> Result<Child, HostError> {
    let raw: Vec<RawFd> = keep_fds.iter().map(AsRawFd::as_raw_fd).collect();
    let child = if parent_death {
        prepare(&mut cmd, raw, true);
        spawn_on_spawner(cmd, None)?
    } else {
        // Its own process group (killed as a whole), via posix_spawn.
        cmd.process_group(0);
        spawn_on_spawner(cmd, Some(raw))?
    };
    drop(keep_fds);
    Ok(child)
}

/// Spawn `cmd` (already carrying program, args, env and cwd) and supervise
/// it according to `req`. `keep_fds` are passed to the child; the caller's
/// copies are dropped right after the spawn.
/// How often a cancellable run checks its [`crate::host::request::CancelToken`].
const CANCEL_POLL: Duration = Duration::from_millis(50);

pub fn run(
    cmd: Command,
    keep_fds: Vec<OwnedFd>,
    req: &ExecRequest,
) -> Result<Supervised, HostError> {
    run_with(cmd, keep_fds, req, true)
}

/// [`run`], choosing whether the child gets our parent-death signal (see
/// [`prepare`] for why bwrap does not).
pub fn run_with(
    cmd: Command,
    keep_fds: Vec<OwnedFd>,
    req: &ExecRequest,
    parent_death: bool,
) -> Result<Supervised, HostError> {
    run_inner(cmd, keep_fds, req, parent_death)
}

/// How long a stage watching a lifeline gets to take its process tree down
/// after the lifeline was closed, before its group is killed outright.
const LIFELINE_GRACE: Duration = Duration::from_secs(2);

/// The child's ends of its stdio, made by [`run_raw`] for a spawner that
/// sets up stdio itself (it must have its own copies by the time it
/// returns: ours are closed then).
pub struct ChildEnds {
    /// `None`: inherit ours.
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Supervise a child started by `spawn` (given the child's stdio ends,
/// returning its pid) that watches a lifeline: the landlock tier's stage,
/// the subreaper of the command's tree. On timeout the lifeline (our only
/// write end) is closed first, so the stage kills every descendant —
/// including `setsid` daemons outside the process group — before it
/// exits; only if it has not exited after [`LIFELINE_GRACE`] is its group
/// killed directly. The child must lead its own process group and must be
/// a child of this process (it is reaped here).
pub fn run_raw(
    spawn: impl FnOnce(&ChildEnds) -> Result<i32, HostError>,
    req: &ExecRequest,
    lifeline: OwnedFd,
) -> Result<Supervised, HostError> {
    let pipe = || os::pipe_cloexec().map_err(|e| HostError::io("creating the output pipes", e));
    let (out_r, out_w) = match &req.stdio {
        Some(s) => (None, dup_end(&s.stdout)?),
        None => {
            let (r, w) = pipe()?;
            (Some(r), w)
        }
    };
    let (err_r, err_w) = pipe()?;
    let (stdin_child, stdin_ours) = match req.stdin {
        _ if req.stdio.is_some() => {
            let s = req.stdio.as_ref().map(|s| dup_end(&s.stdin));
            (s.transpose()?, None)
        }
        StdinSpec::Inherit => (None, None),
        StdinSpec::Null => {
            let null = std::fs::File::open("/dev/null")
                .map_err(|e| HostError::io("opening /dev/null", e))?;
            (Some(OwnedFd::from(null)), None)
        }
        StdinSpec::Bytes(_) => {
            let (r, w) = pipe()?;
            (Some(r), Some(w))
        }
    };
    let ends = ChildEnds {
        stdin: stdin_child,
        stdout: out_w,
        stderr: err_w,
    };
    let start = Instant::now();
    let pid = spawn(&ends)?;
    drop(ends);
    let io = ChildIo {
        stdin: stdin_ours.map(std::fs::File::from),
        stdout: out_r,
        stderr: Some(err_r),
    };
    supervise_loop(Proc::Raw(pid), io, req, start, Some(lifeline))
}

/// A duplicate of one end of a server process's stdio pipe, for the child
/// (close-on-exec in this process; the spawn makes it the child's fd 0/1).
fn dup_end(fd: &OwnedFd) -> Result<OwnedFd, HostError> {
    fd.try_clone()
        .map_err(|e| HostError::io("duplicating the server's stdio pipe", e))
}

/// The supervised child: std's, or one started by hand (reaped by pid).
enum Proc {
    Std(Child),
    Raw(i32),
}

impl Proc {
    fn pid(&self) -> i32 {
        match self {
            Proc::Std(c) => c.id() as i32,
            Proc::Raw(p) => *p,
        }
    }

    fn wait(self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Proc::Std(mut c) => c.wait(),
            Proc::Raw(pid) => loop {
                let mut status = 0;
                // SAFETY: waitpid on our own child with a valid pointer.
                let r = unsafe { libc::waitpid(pid, &mut status, 0) };
                if r == pid {
                    return Ok(std::process::ExitStatus::from_raw(status));
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            },
        }
    }
}

/// Our ends of the child's stdio.
struct ChildIo {
    stdin: Option<std::fs::File>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

fn run_inner(
    mut cmd: Command,
    keep_fds: Vec<OwnedFd>,
    req: &ExecRequest,
    parent_death: bool,
) -> Result<Supervised, HostError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(match req.stdin {
        StdinSpec::Null => Stdio::null(),
        StdinSpec::Bytes(_) => Stdio::piped(),
        StdinSpec::Inherit => Stdio::inherit(),
    });
    if let Some(s) = &req.stdio {
        // A server process: its stdin and stdout are the caller's pipes.
        cmd.stdin(Stdio::from(dup_end(&s.stdin)?));
        cmd.stdout(Stdio::from(dup_end(&s.stdout)?));
    }
    let start = Instant::now();
    let mut child = spawn(cmd, keep_fds, parent_death)?;
    let io = ChildIo {
        stdin: child
            .stdin
            .take()
            .map(|s| std::fs::File::from(OwnedFd::from(s))),
        stdout: child.stdout.take().map(OwnedFd::from),
        stderr: child.stderr.take().map(OwnedFd::from),
    };
    supervise_loop(Proc::Std(child), io, req, start, None)
}

/// The poll loop shared by every spawn: output, exit, timeout, cancel.
fn supervise_loop(
    child: Proc,
    io: ChildIo,
    req: &ExecRequest,
    start: Instant,
    mut lifeline: Option<OwnedFd>,
) -> Result<Supervised, HostError> {
    let pid = child.pid();
    if let (StdinSpec::Bytes(bytes), Some(mut stdin)) = (&req.stdin, io.stdin) {
        let bytes = bytes.clone();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let tee = |err: bool| -> Option<Box<dyn Write>> {
        match (req.tee, err) {
            (false, _) => None,
            (true, false) => Some(Box::new(std::io::stdout())),
            (true, true) => Some(Box::new(std::io::stderr())),
        }
    };
    // A server process's stderr also goes, live, to its log file.
    let stderr_log = req
        .stdio
        .as_ref()
        .and_then(|s| s.stderr_log.as_ref())
        .and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        })
        .map(|f| Box::new(f) as Box<dyn Write>);
    let mut streams = [
        Stream::new(io.stdout, tee(false)),
        Stream::new(io.stderr, tee(true).or(stderr_log)),
    ];
    let exit_fd = exit_notifier(pid)?;
    let deadline = req.timeout.map(|t| start + t);
    let mut exited_at: Option<Instant> = None;
    let mut timed_out = false;
    // Set when the lifeline was closed on timeout: kill the group outright
    // if the child is still there by then.
    let mut hard_kill_at: Option<Instant> = None;
    let mut buf = vec![0u8; 64 * 1024];
    // One thread does it all: poll the output pipes and the exit notifier.
    loop {
        let open = streams.iter().filter(|s| s.fd.is_some()).count();
        if let Some(at) = exited_at {
            // Gone: drain until the pipes close, but not for ever (a
            // process that escaped the group could hold them open).
            if open == 0 || at.elapsed() >= DRAIN_GRACE {
                break;
            }
        }
        let mut fds: Vec<libc::pollfd> = streams
            .iter()
            .filter_map(|s| s.fd.as_ref())
            .map(|f| libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if exited_at.is_none() {
            fds.push(libc::pollfd {
                fd: exit_fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let now = Instant::now();
        let wait = match (exited_at, deadline) {
            (Some(at), _) => Some((at + DRAIN_GRACE).saturating_duration_since(now)),
            (None, Some(d)) if !timed_out => Some(d.saturating_duration_since(now)),
            (None, _) => hard_kill_at.map(|h| h.saturating_duration_since(now)),
        };
        // A cancellable run wakes up at least every CANCEL_POLL to look.
        let wait = match (&req.cancel, exited_at) {
            (Some(_), None) => Some(wait.map_or(CANCEL_POLL, |w| w.min(CANCEL_POLL))),
            _ => wait,
        };
        let ms = wait
            .map(|w| w.as_millis().min(i32::MAX as u128) as i32 + 1)
            .unwrap_or(-1);
        // SAFETY: fds points at fds.len() valid pollfd structs.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            kill_group(pid);
            return Err(HostError::io("supervising the command", e));
        }
        for s in streams.iter_mut() {
            s.drain(req.output_cap, &mut buf);
        }
        if exited_at.is_none() && fds.last().is_some_and(|p| p.revents != 0) {
            exited_at = Some(Instant::now());
            // Exited but not reaped: its pid still names the group.
            kill_group(pid);
        }
        if exited_at.is_none() && !timed_out && deadline.is_some_and(|d| Instant::now() >= d) {
            timed_out = true;
            match lifeline.take() {
                Some(l) => {
                    drop(l);
                    hard_kill_at = Some(Instant::now() + LIFELINE_GRACE);
                }
                None => kill_group(pid),
            }
        }
        if exited_at.is_none() && hard_kill_at.is_some_and(|h| Instant::now() >= h) {
            kill_group(pid);
            hard_kill_at = None;
        }
        if exited_at.is_none() && req.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            // Killed on request: the exit status says SIGKILL. A stage with
            // a lifeline takes its tree down itself (as on timeout).
            match lifeline.take() {
                Some(l) => {
                    drop(l);
                    hard_kill_at = Some(Instant::now() + LIFELINE_GRACE);
                }
                None if hard_kill_at.is_none() => kill_group(pid),
                None => {}
            }
        }
    }
    kill_group(pid);
    let status = child
        .wait()
        .map_err(|e| HostError::io("waiting for the command", e))?;
    let duration = exited_at.unwrap_or_else(Instant::now) - start;
    let [out, err] = streams;
    let exit = match (status.code(), status.signal()) {
        (Some(c), _) => ExitKind::Code(c),
        (None, Some(s)) => ExitKind::Signal(s),
        (None, None) => ExitKind::Code(crate::exit::FAILURE),
    };
    Ok(Supervised {
        pid: pid as u32,
        exit,
        timed_out,
        duration,
        stdout: out.out,
        stderr: err.out,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "supervise_tests.rs"]
mod tests;
