#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The egress proxy's cost on loopback, against a baseline measured in the
//! same run: (1) a 100 MB download over plain TCP, direct vs through the
//! proxy's SOCKS5 front end (the relay path CONNECT shares), with the
//! default `splice(2)` relay (256 KiB steps), in 1 MiB steps, and with the
//! buffered one, and through the
//! bwrap tier's path (the in-sandbox bridge's loopback port, handed on to
//! the proxy's Unix socket); wall time and the CPU time the whole process
//! spent (client, origin and proxy share it), which a busy machine
//! disturbs far less than wall time; (2) the added
//! connect latency, p50/p99 over many connects; (3) the proxy's resident
//! memory growth with 64 concurrent open connections. The client is the
//! `fast-socks5` crate's; the origin is a TCP server that writes N bytes.
//! Speed is reported, never asserted. The goals (issue 34), printed as met
//! or not per proxied path: CPU per proxied byte ≤ 2.2× direct's, and a
//! proxied throughput (wall median) ≥ 1.2 GB/s (10^9 bytes; a 10 Gb/s
//! link's payload rate).
//!
//! Run: `cargo bench --bench egress`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use codewhale::net::classify::LocalAddrs;
use codewhale::net::proxy::thread::ProxyThread;
use codewhale::net::proxy::Listen;
use codewhale::net::{FixedResolver, Gate, Limits, NetworkMode, NetworkPolicy, Resolver};
use fast_socks5::client::{Config, Socks5Stream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MB: usize = 1 << 20;
const DOWNLOAD: usize = 100 * MB;
const RUNS: usize = 5;
const CONNECTS: usize = 400;
const CONCURRENT: usize = 64;
/// Issue 34's goals for a proxied download.
const GOAL_CPU_RATIO: f64 = 2.2;
const GOAL_BYTES_PER_S: f64 = 1.2e9;

/// Writes `DOWNLOAD` bytes to every connection that sends `b`, keeps a
/// connection that sends `i` open and idle until the client closes. Runs
/// on its own thread and single-threaded runtime, as a server elsewhere
/// would: the client, the origin and the proxy each get their own thread
/// (in production they are three processes: the command, the server, and
/// codewhale's proxy thread), so no side waits for another's task on a
/// shared worker.
fn origin() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
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
    });
    rx.recv().unwrap()
}

/// The proxy as the host runs it: [`ProxyThread`], its own thread with a
/// single-threaded runtime.
fn proxy(origin: SocketAddr, copy_relay: bool, unix: Option<std::path::PathBuf>) -> ProxyThread {
    proxy_with(origin, copy_relay, unix, codewhale::net::gate::SPLICE_CHUNK)
}

fn proxy_with(
    origin: SocketAddr,
    copy_relay: bool,
    unix: Option<std::path::PathBuf>,
    splice_chunk: usize,
) -> ProxyThread {
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
        gate.with_splice_chunk(splice_chunk)
    };
    ProxyThread::start(
        gate,
        Listen {
            tcp: Some("127.0.0.1:0".parse().unwrap()),
            unix,
        },
    )
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

/// CPU time (user + system) of this process so far.
fn cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One timed download: (wall, CPU of the whole process).
async fn timed<F, Fut>(f: F) -> (Duration, Duration)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let (t, c) = (Instant::now(), cpu());
    let n = f().await;
    assert_eq!(n, DOWNLOAD);
    (t.elapsed(), cpu() - c)
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
    // The client's own thread and runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let origin = origin();
        let p = proxy(origin, false, None);
        let paddr = p.tcp_addr.unwrap();
        let copy = proxy(origin, true, None);
        let caddr = copy.tcp_addr.unwrap();
        // The same splice relay in 1 MiB steps (the unprivileged pipe
        // maximum) instead of the default, compared in the same run.
        let big = proxy_with(origin, false, None, 1 << 20);
        let gaddr = big.tcp_addr.unwrap();
        // The bwrap tier: the command reaches a bridge on a loopback port,
        // which hands on to the proxy's Unix socket (src/net/bridge.rs).
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("proxy.sock");
        let up = proxy(origin, false, Some(sock.clone()));
        let bl = codewhale::net::bridge::bind(0).unwrap();
        let baddr = bl.local_addr().unwrap();
        std::thread::spawn(move || codewhale::net::bridge::serve(bl, sock));
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("egress bench: load average {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));

        // (1) throughput, interleaved so load drifts hit every side alike.
        let mut sides: [(&str, Vec<Duration>, Vec<Duration>); 5] = [
            ("direct", Vec::new(), Vec::new()),
            ("via proxy, TCP port (landlock tier path; splice relay)", Vec::new(), Vec::new()),
            ("via proxy, 64 KiB copy relay", Vec::new(), Vec::new()),
            ("via bridge + proxy Unix socket (bwrap tier path)", Vec::new(), Vec::new()),
            ("via proxy, TCP port, splice relay in 1 MiB steps", Vec::new(), Vec::new()),
        ];
        for _ in 0..RUNS {
            for (i, side) in sides.iter_mut().enumerate() {
                let (wall, cpu) = match i {
                    0 => timed(|| async { drain(tokio::net::TcpStream::connect(origin).await.unwrap()).await }).await,
                    1 => timed(|| async { drain(via(paddr, origin.port()).await).await }).await,
                    2 => timed(|| async { drain(via(caddr, origin.port()).await).await }).await,
                    3 => timed(|| async { drain(via(baddr, origin.port()).await).await }).await,
                    _ => timed(|| async { drain(via(gaddr, origin.port()).await).await }).await,
                };
                side.1.push(wall);
                side.2.push(cpu);
            }
        }
        let mbps = |d: Duration| DOWNLOAD as f64 / MB as f64 / d.as_secs_f64();
        let (dm, _, _, _) = stats(sides[0].1.clone());
        let (dc, _, _, _) = stats(sides[0].2.clone());
        for (name, wall, cpu) in &sides {
            let (m, _, min, max) = stats(wall.clone());
            let (cm, _, cmin, cmax) = stats(cpu.clone());
            println!(
                "download 100 MB {name}: median {:.0} MB/s (range {:.0}-{:.0}), ratio {:.2}x direct; CPU median {:.0} ms (range {:.0}-{:.0}), {:.2}x direct's",
                mbps(m), mbps(max), mbps(min), dm.as_secs_f64() / m.as_secs_f64(),
                cm.as_secs_f64() * 1e3, cmin.as_secs_f64() * 1e3, cmax.as_secs_f64() * 1e3,
                cm.as_secs_f64() / dc.as_secs_f64()
            );
        }
        for (name, wall, cpu) in sides.iter().skip(1) {
            let (m, _, _, _) = stats(wall.clone());
            let (cm, _, _, _) = stats(cpu.clone());
            let ratio = cm.as_secs_f64() / dc.as_secs_f64();
            let rate = DOWNLOAD as f64 / m.as_secs_f64();
            let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
            println!(
                "goal {name}: CPU per byte {ratio:.2}x direct (<= {GOAL_CPU_RATIO}x: {}); throughput {:.2} GB/s (>= {:.1} GB/s: {})",
                verdict(ratio <= GOAL_CPU_RATIO),
                rate / 1e9,
                GOAL_BYTES_PER_S / 1e9,
                verdict(rate >= GOAL_BYTES_PER_S)
            );
        }

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
        drop(big);
        drop(up);
    });
}
