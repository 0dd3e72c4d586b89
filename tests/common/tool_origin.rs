//! A loopback origin for real package tools: git (dumb HTTP, and smart
//! HTTP through `git http-backend` under `/smart/`), pip (a PEP 503 simple
//! index with one wheel), npm (a registry answering one packument) and
//! cargo (a sparse registry index with one crate under `/cargo/index/`),
//! served by `tool_origin.py` (Python's `http.server`, its own
//! process). Every request is logged with the peer address it came from
//! and its `Host` header, so a test can check on the server's side what
//! arrived and through which socket.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const SERVER: &str = include_str!("tool_origin.py");

/// The file `git clone` must bring back, and its content.
pub const GIT_FILE: &str = "hello.txt";
pub const GIT_TEXT: &str = "cloned through the proxy\n";
/// The wheel `pip download` must bring back.
pub const WHEEL: &str = "demo_pkg-1.0-py3-none-any.whl";
/// The packument's description, printed by `npm view demo-pkg description`.
pub const NPM_DESCRIPTION: &str = "served on loopback";

/// The crate the sparse index serves, and the path of its `.crate` under
/// the origin's root.
pub const CRATE: &str = "demo-crate-1.0.0.crate";
pub const CRATE_SERVED: &str = "cargo/dl/demo-crate/1.0.0/download";

/// One request as the origin logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `ip:port` of the connection's other end.
    pub peer: String,
    pub method: String,
    pub path: String,
    pub host: String,
}

pub struct ToolOrigin {
    pub port: u16,
    pub root: PathBuf,
    log: PathBuf,
    child: Child,
}

impl ToolOrigin {
    /// Build the served tree under `dir` (a bare git repository after
    /// `git update-server-info`, made with the host's git and `home` as
    /// `HOME`) and start the server.
    pub fn start(dir: &Path, home: &Path) -> ToolOrigin {
        let root = dir.join("origin-root");
        let src = dir.join("origin-src");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join(GIT_FILE), GIT_TEXT).unwrap();
        let git = |cwd: &Path, args: &[&str]| {
            let out = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(cwd)
                .env("HOME", home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .expect("git (installed by ci/setup)");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&src, &["init", "-q"]);
        git(&src, &["add", GIT_FILE]);
        git(&src, &["commit", "-qm", "one"]);
        let bare = root.join("repo.git");
        git(
            dir,
            &[
                "clone",
                "-q",
                "--bare",
                src.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        // What makes a bare repository servable as static files
        // (gitprotocol-http(5), "dumb" protocol): info/refs and
        // objects/info/packs.
        git(&bare, &["update-server-info"]);
        let log = dir.join("origin-requests.log");
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(SERVER)
            .arg(&root)
            .arg(&log)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("tool origin did not print its port: {line:?}"));
        ToolOrigin {
            port,
            root,
            log,
            child,
        }
    }

    /// Every request logged so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(4, ' ');
                Some(Request {
                    peer: it.next()?.to_string(),
                    method: it.next()?.to_string(),
                    path: it.next()?.to_string(),
                    host: it.next()?.strip_prefix("host=")?.to_string(),
                })
            })
            .collect()
    }
}

impl Drop for ToolOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The proxy's own ends (`local`) of its allowed connections to `host`,
/// from a run's `enforcement.egress.events`.
pub fn proxy_sockets(events: &[Value], host: &str) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| e["host"] == host && e["decision"] == "allowed")
        .filter_map(|e| e["local"].as_str().map(str::to_string))
        .collect()
}
