//! The code that runs in the stage process and in the command's process
//! before `execve`.
//!
//! Both are `clone(CLONE_VM | CLONE_VFORK)` children (see the module docs
//! of `stage`): they share codewhale's memory, run on their own
//! guarded stacks, and borrow the TLS of the thread that cloned them, which
//! is suspended meanwhile. So they make system calls only (glibc's thin
//! wrappers, whose one side effect is the borrowed `errno`), read the
//! [`Stage`] prepared before, write only to their own stacks, and never
//! allocate, lock or return into Rust code of codewhale's.

use super::status::{Step, APPLIED, EXEC_FAILED, FAILED};
use super::Stage;
use std::os::fd::{AsRawFd, RawFd};

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

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

/// Write `[FAILED, step, errno]` to the status pipe.
pub(super) fn report_failure(status_fd: RawFd, step: Step, errno: i32) {
    let e = errno.to_le_bytes();
    let rec = [FAILED, step as u8, e[0], e[1], e[2], e[3]];
    // SAFETY: a stack buffer to the status pipe we were handed.
    unsafe { libc::write(status_fd, rec.as_ptr().cast(), rec.len()) };
}

/// Leave without running any handler (we share codewhale's memory).
fn leave(code: i32) -> ! {
    // SAFETY: _exit ends this process only.
    unsafe { libc::_exit(code) }
}

/// The stage process: `arg` is the [`Stage`]; never returns.
pub extern "C" fn stage_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Stage` handed to clone by the thread that
    // is suspended (CLONE_VFORK) until we exit; nothing else uses it.
    let stage = unsafe { &*arg.cast::<Stage>() };
    stage_main(stage)
}

fn stage_main(stage: &Stage) -> ! {
    let status = stage.status_fd;
    // SAFETY: getpid/write with a stack buffer; the hello pipe tells
    // codewhale our pid (the cloning thread is suspended until we exit).
    unsafe {
        let pid = libc::getpid().to_le_bytes();
        libc::write(stage.hello_fd, pid.as_ptr().cast(), pid.len());
    }
    reset_signal_dispositions();
    // SAFETY: setpgid/dup2/chdir/prctl with plain arguments on our own
    // process and descriptor table (a copy of codewhale's, taken by clone).
    let ok = unsafe {
        libc::setpgid(0, 0) == 0
            && stage.stdin.is_none_or(|fd| libc::dup2(fd, 0) == 0)
            && libc::dup2(stage.stdout, 1) == 1
            && libc::dup2(stage.stderr, 2) == 2
            && libc::chdir(stage.cwd.as_ptr()) == 0
    };
    // Before the command's half exists nothing else runs on the stacks.
    let give_up = |step: Step| -> ! {
        report_failure(status, step, errno());
        stage.done.store(true, std::sync::atomic::Ordering::Release);
        leave(crate::exit::SANDBOX_SETUP)
    };
    if !ok {
        give_up(Step::Stdio);
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        give_up(Step::Subreaper);
    }
    let ruleset = stage.ruleset.as_ref().map_or(-1, |f| f.as_raw_fd());
    let opener = stage.opener.as_ref().map_or(-1, |o| o.sock);
    close_all_but(&[status, stage.lifeline_fd, ruleset, opener, stage.hold_fd]);
    // SAFETY: the command's half runs `command_entry` on its own stack with
    // CLONE_VM|CLONE_VFORK: we are suspended until it execs or exits.
    let pid = unsafe {
        libc::clone(
            command_entry,
            stage.command_stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (stage as *const Stage).cast_mut().cast(),
        )
    };
    if pid < 0 {
        give_up(Step::Fork);
    }
    // SAFETY: our copies of the status pipe and the opener's socket are
    // no longer needed (codewhale sees the socket's end once the command
    // has exec'd).
    unsafe {
        libc::close(status);
        if opener >= 0 {
            libc::close(opener);
        }
    }
    let code = supervise(stage.lifeline_fd, pid);
    // The command's half is reaped: the stacks are free once we are gone.
    stage.done.store(true, std::sync::atomic::Ordering::Release);
    exit_like(code)
}

/// Default dispositions for every caught signal: the handlers are
/// codewhale's and would run on its memory. (Signals are blocked: the
/// cloning thread blocked them all, and we keep them blocked.) One query
/// per signal: cheaper than reading `SigCgt` from `/proc/self/status`
/// (measured: 9 µs against 11 µs).
fn reset_signal_dispositions() {
    for sig in 1..=libc::SIGRTMAX() {
        // SAFETY: sigaction on our own handler table (not shared: no
        // CLONE_SIGHAND) with live, zero-initialised structs.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut sa) == 0
                && sa.sa_sigaction != libc::SIG_DFL
                && sa.sa_sigaction != libc::SIG_IGN
            {
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

/// Watch the command, the lifeline and re-parented orphans; then kill the
/// whole tree. Returns the command's wait status.
fn supervise(life: RawFd, command: libc::pid_t) -> i32 {
    use crate::host::process::reaper;
    let pidfd = reaper::pidfd(command);
    let mut command_status: Option<i32> = None;
    loop {
        // Wake up now and then anyway, to reap re-parented orphans (and,
        // without a pidfd, to notice the command's exit).
        let lifeline_fired = reaper::wait_child_or_lifeline(life, pidfd, 1000, 50).unwrap_or(false);
        reaper::reap_exited(|pid, st| {
            if pid == command {
                command_status = Some(st);
            }
        });
        if command_status.is_some() {
            break;
        }
        if lifeline_fired {
            // Timeout, or codewhale is gone: take the tree down.
            // SAFETY: signalling our own, not yet reaped child.
            unsafe { libc::kill(command, libc::SIGKILL) };
            break;
        }
    }
    crate::host::process::reaper::kill_descendants(|pid, st| {
        if pid == command {
            command_status = Some(st);
        }
    });
    command_status.unwrap_or(0)
}

/// The command's process: `arg` is the [`Stage`].
extern "C" fn command_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the stage's `&mut Stage`; the stage is suspended
    // (CLONE_VFORK) until we exec or exit.
    let stage = unsafe { &*arg.cast::<Stage>() };
    leave(command_main(stage))
}

/// Every protection, then `execve`. Returns the exit code when something
/// failed (the record is written).
fn command_main(stage: &Stage) -> i32 {
    let status = stage.status_fd;
    let fail = |step: Step| {
        report_failure(status, step, errno());
        crate::exit::SANDBOX_SETUP
    };
    // SAFETY: not a group leader (a fresh child), so setsid works; the new
    // session has no controlling terminal (no TIOCSTI into ours).
    if unsafe { libc::setsid() } < 0 {
        return fail(Step::Setsid);
    }
    // The mask strategy: the namespace and its mounts first (they need
    // the capabilities or a user namespace, and the mount calls the
    // filter denies), then every capability dropped and the filter
    // installed here; otherwise all of it came with the launcher thread.
    if let Some((spec, progs)) = &stage.mask {
        if let Err((what, e)) = crate::host::backends::landlock::mask::apply(spec) {
            // The errno word carries the mask's own step in its top byte.
            report_failure(
                status,
                Step::Mask,
                (i32::from(what) << 24) | (e & 0xff_ffff),
            );
            return crate::exit::SANDBOX_SETUP;
        }
        if !drop_capabilities() {
            return fail(Step::Capabilities);
        }
        if let Err((step, e)) = install_filters(progs) {
            report_failure(status, step, e);
            return crate::exit::SANDBOX_SETUP;
        }
    }
    // no_new_privs, the capability drop and the seccomp filter: check
    // they are in force.
    if let Some(step) = inherited_missing() {
        return fail(step);
    }
    if let Some(fd) = &stage.ruleset {
        // SAFETY: landlock_restrict_self on the ruleset fd, no flags;
        // no_new_privs is in force (checked above).
        if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) } != 0 {
            return fail(Step::Landlock);
        }
    }
    if let Some(o) = &stage.opener {
        if !install_opener(o) {
            return fail(Step::Opener);
        }
    }
    // SAFETY: the status byte from the stack (the status pipe, the
    // lifeline and the ruleset are close-on-exec: the command holds none of
    // them), an empty signal mask for the command, then execve with arrays
    // prepared before any fork.
    unsafe {
        libc::write(status, [APPLIED].as_ptr().cast(), 1);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(
            stage.path.as_ptr(),
            stage.argv.ptrs.as_ptr(),
            stage.envp.ptrs.as_ptr(),
        );
    }
    let e = errno();
    let b = e.to_le_bytes();
    let rec = [EXEC_FAILED, b[0], b[1], b[2], b[3]];
    // SAFETY: a stack buffer to the status pipe (still open: exec failed).
    unsafe { libc::write(status, rec.as_ptr().cast(), rec.len()) };
    if e == libc::ENOENT {
        crate::exit::NOT_FOUND
    } else {
        crate::exit::NOT_EXECUTABLE
    }
}

/// Install the opener's filter with a new listener and send the listener
/// to codewhale. A filter that cannot be installed (e.g. `EBUSY`: a
/// listener further up the chain, as some container runtimes install) is
/// not fatal: the errno is sent instead and the command runs without the
/// opener. False only when the listener exists and could not be sent (every
/// open would then fail with `ENOSYS`).
fn install_opener(o: &super::OpenerEnd) -> bool {
    let fprog = libc::sock_fprog {
        len: o.prog.len() as libc::c_ushort,
        filter: o.prog.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    // SAFETY: fprog points at a live program for the duration of the call;
    // no_new_privs is in force (checked by the caller).
    let listener = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    let why = if listener < 0 { errno() } else { 0 };
    let mut payload = why.to_le_bytes();
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // Room for one SCM_RIGHTS fd (CMSG_SPACE(4) = 24 on 64-bit), aligned.
    let mut cbuf = [0u64; 4];
    // SAFETY: a zeroed msghdr on our stack, pointing at stack buffers;
    // the CMSG macros stay inside `cbuf`; sendmsg copies it all; then our
    // copies of the listener and the socket are closed.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if listener >= 0 {
            let fd = listener as libc::c_int;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(4) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd);
        }
        let sent = libc::sendmsg(o.sock, &msg, libc::MSG_NOSIGNAL) == payload.len() as isize;
        if listener >= 0 {
            libc::close(listener as libc::c_int);
        }
        libc::close(o.sock);
        sent || listener < 0
    }
}

/// Harden the calling thread once, for every stage it will start (they
/// inherit all of it through clone): no_new_privs, every capability
/// dropped, the seccomp programs installed. Per-thread state: codewhale's
/// other threads keep theirs. The failed step and errno otherwise.
pub(super) fn harden_thread(progs: &[seccompiler::BpfProgram]) -> Result<(), (Step, i32)> {
    no_new_privs()?;
    if !drop_capabilities() {
        return Err((Step::Capabilities, errno()));
    }
    install_filters(progs)
}

/// Set no_new_privs on the calling thread (all a `mask` launcher thread
/// gets, see `launcher`).
pub(super) fn no_new_privs() -> Result<(), (Step, i32)> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err((Step::NoNewPrivs, errno()));
    }
    Ok(())
}

/// Install the seccomp programs on the calling thread (system calls only).
fn install_filters(progs: &[seccompiler::BpfProgram]) -> Result<(), (Step, i32)> {
    for prog in progs {
        let fprog = libc::sock_fprog {
            len: prog.len() as libc::c_ushort,
            // seccompiler's sock_filter has the kernel's layout.
            filter: prog.as_ptr().cast::<libc::sock_filter>().cast_mut(),
        };
        // SAFETY: fprog points at a live BPF program for the duration of
        // the call; the kernel copies it. No TSYNC: this thread only.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                0 as libc::c_ulong,
                &fprog as *const libc::sock_fprog,
            )
        };
        if rc != 0 {
            return Err((Step::Seccomp, errno()));
        }
    }
    Ok(())
}

/// Which inherited protection is missing in the calling process, if any:
/// no_new_privs, a seccomp filter, an empty effective/permitted/inheritable
/// capability set.
fn inherited_missing() -> Option<Step> {
    // SAFETY: prctl queries with integer arguments only.
    let (nnp, seccomp) = unsafe {
        (
            libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
            libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0),
        )
    };
    if nnp != 1 {
        return Some(Step::NoNewPrivs);
    }
    if seccomp != 2 {
        return Some(Step::Seccomp);
    }
    let mut hdr = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData into the live array.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    let clear = data
        .iter()
        .all(|d| d.effective == 0 && d.permitted == 0 && d.inheritable == 0);
    (rc != 0 || !clear).then_some(Step::Capabilities)
}

/// Clear the bounding set (when CAP_SETPCAP allows), ambient, inheritable,
/// effective and permitted; true when effective and permitted read back
/// empty.
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

/// Close every fd from 3 up except `keep` (negative entries ignored).
fn close_all_but(keep: &[RawFd]) {
    let mut sorted = [-1 as RawFd; 5];
    let n = keep.len().min(sorted.len());
    sorted[..n].copy_from_slice(&keep[..n]);
    let sorted = &mut sorted[..n];
    sorted.sort_unstable();
    let mut from: u32 = 3;
    for &k in sorted.iter() {
        if k < 0 || (k as u32) < from {
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

/// Exit the way the command did: its exit code, or its signal re-raised
/// (with core dumps off: the stage's memory is codewhale's).
fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit, signal, sigprocmask and kill with plain
        // arguments on our own process; the default action ends it.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        leave(128 + sig)
    }
    leave(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        crate::exit::SANDBOX_SETUP
    })
}
