#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Network off keeps a private loopback: a test server the command starts
//! on 127.0.0.1 (supertest's `app.listen(0)`, the pattern of express's
//! suite, which failed 1,055 of 1,256 tests in both tiers before:
//! shared/research/real-workloads.md D4) is reachable from the command,
//! while the host's loopback stays out of reach (catalogue #26/#28, with
//! the positive control of the same connection outside the sandbox).
//!
//! The bwrap tier always has a network namespace of its own; the landlock
//! tier makes one wherever user (or, as root, mount) namespaces are
//! allowed, and otherwise must say `over-restricted: loopback`.

mod common;

use common::sandbox::*;
use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

/// A node program doing what supertest does: listen on an ephemeral
/// loopback port, request it, print the answer.
const SERVER: &str = r#"
const http = require('http');
const s = http.createServer((q, r) => r.end('pong'));
s.on('error', e => { console.log('listen-error ' + e.code); process.exit(3); });
s.listen(0, '127.0.0.1', () => {
  const port = s.address().port;
  http.get('http://127.0.0.1:' + port + '/', res => {
    let d = '';
    res.on('data', c => d += c);
    res.on('end', () => { console.log('got ' + d); s.close(); });
  }).on('error', e => { console.log('request-error ' + e.code); process.exit(4); });
});
"#;

fn has_netns(r: &Run) -> bool {
    r.enforcement()["network_enforced_by"]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v == "netns"))
}

#[test]
fn a_local_test_server_works_with_the_network_off() {
    assert!(
        which::which("node").is_ok(),
        "node is needed (ci/setup installs it)"
    );
    for tier in tiers() {
        for (flags, label) in [
            (vec![], "off"),
            (
                vec!["--network=allowlist", "--allow-domain", "example.com"],
                "allowlist",
            ),
        ] {
            let case = Case {
                tier,
                mode: Mode::Ww,
            };
            let fx = Fx::new();
            std::fs::write(fx.ws.join("server.js"), SERVER).unwrap();
            let r = fx.run(&case, &flags, &["node", "server.js"]);
            let private = has_netns(&r);
            let over = reported_partial(&r, &["over-restricted", "loopback"]);
            if tier.namespaces {
                assert!(
                    private,
                    "[{case} {label}] bwrap always unshares the network: {r:?}"
                );
            }
            // Honest either way: a private loopback that works, or the
            // over-restricted item and the failure it names.
            assert!(
                private != over,
                "[{case} {label}] private={private} over={over}: {}",
                r.enforcement()
            );
            if private {
                assert_eq!(r.stdout.trim(), "got pong", "[{case} {label}] {r:?}");
                assert!(r.ok(), "[{case} {label}] {r:?}");
            } else {
                assert!(r.stdout.contains("listen-error"), "[{case} {label}] {r:?}");
            }
        }
    }
}

#[test]
fn the_hosts_loopback_stays_out_of_reach() {
    for tier in tiers() {
        let case = Case {
            tier,
            mode: Mode::Ww,
        };
        let fx = Fx::new();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED || echo REFUSED");
        let r = fx.run(&case, &[], &["bash", "-c", &script]);
        assert!(r.stdout.contains("REFUSED"), "[{case}] {r:?}");
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            l.accept().is_err(),
            "[{case}] the host's listener saw a connection"
        );
        // Positive control: the same connection outside any sandbox.
        let c = fx.unsandboxed(&format!("bash -c '{script}'"));
        assert!(c.stdout.contains("CONNECTED"), "{c:?}");
        let (mut s, _) = l.accept().unwrap();
        s.set_nonblocking(false).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
    }
}
