//! `codewhale serve --acp`: an Agent Client Protocol (v1) agent for
//! editors (Zed, JetBrains, CodeCompanion …) on newline-delimited stdio
//! JSON-RPC. Wire types are `agent-client-protocol-schema`'s; the loop is
//! ours ([`rpc`]), because every session is a runtime thread and every
//! prompt a runtime turn ([`agent`]): the same driver, gates and host as
//! the app-server, and nothing else can run a tool. stdout carries
//! protocol lines only; notes go to stderr.
//!
//! The client's `fs/*` and `terminal/*` methods are never called: file and
//! shell work runs through codewhale's own host under its sandbox.

pub mod agent;
pub mod mcp;
pub mod options;
pub mod rpc;
pub mod translate;

use crate::config::ConfigPaths;
use crate::runtime::driver::Driver;
use crate::runtime::Runtime;
use anyhow::Context;
use rpc::{Incoming, Peer};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// `codewhale serve --acp [-C DIR] [--approval-timeout SECS]`.
pub fn run(workspace: Option<PathBuf>, approval_timeout: Duration) -> anyhow::Result<i32> {
    let paths = ConfigPaths::from_env();
    let home = paths.codewhale_home.clone();
    let ws = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("current directory")?,
    };
    let ws = std::fs::canonicalize(&ws).with_context(|| format!("-C {}", ws.display()))?;
    let (rt, report) = Runtime::open(&home)?;
    for t in &report.interrupted_turns {
        eprintln!("codewhale serve --acp: runtime: turn {t} marked interrupted (its process ended mid-turn)");
    }
    let driver = Driver::new(rt, &home, approval_timeout);
    let default_model = crate::runtime::request::default_model(&ws, &home);
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    eprintln!(
        "codewhale serve --acp: speaking ACP v1 on stdio (default workspace {})",
        ws.display()
    );
    tokio_rt.block_on(serve(driver, ws, default_model));
    tokio_rt.shutdown_background();
    Ok(crate::exit::OK)
}

/// Read requests until stdin closes; each request runs on its own task
/// (a prompt streams while cancel and permission answers still arrive).
pub async fn serve(driver: Driver, workspace: PathBuf, default_model: String) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(v) = rx.recv().await {
            let mut line = v.to_string();
            line.push('\n');
            if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let peer = Peer::new(tx);
    let agent = Arc::new(agent::Agent::new(
        driver,
        workspace,
        default_model,
        peer.clone(),
    ));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        match rpc::parse_line(&line) {
            Incoming::Request { id, method, params } => {
                let a = agent.clone();
                tokio::spawn(async move {
                    let r = a.handle(&method, params).await;
                    a.peer().respond(id, r);
                });
            }
            Incoming::Notification { method, params } => agent.notified(&method, params),
            Incoming::Response { id, reply } => {
                if !peer.deliver(&id, reply) {
                    eprintln!("codewhale serve --acp: a response to no request of ours (id {id})");
                }
            }
            Incoming::Invalid { id, code, message } => peer.respond(id, Err((code, message))),
        }
    }
    // stdin closed: stop running turns (their commands are killed).
    drop(agent);
    drop(peer);
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
}
