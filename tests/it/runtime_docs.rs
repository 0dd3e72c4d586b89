#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The curl examples of docs/RUNTIME_API.md run as written against a real
//! server (curl is a client nobody here wrote).
#![cfg(unix)]

use crate::common;

use common::cli::Fixture;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

fn examples() -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/RUNTIME_API.md"))
        .unwrap();
    let after = doc
        .split("<!-- runtime-api-examples -->")
        .nth(1)
        .expect("marker");
    let body = after.split("```sh\n").nth(1).unwrap();
    body.split("```").next().unwrap().to_string()
}

#[test]
fn the_documented_curl_examples_run() {
    let f = Fixture::with_config("");
    let tmp = f.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = f
        .cmd(&[
            "app-server",
            "--http",
            "--port",
            "0",
            "-C",
            f.ws.to_str().unwrap(),
        ])
        .env("TMPDIR", &tmp)
        .env("XDG_RUNTIME_DIR", &tmp)
        .env("CODEWHALE_RUNTIME_TOKEN", "doc-token")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let base = line
        .split("listening on ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let script = format!("set -e\n{}", examples());
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(&tmp)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BASE", &base)
        .env("CODEWHALE_RUNTIME_TOKEN", "doc-token")
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains(r#""status":"ok""#), "{out}");
    assert!(out.contains("pending_approvals"), "{out}");
    assert!(
        out.contains("unknown field `titel`"),
        "the documented error: {out}"
    );
    assert!(out.contains("event: thread.started"), "{out}");
    assert!(out.contains(r#""group_by":"model""#), "{out}");
    assert!(out.contains("nothing to compact"), "{out}");
}
