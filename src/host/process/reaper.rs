//! Killing a whole process tree without a pid namespace or a cgroup.
//!
//! The landlock tier's stage process is a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`): whenever a process of the command's tree
//! dies, its children are re-parented to the stage instead of init, even
//! if they left the process group or the session (`setsid`, double fork).
//! So "every descendant" is reachable as "every child of the stage,
//! repeatedly": kill the children, reap them (their own children have been
//! re-parented to us by then), and repeat until none is left.
//!
//! The children are listed from `/proc/self/task/<tid>/children`
//! (`CONFIG_PROC_CHILDREN`) or, when that file is missing, by scanning
//! `/proc/*/stat` for our pid as the parent.
//!
//! Everything here is allocation-free (stack buffers, raw system calls):
//! the stage runs in a process forked from the multi-threaded codewhale
//! and never execs, so only async-signal-safe calls are allowed in it.

/// Upper bound on kill rounds; each round only sees processes that existed
/// before it started, and a SIGKILLed process cannot fork again, so a tree
/// of depth N needs about N rounds.
const MAX_ROUNDS: usize = 10_000;

/// How many children one round handles; more are left for the next round.
const BATCH: usize = 512;

/// SIGKILL and reap every descendant of the calling process (see the
/// module docs; the caller must be a child subreaper for orphans to come
/// back to it). Calls `on_reap(pid, status)` for every child it reaps.
pub fn kill_descendants(mut on_reap: impl FnMut(libc::pid_t, i32)) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let mut kids: [libc::pid_t; BATCH] = [0; BATCH];
    // The common case: the command left nothing behind (one system call
    // instead of reading /proc).
    if !has_children() {
        return;
    }
    for _ in 0..MAX_ROUNDS {
        let n = children(me, &mut kids);
        if n == 0 {
            break;
        }
        for &k in &kids[..n] {
            // SAFETY: signalling our own child (not yet reaped, so its pid
            // cannot have been reused).
            unsafe { libc::kill(k, libc::SIGKILL) };
        }
        for &k in &kids[..n] {
            let mut status = 0;
            // SAFETY: waitpid on our own child; blocks only until the
            // SIGKILL we just sent has taken effect.
            if unsafe { libc::waitpid(k, &mut status, 0) } == k {
                on_reap(k, status);
            }
        }
    }
    // Reap whatever else is left as a zombie.
    reap_exited(on_reap);
}

/// A child's pidfd (or `-1` where `pidfd_open` is missing: kernels < 5.3).
pub fn pidfd(pid: libc::pid_t) -> std::os::fd::RawFd {
    // SAFETY: pidfd_open on our own, not yet reaped child.
    unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) as std::os::fd::RawFd }
}

/// Wait until the child behind `pidfd` has exited, the `lifeline` is
/// readable or hung up, or `timeout_ms` passed (`-1`: no limit; without a
/// pidfd the wait is capped at `fallback_ms` so the caller can check the
/// child itself). Returns whether the lifeline fired, or `None` when poll
/// failed other than by EINTR.
pub fn wait_child_or_lifeline(
    lifeline: std::os::fd::RawFd,
    pidfd: std::os::fd::RawFd,
    timeout_ms: i32,
    fallback_ms: i32,
) -> Option<bool> {
    let mut fds = [
        libc::pollfd {
            fd: lifeline,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let (n_fds, timeout) = if pidfd >= 0 {
        (2, timeout_ms)
    } else {
        (1, fallback_ms)
    };
    // SAFETY: fds points at n_fds live pollfd structs.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), n_fds, timeout) };
    if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
        return None;
    }
    Some(rc > 0 && fds[0].revents != 0)
}

/// Whether the calling process has any child at all (exited or not).
fn has_children() -> bool {
    // SAFETY: siginfo_t is plain data; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid without reaping (WNOWAIT), without blocking.
    let rc = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    !(rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// Reap every child that has already exited (no blocking).
pub fn reap_exited(mut on_reap: impl FnMut(libc::pid_t, i32)) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(-1, WNOHANG) with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            return;
        }
        on_reap(r, status);
    }
}

/// Write the decimal digits of `n` into `out`; returns how many.
fn write_decimal(mut n: u64, out: &mut [u8]) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = (tmp.len() - i).min(out.len());
    out[..len].copy_from_slice(&tmp[i..i + len]);
    len
}

/// `"{prefix}{n}{suffix}\0"` into `buf`; `None` when it does not fit.
fn c_path<'a>(buf: &'a mut [u8], prefix: &[u8], n: u64, suffix: &[u8]) -> Option<&'a [u8]> {
    let mut digits = [0u8; 20];
    let d = write_decimal(n, &mut digits);
    let len = prefix.len() + d + suffix.len() + 1;
    if len > buf.len() {
        return None;
    }
    buf[..prefix.len()].copy_from_slice(prefix);
    buf[prefix.len()..prefix.len() + d].copy_from_slice(&digits[..d]);
    buf[prefix.len() + d..len - 1].copy_from_slice(suffix);
    buf[len - 1] = 0;
    Some(&buf[..len])
}

/// Read up to `buf.len()` bytes of the file at the NUL-terminated `path`.
fn read_file(path: &[u8], buf: &mut [u8]) -> Option<usize> {
    // SAFETY: path is NUL-terminated (built by `c_path` or a literal).
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut used = 0;
    while used < buf.len() {
        // SAFETY: reading into the unused tail of a live buffer.
        let n = unsafe { libc::read(fd, buf[used..].as_mut_ptr().cast(), buf.len() - used) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n <= 0 {
            break;
        }
        used += n as usize;
    }
    // SAFETY: closing the fd we opened.
    unsafe { libc::close(fd) };
    Some(used)
}

/// Parse a leading decimal number.
fn parse_pid(s: &[u8]) -> Option<libc::pid_t> {
    if s.is_empty() || s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = s
        .iter()
        .fold(0i64, |acc, &b| acc * 10 + i64::from(b - b'0'));
    libc::pid_t::try_from(v).ok()
}

/// Fill `out` with pids whose parent is `me`; returns how many.
fn children(me: libc::pid_t, out: &mut [libc::pid_t]) -> usize {
    // The stage is single-threaded: its only task is itself.
    let mut path = [0u8; 64];
    let Some(p) = c_path(&mut path, b"/proc/self/task/", me as u64, b"/children") else {
        return scan_proc(me, out);
    };
    let mut buf = [0u8; 8192];
    let Some(len) = read_file(p, &mut buf) else {
        return scan_proc(me, out);
    };
    // A full buffer may end in a cut-off number: drop the last token (the
    // next round sees it again).
    let text = if len == buf.len() {
        match buf.iter().rposition(|&b| b == b' ') {
            Some(i) => &buf[..i],
            None => &buf[..0],
        }
    } else {
        &buf[..len]
    };
    let mut n = 0;
    for tok in text.split(|b| b.is_ascii_whitespace()) {
        if n == out.len() {
            break;
        }
        if let Some(pid) = parse_pid(tok) {
            out[n] = pid;
            n += 1;
        }
    }
    n
}

/// The parent pid in a `/proc/<pid>/stat` line.
fn stat_ppid(stat: &[u8]) -> Option<libc::pid_t> {
    // Fields after the command name (which may contain spaces and ')').
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    fields.next()?; // state
    parse_pid(fields.next()?)
}

/// `linux_dirent64`'s fixed header: d_ino, d_off, d_reclen, d_type.
const DIRENT_HEADER: usize = 8 + 8 + 2 + 1;

/// Fallback for kernels without `/proc/…/children`: walk `/proc` with
/// `getdents64` and read each process's parent from its `stat`.
fn scan_proc(me: libc::pid_t, out: &mut [libc::pid_t]) -> usize {
    // SAFETY: a NUL-terminated literal path.
    let dir = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return 0;
    }
    let mut n = 0;
    let mut ents = [0u8; 8192];
    'outer: loop {
        // SAFETY: getdents64 fills the live buffer with at most its length.
        let got = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                ents.as_mut_ptr(),
                ents.len() as libc::c_uint,
            )
        };
        if got <= 0 {
            break;
        }
        let got = got as usize;
        let mut off = 0;
        while off + DIRENT_HEADER <= got {
            let reclen = u16::from_ne_bytes([ents[off + 16], ents[off + 17]]) as usize;
            if reclen == 0 || off + reclen > got {
                break;
            }
            let name = &ents[off + DIRENT_HEADER..off + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            off += reclen;
            let Some(pid) = parse_pid(name) else { continue };
            let mut path = [0u8; 48];
            let Some(p) = c_path(&mut path, b"/proc/", pid as u64, b"/stat") else {
                continue;
            };
            let mut stat = [0u8; 1024];
            let Some(len) = read_file(p, &mut stat) else {
                continue;
            };
            if stat_ppid(&stat[..len]) == Some(me) {
                out[n] = pid;
                n += 1;
                if n == out.len() {
                    break 'outer;
                }
            }
        }
    }
    // SAFETY: closing the fd we opened.
    unsafe { libc::close(dir) };
    n
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// `children` lists the children of one task (thread), and the test's
    /// own thread forked the child (the stage is single-threaded, so there
    /// its pid is its only task); `scan_proc` matches the process.
    fn listed(scan: bool) -> Vec<libc::pid_t> {
        let mut buf = [0; BATCH];
        let n = if scan {
            // SAFETY: getpid has no preconditions.
            scan_proc(unsafe { libc::getpid() }, &mut buf)
        } else {
            // SAFETY: gettid has no preconditions.
            children(unsafe { libc::gettid() }, &mut buf)
        };
        buf[..n].to_vec()
    }

    #[test]
    fn scan_and_children_file_agree_on_a_real_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as libc::pid_t;
        assert!(listed(true).contains(&pid));
        assert!(listed(false).contains(&pid));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!listed(true).contains(&pid));
        assert!(!listed(false).contains(&pid));
    }

    #[test]
    fn parsing_helpers() {
        let mut b = [0u8; 64];
        assert_eq!(
            c_path(&mut b, b"/proc/", 1234, b"/stat").unwrap(),
            b"/proc/1234/stat\0"
        );
        assert!(c_path(&mut [0u8; 8], b"/proc/", 1234, b"/stat").is_none());
        assert_eq!(parse_pid(b"42"), Some(42));
        assert_eq!(parse_pid(b"4x"), None);
        assert_eq!(parse_pid(b""), None);
        assert_eq!(
            stat_ppid(b"77 (a b) c) S 12 77 77 0 -1"),
            Some(12),
            "comm with spaces and parentheses"
        );
    }
}
