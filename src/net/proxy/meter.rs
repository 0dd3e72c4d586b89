//! A stream wrapper that counts every byte relayed to and from the server
//! side of a connection and enforces the command's byte budget, and the
//! relay built on it.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::net::events::ConnCounters;
use crate::net::gate::Gate;
use crate::net::proxy::socket::ClientStream;
#[cfg(target_os = "linux")]
use crate::net::proxy::socket::SocketRef;

use crate::net::proxy::BYTE_CAP;

/// Wraps the *upstream* stream: writes are bytes up, reads bytes down.
///
/// Reads: a chunk that crosses the cap is dropped and the read fails.
/// Writes: refused once the cap is reached; the write that crosses it has
/// already gone out, so the overshoot is at most one write (a relay
/// buffer, 64 KiB).
pub struct Metered<S> {
    inner: S,
    counters: Arc<ConnCounters>,
    gate: Arc<Gate>,
}

impl<S> Metered<S> {
    pub fn new(inner: S, counters: Arc<ConnCounters>, gate: Arc<Gate>) -> Self {
        Metered {
            inner,
            counters,
            gate,
        }
    }
}

fn cap_error() -> io::Error {
    io::Error::other(BYTE_CAP)
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.gate.budget.exceeded() {
            return Poll::Ready(Err(cap_error()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = (buf.filled().len() - before) as u64;
                if !self.gate.budget.take(n) {
                    buf.set_filled(before);
                    return Poll::Ready(Err(cap_error()));
                }
                self.counters.down.fetch_add(n, Ordering::Relaxed);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.gate.budget.exceeded() {
            return Poll::Ready(Err(cap_error()));
        }
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                self.counters.up.fetch_add(n as u64, Ordering::Relaxed);
                // Crossing the cap here marks it; the next call fails.
                let _ = self.gate.budget.take(n as u64);
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Relay buffer per direction for the copying relay: 64 KiB moves bulk
/// downloads in a quarter of the system calls of tokio's 8 KiB default
/// (benches/egress.rs).
const RELAY_BUF: usize = 64 * 1024;

/// Relay both ways until either side closes; record a byte-cap cut.
///
/// `prefix`: bytes the client already sent past the handshake (hyper may
/// have read them with the `CONNECT` head); they go upstream first.
/// On Linux, when the client is a bare socket, the bytes move by
/// `splice(2)` (no copy through user space); otherwise through buffers.
pub async fn relay<C>(
    mut client: C,
    prefix: bytes::Bytes,
    upstream: tokio::net::TcpStream,
    id: u64,
    counters: Arc<ConnCounters>,
    gate: Arc<Gate>,
) where
    C: ClientStream,
{
    let mut up = Metered::new(upstream, Arc::clone(&counters), Arc::clone(&gate));
    let moved = async {
        if !prefix.is_empty() {
            up.write_all(&prefix).await?;
        }
        #[cfg(target_os = "linux")]
        if let Some(sock) = client.socket().filter(|_| !gate.copy_relay) {
            return crate::net::proxy::splice::relay(
                sock,
                SocketRef::Tcp(&up.inner),
                &counters.up,
                &counters.down,
                &gate,
            )
            .await;
        }
        tokio::io::copy_bidirectional_with_sizes(&mut client, &mut up, RELAY_BUF, RELAY_BUF)
            .await
            .map(|_| ())
    };
    let result = tokio::select! {
        r = moved => r,
        _ = gate.stopped() => {
            gate.log.set_error(id, "cut: the proxy shut down".to_string());
            return;
        }
    };
    if let Err(e) = result {
        if gate.budget.exceeded() {
            gate.log.set_error(id, "byte cap reached".to_string());
        } else if !matches!(
            e.kind(),
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof
        ) {
            gate.log.set_error(id, format!("relay: {e}"));
        }
    }
}
