#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The egress proxy's cost on loopback, against a baseline measured in the
//! same run: (1) a 100 MB download over plain TCP, direct vs through the
//! proxy's SOCKS5 front end (the relay path CONNECT shares), with the
//! default `splice(2)` relay and with the buffered one; (2) the added
//! connect latency, p50/p99 over many connects; (3) the proxy's resident
//! memory growth with 64 concurrent open connections. The client is the
//! `fast-socks5` crate's; the origin is a TCP server that writes N bytes.
//! Speed is reported, never asserted (goal from issue 19: ≥ 0.8× direct).
//!
//! Run: `cargo bench --bench egress`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use codewhale::net::classify::LocalAddrs;
use codewhale::net::proxy::{EgressProxy, Listen};
use codewhale::net::{FixedResolver, Gate, Limits, NetworkMode, NetworkPolicy, Resolver};
use fast_socks5::client::{Config, Socks5Stream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MB: usize = 1 << 20;
const DOWNLOAD: usize = 100 * MB;
const RUNS: usize = 5;
const CONNECTS: usize = 400;
const CONCURRENT: usize = 64;

/// Writes `DOWNLOAD` bytes to every connection that sends `b`, keeps a
/// connection that sends `i` open and idle until the client closes.
async fn origin() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let chunk = std::sync::Arc::new(vec![b'x'; 256 * 1024]);
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let chunk = std::sync::Arc::clone(&chunk);
            tokio::spawn(async move {
                let mut cmd = [0u8; 1];
                if s.read_exact(&mut cmd).await.is_err() {
                    return;
                }
                if cmd[0] == b'b' {
                    let mut left = DOWNLOAD;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        if s.write_all(&chunk[..n]).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                } else {
                    let mut sink = [0u8; 64];
                    let _ = s.read(&mut sink).await;
                }
            });
        }
    });
    addr
}

async fn proxy(origin: SocketAddr, copy_relay: bool) -> EgressProxy {
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("origin.test", vec![origin.ip()]);
    let gate = Gate::new(
        NetworkPolicy::new(NetworkMode::Allowlist, &["origin.test".into()], &[]).unwrap(),
        Resolver::Fixed(r),
        LocalAddrs::default(),
        Limits {
            max_bytes: u64::MAX,
            burst: 1_000_000,
            per_second: 1_000_000,
        },
    );
    let gate = if copy_relay {
        gate.with_copy_relay()
    } else {
        gate
    };
    EgressProxy::start(
        gate,
        Listen {
            tcp: Some("127.0.0.1:0".parse().unwrap()),
            unix: None,
        },
    )
    .await
    .unwrap()
}

async fn via(proxy: SocketAddr, port: u16) -> Socks5Stream<tokio::net::TcpStream> {
    Socks5Stream::connect(proxy, "origin.test".into(), port, Config::default())
        .await
        .unwrap()
}

async fn drain<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S) -> usize {
    s.write_all(b"b").await.unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return total;
        }
        total += n;
    }
}

fn stats(mut v: Vec<Duration>) -> (Duration, Duration, Duration, Duration) {
    v.sort();
    let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.99), v[0], v[v.len() - 1])
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let origin = origin().await;
        let p = proxy(origin, false).await;
        let paddr = p.tcp_addr().unwrap();
        let copy = proxy(origin, true).await;
        let caddr = copy.tcp_addr().unwrap();
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("egress bench: load average {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));

        // (1) throughput, interleaved so load drifts hit both alike.
        let (mut direct, mut proxied, mut copied) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let t = Instant::now();
            let n = drain(via(caddr, origin.port()).await).await;
            assert_eq!(n, DOWNLOAD);
            copied.push(t.elapsed());
            let t = Instant::now();
            let n = drain(tokio::net::TcpStream::connect(origin).await.unwrap()).await;
            assert_eq!(n, DOWNLOAD);
            direct.push(t.elapsed());
            let t = Instant::now();
            let n = drain(via(paddr, origin.port()).await).await;
            assert_eq!(n, DOWNLOAD);
            proxied.push(t.elapsed());
        }
        let mbps = |d: Duration| DOWNLOAD as f64 / MB as f64 / d.as_secs_f64();
        let (dm, _, dmin, dmax) = stats(direct);
        let (pm, _, pmin, pmax) = stats(proxied);
        let (cm, _, cmin, cmax) = stats(copied);
        println!(
            "download 100 MB: direct median {:.0} MB/s (range {:.0}-{:.0}); via proxy (splice, the default) median {:.0} MB/s (range {:.0}-{:.0}); ratio {:.2}x",
            mbps(dm), mbps(dmax), mbps(dmin), mbps(pm), mbps(pmax), mbps(pmin), dm.as_secs_f64() / pm.as_secs_f64()
        );
        println!(
            "download 100 MB: via proxy (64 KiB copy relay, the previous default) median {:.0} MB/s (range {:.0}-{:.0}); ratio {:.2}x",
            mbps(cm), mbps(cmax), mbps(cmin), dm.as_secs_f64() / cm.as_secs_f64()
        );

        // (2) connect latency: TCP connect vs SOCKS5 handshake + gate + dial.
        let (mut dl, mut pl) = (Vec::new(), Vec::new());
        for _ in 0..CONNECTS {
            let t = Instant::now();
            let s = tokio::net::TcpStream::connect(origin).await.unwrap();
            dl.push(t.elapsed());
            drop(s);
            let t = Instant::now();
            let s = via(paddr, origin.port()).await;
            pl.push(t.elapsed());
            drop(s);
        }
        let (d50, d99, _, _) = stats(dl);
        let (p50, p99, _, _) = stats(pl);
        println!(
            "connect latency over {CONNECTS}: direct p50 {d50:?} p99 {d99:?}; via proxy p50 {p50:?} p99 {p99:?}; added p50 {:?} p99 {:?}",
            p50.saturating_sub(d50),
            p99.saturating_sub(d99)
        );

        // (3) memory: 64 idle proxied connections held open.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = rss_kib();
        let mut held = Vec::new();
        for _ in 0..CONCURRENT {
            let mut s = via(paddr, origin.port()).await;
            s.write_all(b"i").await.unwrap();
            held.push(s);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = rss_kib();
        println!(
            "memory: {CONCURRENT} concurrent connections: RSS {before} KiB -> {after} KiB (+{} KiB, {:.1} KiB per connection; client, origin and proxy share this process)",
            after.saturating_sub(before),
            after.saturating_sub(before) as f64 / CONCURRENT as f64
        );
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("egress bench: load average at the end {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
        drop(held);
        drop(p);
        drop(copy);
    });
}
