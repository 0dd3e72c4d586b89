//! The egress proxy of one command: listeners on a loopback TCP port
//! and/or a Unix socket, one port for both protocols (the first byte tells
//! SOCKS5, `0x05`, from HTTP), and a [`Gate`] shared by every connection.
//!
//! It runs as tokio tasks in codewhale's own process, outside the sandbox.
//! Dropping (or [`EgressProxy::shutdown`]) stops accepting and cuts every
//! open relay.

#[cfg(target_os = "linux")]
pub mod handoff;
mod http;
mod meter;
mod rewind;
// The splice relay (Linux) is the only reader of the bare socket.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod socket;
mod socks;
#[cfg(target_os = "linux")]
mod splice;
pub mod thread;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::net::events::{ConnectionEvent, EgressSummary};
use crate::net::gate::Gate;
use socket::ClientStream;

/// The error a relay sees once the budget is spent (the metered copy and
/// the Linux splice path both raise it, so it lives above both).
pub const BYTE_CAP: &str = "codewhale egress byte cap reached";

/// Where the proxy listens.
#[derive(Debug, Clone, Default)]
pub struct Listen {
    /// A loopback TCP address (`127.0.0.1:0` for any free port).
    pub tcp: Option<SocketAddr>,
    /// A Unix socket path (its directory must exist and be private).
    pub unix: Option<PathBuf>,
}

/// A running proxy.
pub struct EgressProxy {
    gate: Arc<Gate>,
    tcp_addr: Option<SocketAddr>,
    unix_path: Option<PathBuf>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl EgressProxy {
    /// Bind the listeners and start accepting. Must be called inside a
    /// tokio runtime.
    pub async fn start(gate: Gate, listen: Listen) -> io::Result<Self> {
        let gate = Arc::new(gate);
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut tcp_addr = None;
        if let Some(addr) = listen.tcp {
            if !addr.ip().is_loopback() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the egress proxy listens on loopback only, not {addr}"),
                ));
            }
            let l = tokio::net::TcpListener::bind(addr).await?;
            tcp_addr = Some(l.local_addr()?);
            let (g, rx) = (Arc::clone(&gate), stop_rx.clone());
            tasks.push(tokio::spawn(async move {
                accept_loop(rx, g, || l.accept(), serve).await;
            }));
        }
        let mut unix_path = None;
        if let Some(path) = listen.unix {
            let l = tokio::net::UnixListener::bind(&path)?;
            set_private(&path)?;
            unix_path = Some(path);
            let (g, rx) = (Arc::clone(&gate), stop_rx.clone());
            tasks.push(tokio::spawn(async move {
                accept_loop(rx, g, || l.accept(), serve_unix).await;
            }));
        }
        Ok(EgressProxy {
            gate,
            tcp_addr,
            unix_path,
            stop,
            tasks,
        })
    }

    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Every connection attempt so far, bytes as of now.
    pub fn events(&self) -> Vec<ConnectionEvent> {
        self.gate.log.snapshot()
    }

    pub fn summary(&self) -> EgressSummary {
        EgressSummary::of(&self.events(), self.gate.budget.exceeded())
    }

    /// Stop accepting, cut open relays, remove the Unix socket; returns
    /// the final events.
    pub async fn shutdown(mut self) -> Vec<ConnectionEvent> {
        let _ = self.stop.send(true);
        self.gate.stop();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        self.events()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.gate.stop();
        for t in &self.tasks {
            t.abort();
        }
        if let Some(p) = &self.unix_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn set_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

async fn accept_loop<F, Fut, S, A, H, HFut>(
    mut stop: watch::Receiver<bool>,
    gate: Arc<Gate>,
    mut accept: F,
    handle: H,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = io::Result<(S, A)>>,
    H: Fn(Arc<Gate>, S) -> HFut,
    HFut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            r = accept() => match r {
                Ok((stream, _)) => {
                    conns.spawn(handle(Arc::clone(&gate), stream));
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

/// How long a client may take to send its first byte.
const FIRST_BYTE: std::time::Duration = std::time::Duration::from_secs(30);

/// Tell SOCKS5 from HTTP by the first byte and hand the stream over.
async fn serve<S>(gate: Arc<Gate>, mut stream: S)
where
    S: ClientStream,
{
    let mut first = [0u8; 1];
    let Ok(Ok(1)) = tokio::time::timeout(FIRST_BYTE, stream.read(&mut first)).await else {
        return;
    };
    dispatch(gate, first[0], stream).await;
}

async fn dispatch<S: ClientStream>(gate: Arc<Gate>, first: u8, stream: S) {
    let stream = rewind::Rewind::new(first, stream);
    if first == 0x05 {
        socks::serve(gate, stream).await;
    } else {
        http::serve(gate, stream).await;
    }
}

/// A connection on the Unix listener: either the bwrap bridge handing
/// over the command's TCP socket ([`handoff`]), served like a client of
/// the TCP port, or a client speaking to the proxy itself.
#[cfg(target_os = "linux")]
async fn serve_unix(gate: Arc<Gate>, stream: tokio::net::UnixStream) {
    use std::os::fd::AsFd;
    let first = tokio::time::timeout(FIRST_BYTE, async {
        loop {
            stream.readable().await?;
            match stream.try_io(tokio::io::Interest::READABLE, || {
                handoff::recv_first(stream.as_fd())
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    })
    .await;
    let Ok(Ok(Some((first, fds)))) = first else {
        return;
    };
    if first == handoff::HANDOFF {
        drop(stream);
        // Anything but one connected TCP socket is closed unserved.
        if let Ok(tcp) = handoff::tcp_client(fds) {
            serve(gate, tcp).await;
        }
        return;
    }
    // Descriptors sent with anything else are closed unused.
    drop(fds);
    dispatch(gate, first, stream).await;
}

#[cfg(not(target_os = "linux"))]
async fn serve_unix(gate: Arc<Gate>, stream: tokio::net::UnixStream) {
    serve(gate, stream).await;
}
