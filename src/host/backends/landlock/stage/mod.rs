//! The landlock tier's stage: the sandbox applied with no helper exec and
//! no copy of codewhale's address space.
//!
//! Everything that allocates is done in codewhale first: the Landlock
//! ruleset is built in the kernel, the seccomp table is compiled to BPF
//! (once per process), the command's path, argv and environment are laid
//! out as C arrays, two guarded stacks are mapped ([`stack`]). Then:
//!
//! - a launcher thread — kept between runs, every signal blocked, and
//!   hardened once with no_new_privs, no capabilities and the seccomp
//!   filter, all of which the stage and the command inherit (see
//!   [`launcher`]) — starts the **stage** with `clone(CLONE_VM |
//!   CLONE_VFORK)`, the way `posix_spawn` starts a child: no page tables
//!   are copied, and the thread stays suspended until the stage exits, so
//!   the stage can borrow its TLS;
//! - the **stage** (its own process, own fd table and signal handlers)
//!   tells codewhale its pid on the hello pipe, resets every caught
//!   signal to its default, takes its own process group, puts the output
//!   pipes on its stdio, enters the working directory, becomes the
//!   **child subreaper**, closes every fd but the status pipe, the
//!   lifeline and the ruleset, and starts the command with
//!   `clone(CLONE_VM | CLONE_VFORK)` again;
//! - the **command's half** takes a new session (no controlling terminal),
//!   checks that no_new_privs, the empty capability sets and the seccomp
//!   filter are in force, applies the ruleset (`landlock_restrict_self`),
//!   writes one status byte and `execve`s the command;
//! - the stage then waits for the command, the lifeline (closed by
//!   codewhale on timeout, or by the kernel when codewhale dies) and
//!   re-parented orphans. When the command exits or the lifeline goes, it
//!   kills every descendant (also `setsid` daemons, see `reaper`) and
//!   exits the way the command did.
//!
//! The stage and the command's half share codewhale's memory while
//! codewhale's other threads run: they only make system calls on memory
//! prepared before, on their own stacks (see [`child`]). Compared to
//! exec'ing a helper binary this saves an exec, a dynamic link, a JSON
//! decode and the seccomp compile per command; compared to `fork` it saves
//! copying (and later faulting back) the page tables of a process that
//! may be large (see `docs/PERFORMANCE.md`).

mod child;
mod launcher;
mod stack;
mod status;

pub use status::{decode_status, read_stage_status, StageStatus, Step};

use crate::host::backends::landlock::PreparedRuleset;
use crate::host::process::supervise::ChildEnds;
use crate::host::seccomp::apply as seccomp_apply;
use crate::host::seccomp::SeccompOptions;
use crate::host::HostError;
use seccompiler::BpfProgram;
use stack::Stack;
use std::ffi::{CString, OsStr};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// Stack of the stage (its supervision loop and the reaper's buffers).
const STAGE_STACK: usize = 128 * 1024;
/// Stack of the command's half between clone and exec.
const COMMAND_STACK: usize = 64 * 1024;

/// The compiled seccomp programs per options (compiling is pure; the
/// result never changes within a process).
fn compiled(opts: &SeccompOptions) -> Result<Arc<Vec<BpfProgram>>, seccomp_apply::SeccompError> {
    type Cache = Mutex<Vec<(SeccompOptions, Arc<Vec<BpfProgram>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    if let Ok(c) = cache.lock() {
        if let Some((_, p)) = c.iter().find(|(o, _)| o == opts) {
            return Ok(Arc::clone(p));
        }
    }
    let progs = Arc::new(seccomp_apply::compile(&crate::host::seccomp::rules(opts))?);
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
    fn new(items: impl IntoIterator<Item = Vec<u8>>) -> Option<CArray> {
        let strings = items
            .into_iter()
            .map(|b| CString::new(b).ok())
            .collect::<Option<Vec<_>>>()?;
        let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Some(CArray {
            _strings: strings,
            ptrs,
        })
    }
}

/// What to run and how, for [`Stage::new`].
pub struct Command<'a> {
    /// The program, already resolved (as a shell would, on the command's
    /// `PATH`), or a path with a slash.
    pub path: &'a Path,
    pub argv: &'a [String],
    pub env: Vec<(String, String)>,
    pub cwd: &'a Path,
}

/// Everything the stage and the command's half need, prepared before.
pub struct Stage {
    /// The Landlock ruleset fd (`None`: the kernel enforces nothing).
    ruleset: Option<OwnedFd>,
    /// The seccomp variant: the launcher thread carries the filter.
    seccomp: SeccompOptions,
    status_fd: RawFd,
    lifeline_fd: RawFd,
    path: CString,
    argv: CArray,
    envp: CArray,
    cwd: CString,
    /// The child ends of the output pipes and stdin, set by [`Stage::spawn`].
    stdin: Option<RawFd>,
    stdout: RawFd,
    stderr: RawFd,
    /// Write end of the hello pipe (the stage writes its pid there).
    hello_fd: RawFd,
    stage_stack: Stack,
    command_stack: Stack,
    /// Set by the stage right before it exits normally, when the command's
    /// half is reaped: only then are the stacks known to be free.
    done: std::sync::atomic::AtomicBool,
    /// The opener (see `opener`): its seccomp program and the command's
    /// end of the socketpair the listener is sent over.
    opener: Option<OpenerEnd>,
    /// An fd the stage keeps open until it exits (close-on-exec, so the
    /// command never has it): the integrity check's shared `active` lock,
    /// so a run whose codewhale was SIGKILLed counts as live until the
    /// stage has killed and reaped the whole tree (-1: none).
    hold_fd: RawFd,
    /// The `mask` strategy: what to mount, and the seccomp programs the
    /// command's half installs itself after mounting (its launcher thread
    /// carries only no_new_privs, see `launcher`).
    mask: Option<(
        crate::host::backends::landlock::mask::MaskSpec,
        Arc<Vec<BpfProgram>>,
    )>,
}

/// What the command's half needs to install the opener's filter.
struct OpenerEnd {
    prog: Vec<seccompiler::sock_filter>,
    sock: RawFd,
}

// SAFETY: the raw pointers in `argv`/`envp` point into CStrings owned by
// the same struct, never mutated and never moved (their buffers stay put);
// the struct moves as a whole into the spawning thread.
unsafe impl Send for Stage {}

/// Setting up the stage failed before it started.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Seccomp(#[from] seccomp_apply::SeccompError),
    #[error(transparent)]
    Landlock(#[from] crate::host::backends::landlock::LandlockError),
    #[error("the command's {0} contains a NUL byte")]
    Nul(&'static str),
    #[error("mapping the stage's stacks: {0}")]
    Stack(std::io::Error),
}

impl Stage {
    /// Prepare the stage: `ruleset` built, the seccomp programs for `opts`
    /// compiled (once per process), the command laid out for `execve`.
    /// `status_fd` and `lifeline_fd` must stay open until [`spawn`]
    /// returns (the stage gets its own copies).
    ///
    /// [`spawn`]: Stage::spawn
    pub fn new(
        ruleset: PreparedRuleset,
        seccomp: &SeccompOptions,
        status_fd: RawFd,
        lifeline_fd: RawFd,
        cmd: Command<'_>,
    ) -> Result<Stage, StageError> {
        let bytes = |p: &Path| p.as_os_str().as_bytes().to_vec();
        Ok(Stage {
            ruleset: ruleset.into_fd()?,
            seccomp: {
                // Compiled here so a bad table fails before any thread.
                compiled(seccomp)?;
                *seccomp
            },
            status_fd,
            lifeline_fd,
            path: CString::new(bytes(cmd.path)).map_err(|_| StageError::Nul("program path"))?,
            argv: CArray::new(cmd.argv.iter().map(|a| OsStr::new(a).as_bytes().to_vec()))
                .ok_or(StageError::Nul("argument"))?,
            envp: CArray::new(cmd.env.iter().map(|(k, v)| format!("{k}={v}").into_bytes()))
                .ok_or(StageError::Nul("environment variable"))?,
            cwd: CString::new(bytes(cmd.cwd)).map_err(|_| StageError::Nul("working directory"))?,
            stdin: None,
            stdout: -1,
            stderr: -1,
            hello_fd: -1,
            stage_stack: Stack::take(STAGE_STACK).map_err(StageError::Stack)?,
            command_stack: Stack::take(COMMAND_STACK).map_err(StageError::Stack)?,
            done: std::sync::atomic::AtomicBool::new(false),
            opener: None,
            hold_fd: -1,
            mask: None,
        })
    }

    /// Install the opener's filter `prog` in the command (last, after the
    /// Landlock ruleset) and send its listener over `sock` (the command's
    /// end of a socketpair; it must stay open until [`Stage::spawn`]
    /// returns).
    pub fn with_opener(mut self, prog: Vec<seccompiler::sock_filter>, sock: RawFd) -> Stage {
        self.opener = Some(OpenerEnd { prog, sock });
        self
    }

    /// Mask deny-read items with `spec` in the command's half (see
    /// `mask`): the stage starts from a launcher thread that only sets
    /// no_new_privs, and the command's half drops the capabilities and
    /// installs the seccomp filter after mounting.
    pub fn with_mask(
        mut self,
        spec: crate::host::backends::landlock::mask::MaskSpec,
    ) -> Result<Stage, StageError> {
        let progs = compiled(&self.seccomp)?;
        self.mask = Some((spec, progs));
        Ok(self)
    }

    /// Keep `fd` open in the stage until it exits (see [`Stage::hold_fd`]);
    /// it must stay open until [`Stage::spawn`] returns.
    pub fn with_held_fd(mut self, fd: RawFd) -> Stage {
        self.hold_fd = fd;
        self
    }

    /// Start the stage with `ends` as its stdio (from a hardened launcher
    /// thread, see [`launcher`]); returns its pid once it runs.
    pub fn spawn(mut self, ends: &ChildEnds) -> Result<libc::pid_t, HostError> {
        let (hello_r, hello_w): (OwnedFd, OwnedFd) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| HostError::io("creating the stage's hello pipe", e.into()))?;
        self.stdin = ends.stdin.as_ref().map(AsRawFd::as_raw_fd);
        self.stdout = ends.stdout.as_raw_fd();
        self.stderr = ends.stderr.as_raw_fd();
        self.hello_fd = hello_w.as_raw_fd();
        let opts = self.seccomp;
        let mask = self.mask.is_some();
        let (err_tx, err_rx) = std::sync::mpsc::channel();
        launcher::launch(&opts, mask, move |hardened| {
            let _ = err_tx.send(start(self, hello_w, hardened));
        })
        .map_err(|e| HostError::io("handing the stage to its launcher thread", e))?;
        let mut pid = [0u8; 4];
        match std::fs::File::from(hello_r).read_exact(&mut pid) {
            Ok(()) => Ok(libc::pid_t::from_le_bytes(pid)),
            Err(_) => {
                // The stage never ran: the launcher has the error (and
                // wrote a failure record if hardening failed).
                let errno = err_rx.recv().ok().flatten().unwrap_or(libc::EAGAIN);
                Err(HostError::io(
                    "starting the sandbox stage",
                    std::io::Error::from_raw_os_error(errno),
                ))
            }
        }
    }
}

/// On a launcher thread (hardened, every signal blocked): clone the
/// stage, stay suspended until it exits. Returns the errno if the thread's
/// hardening or the clone failed.
fn start(mut stage: Stage, hello_w: OwnedFd, hardened: Result<(), (Step, i32)>) -> Option<i32> {
    if let Err((step, errno)) = hardened {
        child::report_failure(stage.status_fd, step, errno);
        return Some(errno);
    }
    // SAFETY: the stage runs `stage_entry` on its own mapped stack with
    // CLONE_VM|CLONE_VFORK: this thread is suspended until it exits, so
    // the `Stage` it is handed stays alive and untouched meanwhile.
    let pid = unsafe {
        libc::clone(
            child::stage_entry,
            stage.stage_stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut stage as *mut Stage).cast(),
        )
    };
    let err = (pid < 0).then(|| {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EAGAIN)
    });
    drop(hello_w);
    let Stage {
        stage_stack,
        command_stack,
        done,
        ..
    } = stage;
    if pid < 0 || done.load(std::sync::atomic::Ordering::Acquire) {
        // Nothing runs on the stacks any more: the stage has exited after
        // reaping the command's half (or never ran).
        stage_stack.recycle();
        command_stack.recycle();
    } else {
        // The stage was killed from outside, maybe while the command's
        // half still ran on its stack before exec: never unmap or reuse
        // that memory (a deliberate, bounded leak of one pair of stacks).
        std::mem::forget(stage_stack);
        std::mem::forget(command_stack);
    }
    err
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn c_arrays_are_null_terminated_and_refuse_nul() {
        let a = CArray::new([b"a".to_vec(), b"bc".to_vec()]).unwrap();
        assert_eq!(a.ptrs.len(), 3);
        assert!(a.ptrs[2].is_null());
        assert!(CArray::new([b"a\0b".to_vec()]).is_none());
    }

    #[test]
    fn guarded_stacks_map_and_align() {
        let s = Stack::new(64 * 1024).unwrap();
        assert_eq!(s.top() as usize % 16, 0);
    }
}
