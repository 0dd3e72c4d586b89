//! The proxy on its own thread with its own single-threaded runtime, for
//! the host's blocking spawn paths: it lives exactly as long as one
//! sandboxed command and hands back the events when stopped.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::net::events::{ConnectionEvent, EgressSummary};
use crate::net::gate::Gate;
use crate::net::proxy::{EgressProxy, Listen};

pub struct ProxyThread {
    pub tcp_addr: Option<SocketAddr>,
    pub unix_path: Option<PathBuf>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    join: Option<std::thread::JoinHandle<(Vec<ConnectionEvent>, bool)>>,
}

impl ProxyThread {
    /// Bind (errors come back here) and serve until [`ProxyThread::finish`].
    pub fn start(gate: Gate, listen: Listen) -> io::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let join = std::thread::Builder::new()
            .name("codewhale-egress".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return (Vec::new(), false);
                    }
                };
                rt.block_on(async move {
                    let proxy = match EgressProxy::start(gate, listen).await {
                        Ok(p) => p,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return (Vec::new(), false);
                        }
                    };
                    let _ = ready_tx.send(Ok((
                        proxy.tcp_addr(),
                        proxy.unix_path().map(|p| p.to_path_buf()),
                    )));
                    let _ = stop_rx.await;
                    let cap = proxy.gate().budget.exceeded();
                    (proxy.shutdown().await, cap)
                })
            })?;
        let (tcp_addr, unix_path) = ready_rx
            .recv()
            .map_err(|_| io::Error::other("the egress proxy thread died while starting"))??;
        Ok(ProxyThread {
            tcp_addr,
            unix_path,
            stop: Some(stop_tx),
            join: Some(join),
        })
    }

    /// Stop the proxy (cutting open relays) and return its events.
    pub fn finish(mut self) -> (Vec<ConnectionEvent>, EgressSummary) {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> (Vec<ConnectionEvent>, EgressSummary) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let (events, cap) = self
            .join
            .take()
            .and_then(|j| j.join().ok())
            .unwrap_or_default();
        let summary = EgressSummary::of(&events, cap);
        (events, summary)
    }
}

impl Drop for ProxyThread {
    fn drop(&mut self) {
        if self.join.is_some() {
            let _ = self.stop_and_join();
        }
    }
}
