//! Linux: relay a tunnel with `splice(2)` (socket → pipe → socket), so the
//! bytes of a download never pass through user space.
//!
//! Metering is the same as the copying relay's, with one difference that
//! only makes it stricter: a chunk is counted when it enters the pipe, and
//! a chunk that crosses the byte cap is never written out (in either
//! direction).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{splice, FcntlArg, OFlag, SpliceFFlags};
use tokio::io::Interest;

use crate::net::gate::Gate;
use crate::net::proxy::socket::SocketRef;
use crate::net::proxy::BYTE_CAP;

/// A non-blocking pipe grown to `size` bytes (`Gate::splice_chunk`).
fn pipe(size: usize) -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
    // Best effort: the default 64 KiB pipe still works, in smaller steps.
    let _ = nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&w),
        FcntlArg::F_SETPIPE_SZ(i32::try_from(size).unwrap_or(i32::MAX)),
    );
    Ok((r, w))
}

fn flags() -> SpliceFFlags {
    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK
}

/// Move bytes from `src` to `dst` until `src` reaches end of stream, then
/// half-close `dst`. `counter` is the connection's byte count for this
/// direction.
async fn pump(
    src: SocketRef<'_>,
    dst: SocketRef<'_>,
    counter: &AtomicU64,
    gate: &Gate,
) -> io::Result<()> {
    let chunk = gate.splice_chunk;
    let (pr, pw) = pipe(chunk)?;
    loop {
        if gate.budget.exceeded() {
            return Err(io::Error::other(BYTE_CAP));
        }
        src.ready(Interest::READABLE).await?;
        let n = match src.try_io(Interest::READABLE, || {
            splice(src.fd(), None, pw.as_fd(), None, chunk, flags()).map_err(io::Error::from)
        }) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            let _ = nix::sys::socket::shutdown(
                std::os::fd::AsRawFd::as_raw_fd(&dst.fd()),
                nix::sys::socket::Shutdown::Write,
            );
            return Ok(());
        }
        if !gate.budget.take(n as u64) {
            return Err(io::Error::other(BYTE_CAP));
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
        let mut left = n;
        while left > 0 {
            dst.ready(Interest::WRITABLE).await?;
            match dst.try_io(Interest::WRITABLE, || {
                splice(pr.as_fd(), None, dst.fd(), None, left, flags()).map_err(io::Error::from)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Relay both ways until both directions have ended or one fails.
pub async fn relay(
    client: SocketRef<'_>,
    upstream: SocketRef<'_>,
    up: &AtomicU64,
    down: &AtomicU64,
    gate: &Gate,
) -> io::Result<()> {
    tokio::try_join!(
        pump(client, upstream, up, gate),
        pump(upstream, client, down, gate)
    )
    .map(|_| ())
}
