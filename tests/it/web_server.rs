#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale web` as a real process on loopback, spoken to over real
//! sockets: the one-time link and its cookie, the `Host` and origin
//! checks, the security headers, bearer clients unchanged, and
//! `--new-link` against the running server. (The page itself is driven in
//! Chromium by tests/it/web_browser.rs.)
#![cfg(unix)]

use crate::common;

use common::runtime::{cmd, fixture, TOKEN};
use common::scripted_model::{reply, ScriptedModel, Wire};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `codewhale web --no-open --port 0`, its link and everything it printed.
pub struct Web {
    pub child: Child,
    pub port: u16,
    pub link: String,
    pub out: Arc<Mutex<String>>,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Web {
    pub fn start(f: &common::cli::Fixture) -> Web {
        let ws = f.ws.to_str().unwrap().to_string();
        let mut child = cmd(f, &["web", "--no-open", "--port", "0", "-C", &ws])
            .env("CODEWHALE_RUNTIME_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut line = String::new();
        let link = loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "web exited early");
            if let Some(url) = line.strip_prefix("codewhale web: ") {
                break url.trim().to_string();
            }
            assert!(Instant::now() < deadline, "no link printed");
        };
        let port: u16 = link
            .strip_prefix("http://127.0.0.1:")
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse().ok())
            .expect("link on 127.0.0.1");
        let all = Arc::new(Mutex::new(line.clone()));
        for r in [
            Box::new(out) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let into = all.clone();
            std::thread::spawn(move || {
                let mut r = r;
                let mut buf = [0u8; 4096];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    into.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        Web {
            child,
            port,
            link,
            out: all,
        }
    }

    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// No redirects followed, no proxy, no cookie jar: each test says exactly
/// what it sends.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

/// The cookie a fresh link is exchanged for (checked on the way).
async fn exchange(w: &Web, link: &str) -> String {
    let r = client().get(link).send().await.unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.text().await);
    assert_eq!(r.headers()["location"], "/");
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let (pair, attrs) = set.split_once("; ").unwrap();
    assert_eq!(attrs, "HttpOnly; SameSite=Strict; Path=/; Max-Age=43200");
    assert!(!set.contains(TOKEN));
    let _ = w;
    pair.to_string()
}

async fn thread_count(w: &Web) -> usize {
    let r = client()
        .get(format!("{}/v1/threads?limit=500", w.origin()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    v["threads"].as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_becomes_a_cookie_once_and_the_token_stays_in_the_terminal() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("hi")]);
    let f = fixture(&model);
    let w = Web::start(&f);
    let c = client();

    // Without a session, `/` is the locked page, never the app.
    let r = c.get(format!("{}/", w.origin())).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("one-time link") && !body.contains("app.js"),
        "{body}"
    );

    // A malformed or unknown capability is 401 too.
    for bad in [
        "/bootstrap/x",
        "/bootstrap/cwcap_0000000000000000000000000000000000000000000000000000000000000000",
    ] {
        let r = c.get(format!("{}{bad}", w.origin())).send().await.unwrap();
        assert_eq!(r.status(), 401, "{bad}");
    }

    let cookie = exchange(&w, &w.link).await;
    // Used once: never again.
    let again = c.get(&w.link).send().await.unwrap();
    assert_eq!(again.status(), 401);

    // The app, with its headers.
    let r = c
        .get(format!("{}/", w.origin()))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    assert!(csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"));
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let page = r.text().await.unwrap();
    assert!(page.contains("/app.js") && !page.contains(TOKEN));

    // The cookie reads the API (a safe method needs no Origin)…
    let r = c
        .get(format!("{}/v1/threads", w.origin()))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // …and a wrong cookie does not.
    let r = c
        .get(format!("{}/v1/threads", w.origin()))
        .header("cookie", "codewhale_web_session=cwweb_forged")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // The runtime token was never printed.
    let printed = w.out.lock().unwrap().clone();
    assert!(!printed.contains(TOKEN), "{printed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebinding_and_cross_origin_requests_are_refused_bearer_clients_are_not() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("hi")]);
    let f = fixture(&model);
    let w = Web::start(&f);
    let c = client();
    let cookie = exchange(&w, &w.link).await;
    let url = format!("{}/v1/threads", w.origin());
    let host = format!("127.0.0.1:{}", w.port);

    // DNS rebinding: another name (or no port) in Host is 421, even
    // for the public health route and with the right cookie.
    for bad in [format!("evil.test:{}", w.port), "127.0.0.1".to_string()] {
        let r = c
            .get(format!("{}/health", w.origin()))
            .header("host", &bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 421, "{bad}");
        assert_eq!(r.headers()["cache-control"], "no-store");
    }
    let r = c
        .get(format!("{}/health", w.origin()))
        .header("host", format!("localhost:{}", w.port))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "localhost:P is this server too");

    let before = thread_count(&w).await;
    let post = |h: HeaderMap| {
        c.post(&url)
            .headers(h)
            .header("cookie", &cookie)
            .json(&json!({}))
            .send()
    };
    // A cookie POST without Origin, from a sibling port, or with
    // cross-site fetch metadata: refused, nothing created.
    let refused = [
        headers(&[]),
        headers(&[("origin", "http://127.0.0.1:1".into())]),
        headers(&[
            ("origin", "http://127.0.0.1:1".into()),
            ("sec-fetch-site", "same-site".into()),
        ]),
        headers(&[
            ("origin", w.origin()),
            ("sec-fetch-site", "cross-site".into()),
        ]),
        headers(&[("origin", format!("http://localhost:{}", w.port))]),
    ];
    for h in refused {
        let shown = format!("{h:?}");
        let r = post(h).await.unwrap();
        assert_eq!(r.status(), 403, "{shown}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "cross_origin", "{v}");
    }
    assert_eq!(thread_count(&w).await, before, "nothing was created");

    // The page's own origin: created (the positive control).
    let r = post(headers(&[
        ("origin", w.origin()),
        ("sec-fetch-site", "same-origin".into()),
    ]))
    .await
    .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(thread_count(&w).await, before + 1);

    // A bearer client is unchanged: no Origin needed.
    let r = c
        .post(&url)
        .bearer_auth(TOKEN)
        .header("host", &host)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    // Links are minted for bearer clients only, never for a page.
    let r = c
        .post(format!("{}/v1/web/link", w.origin()))
        .header("cookie", &cookie)
        .header("origin", w.origin())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_link_asks_the_running_server() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("hi")]);
    let f = fixture(&model);
    let w = Web::start(&f);
    let port = w.port.to_string();
    let o = cmd(&f, &["web", "--new-link", "--port", &port])
        .env("CODEWHALE_RUNTIME_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let link = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(
        link.starts_with(&format!("{}/bootstrap/cwcap_", w.origin())),
        "{link}"
    );
    assert_ne!(link, w.link);
    exchange(&w, &link).await;

    // Without the token there is nothing to ask with: a clear error.
    let o = cmd(&f, &["web", "--new-link", "--port", &port])
        .env_remove("CODEWHALE_RUNTIME_TOKEN")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--auth-token") && err.contains("CODEWHALE_RUNTIME_TOKEN"),
        "{err}"
    );
    // A wrong token is refused by the server.
    let o = cmd(&f, &["web", "--new-link", "--port", &port])
        .env("CODEWHALE_RUNTIME_TOKEN", "wrong")
        .output()
        .unwrap();
    assert!(!o.status.success());
}
