//! A stream with one already-read byte put back in front, so the proxy can
//! look at the first byte (SOCKS5 starts with 0x05, HTTP with a method
//! letter) and hand the whole stream to the right parser.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct Rewind<S> {
    first: Option<u8>,
    inner: S,
}

impl<S> Rewind<S> {
    pub fn new(first: u8, inner: S) -> Self {
        Rewind {
            first: Some(first),
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() > 0 {
            if let Some(b) = self.first.take() {
                buf.put_slice(&[b]);
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: crate::net::proxy::socket::ClientStream> crate::net::proxy::socket::ClientStream
    for Rewind<S>
{
    /// The socket once the put-back byte has been read (it always has by
    /// the time a handshake is done).
    fn socket(&self) -> Option<crate::net::proxy::socket::SocketRef<'_>> {
        match self.first {
            Some(_) => None,
            None => self.inner.socket(),
        }
    }
}
