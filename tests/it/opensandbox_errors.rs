#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Error paths of the OpenSandbox backend against the fake server: each
//! error names the call, and maps to the documented exit code.
#![cfg(unix)]

use crate::common;
use common::opensandbox_env;

use codewhale::host::opensandbox;
use codewhale::host::{ExecRequest, HostError, StdinSpec};
use codewhale::policy::SandboxMode;
use opensandbox_env::{config_from, sh, Env};

async fn run_err(env: &Env, cfg: &opensandbox::OpenSandboxConfig, req: ExecRequest) -> HostError {
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    match opensandbox::run(cfg, &r, req).await {
        Ok(o) => panic!("expected an error, got exit {:?}", o.exit),
        Err(e) => e,
    }
}

#[tokio::test]
async fn wrong_lifecycle_key_names_the_call() {
    let env = Env::start(|_| {}).await;
    let mut cfg = env.cfg.clone();
    cfg.api_key = Some("wrong".into());
    let e = run_err(&env, &cfg, ExecRequest::new(sh("true"))).await;
    let msg = e.to_string();
    assert!(
        msg.contains("POST /v1/sandboxes")
            && msg.contains("401")
            && msg.contains("INVALID_API_KEY"),
        "{msg}"
    );
    assert_eq!(e.exit_code(), 125);
    // Positive control: the right key works.
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    opensandbox::run(&env.cfg, &r, ExecRequest::new(sh("true")))
        .await
        .expect("right key");
}

#[tokio::test]
async fn wrong_execd_token_names_execd_and_cleans_up() {
    let env = Env::start(|_| {}).await;
    let mut cfg = env.cfg.clone();
    cfg.execd_access_token = Some("nope".into());
    let e = run_err(&env, &cfg, ExecRequest::new(sh("true"))).await;
    let msg = e.to_string();
    assert!(msg.contains("GET /ping") && msg.contains("401"), "{msg}");
    assert_eq!(
        env.fake.deleted(),
        vec!["sbx-1".to_string()],
        "half-started sandbox deleted"
    );
}

#[tokio::test]
async fn unreachable_server_is_transient() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let env = Env::start(|_| {}).await;
    let cfg = config_from(
        &env.tmp,
        &format!("url = \"http://127.0.0.1:{port}\"\napi_key = \"k\"\n"),
    );
    let e = run_err(&env, &cfg, ExecRequest::new(sh("true"))).await;
    assert!(matches!(e, HostError::RemoteTransient(_)), "{e:?}");
    assert!(e.to_string().contains("cannot reach"), "{e}");
    assert_eq!(e.exit_code(), 75);
}

#[tokio::test]
async fn failed_sandbox_is_reported_with_its_state() {
    let env = Env::start(|o| o.final_state = Some("Failed".into())).await;
    let e = run_err(&env, &env.cfg, ExecRequest::new(sh("true"))).await;
    let msg = e.to_string();
    assert!(msg.contains("sbx-1 is Failed"), "{msg}");
    assert_eq!(env.fake.deleted(), vec!["sbx-1".to_string()]);
}

#[tokio::test]
async fn requests_the_backend_cannot_express_are_refused() {
    let env = Env::start(|_| {}).await;
    let mut req = ExecRequest::new(sh("cat"));
    req.stdin = StdinSpec::Bytes(b"data".to_vec());
    let msg = run_err(&env, &env.cfg, req).await.to_string();
    assert!(msg.contains("stdin"), "{msg}");
    let mut req = ExecRequest::new(sh("pwd"));
    req.cwd = Some(env.tmp.path().join("home"));
    let msg = run_err(&env, &env.cfg, req).await.to_string();
    assert!(msg.contains("outside the workspace"), "{msg}");
    assert!(
        env.fake.requests().is_empty(),
        "refused before any sandbox was created"
    );
    // Positive control: a cwd inside the workspace maps into the remote workdir.
    std::fs::create_dir_all(env.ws.join("sub")).unwrap();
    let mut req = ExecRequest::new(sh("pwd"));
    req.cwd = Some(env.ws.join("sub"));
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let out = opensandbox::run(&env.cfg, &r, req).await.expect("run");
    assert_eq!(
        out.stdout.text().trim(),
        env.remote_ws.join("sub").display().to_string()
    );
}
