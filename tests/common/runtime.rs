//! The runtime tests' harness (tests/runtime_*.rs): `codewhale app-server`
//! as a real process — over HTTP on loopback with reqwest as the client,
//! or over stdio as a child whose stdin/stdout the test holds — with the
//! scripted model server as its provider, and the runner of the Python
//! standard-library clients in tests/clients/.

use super::cli::Fixture;
use super::scripted_model::ScriptedModel;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bearer token every HTTP server of these tests is started with.
pub const TOKEN: &str = "runtime-test-token-5f2c9e1d";

/// How long a test waits for a server's line, event or reply.
const WAIT: Duration = Duration::from_secs(30);

/// `codewhale ARGS…` with the fixture's own (created, empty) `TMPDIR` and
/// `XDG_RUNTIME_DIR`: the runtime keeps its socket and lock there.
pub fn cmd(f: &Fixture, args: &[&str]) -> Command {
    let mut c = f.cmd(args);
    let (tmp, xdg) = dirs(f);
    c.env("TMPDIR", tmp).env("XDG_RUNTIME_DIR", xdg);
    c
}

/// The fixture's `TMPDIR` and `XDG_RUNTIME_DIR` for runtime processes,
/// created.
pub fn dirs(f: &Fixture) -> (std::path::PathBuf, std::path::PathBuf) {
    let (tmp, xdg) = (f.root.join("tmp"), f.root.join("xdg"));
    for d in [&tmp, &xdg] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    (tmp, xdg)
}

/// A fixture whose configured default provider is the scripted model.
pub fn fixture(model: &ScriptedModel) -> Fixture {
    Fixture::with_config(&format!(
        "provider = \"custom\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ))
}

/// `app-server --http` on an ephemeral loopback port (killed on drop);
/// its stdout and stderr are collected while it runs.
pub struct Server {
    pub child: Child,
    pub base: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(mut r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
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

impl Server {
    /// `app-server --http --port 0 -C <workspace> EXTRA…`, once it says
    /// where it listens.
    pub fn start(f: &Fixture, extra: &[&str]) -> Server {
        Self::start_env(f, extra, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub fn start_env(f: &Fixture, extra: &[&str], envs: &[(&str, String)]) -> Server {
        let ws = f.ws.to_str().unwrap().to_string();
        let mut args = vec!["app-server", "--http", "--port", "0", "-C", &ws];
        args.extend_from_slice(extra);
        let mut child = cmd(f, &args)
            .env("CODEWHALE_RUNTIME_TOKEN", TOKEN)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let deadline = Instant::now() + WAIT;
        let mut line = String::new();
        // Everything said before listening (recovery notes) is kept too.
        let mut said = String::new();
        let base = loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "server exited before listening: {said}"
            );
            said.push_str(&line);
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
            assert!(Instant::now() < deadline, "server never listened");
        };
        let stderr = Arc::new(Mutex::new(said));
        collect(err, stderr.clone());
        let stdout = Arc::new(Mutex::new(String::new()));
        collect(child.stdout.take().unwrap(), stdout.clone());
        Server {
            child,
            base,
            stdout,
            stderr,
        }
    }

    /// Kill the server; everything it wrote: (stdout, stderr).
    pub fn kill_and_output(mut self) -> (String, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The readers see EOF once the process is gone.
        std::thread::sleep(Duration::from_millis(100));
        let out = self.stdout.lock().unwrap().clone();
        let err = self.stderr.lock().unwrap().clone();
        (out, err)
    }
}

/// A reqwest client that never goes through a proxy.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// `METHOD path` with the token (and a JSON body): status and JSON answer.
pub async fn api(s: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = client()
        .request(m, format!("{}{path}", s.base))
        .bearer_auth(TOKEN);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        code,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")),
    )
}

/// `POST path` declaring a body of `len` bytes and sending none: the
/// status and JSON answer of a server that refuses by `Content-Length`
/// alone (tower-http's `RequestBodyLimit` answers before reading a body
/// byte). A client still writing a 2 MB body when the server has answered
/// and closed gets a broken pipe instead of the answer (reqwest did, once,
/// in CI), so the request is written by hand on a real socket; HTTP/1.1,
/// `Connection: close`, the answer read to the end (RFC 9112).
pub async fn declared_too_large(s: &Server, path: &str, len: usize) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    c.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), c.read_to_end(&mut raw))
        .await
        .expect("the server answers without the body")
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let code: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    // The server's JSON errors carry a Content-Length (axum's `Json`), so
    // the body is the rest of the stream up to the close.
    assert!(
        !head
            .lines()
            .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked")),
        "a chunked answer: {head}"
    );
    (
        code,
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}")),
    )
}

/// A new thread (201) from `body`; its id.
/// `GET /v1/threads/{thread}/turns/{turn}/receipt`: status and body.
pub async fn turn_receipt(s: &Server, thread: &str, turn: &str) -> (u16, Value) {
    api(
        s,
        "GET",
        &format!("/v1/threads/{thread}/turns/{turn}/receipt"),
        None,
    )
    .await
}

pub async fn new_thread(s: &Server, body: Value) -> String {
    let (code, t) = api(s, "POST", "/v1/threads", Some(body)).await;
    assert_eq!(code, 201, "{t}");
    t["thread"]["id"].as_str().unwrap().to_string()
}

/// A new turn (202) of `thread`; its id.
pub async fn new_turn(s: &Server, thread: &str, prompt: &str) -> String {
    let (code, b) = api(
        s,
        "POST",
        &format!("/v1/threads/{thread}/turns"),
        Some(serde_json::json!({ "prompt": prompt })),
    )
    .await;
    assert_eq!(code, 202, "{b}");
    b["turn"]["id"].as_str().unwrap().to_string()
}

/// SSE envelopes of `thread` after `since` until `stop` says so (30 s at
/// most); each message's `id:` is its seq and its `event:` its name.
pub async fn events_until(
    s: &Server,
    thread: &str,
    since: u64,
    mut stop: impl FnMut(&[Value]) -> bool,
) -> Vec<Value> {
    let resp = client()
        .get(format!(
            "{}/v1/threads/{thread}/events?since_seq={since}",
            s.base
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut es = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !stop(&out) {
        let ev = tokio::time::timeout_at(deadline, es.next())
            .await
            .unwrap_or_else(|_| panic!("events in time; so far: {out:#?}"))
            .expect("stream open")
            .unwrap();
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        assert_eq!(ev.id, v["seq"].to_string(), "id: line is the seq");
        assert_eq!(ev.event, v["event"].as_str().unwrap());
        out.push(v);
    }
    out
}

/// All events up to the `n`th `turn.completed` of the thread.
pub async fn until_completed(s: &Server, thread: &str, n: usize) -> Vec<Value> {
    events_until(s, thread, 0, |e| count(e, "turn.completed") >= n).await
}

pub fn count(evs: &[Value], name: &str) -> usize {
    evs.iter().filter(|e| e["event"] == name).count()
}

pub fn has(evs: &[Value], name: &str) -> bool {
    count(evs, name) > 0
}

pub fn first<'a>(evs: &'a [Value], name: &str) -> &'a Value {
    evs.iter()
        .find(|e| e["event"] == name)
        .unwrap_or_else(|| panic!("no {name} in {evs:#?}"))
}

/// `app-server --stdio -C <workspace>` with piped stdin/stdout/stderr.
pub fn stdio_command(f: &Fixture) -> Command {
    let mut c = cmd(f, &["app-server", "--stdio", "-C", f.ws.to_str().unwrap()]);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A running `app-server --stdio`: lines in, JSON lines out; the `event`
/// notifications read while waiting for a reply are kept in `events`.
pub struct StdioServer {
    pub child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    pub events: Vec<Value>,
}

impl StdioServer {
    pub fn start(f: &Fixture) -> StdioServer {
        let mut child = stdio_command(f).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        StdioServer {
            child,
            stdin,
            out,
            events: Vec::new(),
        }
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    /// The next stdout line, which must be JSON.
    pub fn read(&mut self) -> Value {
        let mut l = String::new();
        self.out.read_line(&mut l).unwrap();
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    }

    /// The reply to `id` (30 s at most), keeping the notifications before
    /// it and passing over other replies.
    pub fn reply_to(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "no reply to {id}");
            let m = self.read();
            if m["method"] == "event" {
                self.events.push(m["params"].clone());
            } else if m["id"] == id {
                return m;
            }
        }
    }

    /// Send `shutdown` as request `id`, expect its reply and exit 0.
    pub fn shutdown(mut self, id: u64) {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"shutdown"}}"#
        ));
        assert_eq!(self.reply_to(id)["result"]["shutting_down"], true);
        assert!(self.child.wait().unwrap().success());
    }
}

/// Run the Python standard-library client tests/clients/SCRIPT with
/// `args` and only `PATH`, `NO_PROXY=*`, `PYTHONDONTWRITEBYTECODE=1` and `envs` in its environment;
/// it must exit 0 and print one JSON line, which is returned.
/// A Chromium-driving client script (tests/clients/*.py): Debian's
/// `chromium` first, then `args`; the fixture's own HOME and TMPDIR and
/// the runtime token in its environment.
pub fn browser_client(script: &str, f: &Fixture, token: &str, args: &[&OsStr]) -> Value {
    let chromium = which::which("chromium").expect("chromium (ci/setup installs Debian's)");
    let (tmp, _) = dirs(f);
    let mut all: Vec<&OsStr> = vec![chromium.as_os_str()];
    all.extend_from_slice(args);
    python_client(
        script,
        &all,
        &[
            ("CODEWHALE_RUNTIME_TOKEN", OsStr::new(token)),
            ("HOME", f.home.as_os_str()),
            ("TMPDIR", tmp.as_os_str()),
        ],
    )
}

pub fn python_client(script: &str, args: &[&OsStr], envs: &[(&str, &OsStr)]) -> Value {
    let path = format!("{}/tests/clients/{script}", env!("CARGO_MANIFEST_DIR"));
    let o = Command::new("python3")
        .arg(path)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_PROXY", "*")
        // No __pycache__ beside the scripts (cw_http.py is imported).
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("python3 (installed by ci/setup)");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{script}: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{script} printed ({e}): {out}"))
}

/// [`python_client`] against a running HTTP server (its base URL as the
/// argument, the token in `CODEWHALE_RUNTIME_TOKEN`).
pub fn python_http_client(script: &str, s: &Server) -> Value {
    python_client(
        script,
        &[OsStr::new(&s.base)],
        &[("CODEWHALE_RUNTIME_TOKEN", OsStr::new(TOKEN))],
    )
}
