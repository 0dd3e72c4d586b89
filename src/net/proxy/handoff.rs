//! Linux: the bwrap tier's bridge hands each accepted connection's socket
//! to the proxy instead of relaying its bytes (`SCM_RIGHTS` over the
//! proxy's Unix socket), so a proxied download crosses one socket pair
//! fewer and no bridge thread touches it (benches/egress.rs).
//!
//! The message is one byte, [`HANDOFF`], with exactly one descriptor. The
//! proxy takes it only if it is a connected TCP socket (not a listener,
//! not a file, a pipe or a Unix socket) and then serves it exactly as a
//! client that connected to its TCP port: every decision stays the proxy's.
//! Who can send one: the Unix socket lives in a private (0700) directory,
//! the socket itself is 0600, and the sandboxed command cannot create an
//! `AF_UNIX` socket at all (seccomp); the bridge is forked before that
//! filter.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// The first byte of a handoff. A client speaking to the proxy directly
/// starts with `0x05` (SOCKS5) or an HTTP method, never with NUL.
pub const HANDOFF: u8 = 0;

/// Bridge side: send `conn` over `unix` (a connected stream to the
/// proxy's socket). The caller closes its copy afterwards.
pub fn send(unix: BorrowedFd<'_>, conn: BorrowedFd<'_>) -> io::Result<()> {
    let fds = [conn.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let iov = [io::IoSlice::new(&[HANDOFF])];
    loop {
        match sendmsg::<()>(unix.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(io::ErrorKind::WriteZero.into()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Proxy side: read the first byte of a non-blocking Unix stream, with
/// any descriptors sent alongside it (owned, close-on-exec).
/// `Ok(None)`: end of stream before any byte.
pub fn recv_first(unix: BorrowedFd<'_>) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    let mut byte = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    // Room for a few descriptors, so a sender of more than one is seen
    // (and refused) rather than silently truncated.
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let (n, fds, truncated) = {
        let msg = recvmsg::<()>(
            unix.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
        )
        .map_err(io::Error::from)?;
        let mut fds = Vec::new();
        for c in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                for fd in raw {
                    // SAFETY: the kernel installed this descriptor in our
                    // table for this message; nothing else owns it.
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        (msg.bytes, fds, msg.flags.contains(MsgFlags::MSG_CTRUNC))
    };
    if truncated {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "egress handoff: control data truncated",
        ));
    }
    if n == 0 {
        return Ok(None);
    }
    Ok(Some((byte[0], fds)))
}

fn int_opt(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`, which we own.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Why a handed-over descriptor is not taken, or the stream it becomes.
pub fn tcp_client(fds: Vec<OwnedFd>) -> io::Result<tokio::net::TcpStream> {
    let bad =
        |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("egress handoff: {why}"));
    let mut fds = fds.into_iter();
    let (Some(fd), None) = (fds.next(), fds.next()) else {
        return Err(bad("exactly one descriptor expected"));
    };
    let b = fd.as_fd();
    let is = |name, want: &[libc::c_int]| int_opt(b, name).map(|v| want.contains(&v));
    if !is(libc::SO_TYPE, &[libc::SOCK_STREAM]).unwrap_or(false)
        || !is(libc::SO_DOMAIN, &[libc::AF_INET, libc::AF_INET6]).unwrap_or(false)
        || !is(libc::SO_PROTOCOL, &[libc::IPPROTO_TCP]).unwrap_or(false)
    {
        return Err(bad("not a TCP socket"));
    }
    if !is(libc::SO_ACCEPTCONN, &[0]).unwrap_or(false) {
        return Err(bad("a listening socket"));
    }
    let std = std::net::TcpStream::from(fd);
    std.peer_addr().map_err(|_| bad("not connected"))?;
    std.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(std)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn pair() -> (UnixStream, UnixStream) {
        UnixStream::pair().unwrap()
    }

    /// Send `fds` with byte `b` on `a`, receive on `b_side`.
    fn roundtrip(first: u8, fds: &[BorrowedFd<'_>]) -> (u8, Vec<OwnedFd>) {
        let (a, b) = pair();
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let cmsg = [ControlMessage::ScmRights(&raw)];
        let byte = [first];
        let iov = [io::IoSlice::new(&byte)];
        let cm: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &cmsg };
        sendmsg::<()>(a.as_raw_fd(), &iov, cm, MsgFlags::empty(), None).unwrap();
        recv_first(b.as_fd()).unwrap().unwrap()
    }

    #[tokio::test]
    async fn a_connected_tcp_socket_is_taken_and_is_the_same_connection() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        let (b, fds) = roundtrip(HANDOFF, &[server.as_fd()]);
        drop(server);
        assert_eq!(b, HANDOFF);
        let taken = tcp_client(fds).unwrap();
        let mut taken = taken.into_std().unwrap();
        taken.set_nonblocking(false).unwrap();
        client.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        taken.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        taken.write_all(b"pong").unwrap();
        drop(taken);
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"pong", "and no other copy keeps it open");
    }

    #[tokio::test]
    async fn anything_but_one_connected_tcp_socket_is_refused() {
        let err = |fds: Vec<OwnedFd>| tcp_client(fds).unwrap_err().to_string();
        // A pipe, a Unix socket, a listener, an unconnected socket.
        let (pr, _pw) = nix::unistd::pipe().unwrap();
        let (_, fds) = roundtrip(HANDOFF, &[pr.as_fd()]);
        assert_eq!(err(fds), "egress handoff: not a TCP socket");
        let (u, _u2) = pair();
        let (_, fds) = roundtrip(HANDOFF, &[u.as_fd()]);
        assert_eq!(err(fds), "egress handoff: not a TCP socket");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (_, fds) = roundtrip(HANDOFF, &[l.as_fd()]);
        assert_eq!(err(fds), "egress handoff: a listening socket");
        let fresh = nix::sys::socket::socket(
            nix::sys::socket::AddressFamily::Inet,
            nix::sys::socket::SockType::Stream,
            nix::sys::socket::SockFlag::empty(),
            None,
        )
        .unwrap();
        let (_, fds) = roundtrip(HANDOFF, &[fresh.as_fd()]);
        assert_eq!(err(fds), "egress handoff: not connected");
        // None, or two.
        assert_eq!(
            err(Vec::new()),
            "egress handoff: exactly one descriptor expected"
        );
        let (_, fds) = roundtrip(HANDOFF, &[pr.as_fd(), pr.as_fd()]);
        assert_eq!(fds.len(), 2);
        assert_eq!(err(fds), "egress handoff: exactly one descriptor expected");
    }

    #[test]
    fn a_plain_first_byte_comes_back_with_no_descriptor() {
        let (b, fds) = roundtrip(0x05, &[]);
        assert_eq!((b, fds.len()), (0x05, 0));
        let (a, b) = pair();
        drop(a);
        assert!(recv_first(b.as_fd()).unwrap().is_none(), "end of stream");
    }
}
