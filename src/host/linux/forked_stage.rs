//! The landlock tier's stage, without a helper exec.
//!
//! Everything that allocates is done in codewhale before the fork: the
//! Landlock ruleset is built in the kernel ([`PreparedRuleset`]), the
//! seccomp table is compiled to BPF, the command's path, argv and
//! environment are laid out as C arrays, a stack for the command's
//! set-up is allocated. The spawn then forks once (std's `Command`, with
//! this stage as its `pre_exec` hook), and the forked process is the
//! **stage**, the process std returns as `Child`:
//!
//! - it becomes the child subreaper and closes every fd it does not need
//!   (std's own error pipe included, and every fd of codewhale's that the
//!   fork inherited);
//! - it starts the **command** with `clone(CLONE_VM | CLONE_VFORK)`, the
//!   way `posix_spawn` does (no second copy of the address space; the
//!   stage waits until the command has exec'd). On its own stack, the
//!   command's half takes a new session (no controlling terminal),
//!   no_new_privs, drops every capability, applies the Landlock ruleset
//!   and the seccomp filter, writes one status byte for codewhale and
//!   `execve`s the command;
//! - it then waits for the command, the lifeline (closed by codewhale on
//!   timeout, or by the kernel when codewhale dies) and re-parented
//!   orphans. When the command exits or the lifeline goes, it kills every
//!   descendant (also `setsid` daemons, see [`super::reaper`]) and exits
//!   the way the command did. It never returns to std and never execs.
//!
//! Both run in a process forked from the multi-threaded codewhale, so
//! they only make raw system calls on memory prepared before the fork (no
//! allocation, no locks). Compared to exec'ing a helper binary this saves
//! an exec, a dynamic link, a JSON decode and the seccomp compile per
//! command (see `docs/PERFORMANCE.md`).

use super::landlock::PreparedRuleset;
use super::seccomp_apply;
use seccompiler::BpfProgram;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// The status byte the command writes when every protection is in force.
pub const APPLIED: u8 = b'A';
/// The first byte of a failure record: `[FAILED, step, errno (4 bytes LE)]`.
pub const FAILED: u8 = b'F';
/// After [`APPLIED`]: `[EXEC_FAILED, errno (4 bytes LE)]` when `execve` failed.
pub const EXEC_FAILED: u8 = b'E';

/// Stack for the command's half between clone and exec (it runs the
/// Landlock crate's `restrict_self` and a few system calls).
const CHILD_STACK: usize = 256 * 1024;

/// The step of the command's set-up, as reported in a failure record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    Setsid = 1,
    NoNewPrivs = 2,
    Capabilities = 3,
    Landlock = 4,
    Seccomp = 5,
    Subreaper = 6,
    Fork = 7,
}

impl Step {
    fn from_u8(b: u8) -> Option<Step> {
        Some(match b {
            1 => Step::Setsid,
            2 => Step::NoNewPrivs,
            3 => Step::Capabilities,
            4 => Step::Landlock,
            5 => Step::Seccomp,
            6 => Step::Subreaper,
            7 => Step::Fork,
            _ => return None,
        })
    }

    fn what(self) -> &'static str {
        match self {
            Step::Setsid => "starting a new session (setsid)",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Capabilities => "dropping every capability",
            Step::Landlock => "applying the Landlock ruleset",
            Step::Seccomp => "installing the seccomp filter",
            Step::Subreaper => "becoming the child subreaper",
            Step::Fork => "forking the command",
        }
    }
}

/// What the status pipe said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageStatus {
    /// Every protection was in force before the command was exec'd.
    Applied,
    /// Every protection was in force, then `execve` failed with this errno.
    ExecFailed(i32),
    /// A step failed; the command never ran.
    Failed { step: String, error: String },
    /// Nothing (or garbage) arrived: the stage died before reporting.
    Silent,
}

/// Decode what the status pipe carried.
pub fn decode_status(bytes: &[u8]) -> StageStatus {
    match bytes {
        [APPLIED, EXEC_FAILED, e0, e1, e2, e3, ..] => {
            StageStatus::ExecFailed(i32::from_le_bytes([*e0, *e1, *e2, *e3]))
        }
        [APPLIED, ..] => StageStatus::Applied,
        [FAILED, step, e0, e1, e2, e3, ..] => {
            let errno = i32::from_le_bytes([*e0, *e1, *e2, *e3]);
            StageStatus::Failed {
                step: Step::from_u8(*step)
                    .map(Step::what)
                    .unwrap_or("an unknown step")
                    .to_string(),
                error: io::Error::from_raw_os_error(errno).to_string(),
            }
        }
        _ => StageStatus::Silent,
    }
}

/// Read what the status pipe holds, without blocking: both halves have
/// written (or died) by the time supervision returns, and a command that
/// exec'd no longer holds the write end.
pub fn read_stage_status(read_end: std::os::fd::OwnedFd) -> StageStatus {
    use std::os::fd::AsRawFd;
    let fd = read_end.as_raw_fd();
    let mut buf = [0u8; 16];
    // SAFETY: fcntl on the fd we own, then a read into a live buffer.
    let n = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
    };
    decode_status(&buf[..n.max(0) as usize])
}

/// The capability header and data of `capget`/`capset` (version 3: two
/// 32-bit words per set).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;
const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;

/// The compiled seccomp programs per options (compiling is pure; the
/// result never changes within a process).
fn compiled(
    opts: &super::seccomp::SeccompOptions,
) -> Result<Arc<Vec<BpfProgram>>, seccomp_apply::SeccompError> {
    type Cache = Mutex<Vec<(super::seccomp::SeccompOptions, Arc<Vec<BpfProgram>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    if let Ok(c) = cache.lock() {
        if let Some((_, p)) = c.iter().find(|(o, _)| o == opts) {
            return Ok(Arc::clone(p));
        }
    }
    let progs = Arc::new(seccomp_apply::compile(&super::seccomp::rules(opts))?);
    if let Ok(mut c) = cache.lock() {
        c.push((*opts, Arc::clone(&progs)));
    }
    Ok(progs)
}

/// A NUL-terminated C array of C strings, owning the strings.
struct CArray {
    _strings: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

impl CArray {
    fn new(items: impl IntoIterator<Item = Vec<u8>>) -> Result<CArray, io::Error> {
        let strings = items
            .into_iter()
            .map(|b| CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Ok(CArray {
            _strings: strings,
            ptrs,
        })
    }
}

/// Everything the stage and the command's half need, prepared before the
/// fork.
pub struct Stage {
    /// The Landlock ruleset fd (`None`: the kernel enforces nothing).
    ruleset: Option<std::os::fd::OwnedFd>,
    seccomp: Arc<Vec<BpfProgram>>,
    status_fd: RawFd,
    lifeline_fd: RawFd,
    path: CString,
    argv: CArray,
    envp: CArray,
    stack: Box<[std::mem::MaybeUninit<u8>]>,
}

// SAFETY: the raw pointers in `argv`/`envp` point into CStrings owned by
// the same struct, which are never mutated or moved (the Vec buffers stay
// put); the struct moves as a whole into the pre_exec closure.
unsafe impl Send for Stage {}
// SAFETY: as for Send; shared references only read the arrays.
unsafe impl Sync for Stage {}

impl Stage {
    /// Prepare the stage: `ruleset` built, the seccomp programs for `opts`
    /// compiled (once per process), the command (`path` already resolved,
    /// `argv`, `env`) laid out for `execve`. `status_fd` and `lifeline_fd`
    /// reach the stage through the fork (it keeps them, closes the rest).
    pub fn new(
        ruleset: PreparedRuleset,
        seccomp: &super::seccomp::SeccompOptions,
        status_fd: RawFd,
        lifeline_fd: RawFd,
        path: &Path,
        argv: &[impl AsRef<OsStr>],
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Stage, StageError> {
        let bad = |what: &'static str| StageError::Nul(what);
        Ok(Stage {
            ruleset: ruleset.into_fd()?,
            seccomp: compiled(seccomp)?,
            status_fd,
            lifeline_fd,
            path: CString::new(path.as_os_str().as_bytes()).map_err(|_| bad("program path"))?,
            argv: CArray::new(argv.iter().map(|a| a.as_ref().as_bytes().to_vec()))
                .map_err(|_| bad("argument"))?,
            envp: CArray::new(
                env.into_iter()
                    .map(|(k, v)| format!("{k}={v}").into_bytes()),
            )
            .map_err(|_| bad("environment variable"))?,
            // Uninitialised: a stack needs no zeroes, and untouched pages
            // are never faulted in.
            stack: Box::new_uninit_slice(CHILD_STACK),
        })
    }

    /// The `pre_exec` hook, run in the forked stage process. Returns only
    /// when the stage could not even start the command (std then reports
    /// the error from `spawn`); otherwise the stage supervises and exits.
    pub fn pre_exec_hook(&mut self) -> io::Result<()> {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(self.fail(Step::Subreaper));
        }
        let (status, life) = (self.status_fd, self.lifeline_fd);
        // Keep stdio, the status pipe and the lifeline; close everything
        // else (std's error pipe too: `spawn` returns now, and failures
        // from here on are reported on the status pipe).
        let ruleset = self.ruleset.as_ref().map_or(-1, |f| f.as_raw_fd());
        close_all_but(&[status, life, ruleset]);
        let mut all: libc::sigset_t = unsafe_zeroed_sigset();
        let mut old: libc::sigset_t = unsafe_zeroed_sigset();
        // SAFETY: sigfillset/sigprocmask on live sigset_t values. Signals
        // stay blocked while the command's half shares our memory.
        unsafe {
            libc::sigfillset(&mut all);
            libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old);
        }
        let top = self.stack.as_mut_ptr_range().end.cast::<u8>();
        // 16-byte alignment for the ABI.
        let top = ((top as usize) & !15) as *mut libc::c_void;
        // SAFETY: the child runs `command_entry` on its own stack (`top`,
        // inside our allocation) with CLONE_VM|CLONE_VFORK: we are
        // suspended until it execs or exits, so nothing else touches the
        // shared memory meanwhile; it only makes raw system calls.
        let pid = unsafe {
            libc::clone(
                command_entry,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (self as *mut Stage).cast(),
            )
        };
        // SAFETY: restoring the mask saved above.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        if pid < 0 {
            let _ = self.fail(Step::Fork);
            // SAFETY: leaving the forked stage without atexit handlers.
            unsafe { libc::_exit(crate::exit::SANDBOX_SETUP) };
        }
        // SAFETY: our copy of the status pipe is no longer needed.
        unsafe { libc::close(status) };
        self.supervise(pid)
    }

    /// Write a failure record for `step` (errno from the last call) and
    /// return the error.
    fn fail(&self, step: Step) -> io::Error {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM);
        self.fail_with(step, errno)
    }

    /// [`fail`](Self::fail) with a known errno.
    fn fail_with(&self, step: Step, errno: i32) -> io::Error {
        let e = errno.to_le_bytes();
        let rec = [FAILED, step as u8, e[0], e[1], e[2], e[3]];
        // SAFETY: writing a stack buffer to the status pipe we were handed.
        unsafe { libc::write(self.status_fd, rec.as_ptr().cast(), rec.len()) };
        io::Error::from_raw_os_error(errno)
    }

    /// The command's half: every protection, then `execve`. Returns the
    /// exit code when something failed (the record is written).
    fn command_side(&mut self) -> i32 {
        let errno = || {
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EPERM)
        };
        // SAFETY: the clone child is not a group leader, so setsid works;
        // the new session has no controlling terminal (no TIOCSTI into ours).
        if unsafe { libc::setsid() } < 0 {
            self.fail_with(Step::Setsid, errno());
            return crate::exit::SANDBOX_SETUP;
        }
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            self.fail_with(Step::NoNewPrivs, errno());
            return crate::exit::SANDBOX_SETUP;
        }
        if !drop_capabilities() {
            self.fail_with(Step::Capabilities, errno());
            return crate::exit::SANDBOX_SETUP;
        }
        if let Some(fd) = &self.ruleset {
            // SAFETY: landlock_restrict_self on the ruleset fd we own, with
            // no flags; no_new_privs is set above.
            let rc =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
            if rc != 0 {
                self.fail_with(Step::Landlock, errno());
                return crate::exit::SANDBOX_SETUP;
            }
        }
        for prog in self.seccomp.iter() {
            let fprog = libc::sock_fprog {
                len: prog.len() as libc::c_ushort,
                // seccompiler's sock_filter has the kernel's layout.
                filter: prog.as_ptr().cast::<libc::sock_filter>().cast_mut(),
            };
            // SAFETY: fprog points at a live BPF program for the duration
            // of the call; the kernel copies it.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    SECCOMP_SET_MODE_FILTER,
                    0 as libc::c_ulong,
                    &fprog as *const libc::sock_fprog,
                )
            };
            if rc != 0 {
                self.fail_with(Step::Seccomp, errno());
                return crate::exit::SANDBOX_SETUP;
            }
        }
        let mut empty: libc::sigset_t = unsafe_zeroed_sigset();
        // SAFETY: status byte from the stack; the status pipe and the
        // lifeline become close-on-exec (the command never holds them);
        // default dispositions for every caught signal (the handlers are
        // codewhale's, and this process shares its memory until exec);
        // an empty signal mask for the command, as for any spawn.
        unsafe {
            libc::write(self.status_fd, [APPLIED].as_ptr().cast(), 1);
            libc::fcntl(self.status_fd, libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(self.lifeline_fd, libc::F_SETFD, libc::FD_CLOEXEC);
            for sig in 1..libc::SIGRTMAX() {
                let mut sa: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut sa) == 0
                    && sa.sa_sigaction != libc::SIG_DFL
                    && sa.sa_sigaction != libc::SIG_IGN
                {
                    sa.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execve(
                self.path.as_ptr(),
                self.argv.ptrs.as_ptr(),
                self.envp.ptrs.as_ptr(),
            );
        }
        let e = errno().to_le_bytes();
        let rec = [EXEC_FAILED, e[0], e[1], e[2], e[3]];
        // SAFETY: a stack buffer to the status pipe (still open: exec failed).
        unsafe { libc::write(self.status_fd, rec.as_ptr().cast(), rec.len()) };
        if i32::from_le_bytes(e) == libc::ENOENT {
            crate::exit::NOT_FOUND
        } else {
            crate::exit::NOT_EXECUTABLE
        }
    }

    /// The stage's half: supervise the command's tree; never returns.
    fn supervise(&mut self, command: libc::pid_t) -> ! {
        let life = self.lifeline_fd;
        // SAFETY: pidfd_open on our own, not yet reaped child.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, command, 0) } as RawFd;
        let mut command_status: Option<i32> = None;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: life,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let n_fds = if pidfd >= 0 { 2 } else { 1 };
            // Wake up now and then anyway, to reap re-parented orphans
            // (and, without a pidfd, to notice the command's exit).
            let timeout = if pidfd >= 0 { 1000 } else { 50 };
            // SAFETY: fds points at n_fds live pollfd structs.
            unsafe { libc::poll(fds.as_mut_ptr(), n_fds, timeout) };
            super::reaper::reap_exited(|pid, st| {
                if pid == command {
                    command_status = Some(st);
                }
            });
            if command_status.is_some() {
                break;
            }
            if fds[0].revents != 0 {
                // Timeout, or codewhale is gone: take the tree down.
                // SAFETY: signalling our own, not yet reaped child.
                unsafe { libc::kill(command, libc::SIGKILL) };
                break;
            }
        }
        super::reaper::kill_descendants(|pid, st| {
            if pid == command {
                command_status = Some(st);
            }
        });
        exit_like(command_status.unwrap_or(0))
    }
}

/// The command's half after `clone`: `arg` is the stage's `Stage`.
extern "C" fn command_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `&mut Stage` the stage passed to clone; the
    // stage is suspended (CLONE_VFORK) until we exec or exit.
    let stage = unsafe { &mut *arg.cast::<Stage>() };
    let code = stage.command_side();
    // SAFETY: leave without running any handler (we share the stage's memory).
    unsafe { libc::_exit(code) }
}

/// Close every fd from 3 up except `keep`.
fn close_all_but(keep: &[RawFd]) {
    let mut keep_sorted = [0 as RawFd; 4];
    let n = keep.len().min(keep_sorted.len());
    keep_sorted[..n].copy_from_slice(&keep[..n]);
    let keep_sorted = &mut keep_sorted[..n];
    keep_sorted.sort_unstable();
    let mut from: u32 = 3;
    for &k in keep_sorted.iter() {
        if k < 3 || (k as u32) < from {
            continue;
        }
        if (k as u32) > from {
            // SAFETY: close_range on our own descriptor table.
            unsafe { libc::syscall(libc::SYS_close_range, from, (k - 1) as u32, 0u32) };
        }
        from = k as u32 + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32) };
}

fn unsafe_zeroed_sigset() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; all-zero is a valid (empty) value.
    unsafe { std::mem::zeroed() }
}

/// Setting up the stage failed before any fork.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Seccomp(#[from] seccomp_apply::SeccompError),
    #[error("the command's {0} contains a NUL byte")]
    Nul(&'static str),
    #[error(transparent)]
    Landlock(#[from] super::landlock::LandlockError),
}

/// Clear the bounding set (when CAP_SETPCAP allows), ambient, inheritable,
/// effective and permitted; true when effective and permitted read back
/// empty. Raw system calls only.
fn drop_capabilities() -> bool {
    let mut hdr = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData into the live array.
    if unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            data.as_mut_ptr(),
        )
    } != 0
    {
        return false;
    }
    if data[0].effective & (1 << CAP_SETPCAP) != 0 {
        for cap in 0..64 {
            // SAFETY: prctl with integer arguments; EINVAL past the last cap.
            if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                break;
            }
        }
    }
    // SAFETY: prctl with integer arguments (EINVAL before Linux 4.3, when
    // there is no ambient set to clear).
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    let zero = [CapData::default(); 2];
    // SAFETY: capset reads the header and two CapData from live memory.
    if unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, zero.as_ptr()) } != 0 {
        return false;
    }
    let mut check = [CapData::default(); 2];
    // SAFETY: as for the first capget.
    if unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            check.as_mut_ptr(),
        )
    } != 0
    {
        return false;
    }
    check.iter().all(|d| d.effective == 0 && d.permitted == 0)
}

/// Exit the way the command did: its exit code, or its signal re-raised
/// (with core dumps off: the stage is a copy of codewhale's memory).
fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit, signal, sigprocmask and kill with plain
        // arguments; the default action ends the process.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        // SAFETY: leaving the forked stage without running atexit handlers.
        unsafe { libc::_exit(128 + sig) }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        crate::exit::SANDBOX_SETUP
    };
    // SAFETY: leaving the forked stage without running atexit handlers.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_records_decode() {
        assert_eq!(decode_status(&[APPLIED]), StageStatus::Applied);
        assert_eq!(decode_status(&[]), StageStatus::Silent);
        let e = libc::EPERM.to_le_bytes();
        match decode_status(&[FAILED, Step::Seccomp as u8, e[0], e[1], e[2], e[3]]) {
            StageStatus::Failed { step, error } => {
                assert!(step.contains("seccomp"), "{step}");
                assert!(error.contains("not permitted"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(decode_status(&[FAILED, 1]), StageStatus::Silent);
    }
}
