#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Sub-agents in a runtime turn (`codewhale app-server --http`, Ask): a
//! child's question becomes an approval on the parent's thread, named
//! `agent:<id>` with the child's role; `y` runs that one call, `a` grants
//! the rule to the whole tree (a later child's call passes by session
//! rule), `n` denies it. The writes go outside the workspace (gate 4
//! asks; the file guard then refuses them, so nothing needs the OS
//! sandbox); the shell call is denied before it runs.
#![cfg(unix)]

use crate::common;

use common::runtime::{api, count, events_until, fixture, new_thread, new_turn, Server};
use common::scripted_model::{call, lane, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

fn approvals(evs: &[Value]) -> Vec<&Value> {
    evs.iter()
        .filter(|e| e["event"] == "approval.required")
        .collect()
}

async fn answer(s: &Server, ev: &Value, body: Value) {
    let id = ev["payload"]["approval_id"].as_str().unwrap();
    let (code, b) = api(s, "POST", &format!("/v1/approvals/{id}"), Some(body)).await;
    assert_eq!(code, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_questions_bubble_up_as_agent_approvals_y_a_n() {
    let out = |p: &str| json!({"path": format!("../{p}"), "content": "x"});
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    call(
                        "p1",
                        "agent",
                        json!({"role": "general", "prompt": "CHILD-A write"}),
                    ),
                    call(
                        "p2",
                        "agent",
                        json!({"role": "general", "prompt": "CHILD-B write"}),
                    ),
                    reply("both children done"),
                ],
            ),
            lane(
                "a",
                Some("CHILD-A"),
                vec![
                    call("a1", "write_file", out("a1.txt")),
                    call("a2", "write_file", out("a2.txt")),
                    reply("a done"),
                ],
            ),
            lane(
                "b",
                Some("CHILD-B"),
                vec![
                    call("b1", "write_file", out("b1.txt")),
                    call("b2", "shell", json!({"command": "touch made-by-b"})),
                    reply("b done"),
                ],
            ),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &["--approval-timeout", "20"]);
    let thread = new_thread(&s, json!({})).await;
    let _turn = new_turn(&s, &thread, "two children").await;

    // a1: asked as agent:a1 (general); `y` (once).
    let evs = events_until(&s, &thread, 0, |e| count(e, "approval.required") == 1).await;
    let q = approvals(&evs)[0];
    assert_eq!(q["payload"]["asked_by"], "agent:a1", "{q}");
    assert_eq!(q["payload"]["agent_role"], "general", "{q}");
    assert_eq!(q["payload"]["tool"], "write_file", "{q}");
    answer(&s, q, json!({"decision": "allow"})).await;
    // a2: `y` was for one call: asked again; `a` (the whole tree).
    let evs = events_until(&s, &thread, 0, |e| count(e, "approval.required") == 2).await;
    let q = approvals(&evs)[1];
    assert_eq!(q["payload"]["asked_by"], "agent:a1", "{q}");
    answer(&s, q, json!({"decision": "allow", "remember": true})).await;
    // b1 passes by the session rule `a` granted; b2 (shell) asks: `n`.
    let evs = events_until(&s, &thread, 0, |e| count(e, "approval.required") == 3).await;
    let q = approvals(&evs)[2];
    assert_eq!(q["payload"]["asked_by"], "agent:a2", "{q}");
    assert_eq!(q["payload"]["tool"], "shell", "{q}");
    answer(&s, q, json!({"decision": "deny"})).await;
    let all = events_until(&s, &thread, 0, |e| count(e, "turn.completed") >= 1).await;
    assert_eq!(
        count(&all, "approval.required"),
        3,
        "b1 passed by session rule"
    );
    assert_eq!(count(&all, "subagent.started"), 2);
    assert_eq!(count(&all, "subagent.completed"), 2);
    // The children's calls are items of the parent's turn with their agent.
    let items: Vec<&Value> = all
        .iter()
        .filter(|e| e["event"] == "item.failed" || e["event"] == "item.completed")
        .map(|e| &e["payload"]["item"])
        .collect();
    let item = |call: &str| {
        *items
            .iter()
            .find(|i| i["metadata"]["call_id"] == call)
            .unwrap_or_else(|| panic!("no item for {call}: {items:#?}"))
    };
    assert_eq!(item("a1")["metadata"]["agent_id"], "a1");
    assert_eq!(item("a1")["metadata"]["approval"]["decided_by"], "you");
    assert_eq!(item("b1")["metadata"]["agent_id"], "a2");
    assert_eq!(
        item("b1")["metadata"]["approval"]["decided_by"],
        "session rule",
        "{}",
        item("b1")
    );
    assert_eq!(
        item("b2")["metadata"]["status"],
        "not_run",
        "{}",
        item("b2")
    );
    assert!(!f.ws.join("made-by-b").exists());
    // Allowed by the person, refused by the file guard: outside the workspace.
    assert!(!f.root.join("a1.txt").exists() && !f.root.join("b1.txt").exists());
}
