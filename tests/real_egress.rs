#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `network = "allowlist"` in the real sandbox, in every Linux tier
//! (bwrap: empty netns + bridge; landlock: Landlock TCP port rule +
//! seccomp), root and unprivileged. The world is built on loopback: an
//! HTTP origin that counts every TCP connection it accepts, a Python HTTPS
//! origin, a UDP and a unix-socket listener; test names point at them
//! through `CODEWHALE_TEST_RESOLVE` (never `/etc/hosts`). Each denial has
//! its positive control and a check on the listener's side.

mod common;

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::process::Command;
use std::time::Duration;

use common::egress::{EgressWorld as World, Origin, TlsOrigin};
use common::sandbox::{tiers, Case, Mode, Run};
use serde_json::Value;

fn events(r: &Run) -> Vec<Value> {
    r.enforcement()["egress"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn cases() -> Vec<Case> {
    tiers()
        .iter()
        .map(|t| Case {
            tier: t,
            mode: Mode::Ww,
        })
        .collect()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn allowed_name_works_and_every_other_way_out_fails() {
    let rt = rt();
    let origin = rt.block_on(Origin::start("origin"));
    let port = origin.port();
    for case in cases() {
        let w = World::new();
        let before = origin.accepted();
        let resolve = "ok.test=127.0.0.1!loopback;lo.test=127.0.0.1;meta.test=169.254.169.254";
        // Positive control and every refusal in one sandboxed script:
        // each line prints its own verdict.
        let script = format!(
            "curl -sS --max-time 10 http://ok.test:{port}/ ; \
             echo \"direct:$(env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy curl -sS -o /dev/null --max-time 5 http://127.0.0.1:{port}/ 2>&1; echo rc=$?)\"; \
             echo \"denied:$(curl -sS --max-time 5 http://evil.example:{port}/)\"; \
             echo \"literal:$(curl -sS --max-time 5 http://127.0.0.1:{port}/ --noproxy '' -x $HTTP_PROXY)\"; \
             echo \"rebind:$(curl -sS --max-time 5 http://lo.test:{port}/)\"; \
             echo \"meta:$(curl -sS --max-time 5 http://meta.test/latest/meta-data/)\"; \
             echo \"socks-denied:$(curl -sS --max-time 5 -x $ALL_PROXY http://evil.example:{port}/ 2>&1; echo rc=$?)\""
        );
        let r = w.run(&case, resolve, &["--allow-domain", "*.test"], &script);
        let out = &r.stdout;
        assert!(
            out.starts_with("hello from origin\n"),
            "[{case}] {out}\n{}",
            r.stderr
        );
        assert!(
            out.contains("direct:curl: (7)"),
            "[{case}] direct connect must fail: {out}"
        );
        assert!(
            out.contains("denied:codewhale egress proxy: evil.example:"),
            "[{case}] {out}"
        );
        assert!(
            out.contains("literal:codewhale egress proxy: 127.0.0.1:")
                && out.contains("ip literal not in the allow list"),
            "[{case}] {out}"
        );
        assert!(
            out.contains("rebind:") && out.contains("resolves to 127.0.0.1 (loopback)"),
            "[{case}] {out}"
        );
        assert!(
            out.contains("resolves to 169.254.169.254 (cloud-metadata)"),
            "[{case}] {out}"
        );
        assert!(out.contains("socks-denied:curl: (97)"), "[{case}] {out}");
        assert_eq!(
            origin.accepted(),
            before + 1,
            "[{case}] only the allowed request reached the origin"
        );
        let ev = events(&r);
        assert_eq!(ev.len(), 6, "[{case}] {ev:?}");
        assert_eq!(ev[0]["decision"], "allowed");
        assert_eq!(ev[0]["host"], "ok.test");
        assert!(ev[0]["bytes_down"].as_u64().unwrap() > 0);
        assert!(
            ev[1..].iter().all(|e| e["decision"] == "refused"),
            "[{case}] {ev:?}"
        );
        let line = r.enforcement()["egress"]["line"].as_str().unwrap();
        assert!(
            line.starts_with("network: 1 connection to ok.test; 5 refused: "),
            "[{case}] {line}"
        );
        let by = r.enforcement()["network_enforced_by"].as_array().unwrap();
        assert!(by.iter().any(|v| v == "egress-proxy"), "[{case}] {by:?}");
        assert!(
            common::sandbox::reported_partial(&r, &["test resolver", "ok.test"]),
            "[{case}]"
        );
        assert!(
            r.stderr
                .contains("codewhale: network: 1 connection to ok.test; 5 refused: "),
            "[{case}] the summary line on stderr: {}",
            r.stderr
        );
    }
}

#[test]
fn https_through_the_proxy_variables_codewhale_sets() {
    for case in cases() {
        let w = World::new();
        let tls = TlsOrigin::start(&w.fx.ws, "pkg.test");
        let script = format!(
            "curl -sS --max-time 10 --cacert {} https://pkg.test:{}/; \
             echo \"other:$(curl -sS --max-time 5 --cacert {} https://other.test:{}/ 2>&1)\"",
            tls.cert.display(),
            tls.port,
            tls.cert.display(),
            tls.port
        );
        let r = w.run(
            &case,
            "pkg.test=127.0.0.1!loopback;other.test=127.0.0.1!loopback",
            &["--allow-domain", "pkg.test"],
            &script,
        );
        assert!(
            r.stdout.starts_with("hello over tls\n"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(
            r.stdout.contains("other:curl: (56)") && r.stdout.contains("403"),
            "[{case}] {}",
            r.stdout
        );
        assert_eq!(
            tls.requests(),
            1,
            "[{case}] the refused name never reached the server"
        );
        let ev = events(&r);
        assert_eq!(ev[0]["protocol"], "http-connect");
        assert_eq!(ev[0]["rule"], "allow: pkg.test");
        assert_eq!(ev[1]["rule"], "not in the allow list");
    }
}

#[test]
fn no_udp_no_dns_and_no_host_unix_sockets() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let uport = udp.local_addr().unwrap().port();
    for case in cases() {
        let w = World::new();
        let sock = w.fx.ws.join("host.sock");
        let ul = UnixListener::bind(&sock).unwrap();
        ul.set_nonblocking(true).unwrap();
        let probe = format!(
            "import socket, sys\n\
             for what, f in [('udp53', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'q', ('127.0.0.1', 53))),\n\
                             ('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'exfil', ('127.0.0.1', {uport}))),\n\
                             ('unix', lambda: socket.socket(socket.AF_UNIX).connect('{}'))]:\n\
             \x20   try:\n\
             \x20       f(); print(what, 'ok')\n\
             \x20   except OSError as e:\n\
             \x20       print(what, 'errno', e.errno)\n",
            sock.display()
        );
        std::fs::write(w.fx.ws.join("probe.py"), &probe).unwrap();
        // Positive control: unsandboxed, the UDP datagram and the unix
        // connection arrive.
        let c = w.fx.unsandboxed("python3 probe.py");
        assert!(
            c.stdout.contains("udp ok") && c.stdout.contains("unix ok"),
            "{}{}",
            c.stdout,
            c.stderr
        );
        let mut buf = [0u8; 16];
        assert_eq!(
            udp.recv(&mut buf).unwrap(),
            5,
            "the control's datagram arrived"
        );
        assert!(ul.accept().is_ok(), "the control's unix connection arrived");

        let r = w.run(&case, "", &[], "python3 probe.py");
        for what in ["udp53", "udp", "unix"] {
            assert!(
                r.stdout.contains(&format!("{what} errno 1")),
                "[{case}] {what}: {}{}",
                r.stdout,
                r.stderr
            );
        }
        assert!(udp.recv(&mut buf).is_err(), "[{case}] no datagram arrived");
        assert!(ul.accept().is_err(), "[{case}] no unix connection arrived");
        drop(ul);
    }
}

#[test]
fn landlock_tier_reports_the_per_port_gap_and_fails_closed_without_abi_4() {
    let case = Case {
        tier: &common::sandbox::LANDLOCK,
        mode: Mode::Ww,
    };
    let w = World::new();
    let r = w.run(&case, "", &["--allow-domain", "crates.io"], "true");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        common::sandbox::reported_partial(&r, &["per port, not per address"]),
        "{}",
        r.enforcement()["partial"]
    );
    assert_eq!(r.enforcement()["level"], "partial");
    // The seam lowers the ABI below TCP rules: the tier refuses to run.
    let report = w.fx.root.join("r.json");
    let mut c = w.fx.command(
        &case,
        &["--network=allowlist", "--allow-domain", "crates.io"],
        &["sh", "-c", "echo RAN"],
    );
    c.env("CODEWHALE_LANDLOCK_MAX_ABI", "3")
        .env("XDG_RUNTIME_DIR", &w.runtime);
    let out = c.output().unwrap();
    let _ = report;
    assert_eq!(
        out.status.code(),
        Some(125),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs Landlock ABI 4"));
}

#[test]
fn byte_cap_from_the_config_cuts_a_download() {
    let rt = rt();
    let origin = rt.block_on(Origin::start("origin"));
    for case in cases() {
        let w = World::new();
        std::fs::create_dir_all(w.fx.home.join(".codewhale")).unwrap();
        std::fs::write(
            w.fx.home.join(".codewhale/config.toml"),
            "[sandbox.network]\nmode = \"allowlist\"\nallow = [\"big.test\"]\nmax_bytes = 1048576\n",
        )
        .unwrap();
        let script = format!(
            "curl -sS -o /dev/null -w 'small=%{{size_download}}\\n' http://big.test:{p}/bytes/1000; \
             curl -sS -o /dev/null --max-time 10 http://big.test:{p}/bytes/4194304; echo big=$?",
            p = origin.port()
        );
        let mut c = w.fx.command(
            &case,
            &["--report-json", w.fx.root.join("r.json").to_str().unwrap()],
            &["sh", "-c", &script],
        );
        c.env("CODEWHALE_TEST_RESOLVE", "big.test=127.0.0.1!loopback")
            .env("XDG_RUNTIME_DIR", &w.runtime)
            .env("CODEWHALE_HOME", w.fx.home.join(".codewhale"));
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("small=1000"),
            "[{case}] {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !stdout.contains("big=0"),
            "[{case}] the 4 MiB download must be cut: {stdout}"
        );
        let mut text = String::new();
        std::fs::File::open(w.fx.root.join("r.json"))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let e = &v["enforcement"]["egress"];
        assert_eq!(e["summary"]["byte_cap_hit"], true, "[{case}] {e}");
        assert!(
            e["line"].as_str().unwrap().contains("byte cap reached"),
            "[{case}]"
        );
    }
}

#[test]
fn bad_network_flags_and_config_are_refused_naming_them() {
    let w = World::new();
    let run = |args: &[&str]| {
        let out = Command::new(common::sandbox::BIN)
            .args(["sandbox", "run"])
            .args(args)
            .args(["--", "echo", "RAN"])
            .current_dir(&w.fx.ws)
            .env("HOME", &w.fx.home)
            .env("XDG_RUNTIME_DIR", &w.runtime)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["--allow-domain", "a.*.example"]);
    assert_ne!(code, Some(0));
    assert!(!out.contains("RAN"));
    assert!(
        err.contains("--allow-domain a.*.example") && err.contains("whole first label"),
        "{err}"
    );
    let (code, _, err) = run(&["--network=on", "--allow-domain", "crates.io"]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("--allow-domain needs --network=allowlist"),
        "{err}"
    );
    let (code, _, err) = run(&["--network=sometimes"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("sometimes"), "{err}");
    std::fs::create_dir_all(w.fx.home.join(".codewhale")).unwrap();
    std::fs::write(
        w.fx.home.join(".codewhale/config.toml"),
        "[sandbox.network]\nallow = [\"*\"]\n",
    )
    .unwrap();
    let (code, out, err) = run(&[]);
    assert_ne!(code, Some(0));
    assert!(!out.contains("RAN"));
    assert!(
        err.contains("config.toml") && err.contains("use network = \"on\""),
        "{err}"
    );
}

/// A repository's `.codewhale/config.toml` may shrink the network, never
/// grow it: its extra host is ignored with a note naming file and key, its
/// deny entry is applied; the allowed name (positive control) still works,
/// and the origin sees exactly that one connection.
#[test]
fn a_project_override_can_only_shrink_the_allow_list() {
    let rt = rt();
    let origin = rt.block_on(Origin::start("origin"));
    let port = origin.port();
    for case in cases() {
        let w = World::new();
        std::fs::create_dir_all(w.fx.ws.join(".codewhale")).unwrap();
        std::fs::write(
            w.fx.ws.join(".codewhale/config.toml"),
            "[sandbox.network]\nallow = [\"ok.test\", \"extra.test\", \"gone.test\"]\ndeny = [\"gone.test\"]\n",
        )
        .unwrap();
        let before = origin.accepted();
        let resolve =
            "ok.test=127.0.0.1!loopback;extra.test=127.0.0.1!loopback;gone.test=127.0.0.1!loopback";
        let script = format!(
            "curl -sS --max-time 10 http://ok.test:{port}/ ; \
             echo \"extra:$(curl -sS --max-time 5 http://extra.test:{port}/)\"; \
             echo \"gone:$(curl -sS --max-time 5 http://gone.test:{port}/)\""
        );
        let r = w.run(
            &case,
            resolve,
            &["--allow-domain", "ok.test", "--allow-domain", "gone.test"],
            &script,
        );
        let out = &r.stdout;
        assert!(
            out.starts_with("hello from origin\n"),
            "[{case}] {out}\n{}",
            r.stderr
        );
        assert!(
            out.contains("extra:codewhale egress proxy: extra.test:")
                && out.contains("not in the allow list"),
            "[{case}] {out}"
        );
        assert!(
            out.contains("gone:codewhale egress proxy: gone.test:"),
            "[{case}] {out}"
        );
        assert!(
            r.stderr.contains(".codewhale/config.toml: `sandbox.network.allow` ignored: `extra.test` is not covered"),
            "[{case}] {}",
            r.stderr
        );
        assert_eq!(
            origin.accepted(),
            before + 1,
            "[{case}] only the allowed name arrived"
        );
    }
}

/// `git` over ssh goes through the proxy by name (the `GIT_SSH_COMMAND`
/// codewhale sets: `ssh -o ProxyCommand=… __egress-connect %h %p`): for an
/// allowed name the loopback listener receives ssh's own identification
/// line (`SSH-2.0-…`, RFC 4253 §4.2) — the positive control; for a name
/// outside the list git fails naming the refusal and the listener sees
/// nothing more.
#[test]
fn git_over_ssh_goes_through_the_proxy_or_is_refused_clearly() {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            log.lock().unwrap().push(line.trim_end().to_string());
        }
    });
    for case in cases() {
        let w = World::new();
        let before = seen.lock().unwrap().len();
        let script = format!(
            "echo \"ssh-cmd:$GIT_SSH_COMMAND\"; \
             git ls-remote ssh://git@ok.test:{port}/repo.git >/dev/null 2>&1; echo ok-rc=$?; \
             echo \"denied:$(git ls-remote ssh://git@evil.test:{port}/repo.git 2>&1)\""
        );
        let r = w.run(
            &case,
            "ok.test=127.0.0.1!loopback;evil.test=127.0.0.1!loopback",
            &["--allow-domain", "ok.test"],
            &script,
        );
        let out = &r.stdout;
        assert!(
            out.contains("__egress-connect %h %p"),
            "[{case}] {out}\n{}",
            r.stderr
        );
        assert!(
            out.contains(&format!("codewhale egress proxy: evil.test:{port} refused")),
            "[{case}] {out}"
        );
        let got = seen.lock().unwrap()[before..].to_vec();
        assert_eq!(
            got.len(),
            1,
            "[{case}] one connection (the allowed one): {got:?}\n{out}"
        );
        assert!(got[0].starts_with("SSH-2.0-"), "[{case}] {got:?}");
        let ev = events(&r);
        assert!(
            ev.iter()
                .any(|e| e["host"] == "evil.test" && e["decision"] == "refused"),
            "[{case}] {ev:?}"
        );
    }
}

/// DNS over HTTPS is an HTTPS request like any other, decided by name: a
/// DoH POST (RFC 8484: `application/dns-message`, here a real query for
/// `example.com` in DNS wire format) to a resolver name off the list is
/// refused at `CONNECT` and never arrives; the positive control, the same
/// POST with the resolver's name allowed, arrives with every byte.
#[test]
fn dns_over_https_to_a_resolver_off_the_list_never_arrives() {
    for case in cases() {
        let w = World::new();
        let tls = TlsOrigin::start(&w.fx.ws, "doh.test");
        // Header (id 0, RD, one question) + QNAME example.com + A/IN: 29
        // bytes (RFC 1035 §4.1), written before the run.
        std::fs::create_dir(w.fx.ws.join("doh")).unwrap();
        std::fs::write(
            w.fx.ws.join("doh/q.bin"),
            b"\0\0\x01\0\0\x01\0\0\0\0\0\0\x07example\x03com\0\0\x01\0\x01",
        )
        .unwrap();
        let script = format!(
            "curl -sS --max-time 10 --cacert {} -H 'content-type: application/dns-message' \
             --data-binary @doh/q.bin https://doh.test:{}/dns-query 2>&1; echo rc=$?",
            tls.cert.display(),
            tls.port
        );
        let resolve = "doh.test=127.0.0.1!loopback;pkg.test=127.0.0.1!loopback";
        let allowed = w.run(&case, resolve, &["--allow-domain", "doh.test"], &script);
        assert!(
            allowed
                .stdout
                .contains("got 29 bytes of application/dns-message"),
            "[{case}] positive control: {}\n{}",
            allowed.stdout,
            allowed.stderr
        );
        assert_eq!(tls.requests(), 1, "[{case}] the control's POST arrived");
        let denied = w.run(&case, resolve, &["--allow-domain", "pkg.test"], &script);
        assert!(
            denied.stdout.contains("curl: (56)") && denied.stdout.contains("403"),
            "[{case}] {}",
            denied.stdout
        );
        assert!(!denied.stdout.contains("got 29 bytes"), "[{case}]");
        assert_eq!(tls.requests(), 1, "[{case}] nothing more arrived");
        let ev = events(&denied);
        assert_eq!(ev.len(), 1, "[{case}] {ev:?}");
        assert_eq!(ev[0]["host"], "doh.test");
        assert_eq!(ev[0]["decision"], "refused");
        assert_eq!(ev[0]["rule"], "not in the allow list");
    }
}

/// A subdomain-label tunnel (data in the labels of a name under an allowed
/// parent: `<63 chars>.<63 chars>.<…>.allowed-parent.test`) is refused when
/// the list names the parent exactly or a specific name under it: the
/// policy refuses it by name before any lookup (the rule is the policy's,
/// not a resolver error), and the origin — which the tunnel name would
/// reach, the test resolver maps it there — sees only the positive
/// control's request to the specific allowed name. A label over 63
/// characters is refused as no valid name even under a wildcard. And a
/// name resolves nowhere inside the sandbox (`getent` fails): only the
/// proxy resolves, and only allowed names.
///
/// Under a wildcard (`*.allowed-parent.test`), where the command chooses
/// the labels, the same tunnel name is refused as tunnelling (the rule
/// names the shape and the wildcard), while an ordinary name under the
/// same wildcard works (the control); the refusal is in the report's line.
#[test]
fn subdomain_label_tunnels_are_refused_by_name_before_any_lookup() {
    let rt = rt();
    let origin = rt.block_on(Origin::start("origin"));
    let port = origin.port();
    let l1 = "a".repeat(63);
    let l2 = "b".repeat(63);
    let tunnel = format!("{l1}.{l2}.t1.allowed-parent.test");
    let too_long = format!("{}.allowed-parent.test", "c".repeat(64));
    let resolve = format!(
        "api.allowed-parent.test=127.0.0.1!loopback;allowed-parent.test=127.0.0.1!loopback;\
         {tunnel}=127.0.0.1!loopback"
    );
    for case in cases() {
        let w = World::new();
        let before = origin.accepted();
        let script = format!(
            "curl -sS --max-time 10 http://api.allowed-parent.test:{port}/; \
             echo \"tunnel:$(curl -sS --max-time 5 http://{tunnel}:{port}/)\"; \
             echo \"long:$(curl -sS --max-time 5 http://{too_long}:{port}/ 2>&1)\"; \
             getent hosts api.allowed-parent.test; echo getent-rc=$?"
        );
        let r = w.run(
            &case,
            &resolve,
            &[
                "--allow-domain",
                "allowed-parent.test",
                "--allow-domain",
                "api.allowed-parent.test",
            ],
            &script,
        );
        let out = &r.stdout;
        assert!(
            out.starts_with("hello from origin\n"),
            "[{case}] {out}\n{}",
            r.stderr
        );
        assert!(
            out.contains(&format!(
                "tunnel:codewhale egress proxy: {tunnel}:{port} refused: not in the allow list"
            )),
            "[{case}] {out}"
        );
        assert!(out.contains("long:"), "[{case}] {out}");
        assert!(!out.contains("long:hello"), "[{case}] {out}");
        assert!(
            out.contains("getent-rc=") && !out.contains("getent-rc=0"),
            "[{case}] {out}"
        );
        assert_eq!(
            origin.accepted(),
            before + 1,
            "[{case}] only the specific allowed name arrived"
        );
        let ev = events(&r);
        let tun = ev.iter().find(|e| e["host"] == tunnel.as_str()).unwrap();
        assert_eq!(tun["decision"], "refused");
        assert_eq!(tun["rule"], "not in the allow list");
        assert!(
            ev.iter()
                .filter(|e| e["decision"] == "allowed")
                .all(|e| e["host"] == "api.allowed-parent.test"),
            "[{case}] {ev:?}"
        );

        // Under a wildcard the command chooses the labels: the tunnel's
        // shape is refused by the policy, an ordinary name goes through.
        let before = origin.accepted();
        let r = w.run(
            &case,
            &resolve,
            &["--allow-domain", "*.allowed-parent.test"],
            &format!(
                "curl -sS --max-time 10 http://api.allowed-parent.test:{port}/; \
                 echo \"tunnel:$(curl -sS --max-time 5 http://{tunnel}:{port}/)\"; \
                 echo \"long:$(curl -sS --max-time 5 http://{too_long}:{port}/ 2>&1)\""
            ),
        );
        assert!(
            r.stdout.starts_with("hello from origin\n"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        let want = format!(
            "tunnel:codewhale egress proxy: {tunnel}:{port} refused: dns tunnelling: \
             128 characters chosen below the wildcard (at most 64) under \
             *.allowed-parent.test; allowed only by an exact entry"
        );
        assert!(r.stdout.contains(&want), "[{case}] {}", r.stdout);
        assert!(!r.stdout.contains("long:hello"), "[{case}] {}", r.stdout);
        let ev = events(&r);
        let tun = ev.iter().find(|e| e["host"] == tunnel.as_str()).unwrap();
        assert_eq!(tun["decision"], "refused", "[{case}]");
        assert!(
            tun["rule"]
                .as_str()
                .unwrap()
                .starts_with("dns tunnelling: 128 characters chosen"),
            "[{case}] {tun:?}"
        );
        assert!(
            r.stderr.contains(&format!("{tunnel} (dns tunnelling: ")),
            "[{case}] the report's line names why: {}",
            r.stderr
        );
        assert_eq!(origin.accepted(), before + 1, "[{case}]");
    }
}

/// DNS-over-HTTPS needs an exact entry: under a wildcard (`*.google`) a
/// well-known resolver's name (`dns.google`, mapped here to a loopback
/// origin by the test resolver) is refused by name, and a plain-HTTP
/// request carrying DNS (`Accept: application/dns-message`, RFC 8484) to
/// an ordinary name the wildcard allows is refused too; both never arrive
/// and the report names why. The controls: an ordinary name under the
/// wildcard arrives, and with `dns.google` listed exactly the same DNS
/// request arrives.
#[test]
fn doh_resolver_names_and_dns_requests_need_an_exact_entry() {
    let rt = rt();
    let origin = rt.block_on(Origin::start("origin"));
    let port = origin.port();
    let resolve = "dns.google=127.0.0.1!loopback;fonts.google=127.0.0.1!loopback";
    for case in cases() {
        let w = World::new();
        let before = origin.accepted();
        let script = format!(
            "curl -sS --max-time 10 http://fonts.google:{port}/; \
             echo \"doh:$(curl -sS --max-time 5 http://dns.google:{port}/dns-query 2>&1)\"; \
             echo \"msg:$(curl -sS --max-time 5 -H 'accept: application/dns-message' \
                http://fonts.google:{port}/dns-query 2>&1)\""
        );
        let r = w.run(&case, resolve, &["--allow-domain", "*.google"], &script);
        let out = &r.stdout;
        assert!(
            out.starts_with("hello from origin\n"),
            "[{case}] control: {out}\n{}",
            r.stderr
        );
        assert!(
            out.contains(&format!(
                "doh:codewhale egress proxy: dns.google:{port} refused: dns-over-https resolver \
                 dns.google: allowed only by an exact entry, not by *.google"
            )),
            "[{case}] {out}"
        );
        assert!(
            out.contains(&format!(
                "msg:codewhale egress proxy: fonts.google:{port} refused: dns-over-https request \
                 (application/dns-message): allowed only to a host of an exact entry, not by *.google"
            )),
            "[{case}] {out}"
        );
        assert_eq!(
            origin.accepted(),
            before + 1,
            "[{case}] only the control arrived"
        );
        assert!(
            r.stderr
                .contains("2 refused: dns.google (dns-over-https resolver dns.google")
                && r.stderr.contains("fonts.google (dns-over-https request"),
            "[{case}] the report's line names why: {}",
            r.stderr
        );

        // Named exactly, the resolver is the user's call: the DNS request
        // arrives.
        let before = origin.accepted();
        let r = w.run(
            &case,
            resolve,
            &["--allow-domain", "dns.google"],
            &format!(
                "curl -sS --max-time 10 -H 'content-type: application/dns-message' \
                 --data-binary x http://dns.google:{port}/dns-query"
            ),
        );
        assert!(
            r.stdout.starts_with("hello from origin\n"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(origin.accepted(), before + 1, "[{case}]");
    }
}
