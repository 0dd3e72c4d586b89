//! The client side of a relay, as the socket it is when it is one.
//!
//! After the handshake (SOCKS5 reply, `CONNECT` 200) the proxy only moves
//! bytes. When both ends are plain sockets the Linux relay moves them with
//! `splice(2)` through a pipe, never copying them into user space
//! (benches/egress.rs: the copying relay reached 0.48× direct). A client
//! stream that is not a bare socket (hyper kept it wrapped, or a byte is
//! still buffered) takes the copying relay.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::{TcpStream, UnixStream};

/// A connected socket the splice relay can wait on and move bytes through.
#[derive(Clone, Copy)]
pub enum SocketRef<'a> {
    Tcp(&'a TcpStream),
    Unix(&'a UnixStream),
}

impl SocketRef<'_> {
    pub async fn ready(&self, interest: Interest) -> io::Result<()> {
        match self {
            SocketRef::Tcp(s) => s.ready(interest).await.map(|_| ()),
            SocketRef::Unix(s) => s.ready(interest).await.map(|_| ()),
        }
    }

    /// Run `f` (a non-blocking system call on this socket); a
    /// `WouldBlock` clears tokio's readiness so the next `ready` waits.
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        match self {
            SocketRef::Tcp(s) => s.try_io(interest, f),
            SocketRef::Unix(s) => s.try_io(interest, f),
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            SocketRef::Tcp(s) => s.as_fd(),
            SocketRef::Unix(s) => s.as_fd(),
        }
    }
}

/// A stream the proxy accepted or relays to.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The bare socket, when nothing sits between it and the relay.
    fn socket(&self) -> Option<SocketRef<'_>>;
}

impl ClientStream for TcpStream {
    fn socket(&self) -> Option<SocketRef<'_>> {
        Some(SocketRef::Tcp(self))
    }
}

impl ClientStream for UnixStream {
    fn socket(&self) -> Option<SocketRef<'_>> {
        Some(SocketRef::Unix(self))
    }
}

impl ClientStream for hyper_util::rt::TokioIo<hyper::upgrade::Upgraded> {
    fn socket(&self) -> Option<SocketRef<'_>> {
        None
    }
}
