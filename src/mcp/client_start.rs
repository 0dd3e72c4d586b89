//! Starting one server and watching it (part of [`super`]): command
//! lookup, the sandboxed start, `initialize` + `tools/list` within the
//! startup timeout, and the failure reasons (exit, end of the stderr log,
//! stdout junk). Nothing here restarts a server.

use super::{lock, McpTool, Phase, Server};
use crate::host::{ExecOutcome, ExitKind, HostError, HostSettings};
use crate::mcp::client_names;
use crate::mcp::client_transport;
use rmcp::ServiceExt;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Starts each run's part of a server's stderr log.
const LOG_MARKER: &str = "=== codewhale:";

/// The last lines of a server's stderr log (for a failure reason).
fn log_tail(log: &Path) -> Option<String> {
    let text = std::fs::read(log).ok()?;
    let start = text.len().saturating_sub(4096);
    let tail = String::from_utf8_lossy(&text[start..]).into_owned();
    let tail = match tail.rfind(LOG_MARKER) {
        Some(i) => tail[i..].split_once('\n').map_or("", |(_, rest)| rest),
        None => tail.as_str(),
    };
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    let last: Vec<&str> = lines.iter().rev().take(3).rev().copied().collect();
    (!last.is_empty()).then(|| last.join(" | ").chars().take(400).collect())
}

/// Keep what the host enforced for the ended run, in the status and the log.
fn record_end(server: &Server, out: &Result<ExecOutcome, HostError>) {
    let Ok(o) = out else { return };
    let summary = o.enforcement.summary();
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&server.log) {
        let line = serde_json::to_string(&summary).unwrap_or_default();
        let _ = std::io::Write::write_all(
            &mut f,
            format!("{LOG_MARKER} ended ({:?}); enforced: {line}\n", o.exit).as_bytes(),
        );
    }
    lock(&server.state).enforced = Some(summary);
}

fn exit_reason(server: &Server, out: &Result<ExecOutcome, HostError>) -> String {
    let how = match out {
        Ok(o) => match o.exit {
            ExitKind::Code(c) => format!("exited with code {c}"),
            ExitKind::Signal(s) => format!("was killed by signal {s}"),
        },
        Err(e) => format!("could not run: {e}"),
    };
    let tail = log_tail(&server.log);
    record_end(server, out);
    match tail {
        Some(t) => format!("{how}; stderr: {t} (log: {})", server.log.display()),
        None => format!("{how} (log: {})", server.log.display()),
    }
}

/// Start one server and watch it until it exits or is stopped.
pub(super) async fn run_server(server: Arc<Server>, host: HostSettings) {
    let entry = &server.entry;
    if let Err(e) = crate::mcp::env_expand::expand_from_process(&entry.env) {
        server.fail(e);
        return;
    }
    let path_var = entry
        .env
        .get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok());
    if which::which_in(&entry.command, path_var, &server.policy.workspace).is_err() {
        server.fail(format!("command not found: {}", entry.command));
        return;
    }
    lock(&server.state).command_found = true;
    // The backend the server's run will use, for its status and the
    // enforcement line of its tool results (the run's own report, known
    // when it ends, goes into `enforced`).
    let backend = match crate::host::expected(&server.policy, &host) {
        Ok(e) => e.backend.as_str().to_string(),
        Err(e) => {
            server.fail(e.to_string());
            return;
        }
    };
    let mut argv = vec![entry.command.clone()];
    argv.extend(entry.args.iter().cloned());
    if let Some(dir) = server.log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // The log is appended across starts; a marker starts each one (the
    // failure reason reads only what follows the last marker).
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&server.log)
    {
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let _ = std::io::Write::write_all(
            &mut f,
            format!("{LOG_MARKER} starting {} at {now}\n", argv.join(" ")).as_bytes(),
        );
    }
    if server.stopping() {
        return;
    }
    let started = match client_transport::start(
        &server.policy,
        &host,
        argv,
        Some(server.log.clone()),
        server.cancel.clone(),
    ) {
        Ok(s) => s,
        Err(e) => {
            server.fail(format!("could not start: {e}"));
            return;
        }
    };
    let client_transport::Started {
        read,
        write,
        mut run,
        cancel,
        junk,
    } = started;
    {
        let mut s = lock(&server.state);
        s.started = true;
        s.junk = junk.clone();
        s.backend = Some(backend);
    }
    let timeout = entry.startup_timeout();
    let srv = server.clone();
    let init = tokio::time::timeout(timeout, async move {
        let service = ().serve((read, write)).await.map_err(|e| ("initialize", e.to_string()))?;
        lock(&srv.state).initialized = true;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| ("tools/list", e.to_string()))?;
        Ok::<_, (&str, String)>((service, tools))
    });
    let junk_note = || lock(&junk).describe();
    // Whether `run` has already completed (a JoinHandle is awaited once).
    let mut ended = false;
    tokio::select! {
        r = init => match r {
            Ok(Ok((service, tools))) => {
                let info = service.peer_info().and_then(|i| {
                    i.server_info.as_ref().map(|s| format!("{} {}", s.name, s.version))
                });
                let offered = offer(&server.name, tools);
                let mut s = lock(&server.state);
                if s.phase == Phase::Stopped {
                    cancel.cancel();
                } else {
                    s.phase = Phase::Ready;
                    s.initialized = true;
                    s.tools = offered;
                    s.peer = Some(service.peer().clone());
                    s.service = Some(service);
                    s.server_info = info;
                    s.last_error = junk_note();
                }
            }
            Ok(Err((stage, e))) => {
                // The process may have ended first: its exit says more.
                let why = match tokio::time::timeout(Duration::from_secs(1), &mut run).await {
                    Ok(Ok(out)) => {
                        ended = true;
                        format!("the server {}", exit_reason(&server, &out))
                    }
                    Ok(Err(_)) => {
                        ended = true;
                        e
                    }
                    Err(_) => {
                        cancel.cancel();
                        e
                    }
                };
                let why = match junk_note() {
                    Some(j) => format!("{stage} failed: {why}; it {j}"),
                    None => format!("{stage} failed: {why}"),
                };
                server.fail(why);
            }
            Err(_) => {
                cancel.cancel();
                let mut why = format!(
                    "did not initialize within {} s (startupTimeoutSec); stopped",
                    timeout.as_secs()
                );
                if let Some(j) = junk_note() {
                    why.push_str(&format!("; it {j}"));
                }
                server.fail(why);
            }
        },
        out = &mut run => {
            let out = out.unwrap_or_else(|e| Err(HostError::io("server task", std::io::Error::other(e.to_string()))));
            let mut why = format!("initialize failed: the server {}", exit_reason(&server, &out));
            if let Some(j) = junk_note() {
                why.push_str(&format!("; it {j}"));
            }
            server.fail(why);
            return;
        }
    }
    if ended {
        return;
    }
    // Ready, failed or stopped: wait for the process to end.
    let out = run.await.unwrap_or_else(|e| {
        Err(HostError::io(
            "server task",
            std::io::Error::other(e.to_string()),
        ))
    });
    if server.stopping() || lock(&server.state).phase != Phase::Ready {
        record_end(&server, &out);
    }
    if !server.stopping() && lock(&server.state).phase == Phase::Ready {
        let why = format!(
            "the server {} after initialize; not restarted (reload to start it again)",
            exit_reason(&server, &out)
        );
        server.fail(why);
    }
}

/// The server's tools as offered: named, with object schemas, names made
/// unique within the server.
fn offer(server: &str, tools: Vec<rmcp::model::Tool>) -> Vec<McpTool> {
    let mut out: Vec<McpTool> = Vec::new();
    for t in tools {
        let mut name = client_names::tool_name(server, &t.name);
        let mut n = 2;
        while out.iter().any(|o| o.name == name) {
            name = client_names::tool_name(server, &format!("{}_{n}", t.name));
            n += 1;
        }
        let mut schema = Value::Object((*t.input_schema).clone());
        if schema.get("type").is_none() {
            schema["type"] = Value::String("object".into());
        }
        out.push(McpTool {
            name,
            server: server.to_string(),
            tool: t.name.to_string(),
            description: t
                .description
                .as_deref()
                .unwrap_or("")
                .chars()
                .take(2048)
                .collect(),
            input_schema: schema,
            annotations: t
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        });
    }
    out
}
