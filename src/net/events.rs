//! What each proxied connection did: one event per connection attempt,
//! allowed or refused, with the rule that decided and the bytes relayed.
//! Events are kept in order for the enforcement report, stream-json and
//! receipts; [`EgressSummary`] is the one-line form
//! (`network: 3 connections to crates.io; 1 refused: evil.example`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Which front end of the proxy the client used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// `CONNECT host:port` (TLS and anything tunnelled).
    HttpConnect,
    /// `GET http://host/...` relayed by the proxy.
    HttpForward,
    /// SOCKS5 `CONNECT`.
    Socks5,
}

/// Allowed (dialled) or refused (never dialled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Allowed,
    Refused,
}

/// One connection attempt, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionEvent {
    pub id: u64,
    pub protocol: Protocol,
    /// The name (or IP literal) the client asked for.
    pub host: String,
    pub port: u16,
    pub decision: Decision,
    /// The rule that decided (`allow: crates.io`, `deny: ...`,
    /// `not in the allow list`, `resolves to 127.0.0.1 (loopback)`, ...).
    pub rule: String,
    /// The address dialled, for allowed connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<SocketAddr>,
    /// The proxy's own end of that connection: the peer address the
    /// server saw, so a server's log can be matched to the proxy's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<SocketAddr>,
    /// Bytes from the command to the server.
    pub bytes_up: u64,
    /// Bytes from the server to the command.
    pub bytes_down: u64,
    /// Dial or relay failure after an allow (connection refused, byte cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Live byte counters of one connection, shared with its relay.
#[derive(Debug, Default)]
pub struct ConnCounters {
    pub up: AtomicU64,
    pub down: AtomicU64,
}

#[derive(Debug)]
struct Entry {
    event: ConnectionEvent,
    counters: Arc<ConnCounters>,
}

/// The ordered event log of one proxy (one command).
#[derive(Debug, Clone, Default)]
pub struct EgressLog {
    inner: Arc<Mutex<Vec<Entry>>>,
}

impl EgressLog {
    pub fn new() -> Self {
        EgressLog::default()
    }

    /// Record an attempt; returns its id and the counters its relay feeds.
    pub fn record(&self, mut event: ConnectionEvent) -> (u64, Arc<ConnCounters>) {
        let counters = Arc::new(ConnCounters::default());
        let Ok(mut v) = self.inner.lock() else {
            return (0, counters);
        };
        let id = v.len() as u64 + 1;
        event.id = id;
        v.push(Entry {
            event,
            counters: Arc::clone(&counters),
        });
        (id, counters)
    }

    /// Attach an error to an event (dial failed, byte cap hit).
    pub fn set_error(&self, id: u64, error: String) {
        if let Ok(mut v) = self.inner.lock() {
            if let Some(e) = v.iter_mut().find(|e| e.event.id == id) {
                e.event.error.get_or_insert(error);
            }
        }
    }

    /// Set the dialled address of an allowed event and the proxy's own
    /// end of it.
    pub fn set_addr(&self, id: u64, addr: SocketAddr, local: Option<SocketAddr>) {
        if let Ok(mut v) = self.inner.lock() {
            if let Some(e) = v.iter_mut().find(|e| e.event.id == id) {
                e.event.addr = Some(addr);
                e.event.local = local;
            }
        }
    }

    /// Every event so far, with the byte counts as of now.
    pub fn snapshot(&self) -> Vec<ConnectionEvent> {
        let Ok(v) = self.inner.lock() else {
            return Vec::new();
        };
        v.iter()
            .map(|e| {
                let mut ev = e.event.clone();
                ev.bytes_up = e.counters.up.load(Ordering::Relaxed);
                ev.bytes_down = e.counters.down.load(Ordering::Relaxed);
                ev
            })
            .collect()
    }
}

/// Totals of a log, and the one-line summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressSummary {
    pub allowed: u64,
    pub refused: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Allowed connections per host, sorted by host.
    pub allowed_hosts: BTreeMap<String, u64>,
    /// Refused hosts with the first rule that refused each.
    pub refused_hosts: BTreeMap<String, String>,
    /// The per-command byte cap was reached.
    pub byte_cap_hit: bool,
}

impl EgressSummary {
    pub fn of(events: &[ConnectionEvent], byte_cap_hit: bool) -> Self {
        let mut s = EgressSummary {
            allowed: 0,
            refused: 0,
            bytes_up: 0,
            bytes_down: 0,
            allowed_hosts: BTreeMap::new(),
            refused_hosts: BTreeMap::new(),
            byte_cap_hit,
        };
        for e in events {
            s.bytes_up += e.bytes_up;
            s.bytes_down += e.bytes_down;
            match e.decision {
                Decision::Allowed => {
                    s.allowed += 1;
                    *s.allowed_hosts.entry(e.host.clone()).or_default() += 1;
                }
                Decision::Refused => {
                    s.refused += 1;
                    s.refused_hosts
                        .entry(e.host.clone())
                        .or_insert_with(|| e.rule.clone());
                }
            }
        }
        s
    }

    /// `network: 3 connections to crates.io, 1 to pypi.org; 1 refused:
    /// evil.example (not in the allow list)`.
    pub fn line(&self) -> String {
        if self.allowed == 0 && self.refused == 0 {
            return "network: no connections".to_string();
        }
        let mut parts = Vec::new();
        if self.allowed > 0 {
            let hosts: Vec<String> = self
                .allowed_hosts
                .iter()
                .enumerate()
                .map(|(i, (h, n))| match (i, *n) {
                    (0, 1) => format!("1 connection to {h}"),
                    (0, n) => format!("{n} connections to {h}"),
                    (_, n) => format!("{n} to {h}"),
                })
                .collect();
            parts.push(hosts.join(", "));
        }
        if self.refused > 0 {
            let hosts: Vec<String> = self
                .refused_hosts
                .iter()
                .map(|(h, rule)| format!("{h} ({rule})"))
                .collect();
            parts.push(format!("{} refused: {}", self.refused, hosts.join(", ")));
        }
        let mut line = format!("network: {}", parts.join("; "));
        if self.byte_cap_hit {
            line.push_str("; byte cap reached, relays cut");
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(host: &str, decision: Decision, rule: &str) -> ConnectionEvent {
        ConnectionEvent {
            id: 0,
            protocol: Protocol::HttpConnect,
            host: host.into(),
            port: 443,
            decision,
            rule: rule.into(),
            addr: None,
            local: None,
            bytes_up: 0,
            bytes_down: 0,
            error: None,
        }
    }

    #[test]
    fn log_numbers_events_and_reads_live_counters() {
        let log = EgressLog::new();
        let (id, c) = log.record(ev("crates.io", Decision::Allowed, "allow: crates.io"));
        assert_eq!(id, 1);
        c.up.fetch_add(10, Ordering::Relaxed);
        c.down.fetch_add(2000, Ordering::Relaxed);
        log.set_addr(
            id,
            "1.2.3.4:443".parse().unwrap(),
            Some("10.0.0.2:50000".parse().unwrap()),
        );
        let (id2, _) = log.record(ev(
            "evil.example",
            Decision::Refused,
            "not in the allow list",
        ));
        assert_eq!(id2, 2);
        let snap = log.snapshot();
        assert_eq!(snap[0].bytes_down, 2000);
        assert_eq!(snap[0].addr, Some("1.2.3.4:443".parse().unwrap()));
        assert_eq!(snap[0].local, Some("10.0.0.2:50000".parse().unwrap()));
        assert_eq!(snap[1].decision, Decision::Refused);
    }

    #[test]
    fn summary_line() {
        let events = vec![
            ev("crates.io", Decision::Allowed, "allow: crates.io"),
            ev("crates.io", Decision::Allowed, "allow: crates.io"),
            ev("crates.io", Decision::Allowed, "allow: crates.io"),
            ev("pypi.org", Decision::Allowed, "allow: pypi.org"),
            ev("evil.example", Decision::Refused, "not in the allow list"),
        ];
        let s = EgressSummary::of(&events, false);
        assert_eq!(
            s.line(),
            "network: 3 connections to crates.io, 1 to pypi.org; 1 refused: evil.example (not in the allow list)"
        );
        assert_eq!(
            EgressSummary::of(&[], false).line(),
            "network: no connections"
        );
        let only_refused = EgressSummary::of(&events[4..], true);
        assert_eq!(
            only_refused.line(),
            "network: 1 refused: evil.example (not in the allow list); byte cap reached, relays cut"
        );
    }
}
