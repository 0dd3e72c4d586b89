//! Inside the bwrap sandbox: a loopback TCP port that leads to the egress
//! proxy's Unix socket outside. The sandbox has an empty network namespace
//! (bwrap brings its `lo` up), so this port is the only thing a TCP
//! connect there can reach.
//!
//! The bridge is forked by the helper stage after the capability drop and
//! before Landlock and seccomp (the command's filter denies
//! `socket(AF_UNIX)`, which the bridge needs). It is not dumpable, so the
//! command — same uid, no capabilities — cannot ptrace it or write its
//! memory; it can only kill it, which cuts its own network (connections
//! already handed over keep going). It relays no bytes and decides
//! nothing: each accepted connection's socket is handed to the proxy
//! (`SCM_RIGHTS`, [`crate::net::proxy::handoff`]), which serves it as if
//! the command had connected to the proxy's own port; the bridge closes
//! its copy at once. One hop less than relaying through the Unix socket:
//! a download crosses the proxy's two sockets only (benches/egress.rs).

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

/// Accept forever; hand each connection's socket to the proxy. One the
/// proxy cannot take (it is gone) is closed.
pub fn serve(listener: TcpListener, socket: PathBuf) {
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        if hand_over(&tcp, &socket).is_err() {
            let _ = tcp.shutdown(Shutdown::Both);
        }
        // Our copy closes here; the proxy's keeps the connection.
    }
}

fn hand_over(tcp: &TcpStream, socket: &Path) -> io::Result<()> {
    let _ = tcp.set_nodelay(true);
    let unix = UnixStream::connect(socket)?;
    crate::net::proxy::handoff::send(unix.as_fd(), tcp.as_fd())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::OwnedFd;

    /// The bridge passes the accepted socket itself: what the receiver
    /// writes on the descriptor it got arrives at the client, and once the
    /// receiver closes it the client sees end of stream (the bridge kept no
    /// copy open).
    #[test]
    fn hands_the_connection_itself_to_the_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s");
        let ul = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let receiver = std::thread::spawn(move || {
            let (u, _) = ul.accept().unwrap();
            let got = loop {
                match crate::net::proxy::handoff::recv_first(u.as_fd()) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(5))
                    }
                    r => break r.unwrap().unwrap(),
                }
            };
            let (first, mut fds): (u8, Vec<OwnedFd>) = got;
            assert_eq!(first, crate::net::proxy::handoff::HANDOFF);
            assert_eq!(fds.len(), 1);
            let mut conn = TcpStream::from(fds.remove(0));
            let mut ping = [0u8; 4];
            conn.read_exact(&mut ping).unwrap();
            assert_eq!(&ping, b"ping");
            conn.write_all(b"pong").unwrap();
        });
        let l = bind(0).unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || serve(l, sock));
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        c.write_all(b"ping").unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"pong");
        receiver.join().unwrap();
    }

    /// No proxy listening: the connection is closed, not left hanging.
    #[test]
    fn closes_what_it_cannot_hand_over() {
        let dir = tempfile::tempdir().unwrap();
        let l = bind(0).unwrap();
        let port = l.local_addr().unwrap().port();
        let missing = dir.path().join("nobody");
        std::thread::spawn(move || serve(l, missing));
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut back = Vec::new();
        let r = c.read_to_end(&mut back);
        assert!(matches!(r, Ok(0)) || r.is_err(), "{r:?}");
        assert!(back.is_empty());
    }
}
