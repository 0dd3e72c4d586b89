//! The opener's supervisor: a thread in codewhale (outside the sandbox)
//! that answers the command's open-family notifications.
//!
//! Per notification, in this order (each step fails towards `CONTINUE`,
//! which hands the call back to the kernel and so to Landlock):
//! 1. only reads are looked at ([`decide::need`]);
//! 2. a pidfd for the caller, then `SECCOMP_IOCTL_NOTIF_ID_VALID`: the pid
//!    still names the caller (not a reused pid);
//! 3. the path (and `openat2`'s `open_how`) is copied out of the caller's
//!    memory with `process_vm_readv`, the directory fd taken with
//!    `pidfd_getfd` (the cwd for `AT_FDCWD`: `/proc/<pid>/cwd` opened as
//!    `O_PATH`, which is the directory object itself, not a path string),
//!    then `ID_VALID` again;
//! 4. the path must lie beneath a carved root and its first name there
//!    must be an entry Landlock has no rule for (a new one);
//! 5. `openat2` relative to the root with `RESOLVE_BENEATH |
//!    RESOLVE_NO_MAGICLINKS` (symlinks cannot leave the root; an absolute
//!    or escaping one is left to the kernel), the caller's flags, and a
//!    write only where the root is writable in the Landlock domain;
//! 6. the opened file must be a regular file or directory, must not be a
//!    deny-read inode (hard links, renames of a secret), its current path
//!    must not name a deny-read item or a `.env` name, and no directory
//!    between the root and it may be a deny-read inode;
//! 7. `SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND` installs
//!    the fd in the caller and completes the call atomically.
//!
//! The thread runs with an empty effective capability set (capabilities
//! are per thread on Linux), so its opens meet the same permission checks
//! as the command's (which has none either): as root it cannot read a
//! mode-000 file the command could not.

use super::decide::{self, Call, Need};
use super::{Root, Spec};
use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What one run's opener did (for the report and the tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// The command installed the filter and handed over the listener.
    pub active: bool,
    /// Why it is not active (the command's errno, or a setup failure).
    pub inactive_reason: Option<String>,
    /// Opens the opener performed and handed over.
    pub served: u64,
    /// Opens refused with `EACCES` (a deny-read inode or name).
    pub refused: u64,
    /// Notifications handed back to the kernel unchanged.
    pub passed: u64,
}

/// A running supervisor thread; [`Supervisor::finish`] stops it.
pub struct Supervisor {
    stop: OwnedFd,
    thread: std::thread::JoinHandle<Stats>,
}

impl Supervisor {
    /// Start the thread; `sock` is codewhale's end of the socketpair the
    /// command sends its listener over.
    pub fn start(spec: Spec, sock: OwnedFd) -> io::Result<Supervisor> {
        let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let thread = std::thread::Builder::new()
            .name("codewhale-opener".into())
            .spawn(move || supervise(&spec, &sock, &stop_r))?;
        Ok(Supervisor {
            stop: stop_w,
            thread,
        })
    }

    /// Stop serving (the command's tree is gone) and return the counts.
    pub fn finish(self) -> Stats {
        // SAFETY: a one-byte write from a stack buffer to our pipe.
        unsafe { libc::write(self.stop.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        drop(self.stop);
        self.thread.join().unwrap_or_else(|_| Stats {
            inactive_reason: Some("the opener thread panicked".into()),
            ..Stats::default()
        })
    }
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Clear this thread's effective capabilities (permitted stays, so the
/// rest of codewhale is unaffected: capabilities are per thread).
fn drop_effective_caps() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut hdr = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset with a live header and two live data words;
    // pid 0 is the calling thread.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) != 0 {
            return false;
        }
        for d in &mut data {
            d.effective = 0;
        }
        libc::syscall(libc::SYS_capset, &mut hdr as *mut Header, data.as_ptr()) == 0
    }
}

/// Wait until one of `fds` is readable (or hung up); `None` on error.
fn wait(fds: &[RawFd]) -> Option<Vec<libc::c_short>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: poll on a live array of pollfds.
        let rc = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if rc >= 0 {
            return Some(p.iter().map(|x| x.revents).collect());
        }
        if errno() != libc::EINTR {
            return None;
        }
    }
}

/// Receive the listener: `Ok(fd)`, or the command's reason for not
/// installing it.
fn receive_listener(sock: &OwnedFd, stop: &OwnedFd) -> Result<OwnedFd, String> {
    let ev = wait(&[sock.as_raw_fd(), stop.as_raw_fd()]).ok_or("poll failed")?;
    if ev[0] == 0 {
        return Err("the command was never started".into());
    }
    let mut byte = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: a zeroed msghdr pointing at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: recvmsg into the buffers above; MSG_CMSG_CLOEXEC so the
    // received fd never leaks into anything codewhale execs.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n <= 0 {
        return Err("the command closed the channel without a listener".into());
    }
    // SAFETY: CMSG_FIRSTHDR/CMSG_DATA walk the control buffer recvmsg filled.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS
        {
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
            return Ok(OwnedFd::from_raw_fd(fd));
        }
    }
    let e = i32::from_le_bytes(byte);
    Err(format!(
        "installing the seccomp listener failed in the command: {}",
        io::Error::from_raw_os_error(e)
    ))
}

fn supervise(spec: &Spec, sock: &OwnedFd, stop: &OwnedFd) -> Stats {
    let mut stats = Stats::default();
    if !drop_effective_caps() {
        // Serve nothing rather than open with more rights than the command.
        stats.inactive_reason = Some(format!(
            "clearing the opener thread's capabilities failed: {}",
            io::Error::last_os_error()
        ));
        // The listener must still be drained, or the command's opens would
        // wait forever: answer everything with CONTINUE.
    }
    let serving = stats.inactive_reason.is_none();
    let listener = match receive_listener(sock, stop) {
        Ok(l) => l,
        Err(why) => {
            stats.inactive_reason.get_or_insert(why);
            return stats;
        }
    };
    stats.active = serving;
    while let Some(ev) = wait(&[listener.as_raw_fd(), stop.as_raw_fd()]) {
        if ev[1] != 0 {
            break;
        }
        if ev[0] & libc::POLLIN != 0 {
            // SAFETY: a zeroed notification buffer (the kernel insists).
            let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: NOTIF_RECV fills the live struct.
            if unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) }
                != 0
            {
                continue; // ENOENT: the caller went away meanwhile.
            }
            let answer = if serving {
                decide_one(spec, listener.as_raw_fd(), &n)
            } else {
                Answer::Continue
            };
            match &answer {
                Answer::Continue => stats.passed += 1,
                Answer::Refuse => stats.refused += 1,
                Answer::Fd(..) => stats.served += 1,
            }
            respond(listener.as_raw_fd(), n.id, answer);
        } else if ev[0] & (libc::POLLHUP | libc::POLLERR) != 0 {
            break; // no task uses the filter any more
        }
    }
    stats
}

/// The answer to one notification.
enum Answer {
    Continue,
    Refuse,
    /// The opened file and whether the caller asked for `O_CLOEXEC`.
    Fd(OwnedFd, bool),
}

fn respond(listener: RawFd, id: u64, answer: Answer) {
    let send = |error: i32, val: i64, flags: u32| {
        let mut r = libc::seccomp_notif_resp {
            id,
            val,
            error,
            flags,
        };
        // SAFETY: NOTIF_SEND reads the live response (ENOENT if the
        // caller is gone: nothing to do then).
        unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut r) };
    };
    match answer {
        Answer::Continue => send(0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Answer::Refuse => send(-libc::EACCES, 0, 0),
        Answer::Fd(fd, cloexec) => {
            let mut add = libc::seccomp_notif_addfd {
                id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: fd.as_raw_fd() as u32,
                newfd: 0,
                newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
            };
            // SAFETY: NOTIF_ADDFD reads the live struct; with FLAG_SEND it
            // installs the fd and completes the call in one step.
            let rc = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut add) };
            if rc >= 0 || errno() != libc::EINVAL {
                return;
            }
            // Before Linux 5.14 there is no FLAG_SEND: add, then answer
            // with the new fd number.
            add.flags = 0;
            // SAFETY: as above.
            let remote =
                unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut add) };
            if remote >= 0 {
                send(0, i64::from(remote), 0);
            } else {
                send(0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32);
            }
        }
    }
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: the notification (so its pid) is live.
fn id_valid(listener: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads the live u64.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) == 0 }
}

fn own(fd: libc::c_long) -> Option<OwnedFd> {
    // SAFETY: a fresh fd a syscall just returned to us.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Copy `len` bytes at `addr` out of `pid`'s memory.
fn read_mem(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> Option<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: reads into our live buffer only.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    usize::try_from(n).ok()
}

/// The NUL-terminated path at `addr` (page by page, so a path ending near
/// an unmapped page is still read), at most `PATH_MAX` bytes.
fn read_path(pid: libc::pid_t, addr: u64) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < libc::PATH_MAX as usize {
        let chunk = (PAGE - at % PAGE) as usize;
        let mut buf = vec![0u8; chunk];
        let n = read_mem(pid, at, &mut buf)?;
        if n == 0 {
            return None;
        }
        if let Some(z) = buf[..n].iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..z]);
            return Some(out);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    None
}

/// The path of one of our own fds (the kernel's current name for it).
fn fd_path(fd: RawFd) -> Option<PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    p.is_absolute().then_some(p)
}

fn inode_at(dir: RawFd, rel: &Path) -> Option<(u64, u64)> {
    let c = CString::new(rel.as_os_str().as_bytes()).ok()?;
    // SAFETY: fstatat into a zeroed stat, no follow.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0)
            .then_some((st.st_dev, st.st_ino))
    }
}

fn fstat(fd: RawFd) -> Option<libc::stat> {
    // SAFETY: fstat into a zeroed stat.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some(st)
    }
}

fn decide_one(spec: &Spec, listener: RawFd, n: &libc::seccomp_notif) -> Answer {
    let pid = n.pid as libc::pid_t;
    let Some(mut call) = decide::parse(i64::from(n.data.nr), n.data.args) else {
        return Answer::Continue;
    };
    // openat2: flags, mode and resolve come from the caller's open_how.
    let mut resolve = 0u64;
    if let Some((addr, size)) = call.how {
        if size < 24 {
            return Answer::Continue;
        }
        let mut raw = [0u8; 24];
        if read_mem(pid, addr, &mut raw) != Some(24) {
            return Answer::Continue;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&raw[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(w)
        };
        call.flags = word(0);
        call.mode = word(1);
        resolve = word(2);
        if size > 24 {
            // A larger struct with non-zero extensions we do not know.
            return Answer::Continue;
        }
    }
    let Need::Read { write } = decide::need(call.flags) else {
        return Answer::Continue;
    };
    let Some(resolve) = decide::resolve_flags(resolve) else {
        return Answer::Continue;
    };
    let Some(pidfd) = pidfd_of(pid) else {
        return Answer::Continue;
    };
    if !id_valid(listener, n.id) {
        return Answer::Continue;
    }
    let Some(path) = read_path(pid, call.path) else {
        return Answer::Continue;
    };
    let base = if path.first() == Some(&b'/') {
        None
    } else {
        let fd = if call.dirfd == libc::AT_FDCWD {
            // The cwd has no fd number for pidfd_getfd; the magic link
            // opens the directory object itself (pid reuse is ruled out
            // by ID_VALID below).
            let p = CString::new(format!("/proc/{pid}/cwd")).ok();
            p.and_then(|p| {
                // SAFETY: open of a NUL-terminated path we own.
                own(unsafe {
                    libc::open(
                        p.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    )
                } as libc::c_long)
            })
        } else {
            // SAFETY: pidfd_getfd with the live pidfd and plain arguments.
            own(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), call.dirfd, 0) })
        };
        let Some(fd) = fd else {
            return Answer::Continue;
        };
        match fd_path(fd.as_raw_fd()) {
            Some(p) => Some(p),
            None => return Answer::Continue,
        }
    };
    if !id_valid(listener, n.id) {
        return Answer::Continue;
    }
    let Some(abs) = decide::absolute(base.as_deref(), &path) else {
        return Answer::Continue;
    };
    if decide::names_denied(&abs, &spec.deny_paths) {
        return Answer::Continue; // Landlock refuses it (or its new name)
    }
    let Some((i, rel)) = decide::pick_root(&abs, spec.roots.iter().map(|r| r.path.as_path()))
    else {
        return Answer::Continue;
    };
    let root = &spec.roots[i];
    if write && !root.writable {
        return Answer::Continue;
    }
    let Some(first) = rel.components().next() else {
        return Answer::Continue;
    };
    match inode_at(root.fd.as_raw_fd(), Path::new(first.as_os_str())) {
        Some(ino) if root.known.contains(&ino) || spec.deny_inodes.contains(&ino) => {
            return Answer::Continue; // Landlock has a rule for it (or a hole)
        }
        Some(_) => {}
        // A name that does not exist yet: only a creation directly in the
        // root is ours (anything deeper fails with ENOENT in the kernel).
        None if call.flags as u32 as i32 & libc::O_CREAT != 0 && rel.components().count() == 1 => {}
        None => return Answer::Continue,
    }
    let umask = target_umask(pid);
    if !id_valid(listener, n.id) {
        return Answer::Continue;
    }
    match open_beneath(root, &rel, call.flags, call.mode, resolve, umask) {
        Some(fd) => check_and_hand_over(spec, root, fd, call),
        None => Answer::Continue,
    }
}

/// A pidfd for the caller. The notification names a thread; a pidfd of a
/// thread that is not the group leader needs `PIDFD_THREAD` (Linux ≥ 6.9),
/// else the leader's (`Tgid:`) is taken: threads share their fd table. In
/// every case `ID_VALID` afterwards proves the id still names the caller.
fn pidfd_of(tid: libc::pid_t) -> Option<OwnedFd> {
    const PIDFD_THREAD: libc::c_long = libc::O_EXCL as libc::c_long;
    let open = |pid: libc::pid_t, flags: libc::c_long| {
        // SAFETY: pidfd_open with plain arguments.
        own(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) })
    };
    open(tid, 0)
        .or_else(|| open(tid, PIDFD_THREAD))
        .or_else(|| {
            let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
            let tgid = status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))?
                .trim()
                .parse()
                .ok()?;
            open(tgid, 0)
        })
}

/// The caller's umask (`Umask:` in `/proc/<pid>/status`, Linux ≥ 4.7;
/// 022 when unknown).
fn target_umask(pid: libc::pid_t) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

fn openat2(dir: RawFd, rel: &Path, flags: u64, mode: u64, resolve: u64) -> Result<OwnedFd, i32> {
    let c = CString::new(rel.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    // `struct open_how` (Linux uapi, 24 bytes: flags, mode, resolve);
    // libc's is non-exhaustive.
    let how: [u64; 3] = [flags, mode, resolve];
    // SAFETY: openat2 with a live path and open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            c.as_ptr(),
            how.as_ptr(),
            std::mem::size_of_val(&how),
        )
    };
    own(fd).ok_or_else(errno)
}

/// Open `rel` beneath the root the way the caller asked. With `O_CREAT`
/// a new file gets exactly the caller's `mode & !umask` (our process's
/// umask is codewhale's).
fn open_beneath(
    root: &Root,
    rel: &Path,
    flags: u64,
    mode: u64,
    resolve: u64,
    umask: u32,
) -> Option<OwnedFd> {
    let ours = decide::our_flags(flags);
    let f = flags as u32 as i32;
    let dir = root.fd.as_raw_fd();
    if f & libc::O_CREAT == 0 {
        return openat2(dir, rel, ours, 0, resolve).ok();
    }
    let mode = mode & 0o7777;
    let excl = ours | libc::O_EXCL as u32 as u64;
    match openat2(dir, rel, excl, mode, resolve) {
        Ok(fd) => {
            // SAFETY: fchmod of the file we just created.
            unsafe { libc::fchmod(fd.as_raw_fd(), (mode as u32 & !umask) as libc::mode_t) };
            Some(fd)
        }
        Err(libc::EEXIST) if f & libc::O_EXCL == 0 => {
            let again = ours & !(libc::O_CREAT as u32 as u64);
            openat2(dir, rel, again, 0, resolve).ok()
        }
        Err(_) => None,
    }
}

/// Step 6 of the module docs, then the fd with its status flags restored.
fn check_and_hand_over(spec: &Spec, root: &Root, fd: OwnedFd, call: Call) -> Answer {
    let Some(st) = fstat(fd.as_raw_fd()) else {
        return Answer::Continue;
    };
    let kind = st.st_mode & libc::S_IFMT;
    if spec.deny_inodes.contains(&(st.st_dev, st.st_ino)) {
        return Answer::Refuse;
    }
    if kind != libc::S_IFREG && kind != libc::S_IFDIR {
        return Answer::Continue; // FIFOs, sockets, devices: the kernel's call
    }
    let Some(now) = fd_path(fd.as_raw_fd()) else {
        return Answer::Refuse;
    };
    if decide::names_denied(&now, &spec.deny_paths) {
        return Answer::Refuse;
    }
    let Ok(rel) = now.strip_prefix(&root.path) else {
        return Answer::Refuse; // moved out of the root meanwhile
    };
    let mut ancestors: HashSet<(u64, u64)> = HashSet::new();
    let mut prefix = PathBuf::new();
    let comps: Vec<&OsStr> = rel.iter().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        prefix.push(c);
        match inode_at(root.fd.as_raw_fd(), &prefix) {
            Some(ino) => {
                ancestors.insert(ino);
            }
            None => return Answer::Refuse,
        }
    }
    if ancestors.iter().any(|a| spec.deny_inodes.contains(a)) {
        return Answer::Refuse;
    }
    // A directory opened read-only needs nothing from us (read-dir is
    // granted everywhere): leave it to the kernel.
    if kind == libc::S_IFDIR && call.flags as u32 as i32 & libc::O_ACCMODE == libc::O_RDONLY {
        return Answer::Continue;
    }
    let status = decide::status_flags(call.flags);
    // SAFETY: F_SETFL on the file we opened: the caller's status flags
    // (dropping our O_NONBLOCK unless it asked for it).
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, status) };
    Answer::Fd(fd, call.flags as u32 as i32 & libc::O_CLOEXEC != 0)
}
