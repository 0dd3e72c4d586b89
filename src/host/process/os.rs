//! The few OS-specific steps of the one supervisor, each a small function
//! with a `cfg`'d body, so `supervise.rs` itself is the same on every Unix.
//!
//! | step | Linux | macOS / other Unix |
//! |---|---|---|
//! | main-thread test | `gettid() == getpid()` | `pthread_main_np()` (macOS), else "no" |
//! | fd sweep | `close_range(CLOSE_RANGE_CLOEXEC)` (≥ 5.11), else a loop | a loop up to the soft limit |
//! | parent-death signal | `PR_SET_PDEATHSIG` | none: the supervisor kills the group when the run ends; a SIGKILLed codewhale leaves the command to finish by itself (documented) |
//! | exit notifier | `pidfd_open` (≥ 5.3), else a waiter thread | a waiter thread (`waitid(WNOWAIT)`) |
//! | pipes | `pipe2(O_CLOEXEC)` | `pipe` + `FD_CLOEXEC` |

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Whether the calling thread is the process's main thread (it lives as
/// long as the process, so a parent-death signal tied to it fires exactly
/// when codewhale dies).
pub fn is_main_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and getpid have no preconditions.
        unsafe { libc::gettid() == libc::getpid() }
    }
    #[cfg(target_os = "macos")]
    {
        // SAFETY: pthread_main_np has no preconditions.
        unsafe { libc::pthread_main_np() != 0 }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        false
    }
}

/// Mark every fd from 3 up close-on-exec. Async-signal-safe (no
/// allocation, raw system calls only): called between fork and exec by
/// `prepare`, and in the parent by the light spawn (there it flips flags
/// on codewhale's own table, under the spawn lock, and the caller re-marks
/// what it un-marked).
pub fn cloexec_from_3() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only flips flags on
        // the calling process's descriptor table.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if rc == 0 {
            return;
        }
    }
    // Kernels before 5.11, and other Unixes: walk the table up to the limit.
    // SAFETY: sysconf has no memory effects.
    let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) };
    let max = if max <= 0 { 4096 } else { max.min(1 << 20) } as RawFd;
    for fd in 3..max {
        // SAFETY: F_SETFD on a possibly-closed fd fails harmlessly with EBADF.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// Arm SIGKILL on parent death for the calling (child) process.
/// Async-signal-safe. `Ok(false)`: this OS has no such signal.
pub fn set_parent_death_signal() -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(PR_SET_PDEATHSIG) only changes this process's own
        // attribute.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(false)
    }
}

/// A pidfd for our own, not yet reaped child, where the kernel has them.
pub fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: pidfd_open on our own child; no memory is passed.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // SAFETY: the kernel just returned this fd to us.
            return Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// A pipe whose two ends are close-on-exec: `(read, write)`.
pub fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(Into::into)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe writes two fds into the array we own.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both fds were just returned by pipe and are ours.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        for fd in [fds[0], fds[1]] {
            // SAFETY: setting FD_CLOEXEC on our own fresh fd.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok((r, w))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn pipes_are_cloexec() {
        let (r, w) = pipe_cloexec().unwrap();
        for fd in [r.as_raw_fd(), w.as_raw_fd()] {
            // SAFETY: F_GETFD on our own fd.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            assert_ne!(flags & libc::FD_CLOEXEC, 0);
        }
    }

    #[test]
    fn the_test_harness_thread_is_not_main() {
        // cargo test runs each test on a worker thread.
        assert!(!is_main_thread());
    }
}
