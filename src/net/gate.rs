//! The gate every proxied connection passes: rate limit, byte budget, the
//! policy's decision on the *name*, one resolution, the address classes of
//! everything it returned, and only then a dial of exactly those
//! addresses. Each attempt becomes one [`ConnectionEvent`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::net::classify::{classify, AddressClass, LocalAddrs};
use crate::net::events::{ConnCounters, ConnectionEvent, Decision, EgressLog, Protocol};
use crate::net::limits::{ByteBudget, Limits, RateLimiter};
use crate::net::policy::{NetworkPolicy, Target};
use crate::net::resolve::{dialable, Resolver};

/// What one `splice(2)` of a tunnel's relay moves at most; the relay's
/// pipe is grown to hold it (the unprivileged maximum is 1 MiB,
/// `/proc/sys/fs/pipe-max-size`). Larger steps mean fewer wake-ups per
/// megabyte; a pipe's pages are allocated only while data sits in it, so
/// an idle connection does not pay for it.
pub const SPLICE_CHUNK: usize = 256 * 1024;

/// How long a dial of one resolved address may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// The shared decision state of one command's proxy.
#[derive(Debug)]
pub struct Gate {
    policy: NetworkPolicy,
    resolver: Resolver,
    local: LocalAddrs,
    pub budget: ByteBudget,
    rate: RateLimiter,
    pub log: EgressLog,
    /// Set when the proxy shuts down: every relay watches it.
    stopped: tokio::sync::watch::Sender<bool>,
    /// Relay through user-space buffers even where `splice(2)` would do
    /// (benches/egress.rs measures both in one run).
    pub(crate) copy_relay: bool,
    /// What one `splice(2)` moves at most, and the relay pipe's size
    /// (`src/net/proxy/splice.rs`); benches/egress.rs compares sizes in
    /// one run.
    pub(crate) splice_chunk: usize,
}

/// The outcome of [`Gate::admit`].
#[derive(Debug)]
pub enum Verdict {
    /// Dial these (already vetted) addresses, in order.
    Dial {
        id: u64,
        addrs: Vec<SocketAddr>,
        counters: Arc<ConnCounters>,
    },
    /// Refused; the event is recorded, nothing was dialled.
    Refuse { id: u64, rule: String },
}

impl Gate {
    pub fn new(
        policy: NetworkPolicy,
        resolver: Resolver,
        local: LocalAddrs,
        limits: Limits,
    ) -> Self {
        Gate {
            policy,
            resolver,
            local,
            budget: ByteBudget::new(limits.max_bytes),
            rate: RateLimiter::new(limits.burst, limits.per_second),
            log: EgressLog::new(),
            stopped: tokio::sync::watch::channel(false).0,
            copy_relay: false,
            splice_chunk: SPLICE_CHUNK,
        }
    }

    /// Use the buffered relay for tunnels instead of `splice(2)` (for the
    /// benchmark's same-run comparison; the default is faster).
    pub fn with_copy_relay(mut self) -> Self {
        self.copy_relay = true;
        self
    }

    /// Relay tunnels in `splice(2)` steps of `bytes` (for the benchmark's
    /// same-run comparison of sizes; the default is [`Gate::new`]'s).
    pub fn with_splice_chunk(mut self, bytes: usize) -> Self {
        self.splice_chunk = bytes;
        self
    }

    /// Cut every relay (the proxy is shutting down).
    pub fn stop(&self) {
        self.stopped.send_replace(true);
    }

    /// Resolves once [`Gate::stop`] was called.
    pub async fn stopped(&self) {
        let mut rx = self.stopped.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    fn refuse(&self, protocol: Protocol, host: &str, port: u16, rule: String) -> Verdict {
        let (id, _) = self.log.record(ConnectionEvent {
            id: 0,
            protocol,
            host: host.to_string(),
            port,
            decision: Decision::Refused,
            rule: rule.clone(),
            addr: None,
            local: None,
            bytes_up: 0,
            bytes_down: 0,
            error: None,
        });
        Verdict::Refuse { id, rule }
    }

    /// Decide on one plain-HTTP request that carries DNS (an
    /// `application/dns-message` body or `Accept`, or RFC 8484's GET
    /// form): refused unless an exact entry names the host
    /// ([`NetworkPolicy::decide_dns_request`]), else as [`Gate::admit`].
    pub async fn admit_dns_request(&self, protocol: Protocol, host: &str, port: u16) -> Verdict {
        if let Ok(target) = Target::parse(host) {
            let d = self.policy.decide_dns_request(&target, port);
            if !d.allowed && self.policy.decide(&target, port).allowed {
                return self.refuse(protocol, &target.display(), port, d.rule);
            }
        }
        self.admit(protocol, host, port).await
    }

    /// Decide on one connection request for `host:port`.
    pub async fn admit(&self, protocol: Protocol, host: &str, port: u16) -> Verdict {
        if !self.rate.admit() {
            return self.refuse(protocol, host, port, "connection rate limit".into());
        }
        if self.budget.exceeded() {
            return self.refuse(protocol, host, port, "byte cap reached".into());
        }
        let target = match Target::parse(host) {
            Ok(t) => t,
            Err(e) => return self.refuse(protocol, host, port, format!("invalid host: {e}")),
        };
        let shown = target.display();
        let decision = self.policy.decide(&target, port);
        if !decision.allowed {
            return self.refuse(protocol, &shown, port, decision.rule);
        }
        let addrs = match &target {
            Target::Ip(ip) => {
                // Named explicitly: private and CGNAT ranges are the user's
                // call; loopback, link-local, metadata, multicast, this host
                // are never reachable.
                let class = classify(*ip, &self.local);
                if !matches!(
                    class,
                    AddressClass::Public | AddressClass::Private | AddressClass::Cgnat
                ) {
                    return self.refuse(
                        protocol,
                        &shown,
                        port,
                        format!("{ip} is {}", class.as_str()),
                    );
                }
                vec![SocketAddr::new(*ip, port)]
            }
            Target::Name(name) => {
                let resolved = match self.resolver.resolve(name, port).await {
                    Ok(r) => r,
                    Err(e) => {
                        return self.refuse(
                            protocol,
                            &shown,
                            port,
                            format!("resolution failed: {e}"),
                        )
                    }
                };
                for a in &resolved.addrs {
                    let class = classify(a.ip(), &self.local);
                    if !dialable(class, a.ip(), &resolved) {
                        return self.refuse(
                            protocol,
                            &shown,
                            port,
                            format!("resolves to {} ({})", a.ip(), class.as_str()),
                        );
                    }
                }
                resolved.addrs
            }
        };
        let (id, counters) = self.log.record(ConnectionEvent {
            id: 0,
            protocol,
            host: shown,
            port,
            decision: Decision::Allowed,
            rule: decision.rule,
            addr: None,
            local: None,
            bytes_up: 0,
            bytes_down: 0,
            error: None,
        });
        Verdict::Dial {
            id,
            addrs,
            counters,
        }
    }

    /// Dial the vetted addresses in order; the first that answers wins.
    /// No name is looked up here.
    pub async fn dial(
        &self,
        id: u64,
        addrs: &[SocketAddr],
    ) -> std::io::Result<tokio::net::TcpStream> {
        let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
        for a in addrs {
            match tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(a)).await {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    self.log.set_addr(id, *a, s.local_addr().ok());
                    return Ok(s);
                }
                Ok(Err(e)) => last = e,
                Err(_) => {
                    last = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("connect to {a} timed out"),
                    )
                }
            }
        }
        self.log.set_error(id, format!("dial failed: {last}"));
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::policy::NetworkMode;
    use crate::net::resolve::FixedResolver;

    fn gate(allow: &[&str], resolver: FixedResolver, limits: Limits) -> Gate {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        Gate::new(
            NetworkPolicy::new(NetworkMode::Allowlist, &allow, &[]).unwrap(),
            Resolver::Fixed(resolver),
            LocalAddrs::from_list(["198.51.99.1".parse().unwrap()]),
            limits,
        )
    }

    fn rule(v: Verdict) -> String {
        match v {
            Verdict::Refuse { rule, .. } => rule,
            Verdict::Dial { addrs, .. } => format!("dial {addrs:?}"),
        }
    }

    #[tokio::test]
    async fn decides_by_name_then_by_every_resolved_address() {
        let mut r = FixedResolver::new();
        r.insert_loopback_ok("ok.test", vec!["127.0.0.1".parse().unwrap()]);
        r.insert("lo.test", vec!["127.0.0.1".parse().unwrap()]);
        r.insert("md.test", vec!["169.254.169.254".parse().unwrap()]);
        r.insert_loopback_ok("md-marked.test", vec!["169.254.169.254".parse().unwrap()]);
        r.insert(
            "mixed.test",
            vec!["8.8.8.8".parse().unwrap(), "10.0.0.1".parse().unwrap()],
        );
        r.insert("mapped.test", vec!["::ffff:127.0.0.1".parse().unwrap()]);
        r.insert("self.test", vec!["198.51.99.1".parse().unwrap()]);
        r.insert("pub.test", vec!["8.8.8.8".parse().unwrap()]);
        let g = gate(&["*.test", "10.0.0.9", "127.0.0.1"], r, Limits::default());
        let p = Protocol::Socks5;
        assert_eq!(rule(g.admit(p, "ok.test", 80).await), "dial [127.0.0.1:80]");
        assert_eq!(rule(g.admit(p, "pub.test", 80).await), "dial [8.8.8.8:80]");
        assert_eq!(
            rule(g.admit(p, "lo.test", 80).await),
            "resolves to 127.0.0.1 (loopback)"
        );
        assert_eq!(
            rule(g.admit(p, "md.test", 80).await),
            "resolves to 169.254.169.254 (cloud-metadata)"
        );
        assert_eq!(
            rule(g.admit(p, "md-marked.test", 80).await),
            "resolves to 169.254.169.254 (cloud-metadata)"
        );
        assert_eq!(
            rule(g.admit(p, "mixed.test", 80).await),
            "resolves to 10.0.0.1 (private)"
        );
        assert_eq!(
            rule(g.admit(p, "mapped.test", 80).await),
            "resolves to ::ffff:127.0.0.1 (loopback)"
        );
        assert_eq!(
            rule(g.admit(p, "self.test", 80).await),
            "resolves to 198.51.99.1 (this-host)"
        );
        assert_eq!(
            rule(g.admit(p, "nx.test", 80).await),
            "resolution failed: nx.test does not resolve"
        );
        assert_eq!(
            rule(g.admit(p, "evil.example", 80).await),
            "not in the allow list"
        );
        // IP literals: only when named, and never loopback even when named.
        assert_eq!(rule(g.admit(p, "10.0.0.9", 80).await), "dial [10.0.0.9:80]");
        assert_eq!(
            rule(g.admit(p, "10.0.0.8", 80).await),
            "ip literal not in the allow list"
        );
        assert_eq!(
            rule(g.admit(p, "127.0.0.1", 80).await),
            "127.0.0.1 is loopback"
        );
        assert_eq!(
            rule(g.admit(p, "localhost", 80).await),
            "built-in deny: localhost"
        );
        let events = g.log.snapshot();
        assert_eq!(events.len(), 14);
        assert_eq!(
            events
                .iter()
                .filter(|e| e.decision == Decision::Allowed)
                .count(),
            3
        );
    }

    #[tokio::test]
    async fn rate_limit_and_byte_cap_refuse_new_connections() {
        let mut r = FixedResolver::new();
        r.insert("pub.test", vec!["8.8.8.8".parse().unwrap()]);
        let g = gate(
            &["pub.test"],
            r,
            Limits {
                max_bytes: 5,
                burst: 2,
                per_second: 0,
            },
        );
        assert!(matches!(
            g.admit(Protocol::HttpConnect, "pub.test", 443).await,
            Verdict::Dial { .. }
        ));
        assert!(!g.budget.take(6));
        assert_eq!(
            rule(g.admit(Protocol::HttpConnect, "pub.test", 443).await),
            "byte cap reached"
        );
        assert_eq!(
            rule(g.admit(Protocol::HttpConnect, "pub.test", 443).await),
            "connection rate limit"
        );
    }
}
