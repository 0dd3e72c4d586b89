#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `GET /v1/skills`, `PATCH /v1/skills/{name}`, the MCP listings and the
//! session routes, driven by a Python standard-library client
//! (tests/clients/runtime_introspect.py) against a real app-server on
//! loopback, with a real `exec` session and real skill folders; then the
//! cross-process part: a toggle by `codewhale skills` shows in the running
//! server without a restart, and the resumed thread's next turn was sent
//! the stored conversation.

use crate::common;

use common::cli::{stderr, stdout_lines};
use common::runtime::{api, cmd, fixture, python_client, Server, TOKEN};
use common::scripted_model::{reply, ScriptedModel, Wire};
use std::ffi::OsStr;
use std::path::Path;

const SECRET: &str = "s3cr3t-value-9f8e7d";

fn skill(root: &Path, name: &str, body: &str) {
    let d = root.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n"),
    )
    .unwrap();
}

#[test]
fn skills_mcp_and_sessions_routes_for_a_python_client() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply("Hello from exec."), reply("Again, from the thread.")],
    );
    let f = fixture(&model);
    // A stored exec session.
    let o = cmd(
        &f,
        &[
            "exec",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "say hello",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let session = stdout_lines(&o)[0]["thread"].as_str().unwrap().to_string();
    // The event log loses it (an older session, or a lost log): resuming
    // must create the thread from the session file.
    std::fs::remove_dir_all(f.cw_home.join("runtime")).unwrap();

    skill(&f.ws.join("skills"), "lint", "Run the linter.");
    skill(&f.ws.join(".claude/skills"), "lint", "Shadowed lint.");
    skill(&f.ws.join(".claude/skills"), "review", "Review carefully.");
    std::fs::create_dir_all(f.ws.join(".claude/skills/broken")).unwrap();
    std::fs::write(
        f.ws.join(".claude/skills/broken/SKILL.md"),
        "no front matter",
    )
    .unwrap();
    std::fs::write(
        f.cw_home.join("mcp.json"),
        format!(
            r#"{{"mcpServers": {{"docs": {{"command": "docs-server", "env": {{"DOCS_TOKEN": "{SECRET}"}}}},
                "off": {{"command": "other", "enabled": false}}}}}}"#
        ),
    )
    .unwrap();

    let s = Server::start(&f, &[]);
    let v = python_client(
        "runtime_introspect.py",
        &[OsStr::new(&s.base)],
        &[
            ("CODEWHALE_RUNTIME_TOKEN", OsStr::new(TOKEN)),
            ("CW_SESSION", OsStr::new(&session)),
            ("CW_SECRET", OsStr::new(SECRET)),
        ],
    );
    assert_eq!(v["ok"], true, "{v}");

    // The client switched `review` off; the CLI (another process) sees it
    // and switches it back on; the running server sees that at once.
    let ws = f.ws.to_str().unwrap();
    let o = cmd(&f, &["skills", "list", "--json", "-C", ws])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let review = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "review")
        .unwrap();
    assert_eq!(review["enabled"], false, "{listed}");
    let o = cmd(&f, &["skills", "enable", "review", "-C", ws])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (code, body) = rt.block_on(api(&s, "GET", "/v1/skills", None));
    assert_eq!(code, 200);
    let review = body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "review")
        .unwrap();
    assert_eq!(review["enabled"], true, "{body}");
    // Positive and negative control of the CLI's name check.
    let o = cmd(&f, &["skills", "disable", "nosuch", "-C", ws])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // The resumed thread's turn was sent the stored conversation.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let sent = reqs[1].body.to_string();
    assert!(
        sent.contains("say hello") && sent.contains("Hello from exec."),
        "{sent}"
    );
    assert!(sent.contains("and again"), "{sent}");
    assert!(!f.cw_home.join(format!("sessions/{session}.jsonl")).exists());
}

/// The same functions over JSON-RPC on stdio: the `app/*` methods answer
/// what the HTTP routes answer, and their errors map to JSON-RPC codes.
#[test]
fn the_same_listings_over_stdio() {
    use common::runtime::StdioServer;
    let model = ScriptedModel::start(Wire::OpenAi, vec![]);
    let f = fixture(&model);
    skill(&f.ws.join(".agents/skills"), "fmt", "Format.");
    std::fs::write(
        f.cw_home.join("mcp.json"),
        r#"{"mcpServers": {"docs": {"command": "docs-server"}}}"#,
    )
    .unwrap();
    let mut s = StdioServer::start(&f);
    let req = |id: u64, method: &str, params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
    };
    s.send(&req(1, "app/skills/list", "{}"));
    let r = s.reply_to(1);
    assert_eq!(r["result"]["skills"][0]["name"], "fmt", "{r}");
    assert_eq!(r["result"]["skills"][0]["root"], "agents", "{r}");
    s.send(&req(
        2,
        "app/skills/update",
        r#"{"name":"fmt","enabled":false}"#,
    ));
    assert_eq!(s.reply_to(2)["result"]["enabled"], false);
    s.send(&req(
        3,
        "app/skills/update",
        r#"{"name":"nope","enabled":false}"#,
    ));
    assert_eq!(s.reply_to(3)["error"]["code"], -32004);
    s.send(&req(4, "app/mcp/servers", "{}"));
    let r = s.reply_to(4);
    assert_eq!(r["result"]["servers"][0]["name"], "docs", "{r}");
    s.send(&req(5, "app/mcp/tools", r#"{"server":"nope"}"#));
    assert_eq!(s.reply_to(5)["error"]["code"], -32004);
    s.send(&req(6, "app/sessions/list", r#"{"limit":5}"#));
    assert_eq!(s.reply_to(6)["result"]["sessions"], serde_json::json!([]));
    s.send(&req(7, "app/sessions/read", r#"{"session_id":"../x"}"#));
    assert_eq!(s.reply_to(7)["error"]["code"], -32602);
    s.shutdown(8);
}
