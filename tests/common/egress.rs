//! Loopback worlds for the egress-proxy tests: an HTTP origin (hyper, in
//! process) that counts every TCP connection it accepts, so a test can
//! check on the server's side that nothing arrived; and an HTTPS origin
//! (Python's `http.server` + `ssl`, a separate process) with a fresh
//! self-signed certificate for a test name (made by the `openssl` CLI).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// An HTTP/1.1 origin on 127.0.0.1. `GET /bytes/N` answers N bytes of
/// `x`; `POST /count` answers the length of the body it received;
/// everything else answers `hello from NAME`.
pub struct Origin {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Origin {
    pub async fn start(name: &'static str) -> Origin {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: Request<hyper::body::Incoming>| async move {
                            let path = req.uri().path().to_string();
                            if path == "/count" {
                                // POST /count: answers how many body bytes arrived.
                                use http_body_util::BodyExt;
                                let n = match req.into_body().collect().await {
                                    Ok(b) => b.to_bytes().len(),
                                    Err(_) => 0,
                                };
                                return Ok::<_, std::convert::Infallible>(Response::new(
                                    Full::new(Bytes::from(n.to_string())),
                                ));
                            }
                            let body = match path.strip_prefix("/bytes/") {
                                Some(n) => Bytes::from(vec![b'x'; n.parse::<usize>().unwrap_or(0)]),
                                None => Bytes::from(format!("hello from {name}\n")),
                            };
                            Ok::<_, std::convert::Infallible>(Response::new(Full::new(body)))
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        Origin {
            addr,
            accepted,
            task,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `python3` serving HTTPS for `name` on 127.0.0.1; its request log
/// (stderr) tells how many requests arrived.
pub struct TlsOrigin {
    pub port: u16,
    pub cert: PathBuf,
    child: Child,
    log: PathBuf,
}

const TLS_SERVER: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over tls\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        # A DNS-over-HTTPS endpoint's shape (RFC 8484 §4.1: POST, body an
        # application/dns-message): answers how many body bytes arrived.
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        body = ("got %d bytes of %s\n" % (len(data), self.headers.get("Content-Type", ""))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, fmt, *args):
        with open(sys.argv[3], "a") as f:
            f.write("request " + (fmt % args) + "\n")
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

impl TlsOrigin {
    pub fn start(dir: &Path, name: &str) -> TlsOrigin {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        let st = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            ])
            .arg(format!("/CN={name}"))
            .arg("-addext")
            .arg(format!("subjectAltName=DNS:{name}"))
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .expect("openssl (installed by ci/setup)");
        assert!(st.success(), "openssl req failed");
        let log = dir.join("tls-requests.log");
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(TLS_SERVER)
            .arg(&cert)
            .arg(&key)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("python server port");
        TlsOrigin {
            port,
            cert,
            child,
            log,
        }
    }

    pub fn requests(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `curl` with no proxy variables of its own and no config file.
pub fn curl() -> tokio::process::Command {
    let mut c = tokio::process::Command::new("curl");
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(["-q", "-sS", "--max-time", "20"])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

pub struct CurlOut {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub async fn run(mut c: tokio::process::Command) -> CurlOut {
    let o = c.output().await.expect("curl (installed by ci/setup)");
    CurlOut {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The real-sandbox fixture of the `network = "allowlist"` tests
/// (real_egress, real_egress_tools): a fresh [`Fx`] plus its own private
/// (0700) `XDG_RUNTIME_DIR`, where the proxy's Unix socket directory goes,
/// and `TMPDIR`.
pub struct EgressWorld {
    pub fx: super::sandbox::Fx,
    pub runtime: PathBuf,
    pub tmp: PathBuf,
}

impl EgressWorld {
    pub fn new() -> EgressWorld {
        use std::os::unix::fs::PermissionsExt;
        let fx = super::sandbox::Fx::new();
        let runtime = fx.root.join("xdg-runtime");
        let tmp = fx.root.join("tmp");
        for d in [&runtime, &tmp] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        EgressWorld { fx, runtime, tmp }
    }

    /// `sandbox run --network=allowlist FLAGS -- sh -c SCRIPT` with the
    /// test resolver `resolve`.
    pub fn run(
        &self,
        case: &super::sandbox::Case,
        resolve: &str,
        flags: &[&str],
        script: &str,
    ) -> super::sandbox::Run {
        self.run_with(case, resolve, flags, script, |_| {})
    }

    /// [`EgressWorld::run`], with `adjust` applied to the command (its
    /// environment) before it runs. Panics on exit 125 (the sandbox could
    /// not be set up), so no test mistakes a setup failure for a denial.
    pub fn run_with(
        &self,
        case: &super::sandbox::Case,
        resolve: &str,
        flags: &[&str],
        script: &str,
        adjust: impl FnOnce(&mut Command),
    ) -> super::sandbox::Run {
        let report = self.fx.root.join("report.json");
        let _ = std::fs::remove_file(&report);
        let mut fl = vec![
            "--network=allowlist",
            "--report-json",
            report.to_str().unwrap(),
        ];
        fl.extend_from_slice(flags);
        let mut c = self.fx.command(case, &fl, &["sh", "-c", script]);
        c.env("CODEWHALE_TEST_RESOLVE", resolve)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("TMPDIR", &self.tmp);
        adjust(&mut c);
        let out = c.output().unwrap();
        let report = std::fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(serde_json::Value::Null);
        let r = super::sandbox::Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            report,
        };
        assert_ne!(r.code, 125, "[{case}] sandbox setup failed: {}", r.stderr);
        r
    }
}
