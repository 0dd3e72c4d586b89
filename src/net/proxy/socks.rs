//! The SOCKS5 front end (RFC 1928, no authentication, `CONNECT` only),
//! parsed by the `fast-socks5` crate. `socks5h://` clients send the name
//! (address type 3), which the gate decides on; an IP-literal request is
//! refused unless that literal is allowed. `BIND` and `UDP ASSOCIATE` are
//! refused: no UDP leaves the sandbox, DNS included.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fast_socks5::server::Socks5ServerProtocol;
use fast_socks5::util::target_addr::TargetAddr;
use fast_socks5::{ReplyError, Socks5Command};

use crate::net::events::{ConnectionEvent, Decision, Protocol};
use crate::net::gate::{Gate, Verdict};
use crate::net::proxy::meter::relay;
use crate::net::proxy::socket::ClientStream;

/// Greeting + request must arrive within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn serve<S>(gate: Arc<Gate>, stream: S)
where
    S: ClientStream,
{
    let handshake = async {
        let proto = Socks5ServerProtocol::accept_no_auth(stream).await.ok()?;
        proto.read_command().await.ok()
    };
    let Ok(Some((proto, cmd, target))) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await
    else {
        return;
    };
    let (host, port) = match &target {
        TargetAddr::Domain(h, p) => (h.clone(), *p),
        TargetAddr::Ip(sa) => (sa.ip().to_string(), sa.port()),
    };
    if cmd != Socks5Command::TCPConnect {
        gate.log.record(ConnectionEvent {
            id: 0,
            protocol: Protocol::Socks5,
            host,
            port,
            decision: Decision::Refused,
            rule: format!("socks5 {cmd:?} is not supported (only CONNECT)"),
            addr: None,
            local: None,
            bytes_up: 0,
            bytes_down: 0,
            error: None,
        });
        let _ = proto.reply_error(&ReplyError::CommandNotSupported).await;
        return;
    }
    match gate.admit(Protocol::Socks5, &host, port).await {
        Verdict::Refuse { .. } => {
            let _ = proto.reply_error(&ReplyError::ConnectionNotAllowed).await;
        }
        Verdict::Dial {
            id,
            addrs,
            counters,
        } => match gate.dial(id, &addrs).await {
            Err(e) => {
                let code = match e.kind() {
                    std::io::ErrorKind::ConnectionRefused => ReplyError::ConnectionRefused,
                    std::io::ErrorKind::TimedOut => ReplyError::ConnectionTimeout,
                    _ => ReplyError::HostUnreachable,
                };
                let _ = proto.reply_error(&code).await;
            }
            Ok(upstream) => {
                // The bound address is not the client's business (it would
                // tell the sandbox this host's address): report 0.0.0.0:0.
                let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
                if let Ok(client) = proto.reply_success(unspecified).await {
                    relay(client, bytes::Bytes::new(), upstream, id, counters, gate).await;
                }
            }
        },
    }
}
