#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The MCP client end to end, with real servers started under the real
//! sandbox: the reference server `@modelcontextprotocol/server-everything`
//! (npm, pinned; installed by `ci/setup` into `~/.cache/codewhale-ci/npm`) and small
//! fixtures of ours in `tests/fixtures/mcp/` (slow to start, junk on
//! stdout, crash after initialize, a tool that writes a file).
//!
//! A real-sandbox target: CI runs it as root, as the unprivileged user
//! `cwtest` (ci/unprivileged-user stages the npm package and points
//! `CODEWHALE_CI_NPM_DIR` at it) and with bubblewrap hidden
//! (`CODEWHALE_TEST_NO_BWRAP=1`: every server runs on the landlock tier).
//! These tests need node and the npm package: when either is missing
//! they FAIL with the command that installs it (they never skip).

mod common;

use codewhale::mcp::client::Phase;
use codewhale::mcp::McpManager;
use common::cli::*;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::*;

#[test]
fn mcp_list_json_reports_every_server() {
    let f = Fixture::with_config("");
    write_mcp(&f.cw_home, &all_servers());
    // A repository's own .mcp.json is never read.
    std::fs::write(
        f.ws.join(".mcp.json"),
        r#"{"mcpServers": {"evil": {"command": "touch", "args": ["pwned"]}}}"#,
    )
    .unwrap();
    let o = run(&f, &["mcp", "list", "--json"]);
    // Some servers failed: exit 1, and the report says which and why.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["project_mcp_json"]
            .as_str()
            .unwrap()
            .contains(".mcp.json ignored"),
        "{v}"
    );
    assert!(!f.ws.join("pwned").exists());
    let servers = v["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 6, "{v}");
    assert!(servers.iter().all(|s| s["name"] != "evil"));

    let ev = by_name(servers, "everything");
    assert_eq!(ev["state"], "ready", "{ev}");
    assert_eq!(ev["configured"], true);
    assert_eq!(ev["command_found"], true);
    assert_eq!(ev["started"], true);
    assert_eq!(ev["initialized"], true);
    assert!(ev["tools"].as_u64().unwrap() >= 5, "{ev}");
    assert!(ev["tool_names"]
        .as_array()
        .unwrap()
        .contains(&json!("mcp__everything__echo")));
    assert_eq!(ev["last_error"], Value::Null);
    assert_eq!(ev["sandbox"], "workspace-write");
    assert_eq!(ev["network"], false);
    assert_eq!(ev["backend"], backend(), "{ev}");
    // Its stderr went to the log file in codewhale's state dir.
    let log = std::fs::read_to_string(f.cw_home.join("logs/mcp/everything.log")).unwrap();
    assert!(log.contains("Starting default (STDIO) server"), "{log}");

    let slow = by_name(servers, "slow");
    assert_eq!(slow["state"], "failed");
    assert_eq!(slow["started"], true);
    assert_eq!(slow["initialized"], false);
    assert!(
        slow["last_error"]
            .as_str()
            .unwrap()
            .contains("did not initialize within 2 s"),
        "{slow}"
    );

    let junk = by_name(servers, "junk");
    assert_eq!(junk["state"], "ready", "{junk}");
    assert_eq!(junk["tools"], 1);
    assert_eq!(junk["stdout_junk"]["lines"], 2, "{junk}");
    assert_eq!(
        junk["stdout_junk"]["samples"][0],
        "junk_stdout server v1 starting..."
    );
    assert!(junk["last_error"]
        .as_str()
        .unwrap()
        .contains("non-protocol line"));

    let crash = by_name(servers, "crash");
    assert_eq!(crash["state"], "failed");
    assert_eq!(crash["initialized"], true);
    let why = crash["last_error"].as_str().unwrap();
    assert!(why.contains("exited with code 3"), "{why}");
    assert!(why.contains("fatal: database is locked"), "{why}");
    // Its run has ended: what the host enforced for it is in the status.
    assert_eq!(crash["enforced"]["backend"], backend(), "{crash}");
    assert!(crash["enforced"]["level"].is_string(), "{crash}");
    assert_eq!(ev["enforced"], Value::Null, "still running: not known yet");

    let missing = by_name(servers, "missing");
    assert_eq!(missing["command_found"], false);
    assert_eq!(missing["started"], false);
    assert!(missing["last_error"]
        .as_str()
        .unwrap()
        .contains("command not found"));

    let off = by_name(servers, "off");
    assert_eq!(off["state"], "disabled");
    assert_eq!(off["started"], false);
}

#[test]
fn bad_mcp_json_names_file_line_and_key() {
    let f = Fixture::with_config("");
    std::fs::write(
        f.cw_home.join("mcp.json"),
        "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"x\",\n      \"toolTimeoutSec\": 99999\n    }\n  }\n}\n",
    )
    .unwrap();
    let o = run(&f, &["mcp", "validate"]);
    assert_eq!(o.status.code(), Some(78));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{}:5: mcpServers.a.toolTimeoutSec: 99999 s is above the hard maximum of 900 s",
            f.cw_home.join("mcp.json").display()
        )),
        "{err}"
    );
    std::fs::write(
        f.cw_home.join("mcp.json"),
        "{\"mcpServers\": {\"a\": {\n \"command\": \"x\", \"agrs\": []}}}",
    )
    .unwrap();
    let o = run(&f, &["mcp", "list"]);
    assert_eq!(o.status.code(), Some(78));
    assert!(stderr(&o).contains("mcp.json:2:"), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown field `agrs`"));
}

#[test]
fn add_list_remove_round_trip() {
    let f = Fixture::with_config("");
    let o = run(
        &f,
        &[
            "mcp",
            "add",
            "junk",
            "--tool-timeout",
            "10",
            "--env",
            "A=1",
            "--",
            "python3",
            &fixture("junk_stdout.py"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&f, &["mcp", "add", "bad__name", "--", "x"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&f, &["mcp", "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&f, &["mcp", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("junk: ready"), "{text}");
    let o = run(&f, &["mcp", "remove", "junk"]);
    assert_eq!(o.status.code(), Some(0));
    let o = run(&f, &["mcp", "remove", "junk"]);
    assert_eq!(o.status.code(), Some(1));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(f.cw_home.join("mcp.json")).unwrap())
            .unwrap();
    assert_eq!(doc, json!({"mcpServers": {}}));
}

/// The manager never blocks its caller: while the slow server is still
/// starting (and until its timeout), status reads and a call to another,
/// ready server each answer within 1 s; the slow one then fails, and
/// `reload()` starts everything again without a restart.
#[test]
fn slow_and_broken_servers_never_block_the_others() {
    let f = Fixture::with_config("");
    // 5 s: node's start on the landlock tier (bwrap hidden) can take
    // longer than 2 s, and `slow` must still be starting once echo works.
    let mut v = all_servers();
    v["mcpServers"]["slow"]["startupTimeoutSec"] = json!(5);
    write_mcp(&f.cw_home, &v);
    runtime().block_on(async {
        let spec = manager_spec(&f);
        let t0 = Instant::now();
        let m = McpManager::start(spec).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1), "start blocked");
        let mut saw_slow_starting_with_echo = false;
        let cancel = codewhale::host::CancelToken::new();
        while t0.elapsed() < Duration::from_secs(10) {
            let t = Instant::now();
            let st = m.status();
            assert!(t.elapsed() < Duration::from_secs(1), "status blocked");
            let slow = st.iter().find(|s| s.name == "slow").unwrap();
            let ready = m.tools().iter().any(|t| t.name == "mcp__everything__echo");
            if slow.state == Phase::Starting && ready {
                let t = Instant::now();
                let r = m
                    .call("mcp__everything__echo", &json!({"message": "hi"}), &cancel)
                    .await
                    .unwrap();
                assert!(t.elapsed() < Duration::from_secs(1), "call blocked");
                assert_eq!(r.text, "Echo: hi");
                assert!(!r.is_error);
                assert!(
                    r.enforcement.contains("workspace-write"),
                    "{}",
                    r.enforcement
                );
                saw_slow_starting_with_echo = true;
            }
            if slow.state == Phase::Failed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            saw_slow_starting_with_echo,
            "the echo call never ran while `slow` was starting: {:?}",
            m.status()
        );
        let st = m.status();
        let slow = st.iter().find(|s| s.name == "slow").unwrap();
        assert_eq!(slow.state, Phase::Failed, "{slow:?}");
        // The crashed one stays failed: not restarted behind our back.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let crash = m.status().into_iter().find(|s| s.name == "crash").unwrap();
        assert_eq!(crash.state, Phase::Failed);
        let log = std::fs::read_to_string(f.cw_home.join("logs/mcp/crash.log")).unwrap();
        assert_eq!(log.matches("=== codewhale: starting").count(), 1, "{log}");
        // A call to a tool of a failed server says why.
        let e = m
            .call("mcp__crash__anything", &json!({}), &cancel)
            .await
            .unwrap_err();
        assert_eq!(e.category, "mcp_unavailable", "{e:?}");
        // reload: the file is read again; a removed server is gone.
        let mut v = all_servers();
        v["mcpServers"].as_object_mut().unwrap().remove("slow");
        write_mcp(&f.cw_home, &v);
        let t = Instant::now();
        let st = m.reload().unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "reload blocked");
        assert!(st.iter().all(|s| s.name != "slow"));
        m.wait_settled(Duration::from_secs(10)).await;
        let ev = m
            .status()
            .into_iter()
            .find(|s| s.name == "everything")
            .unwrap();
        assert_eq!(ev.state, Phase::Ready, "{ev:?}");
        m.stop_all();
    });
}

/// What the sandbox does to a server: it cannot write outside the
/// workspace (positive control: inside it can), and it reaches a loopback
/// listener on the host only when its entry says `"network": true`.
#[test]
fn servers_run_inside_the_sandbox() {
    let f = Fixture::with_config("");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            drop(c)
        }
    });
    let probe = |tag: &str| {
        let outside = f.home.join(format!("outside-{tag}.txt"));
        let inside = f.ws.join(format!("inside-{tag}.txt"));
        // A server (junk_stdout) started by a shell that first tries both
        // writes and a connection to the host's loopback listener.
        format!(
            "echo x > {} 2>/dev/null; echo y > {} 2>/dev/null; python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' 2>/dev/null && echo NET-OK >&2 || echo NET-DENIED >&2; exec python3 {}",
            outside.display(),
            inside.display(),
            fixture("junk_stdout.py")
        )
    };
    write_mcp(
        &f.cw_home,
        &json!({"mcpServers": {
            "offline": {"command": "sh", "args": ["-c", probe("offline")]},
            "online": {"command": "sh", "args": ["-c", probe("online")], "network": true},
        }}),
    );
    let o = run(&f, &["mcp", "list", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for tag in ["offline", "online"] {
        assert!(
            f.ws.join(format!("inside-{tag}.txt")).exists(),
            "positive control: the workspace is writable"
        );
        assert!(
            !f.home.join(format!("outside-{tag}.txt")).exists(),
            "{tag} wrote outside the workspace"
        );
    }
    let log =
        |n: &str| std::fs::read_to_string(f.cw_home.join(format!("logs/mcp/{n}.log"))).unwrap();
    assert!(log("offline").contains("NET-DENIED"), "{}", log("offline"));
    assert!(log("online").contains("NET-OK"), "{}", log("online"));
}

fn exec_fixture(model: &ScriptedModel) -> Fixture {
    let f = Fixture::new(model, "");
    write_mcp(
        &f.cw_home,
        &json!({"mcpServers": {
            "everything": {"command": "node", "args": [everything_js().display().to_string(), "stdio"]},
            "crash": {"command": "python3", "args": [fixture("crash_after_init.py")]},
        }}),
    );
    f
}

/// The model calls `mcp__everything__echo`; it passes the gates (`--auto`
/// answers the question gate 4 asks about every MCP tool), runs in the
/// sandboxed server, and the receipt says "1 MCP call".
#[test]
fn exec_calls_an_mcp_tool_and_the_receipt_counts_it() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "c1",
                "mcp__everything__echo",
                json!({"message": "hello from the model"}),
            ),
            reply("The server echoed."),
        ],
    );
    let f = exec_fixture(&model);
    let (o, ev) = exec_json(&f, &["--auto"], "say hello through the echo tool");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let meta = &ev[0];
    assert!(meta["mcp_tools"]
        .as_array()
        .unwrap()
        .contains(&json!("mcp__everything__echo")));
    // The first request offered the MCP tool with the server's schema.
    let req = &model.requests()[0].body;
    let offered = offered(req);
    assert!(offered.contains(&"mcp__everything__echo"), "{offered:?}");
    assert!(!offered.iter().any(|t| t.starts_with("mcp__crash__")));
    let approval = event(&ev, "approval", "c1");
    // Asked (every MCP tool is asked about), approved by --auto.
    assert_eq!(approval["decision"], "ask", "{approval}");
    assert_eq!(approval["outcome"], "allow");
    let result = event(&ev, "tool_result", "c1");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["output"], "Echo: hello from the model");
    assert!(
        result["enforcement"].as_str().unwrap().contains(&format!(
            "mcp server `everything`: workspace-write, network off, backend {}",
            backend()
        )),
        "{result}"
    );
    assert!(
        stderr(&o).contains("mcp server crash: not available"),
        "{}",
        stderr(&o)
    );
    let md = last_receipt_md(&f);
    assert!(md.contains("1 MCP call"), "{md}");
    let (r, action) = last_receipt_mcp_action(&f);
    assert_eq!(r["totals"]["mcp_calls"], 1, "{r}");
    assert_eq!(action["tool"], "mcp__everything__echo", "{action}");
    assert!(
        action["enforcement"]
            .as_str()
            .unwrap()
            .contains("mcp server `everything`"),
        "{action}"
    );
}

/// Without `--auto` the question about an MCP tool gets no response in a
/// headless run — the server's `readOnlyHint` does not skip it — and a
/// user rule for the family (`mcp__everything__*`) allows it.
#[test]
fn mcp_tools_are_asked_about_and_rules_match_the_family() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // get-annotated-message is annotated `readOnlyHint: true` by the
            // server (dist/tools/get-annotated-message.js).
            call(
                "c1",
                "mcp__everything__get-annotated-message",
                json!({"messageType": "success"}),
            ),
            reply("done"),
        ],
    );
    let f = exec_fixture(&model);
    let (o, ev) = exec_json(&f, &["--allowed-tools", "mcp__everything__*"], "annotate");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let a = event(&ev, "approval", "c1");
    assert_eq!(a["decision"], "ask", "{a}");
    assert_eq!(a["outcome"], "no_response", "{a}");
    let r = event(&ev, "tool_result", "c1");
    assert_eq!(r["status"], "not_run");

    // Control: a user rule for the family allows the call.
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("c1", "mcp__everything__echo", json!({"message": "ruled"})),
            reply("done"),
        ],
    );
    let f = exec_fixture(&model);
    std::fs::write(
        f.cw_home.join("permissions.toml"),
        "[[rules]]\ntool = \"mcp__everything__*\"\naction = \"allow\"\n",
    )
    .unwrap();
    let (o, ev) = exec_json(&f, &["--allowed-tools", "mcp__everything__*"], "echo");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let a = event(&ev, "approval", "c1");
    assert_eq!(a["outcome"], "allow", "{a}");
    assert_eq!(a["decided_by"], "rule", "{a}");
    let r = event(&ev, "tool_result", "c1");
    assert_eq!(r["output"], "Echo: ruled", "{r}");
}

/// The host's piped-stdio run (what every MCP server uses) on both Linux
/// tiers: bytes written to the pipe reach the sandboxed `cat`, its answer
/// comes back on the other pipe, stderr is appended to the log, and the
/// cancel token ends the run (the caller's read end then sees EOF).
#[test]
fn host_runs_a_server_with_piped_stdio_on_bwrap_and_landlock() {
    use codewhale::host::{BackendChoice, CancelToken, ExecRequest, ServerStdio};
    use codewhale::policy::{SandboxMode, SandboxPolicy};
    use std::io::{BufRead, Write};
    use std::sync::Arc;
    // With bubblewrap hidden, the landlock tier alone.
    let backends = if common::sandbox::no_bwrap() {
        vec![BackendChoice::Landlock]
    } else {
        vec![BackendChoice::Bwrap, BackendChoice::Landlock]
    };
    for backend in backends {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let log = ws.join("stderr.log");
        let (child_in, our_in) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (our_out, child_out) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut req = ExecRequest::new(vec![
            "sh".into(),
            "-c".into(),
            "echo started >&2; exec cat".into(),
        ]);
        let cancel = CancelToken::new();
        req.cancel = Some(cancel.clone());
        req.stdio = Some(ServerStdio {
            stdin: Arc::new(child_in),
            stdout: Arc::new(child_out),
            stderr_log: Some(log.clone()),
        });
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let settings = codewhale::host::HostSettings {
            backend,
            helper_exe: Some(env!("CARGO_BIN_EXE_codewhale").into()),
            ..Default::default()
        };
        let run =
            std::thread::spawn(move || codewhale::host::run_blocking(&policy, &settings, &req));
        let mut to = std::fs::File::from(our_in);
        let mut from = std::io::BufReader::new(std::fs::File::from(our_out));
        writeln!(to, "{{\"jsonrpc\":\"2.0\",\"id\":1}}").unwrap();
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        assert_eq!(line, "{\"jsonrpc\":\"2.0\",\"id\":1}\n", "{backend:?}");
        cancel.cancel();
        let out = run.join().unwrap().unwrap();
        assert_eq!(
            out.enforcement.backend.as_str(),
            match backend {
                BackendChoice::Bwrap => "bwrap",
                _ => "landlock",
            }
        );
        assert_eq!(
            out.stdout.total, 0,
            "stdout went to the pipe, not the capture"
        );
        assert!(out.stderr.text().contains("started"), "{backend:?}");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut from, &mut rest).unwrap();
        assert_eq!(rest, "", "EOF after the run");
        assert!(std::fs::read_to_string(&log).unwrap().contains("started"));
    }
}

/// `app-server --http`: a turn in an agent thread gets the workspace's MCP
/// tools, while `/health` keeps answering within 1 s throughout — during
/// the slow server's start, the turn's wait for it, and the call. The call
/// is an `mcp_tool_call` item of the runtime's event log naming server and
/// tool. Then `mcp.json` is edited (a new server) with the app-server
/// still running: the next turn restarts the servers from the changed file
/// and its tool is called — no restart, no reload request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_turn_calls_an_mcp_tool_and_picks_up_a_changed_mcp_json() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "c1",
                "mcp__everything__echo",
                json!({"message": "via runtime"}),
            ),
            reply("echoed"),
            call(
                "c2",
                "mcp__notes__write_note",
                json!({"path": "from-reloaded.txt", "text": "new server\n"}),
            ),
            reply("written"),
        ],
    );
    let f = model_fixture(&model);
    let mut v = all_servers();
    v["mcpServers"]["slow"]["startupTimeoutSec"] = json!(3);
    write_mcp(&f.cw_home, &v);
    let srv = AppServer::start(&f);
    let thread = srv.thread().await;
    let turn = srv.turn(&thread, "echo via mcp").await;
    let (status, checks) = srv.wait_turn(&thread, &turn).await;
    assert_eq!(status, "completed");
    // The turn waited for the slow server's timeout, and /health answered
    // all along.
    assert!(checks >= 10, "only {checks} health checks");
    let reqs = model.requests();
    let names = offered(&reqs[0].body);
    assert!(names.contains(&"mcp__everything__echo"), "{names:?}");
    assert!(!names.contains(&"mcp__notes__write_note"), "{names:?}");
    assert_eq!(
        tool_message(&reqs[1].body, "c1")["content"],
        "Echo: via runtime"
    );
    let item = started_item(&f, "c1");
    assert_eq!(item["kind"], "mcp_tool_call", "{item}");
    assert_eq!(
        item["metadata"]["mcp"],
        json!({"server": "everything", "tool": "echo"}),
        "{item}"
    );

    // Edit mcp.json while the server runs: a new server, the slow one gone.
    v["mcpServers"]
        .as_object_mut()
        .unwrap()
        .insert("notes".into(), notes_server());
    v["mcpServers"].as_object_mut().unwrap().remove("slow");
    write_mcp(&f.cw_home, &v);
    let turn = srv.turn(&thread, "write a note").await;
    let (status, _) = srv.wait_turn(&thread, &turn).await;
    assert_eq!(status, "completed");
    let reqs = model.requests();
    let names = offered(&reqs[2].body);
    assert!(names.contains(&"mcp__notes__write_note"), "{names:?}");
    let msg = tool_message(&reqs[3].body, "c2");
    assert!(
        msg["content"]
            .as_str()
            .unwrap()
            .starts_with("wrote from-reloaded.txt"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("from-reloaded.txt")).unwrap(),
        "new server\n"
    );
    let log = std::fs::read_to_string(f.cw_home.join("logs/mcp/everything.log")).unwrap();
    assert_eq!(
        log.matches("=== codewhale: starting").count(),
        2,
        "restarted once for the changed file: {log}"
    );
}

/// A call past `toolTimeoutSec` ends as `mcp_timeout` (the server's
/// `trigger-long-running-operation` takes 10 s; the limit is 1 s), and the
/// cancel token (Ctrl-C) ends a call at once.
#[test]
fn tool_timeout_and_cancel_end_a_call() {
    let f = Fixture::with_config("");
    write_mcp(
        &f.cw_home,
        &json!({"mcpServers": {"everything": {
            "command": "node",
            "args": [everything_js().display().to_string(), "stdio"],
            "toolTimeoutSec": 1
        }}}),
    );
    runtime().block_on(async {
        let spec = manager_spec(&f);
        let m = McpManager::start(spec).unwrap();
        m.wait_settled(Duration::from_secs(30)).await;
        let long = json!({"duration": 10, "steps": 2});
        let cancel = codewhale::host::CancelToken::new();
        let t = Instant::now();
        let e = m
            .call(
                "mcp__everything__trigger-long-running-operation",
                &long,
                &cancel,
            )
            .await
            .unwrap_err();
        assert_eq!(e.category, "mcp_timeout", "{e:?}");
        assert!(e.message.contains("within 1 s"), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c2.cancel();
        });
        let t = Instant::now();
        let e = m
            .call(
                "mcp__everything__trigger-long-running-operation",
                &long,
                &cancel,
            )
            .await
            .unwrap_err();
        assert_eq!(e.category, "cancelled", "{e:?}");
        assert!(t.elapsed() < Duration::from_millis(900));
        // Control: the server still answers a quick call.
        let ok = m
            .call(
                "mcp__everything__echo",
                &json!({"message": "still here"}),
                &codewhale::host::CancelToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(ok.text, "Echo: still here");
        m.stop_all();
    });
}

/// A server sees the scrubbed environment plus its entry's `env`: a
/// secret-looking variable of codewhale's own environment does not reach
/// it, the entry's token does (server-everything's `get-env` returns the
/// server's `process.env`).
#[test]
fn servers_get_the_scrubbed_environment_plus_their_env() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("c1", "mcp__everything__get-env", json!({})),
            reply("ok"),
        ],
    );
    let f = Fixture::new(&model, "");
    write_mcp(
        &f.cw_home,
        &json!({"mcpServers": {"everything": {
            "command": "node",
            "args": [everything_js().display().to_string(), "stdio"],
            "env": {"SERVICE_API_TOKEN": "given-on-purpose"}
        }}}),
    );
    let o = cmd(
        &f,
        &[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "env",
        ],
    )
    .env("MY_SECRET_TOKEN", "must-not-leak")
    .env("PLAIN_SETTING", "visible")
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    let r = event(&ev, "tool_result", "c1");
    let out = r["output"].as_str().unwrap();
    assert!(out.contains("given-on-purpose"), "{out}");
    assert!(out.contains("PLAIN_SETTING"), "positive control: {out}");
    assert!(!out.contains("must-not-leak"), "{out}");
}

/// An MCP call with a side effect is first-class in the record: the
/// `notes` server (which claims `readOnlyHint: true`) writes a file in the
/// workspace; stream-json's `tool_use` names server and tool, an undo
/// snapshot was taken just before the call, the receipt counts "1 MCP
/// call" with server, tool, decision and the file it changed, and
/// `codewhale undo --last` removes the file again.
#[test]
fn an_mcp_call_that_writes_is_snapshotted_receipted_and_undone() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "c1",
                "mcp__notes__write_note",
                json!({"path": "note.txt", "text": "written by an MCP server\n"}),
            ),
            reply("noted"),
        ],
    );
    let f = Fixture::new(&model, "");
    std::fs::write(f.ws.join("kept.txt"), "before\n").unwrap();
    write_mcp(
        &f.cw_home,
        &json!({"mcpServers": {"notes": notes_server()}}),
    );
    let (o, ev) = exec_json(&f, &["--auto"], "write a note");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let used = event(&ev, "tool_use", "c1");
    assert_eq!(
        used["mcp"],
        json!({"server": "notes", "tool": "write_note"}),
        "{used}"
    );
    // Asked about despite readOnlyHint, approved by --auto.
    let a = event(&ev, "approval", "c1");
    assert_eq!(
        (&a["decision"], &a["outcome"]),
        (&json!("ask"), &json!("allow")),
        "{a}"
    );
    assert_eq!(event(&ev, "tool_result", "c1")["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("note.txt")).unwrap(),
        "written by an MCP server\n"
    );
    let recs = records(&f.session_files()[0]);
    let snaps = of_type(&recs, "snapshot");
    assert!(
        snaps
            .iter()
            .any(|e| e["label"] == "tool:c1" && !e["id"].is_null()),
        "no snapshot just before the MCP call: {snaps:?}"
    );

    let md = last_receipt_md(&f);
    assert!(md.contains("· 1 MCP call ·"), "{md}");
    assert!(
        md.contains("call MCP tool `write_note` of server `notes` — created `note.txt` (+1 −0)"),
        "{md}"
    );
    assert!(md.contains("note.txt"), "{md}");
    assert!(md.contains("approved by"), "{md}");
    let (r, action) = last_receipt_mcp_action(&f);
    assert_eq!(r["totals"]["mcp_calls"], 1, "{r}");
    assert_eq!(
        action["mcp"],
        json!({"server": "notes", "tool": "write_note"})
    );
    assert_eq!(action["status"], "succeeded", "{action}");
    assert!(
        action["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["path"] == "note.txt"),
        "{action}"
    );

    let o = run(&f, &["undo", "--last"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !f.ws.join("note.txt").exists(),
        "undo left the MCP server's file"
    );
    // Control: what was there before the run is still there.
    assert_eq!(
        std::fs::read_to_string(f.ws.join("kept.txt")).unwrap(),
        "before\n"
    );
}

/// Helpers shared by the tests above.
mod support {
    use crate::common::cli::{stderr, Fixture};
    use crate::common::sandbox::{no_bwrap, path_without_bwrap};
    use crate::common::scripted_model::ScriptedModel;
    use codewhale::host::{BackendChoice, HostSettings};
    use codewhale::mcp::ManagerSpec;
    use codewhale::policy::{SandboxMode, SandboxPolicy};
    use serde_json::{json, Value};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};
    use std::time::{Duration, Instant};

    /// `dist/index.js` of the pinned server-everything.
    pub fn everything_js() -> PathBuf {
        let dir = crate::common::ci_cache_dir("CODEWHALE_CI_NPM_DIR", "npm");
        let js = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            js.exists(),
            "{} is missing: run ci/setup (it installs @modelcontextprotocol/server-everything, pinned, from npm)",
            js.display()
        );
        let node = which::which("node").expect("node is not on PATH: install Node 18+ (ci/setup)");
        assert!(node.exists());
        js
    }

    /// The path of a fixture server in `tests/fixtures/mcp/`.
    pub fn fixture(name: &str) -> String {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mcp")
            .join(name)
            .display()
            .to_string()
    }

    /// An `mcp.json` with every kind of server (the slow one gets 2 s).
    pub fn all_servers() -> Value {
        json!({"mcpServers": {
            "everything": {"command": "node", "args": [everything_js().display().to_string(), "stdio"]},
            "slow": {"command": "python3", "args": [fixture("slow_start.py")], "startupTimeoutSec": 2},
            "junk": {"command": "python3", "args": [fixture("junk_stdout.py")]},
            "crash": {"command": "python3", "args": [fixture("crash_after_init.py")]},
            "missing": {"command": "no-such-mcp-server-anywhere"},
            "off": {"command": "node", "enabled": false},
        }})
    }

    /// The entry of the fixture whose tool writes a file.
    pub fn notes_server() -> Value {
        json!({"command": "python3", "args": [fixture("write_note.py")]})
    }

    pub fn write_mcp(cw_home: &Path, v: &Value) {
        std::fs::write(
            cw_home.join("mcp.json"),
            serde_json::to_string_pretty(v).unwrap(),
        )
        .unwrap();
    }

    pub fn by_name<'a>(servers: &'a [Value], name: &str) -> &'a Value {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no server {name} in {servers:?}"))
    }

    /// The backend every server must report: bwrap, or landlock when CI
    /// hid bubblewrap.
    pub fn backend() -> &'static str {
        if no_bwrap() {
            "landlock"
        } else {
            "bwrap"
        }
    }

    /// `codewhale ARGS…` in the fixture; bubblewrap hidden from its `PATH`
    /// when CI asked for that.
    pub fn cmd(f: &Fixture, args: &[&str]) -> Command {
        let mut c = f.cmd(args);
        if no_bwrap() {
            c.env("PATH", path_without_bwrap());
        }
        c
    }

    pub fn run(f: &Fixture, args: &[&str]) -> Output {
        cmd(f, args).output().unwrap()
    }

    /// `codewhale exec --provider custom --output-format stream-json
    /// EXTRA… PROMPT` and its stream-json lines.
    /// The last run's receipt as markdown (`receipts --last`, exit 0).
    pub fn last_receipt_md(f: &Fixture) -> String {
        let o = run(f, &["receipts", "--last", "--format", "md"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The last run's receipt as JSON and its (first) MCP action.
    pub fn last_receipt_mcp_action(f: &Fixture) -> (Value, Value) {
        let o = run(f, &["receipts", "--last", "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let action = r["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["kind"] == "mcp")
            .cloned()
            .unwrap_or_else(|| panic!("no mcp action: {r}"));
        (r, action)
    }

    pub fn exec_json(f: &Fixture, extra: &[&str], prompt: &str) -> (Output, Vec<Value>) {
        let mut args = vec![
            "exec",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
        ];
        args.extend_from_slice(extra);
        args.push(prompt);
        let o = run(f, &args);
        let ev = crate::common::cli::stdout_lines(&o);
        (o, ev)
    }

    /// The stream-json event of type `ty` for call `call_id`.
    pub fn event<'a>(ev: &'a [Value], ty: &str, call_id: &str) -> &'a Value {
        ev.iter()
            .find(|e| e["type"] == ty && e["call_id"] == call_id)
            .unwrap_or_else(|| panic!("no {ty} event for {call_id}: {ev:?}"))
    }

    /// The tool names a model request offered.
    pub fn offered(body: &Value) -> Vec<&str> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect()
    }

    /// The tool message for `call_id` in a model request.
    pub fn tool_message(body: &Value, call_id: &str) -> Value {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
            .cloned()
            .unwrap_or_else(|| panic!("no tool message for {call_id}: {body}"))
    }

    /// A fixture whose default provider is the scripted model.
    pub fn model_fixture(model: &ScriptedModel) -> Fixture {
        Fixture::with_config(&format!(
            "provider = \"custom\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
            model.kind(),
            model.base_url()
        ))
    }

    /// The fixture's `mcp.json` with a workspace-write policy, the test's
    /// codewhale as the sandbox helper, and landlock when bwrap is hidden.
    pub fn manager_spec(f: &Fixture) -> ManagerSpec {
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &f.ws);
        let mut spec = ManagerSpec::new(&f.cw_home, policy, HostSettings::default());
        spec.host.helper_exe = Some(env!("CARGO_BIN_EXE_codewhale").into());
        if no_bwrap() {
            spec.host.backend = BackendChoice::Landlock;
        }
        spec
    }

    pub fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// The item of the runtime log's `item.started` event for tool call
    /// `call_id`.
    pub fn started_item(f: &Fixture, call_id: &str) -> Value {
        let log = std::fs::read_to_string(f.cw_home.join("runtime/events.jsonl")).unwrap();
        log.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| {
                e["event"] == "item.started"
                    && e["payload"]["item"]["metadata"]["call_id"] == call_id
            })
            .map(|e| e["payload"]["item"].clone())
            .unwrap_or_else(|| panic!("no item.started for {call_id} in {log}"))
    }

    const TOKEN: &str = "mcp-test-token-0b1c";

    /// `codewhale app-server --http` in the fixture, killed when dropped.
    pub struct AppServer {
        child: std::process::Child,
        pub base: String,
        client: reqwest::Client,
    }

    impl Drop for AppServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl AppServer {
        pub fn start(f: &Fixture) -> AppServer {
            use std::io::BufRead;
            for d in ["tmp", "xdg"] {
                std::fs::create_dir_all(f.root.join(d)).unwrap();
            }
            let mut child = cmd(
                f,
                &[
                    "app-server",
                    "--http",
                    "--port",
                    "0",
                    "-C",
                    f.ws.to_str().unwrap(),
                ],
            )
            .env("TMPDIR", f.root.join("tmp"))
            .env("XDG_RUNTIME_DIR", f.root.join("xdg"))
            .env("CODEWHALE_RUNTIME_TOKEN", TOKEN)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
            let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
            let mut srv = AppServer {
                child,
                base: String::new(),
                client: reqwest::Client::builder().no_proxy().build().unwrap(),
            };
            let mut line = String::new();
            srv.base = loop {
                line.clear();
                assert!(err.read_line(&mut line).unwrap() > 0, "server exited");
                if let Some(rest) = line.split("listening on ").nth(1) {
                    break rest.split_whitespace().next().unwrap().to_string();
                }
            };
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            srv
        }

        async fn post(&self, path: &str, body: Value) -> Value {
            self.client
                .post(format!("{}{path}", self.base))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        }

        /// A new agent thread whose questions `auto_approve` answers.
        pub async fn thread(&self) -> String {
            let r = self
                .post("/v1/threads", json!({"title": "mcp", "auto_approve": true}))
                .await;
            r["thread"]["id"].as_str().unwrap().to_string()
        }

        pub async fn turn(&self, thread: &str, prompt: &str) -> String {
            let r = self
                .post(
                    &format!("/v1/threads/{thread}/turns"),
                    json!({"prompt": prompt}),
                )
                .await;
            r["turn"]["id"].as_str().unwrap().to_string()
        }

        /// `/health` answers within 1 s.
        pub async fn health(&self) {
            let r = tokio::time::timeout(
                Duration::from_secs(1),
                self.client.get(format!("{}/health", self.base)).send(),
            )
            .await
            .expect("/health within 1 s")
            .unwrap();
            assert_eq!(r.status(), 200);
        }

        /// Poll until the turn ends, checking `/health` before every poll;
        /// its status and the number of health checks.
        pub async fn wait_turn(&self, thread: &str, turn: &str) -> (String, u32) {
            let t0 = Instant::now();
            let mut checks = 0;
            loop {
                self.health().await;
                checks += 1;
                let d: Value = self
                    .client
                    .get(format!("{}/v1/threads/{thread}", self.base))
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let st = d["turns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["id"] == turn)
                    .map(|t| t["status"].as_str().unwrap_or("").to_string())
                    .unwrap_or_default();
                if st != "in_progress" && !st.is_empty() {
                    return (st, checks);
                }
                assert!(t0.elapsed() < Duration::from_secs(60), "turn did not end");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
