//! A fake OpenSandbox deployment for the tests, written from the specs in
//! `../shared/opensandbox-spec/`: a lifecycle server (`/v1/sandboxes…`) and
//! one execd, both real HTTP on 127.0.0.1.
//!
//! execd really runs each command with `sh -c` on this machine; the
//! "sandbox filesystem" is the host filesystem, and the tests point
//! `remote_workdir`/`remote_tmp` into a temp dir. File routes refuse paths
//! outside `fs_root`.
//!
//! It reproduces what execd really sends: one raw JSON object per event
//! followed by a blank line (optionally `data:`-prefixed), `init` with the
//! command id, one `stdout`/`stderr` event per line without its newline,
//! periodic `ping`s, `execution_complete` or `error` with the exit code in
//! `evalue`, then a configurable close delay and optionally a connection
//! dropped without the final chunk. It checks `OPEN-SANDBOX-API-KEY` on
//! lifecycle routes, the endpoint headers and `X-EXECD-ACCESS-TOKEN` on
//! execd routes, and rejects (and records) the lifecycle key on execd.
#![allow(dead_code, clippy::result_large_err)]

pub mod egress;
pub mod execd;
pub mod lifecycle;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const API_KEY: &str = "lifecycle-key-123";
pub const EXECD_TOKEN: &str = "execd-token-456";
pub const ROUTE_HEADER: &str = "x-fake-route";

#[derive(Clone, Debug)]
pub struct FakeOptions {
    pub execd_token: Option<String>,
    pub data_prefix: bool,
    pub close_delay: Duration,
    pub drop_final_chunk: bool,
    /// GETs answered `Pending` (then an unknown state once) before `Running`.
    pub pending_polls: usize,
    pub ping_every: Duration,
    /// When set, the sandbox ends up in this state instead of `Running`.
    pub final_state: Option<String>,
    pub fs_root: PathBuf,
    /// The egress sidecar of a sandbox created with a `networkPolicy`.
    pub egress: egress::EgressBehaviour,
}

impl FakeOptions {
    pub fn new(fs_root: PathBuf) -> Self {
        FakeOptions {
            execd_token: Some(EXECD_TOKEN.to_string()),
            data_prefix: false,
            close_delay: Duration::from_millis(1000),
            drop_final_chunk: false,
            pending_polls: 1,
            ping_every: Duration::from_millis(200),
            final_state: None,
            fs_root,
            // The spec's own example answers `enforcementMode: dns`.
            egress: egress::EgressBehaviour::Works {
                enforcement_mode: "dns".into(),
            },
        }
    }
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub server: &'static str,
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: BTreeMap<String, String>,
    pub body: Option<Value>,
}

#[derive(Clone, Debug)]
pub struct Sbx {
    pub state: String,
    pub polls: usize,
    pub metadata: BTreeMap<String, String>,
    pub entrypoint: Value,
    /// `None`: created with `timeout: null` (manual cleanup, no expiry).
    pub expires_at: Option<time::OffsetDateTime>,
}

#[derive(Default)]
pub struct Shared {
    pub requests: Vec<Recorded>,
    /// Upload `metadata` parts (FileMetadata JSON).
    pub upload_metadata: Vec<Value>,
    /// Names of upload parts sent without a filename (Go puts them in
    /// `form.Value`, which execd never reads).
    pub upload_value_parts: Vec<String>,
    pub violations: Vec<String>,
    pub sandboxes: BTreeMap<String, Sbx>,
    pub deleted: Vec<String>,
    /// Command id → process group id, while running.
    pub running: BTreeMap<String, i32>,
    pub interrupted: Vec<String>,
    pub next_id: usize,
    /// Sandbox id → its egress sidecar's `NetworkPolicy` (from the create
    /// request's `networkPolicy`; only such sandboxes have a sidecar).
    pub egress_policies: BTreeMap<String, Value>,
}

pub struct State {
    pub opts: FakeOptions,
    pub shared: Mutex<Shared>,
    pub execd_addr: Mutex<String>,
    pub egress_addr: Mutex<String>,
}

impl State {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record(
        &self,
        server: &'static str,
        method: &str,
        path: &str,
        query: &str,
        headers: &HeaderMap,
        body: Option<Value>,
    ) {
        let headers = headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    v.to_str().unwrap_or("?").to_string(),
                )
            })
            .collect();
        self.lock().requests.push(Recorded {
            server,
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            headers,
            body,
        });
    }
}

pub fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"code": code, "message": message})),
    )
        .into_response()
}

/// The running fake.
pub struct FakeServer {
    pub state: Arc<State>,
    pub lifecycle_url: String,
    pub execd_url: String,
}

impl FakeServer {
    pub async fn start(opts: FakeOptions) -> FakeServer {
        let state = Arc::new(State {
            opts,
            shared: Mutex::new(Shared::default()),
            execd_addr: Mutex::new(String::new()),
            egress_addr: Mutex::new(String::new()),
        });
        let l1 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let l2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let l3 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (a1, a2) = (l1.local_addr().unwrap(), l2.local_addr().unwrap());
        *state.execd_addr.lock().unwrap() = a2.to_string();
        *state.egress_addr.lock().unwrap() = l3.local_addr().unwrap().to_string();
        let lr = lifecycle::router(state.clone());
        let er = execd::router(state.clone());
        let gr = egress::router(state.clone());
        tokio::spawn(async move { axum::serve(l1, lr).await.unwrap() });
        tokio::spawn(async move { axum::serve(l2, er).await.unwrap() });
        tokio::spawn(async move { axum::serve(l3, gr).await.unwrap() });
        FakeServer {
            state,
            lifecycle_url: format!("http://{a1}"),
            execd_url: format!("http://{a2}"),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().requests.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.lock().violations.clone()
    }

    pub fn interrupted(&self) -> Vec<String> {
        self.state.lock().interrupted.clone()
    }

    pub fn deleted(&self) -> Vec<String> {
        self.state.lock().deleted.clone()
    }

    /// The egress sidecar's current policy of sandbox `id`.
    pub fn egress_policy(&self, id: &str) -> Option<Value> {
        self.state.lock().egress_policies.get(id).cloned()
    }

    pub fn live_sandboxes(&self) -> Vec<String> {
        self.state.lock().sandboxes.keys().cloned().collect()
    }
}
