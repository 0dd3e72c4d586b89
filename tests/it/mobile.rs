#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `app-server --mobile`: the phone page at `/mobile` as a real process on
//! real sockets (its `Host` rule, headers, no secret in it, bearer
//! clients unchanged, the LAN warning, `--insecure-no-auth` refused off
//! loopback) and in a real headless Chromium as a 390×844 phone
//! (tests/clients/mobile_browser.py: token, thread, Deny, Allow, steer,
//! interrupt, touch targets, overflow, storage).
#![cfg(unix)]

use crate::common;

use common::runtime::{client, cmd, fixture, Server, TOKEN};
use common::scripted_model::{call, reply, ScriptedModel, Step, Wire};
use serde_json::json;
use std::ffi::OsStr;
use std::net::IpAddr;

fn port_of(base: &str) -> u16 {
    base.rsplit(':').next().unwrap().parse().unwrap()
}

/// The default host is 0.0.0.0: the warning names each non-loopback
/// address as a URL, and each one serves the page.
#[tokio::test]
async fn mobile_binds_every_interface_warns_with_each_lan_url_and_each_works() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("unused")]);
    let f = fixture(&model);
    let s = Server::start(&f, &["--mobile"]);
    assert!(s.base.starts_with("http://0.0.0.0:"), "{}", s.base);
    let port = port_of(&s.base);
    let c = client();
    // The machine's own list of IPv4 addresses (not the code under test).
    let listed: Vec<IpAddr> = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|a| a.parse().ok())
                .filter(|a: &IpAddr| a.is_ipv4() && !a.is_loopback())
                .collect()
        })
        .unwrap_or_default();
    // Each LAN address serves the page (Host: the IP, as a phone sends).
    for ip in &listed {
        let r = c
            .get(format!("http://{ip}:{port}/mobile"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{ip}");
    }
    let (_, err) = s.kill_and_output();
    assert!(
        err.contains("warning: --mobile listens on 0.0.0.0:"),
        "{err}"
    );
    for ip in &listed {
        let url = format!("http://{ip}:{port}/mobile");
        assert!(
            err.contains(&format!("  {url}\n")),
            "{url} missing from: {err}"
        );
    }
    assert!(
        !err.contains(&format!("http://127.0.0.1:{port}/mobile")),
        "{err}"
    );
    assert!(!err.contains(TOKEN));
}

#[tokio::test]
async fn the_page_is_public_host_checked_and_the_api_still_needs_the_token() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("unused")]);
    let f = fixture(&model);
    let s = Server::start(&f, &["--mobile", "--host", "127.0.0.1"]);
    let port = port_of(&s.base);
    let c = client();
    let page = c.get(format!("{}/mobile", s.base)).send().await.unwrap();
    assert_eq!(page.status(), 200, "the page itself is not token-gated");
    let h = page.headers().clone();
    assert!(h["content-security-policy"]
        .to_str()
        .unwrap()
        .starts_with("default-src 'none'"));
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let html = page.text().await.unwrap();
    assert!(!html.contains(TOKEN) && !html.contains("<script>"));
    for asset in ["app.js", "app.css", "mobile.css"] {
        let r = c
            .get(format!("{}/mobile/{asset}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{asset}");
        assert!(!r.text().await.unwrap().contains(TOKEN));
    }
    // A DNS name (rebinding) is 421 for the page; localhost and an IP
    // literal are served (the positive controls).
    for (host, want) in [
        (format!("evil.test:{port}"), 421),
        (format!("127.0.0.1.nip.io:{port}"), 421),
        ("127.0.0.1".to_string(), 421),
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 200),
    ] {
        let r = c
            .get(format!("{}/mobile", s.base))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "{host}");
    }
    // The API: bearer clients unchanged (any Host), nothing without it.
    let none = c
        .get(format!("{}/v1/threads", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);
    let made = c
        .post(format!("{}/v1/threads", s.base))
        .header("host", format!("evil.test:{port}"))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201, "bearer clients are unchanged");
    let (_, err) = s.kill_and_output();
    assert!(
        err.contains(&format!(
            "phone page: http://127.0.0.1:{port}/mobile (this machine only)"
        )),
        "{err}"
    );
    assert!(!err.contains("warning: --mobile"), "{err}");
}

#[test]
fn mobile_without_auth_is_refused_off_loopback() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("unused")]);
    let f = fixture(&model);
    let o = cmd(
        &f,
        &[
            "app-server",
            "--mobile",
            "--insecure-no-auth",
            "--port",
            "0",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("not `0.0.0.0`"));
    // The positive control: on loopback it starts.
    let s = Server::start(
        &f,
        &["--mobile", "--insecure-no-auth", "--host", "127.0.0.1"],
    );
    assert!(s.base.starts_with("http://127.0.0.1:"));
}

/// The page asks for the token: a generated one (never shown) could not
/// be typed in, so `--mobile` refuses to start without one (the other
/// tests here, given `CODEWHALE_RUNTIME_TOKEN`, are the positive control).
#[test]
fn mobile_without_a_token_to_type_is_refused() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("unused")]);
    let f = fixture(&model);
    let o = cmd(
        &f,
        &[
            "app-server",
            "--mobile",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--mobile needs a token you can type"),
        "{o:?}"
    );
}

#[test]
fn the_phone_page_in_chromium_at_390x844() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "m1",
                "shell",
                json!({"command": "echo m > mobile-denied.txt"}),
            ),
            reply("phone denied it"),
            call(
                "m2",
                "shell",
                json!({"command": "echo y > mobile-allowed.txt"}),
            ),
            reply("phone allowed it"),
            Step::Hang {
                text: "working".into(),
            },
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--mobile", "--host", "127.0.0.1"]);
    // A screenshot for docs/ when asked (CODEWHALE_MOBILE_SCREENSHOT=path).
    let shot = std::env::var("CODEWHALE_MOBILE_SCREENSHOT").unwrap_or_else(|_| "-".into());
    let v = common::runtime::browser_client(
        "mobile_browser.py",
        &f,
        TOKEN,
        &[OsStr::new(&s.base), f.ws.as_os_str(), OsStr::new(&shot)],
    );
    assert_eq!(v["ok"], true, "{v}");
    assert!(!f.ws.join("mobile-denied.txt").exists());
    assert_eq!(
        std::fs::read_to_string(f.ws.join("mobile-allowed.txt")).unwrap(),
        "y\n"
    );
    let (out, err) = s.kill_and_output();
    assert!(!out.contains(TOKEN) && !err.contains(TOKEN));
}
