//! Inside the bwrap sandbox: a loopback TCP port that leads to the egress
//! proxy's Unix socket outside. The sandbox has an empty network namespace
//! (bwrap brings its `lo` up), so this port is the only thing a TCP
//! connect there can reach.
//!
//! The bridge is forked by the helper stage after the capability drop and
//! before Landlock and seccomp (the command's filter denies
//! `socket(AF_UNIX)`, which the bridge needs). It is not dumpable, so the
//! command — same uid, no capabilities — cannot ptrace it or write its
//! memory; it can only kill it, which cuts its own network. Byte-level
//! relay only: every decision is the proxy's.

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Bind the bridge's port on 127.0.0.1 (before the command exists, so it
/// is listening when the command starts).
pub fn bind(port: u16) -> io::Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port))
}

/// Fork the bridge process. The parent gets the child's pid and closes
/// its copy of the listener; the child never returns.
///
/// Must be called while the process is single-threaded (the helper stage
/// is: bwrap exec'd it and it has started no thread).
pub fn spawn(listener: TcpListener, socket: &Path) -> io::Result<libc::pid_t> {
    let socket = socket.to_path_buf();
    // SAFETY: the caller guarantees a single-threaded process, so the child
    // may allocate and start threads; it never returns into the caller.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: prctl with constant arguments on ourselves.
            unsafe {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            }
            serve(listener, socket);
            // SAFETY: leave the forked child without running the parent's
            // atexit handlers or destructors.
            unsafe { libc::_exit(0) }
        }
        pid => {
            drop(listener);
            Ok(pid)
        }
    }
}

/// Accept forever; one pair of copy threads per connection.
pub fn serve(listener: TcpListener, socket: PathBuf) {
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        let socket = socket.clone();
        let _ = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || relay(tcp, &socket));
    }
}

fn relay(tcp: TcpStream, socket: &Path) {
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = tcp.shutdown(Shutdown::Both);
        return;
    };
    let _ = tcp.set_nodelay(true);
    let (Ok(mut tcp_r), Ok(mut unix_w)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let _ = pump(&mut tcp_r, &mut unix_w);
            let _ = unix_w.shutdown(Shutdown::Write);
        });
    let (mut unix_r, mut tcp_w) = (unix, tcp);
    let _ = pump(&mut unix_r, &mut tcp_w);
    let _ = tcp_w.shutdown(Shutdown::Write);
    if let Ok(h) = up {
        let _ = h.join();
    }
}

/// One direction until end of stream: `splice(2)` through a pipe (the
/// bytes stay in the kernel), or `io::copy` if no pipe can be made or the
/// kernel refuses to splice these sockets before anything moved.
fn pump<R, W>(src: &mut R, dst: &mut W) -> io::Result<u64>
where
    R: io::Read + AsFd,
    W: io::Write + AsFd,
{
    use nix::fcntl::{splice, SpliceFFlags};
    const CHUNK: usize = 256 * 1024;
    let Ok((pr, pw)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        return io::copy(src, dst);
    };
    // Best effort: a bigger pipe, fewer calls per megabyte.
    let _ = nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&pw),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(CHUNK as i32),
    );
    let mut total = 0u64;
    loop {
        let n = match splice(
            src.as_fd(),
            None,
            pw.as_fd(),
            None,
            CHUNK,
            SpliceFFlags::SPLICE_F_MOVE,
        ) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EINVAL) if total == 0 => return io::copy(src, dst),
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(total);
        }
        let mut left = n;
        while left > 0 {
            match splice(
                pr.as_fd(),
                None,
                dst.as_fd(),
                None,
                left,
                SpliceFFlags::SPLICE_F_MOVE,
            ) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn relays_both_ways_and_half_closes() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s");
        let ul = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = ul.accept().unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        let l = bind(0).unwrap();
        let port = l.local_addr().unwrap().port();
        let sock2 = sock.clone();
        std::thread::spawn(move || serve(l, sock2));
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"ping through the bridge").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = String::new();
        c.read_to_string(&mut back).unwrap();
        assert_eq!(back, "ping through the bridge");
        echo.join().unwrap();
    }

    /// Several MiB each way through the spliced relay, byte for byte.
    #[test]
    fn relays_bulk_bytes_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s");
        let ul = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = ul.accept().unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
            buf.len()
        });
        let l = bind(0).unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || serve(l, sock));
        let data: Vec<u8> = (0..5 << 20).map(|i: u32| (i % 251) as u8).collect();
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut w = c.try_clone().unwrap();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            w.write_all(&sent).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert_eq!(echo.join().unwrap(), data.len());
        assert!(back == data, "the bytes came back altered");
    }
}
