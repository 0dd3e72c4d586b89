#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The egress proxy over real loopback sockets, driven by `curl` (a client
//! nobody here wrote): HTTPS through CONNECT (`HTTPS_PROXY`), plain HTTP
//! forwarding, CONNECT tunnels for plain TCP, SOCKS5 with remote
//! resolution. Names point at loopback through the fixed test resolver
//! (never `/etc/hosts`). Every refusal has its positive control and a
//! check on the origin's side that nothing arrived.

use crate::common;

use codewhale::net::classify::LocalAddrs;
use codewhale::net::proxy::{EgressProxy, Listen};
use codewhale::net::{
    Decision, FixedResolver, Gate, Limits, NetworkMode, NetworkPolicy, Protocol, Resolver,
};
use common::egress::{curl, run, Origin, TlsOrigin};

const LO: &str = "127.0.0.1";

fn lo() -> std::net::IpAddr {
    LO.parse().unwrap()
}

async fn proxy(
    allow: &[&str],
    deny: &[&str],
    resolver: FixedResolver,
    limits: Limits,
    unix: Option<std::path::PathBuf>,
) -> EgressProxy {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    let deny: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
    let gate = Gate::new(
        NetworkPolicy::new(NetworkMode::Allowlist, &allow, &deny).unwrap(),
        Resolver::Fixed(resolver),
        LocalAddrs::of_this_host().unwrap(),
        limits,
    );
    EgressProxy::start(
        gate,
        Listen {
            tcp: Some("127.0.0.1:0".parse().unwrap()),
            unix,
        },
    )
    .await
    .unwrap()
}

fn proxy_url(p: &EgressProxy) -> String {
    format!("http://{}", p.tcp_addr().unwrap())
}

#[tokio::test]
async fn https_through_connect_via_https_proxy_env() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsOrigin::start(dir.path(), "allowed.test");
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("allowed.test", vec![lo()]);
    r.insert_loopback_ok("other.test", vec![lo()]);
    let p = proxy(&["allowed.test"], &[], r, Limits::default(), None).await;

    let mut ok = curl();
    ok.env("HTTPS_PROXY", proxy_url(&p))
        .arg("--cacert")
        .arg(&tls.cert)
        .arg(format!("https://allowed.test:{}/", tls.port));
    let out = run(ok).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "hello over tls\n");
    assert_eq!(tls.requests(), 1);

    // Same server, same address, a name not on the list: refused at
    // CONNECT (curl 56 "CONNECT tunnel failed, response 403").
    let mut no = curl();
    no.env("HTTPS_PROXY", proxy_url(&p))
        .arg("--cacert")
        .arg(&tls.cert)
        .arg(format!("https://other.test:{}/", tls.port));
    let out = run(no).await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("403"), "{}", out.stderr);
    assert_eq!(tls.requests(), 1, "nothing more arrived at the server");

    let ev = p.shutdown().await;
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].decision, Decision::Allowed);
    assert_eq!(ev[0].protocol, Protocol::HttpConnect);
    assert_eq!(ev[0].rule, "allow: allowed.test");
    assert!(
        ev[0].bytes_up > 100 && ev[0].bytes_down > 100,
        "{:?}",
        ev[0]
    );
    assert_eq!(ev[1].decision, Decision::Refused);
    assert_eq!(ev[1].rule, "not in the allow list");
    assert_eq!(ev[1].addr, None);
}

#[tokio::test]
async fn plain_http_forward_tunnel_and_socks5_reach_an_allowed_name() {
    let origin = Origin::start("origin").await;
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("pkg.test", vec![lo()]);
    let p = proxy(&["pkg.test"], &[], r, Limits::default(), None).await;
    let url = format!("http://pkg.test:{}/", origin.port());

    let mut fwd = curl();
    fwd.env("http_proxy", proxy_url(&p)).arg(&url);
    let out = run(fwd).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "hello from origin\n"),
        "{}",
        out.stderr
    );

    let mut tunnel = curl();
    tunnel
        .args(["--proxytunnel", "-x", &proxy_url(&p)])
        .arg(&url);
    let out = run(tunnel).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "hello from origin\n"),
        "{}",
        out.stderr
    );

    let mut socks = curl();
    socks
        .env("ALL_PROXY", format!("socks5h://{}", p.tcp_addr().unwrap()))
        .arg(&url);
    let out = run(socks).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "hello from origin\n"),
        "{}",
        out.stderr
    );

    assert_eq!(origin.accepted(), 3);
    let ev = p.shutdown().await;
    let protos: Vec<Protocol> = ev.iter().map(|e| e.protocol).collect();
    assert_eq!(
        protos,
        [
            Protocol::HttpForward,
            Protocol::HttpConnect,
            Protocol::Socks5
        ]
    );
    assert!(ev
        .iter()
        .all(|e| e.decision == Decision::Allowed && e.bytes_down > 0));
    assert!(ev.iter().all(|e| e.addr == Some(origin.addr)));
}

#[tokio::test]
async fn refusals_reach_nothing_and_name_their_rule() {
    let origin = Origin::start("origin").await;
    let port = origin.port();
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("good.test", vec![lo()]);
    // The same loopback address without the test seam's mark: what any
    // real name resolving to 127.0.0.1 looks like.
    r.insert("rebind.test", vec![lo()]);
    r.insert("mapped.test", vec!["::ffff:127.0.0.1".parse().unwrap()]);
    r.insert("meta.test", vec!["169.254.169.254".parse().unwrap()]);
    r.insert_loopback_ok("evil.example", vec![lo()]);
    let p = proxy(&["*.test"], &["blocked.test"], r, Limits::default(), None).await;
    let proxy = proxy_url(&p);
    let socks = format!("socks5h://{}", p.tcp_addr().unwrap());

    // Positive control first: the allowed name reaches the origin.
    let mut c = curl();
    c.args(["-x", &proxy])
        .arg(format!("http://good.test:{port}/"));
    assert_eq!(run(c).await.code, 0);
    assert_eq!(origin.accepted(), 1);

    for (host, want_rule) in [
        ("evil.example", "not in the allow list"),
        ("blocked.test", "deny: blocked.test"),
        ("127.0.0.1", "ip literal not in the allow list"),
        ("rebind.test", "resolves to 127.0.0.1 (loopback)"),
        ("mapped.test", "resolves to ::ffff:127.0.0.1 (loopback)"),
        ("meta.test", "resolves to 169.254.169.254 (cloud-metadata)"),
        ("localhost", "built-in deny: localhost"),
    ] {
        for via in ["forward", "connect", "socks"] {
            let mut c = curl();
            let url = format!("http://{host}:{port}/");
            match via {
                "forward" => c.args(["-x", &proxy]),
                "connect" => c.args(["--proxytunnel", "-x", &proxy]),
                _ => c.args(["-x", &socks]),
            };
            c.arg(&url);
            let out = run(c).await;
            if via == "forward" {
                // The proxy answers 403 itself, with the rule.
                assert!(
                    out.stdout.contains(want_rule),
                    "{host} {via}: {}",
                    out.stdout
                );
            } else {
                assert_ne!(out.code, 0, "{host} {via} must fail");
            }
        }
    }
    assert_eq!(
        origin.accepted(),
        1,
        "no refused request reached the origin"
    );
    let ev = p.shutdown().await;
    assert_eq!(
        ev.iter()
            .filter(|e| e.decision == Decision::Refused)
            .count(),
        21
    );
    for e in ev.iter().filter(|e| e.decision == Decision::Refused) {
        assert_eq!(e.addr, None, "{e:?}");
        assert_eq!((e.bytes_up, e.bytes_down), (0, 0));
    }
}

#[tokio::test]
async fn byte_cap_cuts_the_relay_and_refuses_new_connections() {
    let origin = Origin::start("origin").await;
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("big.test", vec![lo()]);
    let limits = Limits {
        max_bytes: 1 << 20,
        ..Limits::default()
    };
    let p = proxy(&["big.test"], &[], r, limits, None).await;
    let mut small = curl();
    small
        .args([
            "--proxytunnel",
            "-x",
            &proxy_url(&p),
            "-o",
            "/dev/null",
            "-w",
            "%{size_download}",
        ])
        .arg(format!("http://big.test:{}/bytes/1000", origin.port()));
    let out = run(small).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "1000"),
        "{}",
        out.stderr
    );

    let mut big = curl();
    big.args(["--proxytunnel", "-x", &proxy_url(&p), "-o", "/dev/null"])
        .arg(format!(
            "http://big.test:{}/bytes/{}",
            origin.port(),
            4 << 20
        ));
    let out = run(big).await;
    assert_ne!(out.code, 0, "a 4 MiB download under a 1 MiB cap must fail");

    let mut after = curl();
    after
        .args(["--proxytunnel", "-x", &proxy_url(&p)])
        .arg(format!("http://big.test:{}/", origin.port()));
    let out = run(after).await;
    assert_ne!(out.code, 0);
    let summary = p.summary();
    assert!(summary.byte_cap_hit);
    assert!(summary.bytes_down <= (1 << 20) + 64 * 1024, "{summary:?}");
    let ev = p.shutdown().await;
    assert_eq!(ev[1].error.as_deref(), Some("byte cap reached"));
    assert_eq!(ev[2].rule, "byte cap reached");
    assert_eq!(
        origin.accepted(),
        2,
        "the refused third request never reached the origin"
    );
}

#[tokio::test]
async fn connection_rate_limit() {
    let origin = Origin::start("origin").await;
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("r.test", vec![lo()]);
    let limits = Limits {
        burst: 2,
        per_second: 0,
        ..Limits::default()
    };
    let p = proxy(&["r.test"], &[], r, limits, None).await;
    let mut codes = Vec::new();
    for _ in 0..3 {
        let mut c = curl();
        c.args(["-x", &proxy_url(&p)])
            .arg(format!("http://r.test:{}/", origin.port()));
        codes.push(run(c).await.stdout);
    }
    assert_eq!(codes[0], "hello from origin\n");
    assert_eq!(codes[1], "hello from origin\n");
    assert!(codes[2].contains("connection rate limit"), "{}", codes[2]);
    assert_eq!(origin.accepted(), 2);
}

#[tokio::test]
async fn unix_socket_listener_speaks_both_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("egress.sock");
    let origin = Origin::start("origin").await;
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("u.test", vec![lo()]);
    let p = proxy(&["u.test"], &[], r, Limits::default(), Some(sock.clone())).await;
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // curl's --unix-socket talks to the proxy as if it were the origin, so
    // send an absolute-form request line (`--request-target`).
    let mut c = curl();
    c.arg("--unix-socket")
        .arg(&sock)
        .args([
            "--request-target",
            &format!("http://u.test:{}/", origin.port()),
        ])
        .arg("http://u.test/");
    let out = run(c).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "hello from origin\n"),
        "{}",
        out.stderr
    );
    drop(p);
    assert!(!sock.exists(), "the socket is removed with the proxy");
}

/// `curl ARGS` downloads `down` bytes from the origin and uploads the file
/// `upload` (`up` bytes) to its `/count`: both must arrive whole.
async fn bulk_both_ways(
    args: &[String],
    host: &str,
    port: u16,
    upload: &std::path::Path,
    down: usize,
    up: usize,
) {
    let mut d = curl();
    d.args(args)
        .args(["-o", "/dev/null", "-w", "%{size_download}"])
        .arg(format!("http://{host}:{port}/bytes/{down}"));
    let mut u = curl();
    u.args(args)
        .arg("--data-binary")
        .arg(format!("@{}", upload.display()))
        .arg(format!("http://{host}:{port}/count"));
    for (cmd, want) in [(d, down), (u, up)] {
        let out = run(cmd).await;
        assert_eq!(
            (out.code, out.stdout.clone()),
            (0, want.to_string()),
            "{args:?}: {}",
            out.stderr
        );
    }
}

/// Bulk bytes both ways through each tunnel front end (on Linux the relay
/// splices them): every byte arrives, and the connection's counters say
/// at least as much as the body.
#[tokio::test]
async fn tunnels_carry_bulk_bytes_both_ways_and_count_them() {
    const DOWN: usize = 8 << 20;
    const UP: usize = 3 << 20;
    let dir = tempfile::tempdir().unwrap();
    let upload = dir.path().join("up.bin");
    std::fs::write(&upload, vec![b'u'; UP]).unwrap();
    let origin = Origin::start("origin").await;
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("bulk.test", vec![lo()]);
    let p = proxy(&["bulk.test"], &[], r, Limits::default(), None).await;
    let tunnel_args: [Vec<String>; 2] = [
        vec!["--proxytunnel".into(), "-x".into(), proxy_url(&p)],
        vec!["-x".into(), format!("socks5h://{}", p.tcp_addr().unwrap())],
    ];
    for args in &tunnel_args {
        bulk_both_ways(args, "bulk.test", origin.port(), &upload, DOWN, UP).await;
    }
    let ev = p.shutdown().await;
    assert_eq!(ev.len(), 4, "{ev:?}");
    for (i, e) in ev.iter().enumerate() {
        // The last relay may still be winding down when shutdown cuts it.
        assert!(
            matches!(e.error.as_deref(), None | Some("cut: the proxy shut down")),
            "{e:?}"
        );
        if i % 2 == 0 {
            assert!(e.bytes_down >= DOWN as u64, "{e:?}");
        } else {
            assert!(e.bytes_up >= UP as u64, "{e:?}");
        }
    }
}

/// The bwrap tier's path without the sandbox: the bridge (the same code the
/// helper stage forks) accepts on a loopback port and hands each socket to
/// the proxy's Unix listener. Plain forwarding, a SOCKS5 bulk download and
/// a CONNECT upload all work through it and are counted per connection;
/// the bridge itself carries no bytes.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_bridge_hands_connections_to_the_unix_listener() {
    const DOWN: usize = 8 << 20;
    const UP: usize = 3 << 20;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("egress.sock");
    let upload = dir.path().join("up.bin");
    std::fs::write(&upload, vec![b'u'; UP]).unwrap();
    let origin = Origin::start("origin").await;
    let mut r = FixedResolver::new();
    r.insert_loopback_ok("b.test", vec![lo()]);
    let p = proxy(&["b.test"], &[], r, Limits::default(), Some(sock.clone())).await;
    let l = codewhale::net::bridge::bind(0).unwrap();
    let bridge = l.local_addr().unwrap();
    std::thread::spawn(move || codewhale::net::bridge::serve(l, sock));
    let mut c = curl();
    c.args(["-x", &format!("http://{bridge}")])
        .arg(format!("http://b.test:{}/", origin.port()));
    let out = run(c).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "hello from origin\n"),
        "{}",
        out.stderr
    );
    let tunnel_args: [Vec<String>; 2] = [
        vec![
            "--proxytunnel".into(),
            "-x".into(),
            format!("http://{bridge}"),
        ],
        vec!["-x".into(), format!("socks5h://{bridge}")],
    ];
    for args in &tunnel_args {
        bulk_both_ways(args, "b.test", origin.port(), &upload, DOWN, UP).await;
    }
    // A refused name through the bridge: refused by the proxy, as ever.
    let mut bad = curl();
    bad.args(["-x", &format!("http://{bridge}")])
        .arg(format!("http://evil.test:{}/", origin.port()));
    let out = run(bad).await;
    assert!(
        out.stdout.contains("not in the allow list"),
        "{}",
        out.stdout
    );
    assert_eq!(origin.accepted(), 5);
    let ev = p.shutdown().await;
    let protocols: Vec<(Protocol, Decision)> =
        ev.iter().map(|e| (e.protocol, e.decision)).collect();
    use Decision::{Allowed, Refused};
    assert_eq!(
        protocols,
        [
            (Protocol::HttpForward, Allowed),
            (Protocol::HttpConnect, Allowed),
            (Protocol::HttpConnect, Allowed),
            (Protocol::Socks5, Allowed),
            (Protocol::Socks5, Allowed),
            (Protocol::HttpForward, Refused),
        ],
        "{ev:?}"
    );
    for i in [1, 3] {
        assert!(ev[i].bytes_down >= DOWN as u64, "{:?}", ev[i]);
        assert!(ev[i + 1].bytes_up >= UP as u64, "{:?}", ev[i + 1]);
    }
}

/// A descriptor that is not a connected TCP socket, sent to the proxy's
/// Unix socket as a handoff, is closed unserved: no answer, no event.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_bogus_handoff_is_closed_unserved() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("egress.sock");
    let p = proxy(
        &["b.test"],
        &[],
        FixedResolver::new(),
        Limits::default(),
        Some(sock.clone()),
    )
    .await;
    let (pr, pw) = nix::unistd::pipe().unwrap();
    let s2 = sock.clone();
    let got = tokio::task::spawn_blocking(move || {
        let mut u = std::os::unix::net::UnixStream::connect(&s2).unwrap();
        let fds = [pw.as_raw_fd()];
        let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&fds)];
        let iov = [std::io::IoSlice::new(&[
            codewhale::net::proxy::handoff::HANDOFF,
        ])];
        nix::sys::socket::sendmsg::<()>(
            u.as_raw_fd(),
            &iov,
            &cmsg,
            nix::sys::socket::MsgFlags::empty(),
            None,
        )
        .unwrap();
        drop(pw);
        u.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut back = Vec::new();
        let r = u.read_to_end(&mut back).map(|_| back);
        // The proxy closed its copy of the pipe's write end too.
        let mut pr = std::fs::File::from(pr);
        let mut rest = Vec::new();
        pr.read_to_end(&mut rest).unwrap();
        (r.unwrap(), rest)
    })
    .await
    .unwrap();
    assert_eq!(got, (Vec::new(), Vec::new()));
    assert!(p.shutdown().await.is_empty());
}
