//! `codewhale __probe SYSCALL`: attempt one syscall and print its result.
//!
//! Hidden; used by the real-sandbox tests so a seccomp assertion is
//! precise. Arguments are chosen so that, *without* the filter, the call
//! returns something other than EPERM for any user (success, EINVAL,
//! EFAULT, EBADF, ENOTTY…): then EPERM inside the sandbox can only come
//! from the filter. Calls that need privilege even to get that far
//! (`pivot_root`, raw sockets) take `--userns`, which first enters fresh
//! user, mount and network namespaces — the positive control outside the
//! sandbox. Output: `ok` or `err EXXX`, exit 0 whenever the probe ran.

use clap::Args;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The syscall to try (see `codewhale __probe --list`).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// First enter new user+mount+net namespaces (positive controls).
    #[arg(long)]
    pub userns: bool,
    /// List the probe names.
    #[arg(long)]
    pub list: bool,
    /// The socket path for `connect-unix`.
    #[arg(long, value_name = "PATH")]
    pub path: Option<std::path::PathBuf>,
}

/// Every probe name, in catalogue order.
pub const PROBES: &[&str] = &[
    "ptrace-attach",
    "process-vm-readv",
    "process-vm-writev",
    "io-uring-setup",
    "mount",
    "umount2",
    "pivot-root",
    "unshare-user",
    "unshare-user-mount",
    "clone-newuser",
    "clone3",
    "setns",
    "keyctl",
    "add-key",
    "request-key",
    "bpf",
    "perf-event-open",
    "userfaultfd",
    "ioctl-tiocsti",
    "ioctl-tiocsti-high",
    "ioctl-tioclinux",
    "socket-inet",
    "socket-inet6",
    "socket-packet",
    "socket-netlink",
    "socket-vsock",
    "socket-unix",
    "socketpair-unix",
    "mknod",
    "connect-unix",
];

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::CString;

    fn res(rc: libc::c_long) -> Result<libc::c_long, i32> {
        if rc < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(rc)
        }
    }

    fn close(rc: Result<libc::c_long, i32>) -> Result<libc::c_long, i32> {
        if let Ok(fd) = rc {
            // SAFETY: closing the fd the probe just created.
            unsafe { libc::close(fd as i32) };
        }
        rc
    }

    fn socket(domain: i32, ty: i32) -> Result<libc::c_long, i32> {
        // SAFETY: socket takes integers only.
        close(res(unsafe { libc::socket(domain, ty, 0) } as libc::c_long))
    }

    fn ptrace_attach() -> Result<libc::c_long, i32> {
        // SAFETY: fork in a single-purpose probe process; the child only
        // calls async-signal-safe pause/_exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: child: wait for a signal, then exit.
            unsafe {
                libc::pause();
                libc::_exit(0)
            }
        }
        if pid < 0 {
            return res(-1);
        }
        // SAFETY: PTRACE_ATTACH to our own child with null addr/data.
        let r = res(unsafe {
            libc::ptrace(
                libc::PTRACE_ATTACH,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        });
        // SAFETY: kill and reap our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        r
    }

    fn process_vm(write: bool) -> Result<libc::c_long, i32> {
        let mut a = [1u8; 8];
        let mut b = [0u8; 8];
        let local = libc::iovec {
            iov_base: a.as_mut_ptr().cast(),
            iov_len: a.len(),
        };
        let remote = libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        };
        // SAFETY: both iovecs point at live buffers of this process; the
        // "remote" process is ourselves.
        res(unsafe {
            let me = libc::getpid();
            if write {
                libc::process_vm_writev(me, &local, 1, &remote, 1, 0) as libc::c_long
            } else {
                libc::process_vm_readv(me, &local, 1, &remote, 1, 0) as libc::c_long
            }
        })
    }

    fn enter_userns() -> Result<(), i32> {
        // SAFETY: unshare takes flags only.
        res(
            unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWNET) }
                as libc::c_long,
        )
        .map(|_| ())
    }

    pub fn run(name: &str, userns: bool) -> Result<Result<libc::c_long, i32>, String> {
        if userns {
            if let Err(e) = enter_userns() {
                return Ok(Err(e));
            }
        }
        let root = CString::new("/").map_err(|e| e.to_string())?;
        let dot = CString::new(".").map_err(|e| e.to_string())?;
        let tmpnode = CString::new("/tmp/codewhale-probe-node").map_err(|e| e.to_string())?;
        let tiocsti = crate::host::seccomp::TIOCSTI;
        // SAFETY: (whole block) each call passes integers, null pointers
        // the kernel rejects with EFAULT, or pointers to live CStrings above.
        let r = unsafe {
            match name {
                "ptrace-attach" => ptrace_attach(),
                "process-vm-readv" => process_vm(false),
                "process-vm-writev" => process_vm(true),
                "io-uring-setup" => res(libc::syscall(
                    libc::SYS_io_uring_setup,
                    0u32,
                    std::ptr::null_mut::<libc::c_void>(),
                )),
                "mount" => res(libc::syscall(
                    libc::SYS_mount,
                    std::ptr::null::<libc::c_char>(),
                    root.as_ptr(),
                    std::ptr::null::<libc::c_char>(),
                    libc::MS_NOUSER,
                    std::ptr::null::<libc::c_void>(),
                )),
                "umount2" => res(libc::syscall(
                    libc::SYS_umount2,
                    root.as_ptr(),
                    0xffff_ffffu32,
                )),
                "pivot-root" => res(libc::syscall(
                    libc::SYS_pivot_root,
                    dot.as_ptr(),
                    dot.as_ptr(),
                )),
                "unshare-user" => res(libc::unshare(libc::CLONE_NEWUSER) as libc::c_long),
                "unshare-user-mount" => {
                    res(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as libc::c_long)
                }
                "clone-newuser" => {
                    let pid = libc::syscall(
                        libc::SYS_clone,
                        (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
                        0usize,
                        0usize,
                        0usize,
                        0usize,
                    );
                    if pid == 0 {
                        libc::_exit(0);
                    }
                    if pid > 0 {
                        libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
                    }
                    res(pid)
                }
                "clone3" => res(libc::syscall(
                    libc::SYS_clone3,
                    std::ptr::null_mut::<libc::c_void>(),
                    0usize,
                )),
                "setns" => res(libc::syscall(libc::SYS_setns, -1i32, 0i32)),
                "keyctl" => res(libc::syscall(libc::SYS_keyctl, 9999i32, 0usize, 0usize)),
                "add-key" => res(libc::syscall(
                    libc::SYS_add_key,
                    std::ptr::null::<libc::c_char>(),
                    std::ptr::null::<libc::c_char>(),
                    std::ptr::null::<libc::c_void>(),
                    0usize,
                    0i32,
                )),
                "request-key" => res(libc::syscall(
                    libc::SYS_request_key,
                    std::ptr::null::<libc::c_char>(),
                    std::ptr::null::<libc::c_char>(),
                    std::ptr::null::<libc::c_char>(),
                    0i32,
                )),
                "bpf" => res(libc::syscall(
                    libc::SYS_bpf,
                    9999i32,
                    std::ptr::null_mut::<libc::c_void>(),
                    0u32,
                )),
                "perf-event-open" => res(libc::syscall(
                    libc::SYS_perf_event_open,
                    std::ptr::null_mut::<libc::c_void>(),
                    0i32,
                    -1i32,
                    -1i32,
                    0u64,
                )),
                // UFFD_USER_MODE_ONLY (allowed unprivileged) plus an unknown flag: EINVAL.
                "userfaultfd" => res(libc::syscall(libc::SYS_userfaultfd, 1u32 | 0x100u32)),
                "ioctl-tiocsti" => res(libc::syscall(libc::SYS_ioctl, 0i32, tiocsti, 0usize)),
                "ioctl-tiocsti-high" => res(libc::syscall(
                    libc::SYS_ioctl,
                    0i32,
                    0xdead_beef_0000_0000u64 | tiocsti,
                    0usize,
                )),
                "ioctl-tioclinux" => res(libc::syscall(
                    libc::SYS_ioctl,
                    0i32,
                    crate::host::seccomp::TIOCLINUX,
                    0usize,
                )),
                "socket-inet" => socket(libc::AF_INET, libc::SOCK_STREAM),
                "socket-inet6" => socket(libc::AF_INET6, libc::SOCK_DGRAM),
                "socket-packet" => socket(libc::AF_PACKET, libc::SOCK_RAW),
                "socket-netlink" => socket(libc::AF_NETLINK, libc::SOCK_RAW),
                "socket-vsock" => socket(libc::AF_VSOCK, libc::SOCK_STREAM),
                "socket-unix" => socket(libc::AF_UNIX, libc::SOCK_STREAM),
                "socketpair-unix" => {
                    let mut fds = [0i32; 2];
                    let r =
                        res(
                            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr())
                                as libc::c_long,
                        );
                    if r.is_ok() {
                        libc::close(fds[0]);
                        libc::close(fds[1]);
                    }
                    r
                }
                "mknod" => {
                    let r = res(libc::mknod(
                        tmpnode.as_ptr(),
                        libc::S_IFCHR | 0o600,
                        libc::makedev(1, 3),
                    ) as libc::c_long);
                    if r.is_ok() {
                        libc::unlink(tmpnode.as_ptr());
                    }
                    r
                }
                other => return Err(format!("unknown probe {other:?} (see --list)")),
            }
        };
        Ok(r)
    }
}

pub fn run(args: ProbeArgs) -> i32 {
    if args.list {
        for p in PROBES {
            println!("{p}");
        }
        return crate::exit::OK;
    }
    let Some(name) = args.name else {
        return crate::exit::USAGE;
    };
    #[cfg(target_os = "linux")]
    {
        if name == "connect-unix" {
            let Some(path) = args.path else {
                eprintln!("codewhale: __probe connect-unix needs --path");
                return crate::exit::USAGE;
            };
            match std::os::unix::net::UnixStream::connect(&path) {
                Ok(_) => println!("ok"),
                Err(e) => println!(
                    "err {:?}",
                    nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0))
                ),
            }
            return crate::exit::OK;
        }
        match imp::run(&name, args.userns) {
            Ok(Ok(_)) => println!("ok"),
            Ok(Err(errno)) => println!("err {:?}", nix::errno::Errno::from_raw(errno)),
            Err(msg) => {
                eprintln!("codewhale: __probe: {msg}");
                return crate::exit::USAGE;
            }
        }
        crate::exit::OK
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("codewhale: __probe {name}: only implemented on Linux");
        crate::exit::FAILURE
    }
}
