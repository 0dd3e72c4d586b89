#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Operate's tools end to end through `codewhale exec` and the runtime
//! API with the scripted model: the `todo` list (stream-json
//! `todo_updated`, runtime `todo.updated`, a bad list refused), and
//! background jobs (`shell {"background": true}`, `job_output` after other
//! work, `job_kill`, an interrupted turn's jobs killed — no process left
//! in `/proc` — while a finished turn's job lives on into the next turn).
#![cfg(target_os = "linux")]

use crate::common;

use common::cli::*;
use common::procs;
use common::scripted_model::{call, reply, slow, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::time::Duration;

fn exec(f: &Fixture, extra: &[&str]) -> (std::process::Output, Vec<Value>) {
    let mut args = vec![
        "exec",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
    ];
    args.extend_from_slice(extra);
    let o = f.run(&args);
    let ev = if o.stdout.is_empty() {
        Vec::new()
    } else {
        stdout_lines(&o)
    };
    (o, ev)
}

fn result<'a>(ev: &'a [Value], id: &str) -> &'a Value {
    ev.iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}: {ev:#?}"))
}

fn out(ev: &[Value], id: &str) -> String {
    result(ev, id)["output"].as_str().unwrap().to_string()
}

/// The to-do list and a background `sleep 5; echo done` job read after
/// other work: the first read says it runs (no output yet), the read
/// after the model's next (slow) request has `done` and exit 0. A bad
/// list is a tool error and publishes nothing; an unknown job id names
/// the jobs there are.
#[test]
fn todo_list_and_a_background_job_read_after_other_work() {
    let todo = json!({"items": [
        {"id": "1", "text": "start the slow check", "status": "in_progress"},
        {"id": "2", "text": "other work", "status": "pending"}
    ]});
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("t1", "todo", todo),
            call(
                "b1",
                "shell",
                json!({"command": "sleep 5; echo done", "background": true}),
            ),
            call("o1", "shell", json!({"command": "echo other work"})),
            call("r1", "job_output", json!({"id": "job-1"})),
            call(
                "t2",
                "todo",
                json!({"items": [{"id": "1", "text": "x", "status": "finished"}]}),
            ),
            call("r0", "job_output", json!({"id": "job-9"})),
            // The model takes a while: the job finishes meanwhile.
            slow(
                Duration::from_millis(5500),
                call("r2", "job_output", json!({"id": "job-1"})),
            ),
            call("r3", "job_output", json!({"id": "job-1"})),
            reply("all done"),
        ],
    );
    let f = Fixture::new(&model, "");
    let (o, ev) = exec(&f, &["--auto", "run the check in the background"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // Offered in Work (exec's default mode) with --auto.
    let tools: Vec<String> = model.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    for t in ["todo", "job_output", "job_kill", "shell"] {
        assert!(tools.contains(&t.to_string()), "{t} not offered: {tools:?}");
    }

    // The list, typed: one todo_updated for the good call only.
    let todos = of_type(&ev, "todo_updated");
    assert_eq!(todos.len(), 1, "{todos:?}");
    assert_eq!(todos[0]["call_id"], "t1");
    assert_eq!(todos[0]["items"][0]["status"], "in_progress");
    assert_eq!(todos[0]["items"][1]["text"], "other work");
    assert_eq!(result(&ev, "t1")["status"], "ok");
    assert_eq!(result(&ev, "t2")["status"], "error");
    assert!(
        out(&ev, "t2").contains("items[0].status `finished` is not one of"),
        "{}",
        out(&ev, "t2")
    );

    // The job: started at once, running at the first read, done later.
    let b1 = out(&ev, "b1");
    assert!(b1.contains("started background job job-1"), "{b1}");
    assert!(
        result(&ev, "b1")["duration_ms"].as_u64().unwrap() < 3000,
        "background start waited for the job"
    );
    assert!(out(&ev, "o1").contains("other work"));
    let r1 = out(&ev, "r1");
    assert!(r1.contains("running"), "{r1}");
    assert!(r1.contains("(no new output)"), "{r1}");
    let r2 = out(&ev, "r2");
    assert!(r2.contains("finished"), "{r2}");
    assert!(r2.contains("exit code: 0"), "{r2}");
    assert!(r2.contains("done"), "{r2}");
    assert!(result(&ev, "r2")["enforcement"].is_string());
    // Nothing new after the end.
    let r3 = out(&ev, "r3");
    assert!(r3.contains("(no new output)"), "{r3}");
    let r0 = out(&ev, "r0");
    assert!(
        r0.contains("no background job `job-9`") && r0.contains("job-1"),
        "{r0}"
    );
    // The session records the background call with its command (what
    // receipts list as the action).
    let recs = records(&f.session_files()[0]);
    assert!(recs.iter().any(|r| r["type"] == "tool_call"
        && r["call_id"] == "b1"
        && r["args"]["command"] == "sleep 5; echo done"
        && r["args"]["background"] == true));
    let r = f.run(&["receipts", "--format", "json"]);
    let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
    common::receipts::validate(&receipt);
    let actions = receipt["actions"].as_array().unwrap();
    assert!(
        actions
            .iter()
            .any(|a| a.to_string().contains("sleep 5; echo done")),
        "the job's command is not an action: {receipt:#}"
    );
}

/// `job_kill` stops a running job: its whole process tree is gone when the
/// call returns (checked in /proc), and `job_output` then says killed.
#[test]
fn job_kill_leaves_no_process() {
    let marker = "61.40417";
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "b1",
                "shell",
                json!({"command": format!("sleep {marker} & sleep {marker}; echo never"), "background": true}),
            ),
            // Positive control: the job really runs (read while it does).
            slow(
                Duration::from_millis(700),
                call("r1", "job_output", json!({"id": "job-1"})),
            ),
            call("k1", "job_kill", json!({"id": "job-1"})),
            // The run goes on a while after the kill: the tree must be
            // gone by job_kill, not by this process exiting.
            slow(
                Duration::from_millis(4000),
                call("r2", "job_output", json!({"id": "job-1"})),
            ),
            call("k2", "job_kill", json!({"id": "job-1"})),
            reply("stopped"),
        ],
    );
    let f = Fixture::new(&model, "");
    let mut child = f
        .cmd(&[
            "exec",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "--auto",
            "start it, then stop it",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        procs::running_within(marker, Duration::from_secs(20)),
        "control: the job never ran"
    );
    let left = procs::gone_within(marker, Duration::from_secs(3));
    assert!(left.is_empty(), "processes left after job_kill: {left:?}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before the check: the kill was not job_kill's"
    );
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    assert!(out(&ev, "r1").contains("running"), "{}", out(&ev, "r1"));
    assert!(out(&ev, "k1").contains("killed"), "{}", out(&ev, "k1"));
    let r2 = out(&ev, "r2");
    assert!(r2.contains("was killed") && !r2.contains("\nnever"), "{r2}");
    assert!(out(&ev, "k2").contains("already finished"));
}

/// The tool result the model was sent for call `id` (what it saw).
fn sent_result(model: &ScriptedModel, id: &str) -> String {
    model
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no tool result {id} was sent"))
}

/// Over the runtime API (`app-server --http`): `todo.updated` is on the
/// thread's event log with the typed list; a job started in one turn is
/// read in the next (jobs belong to the session, not the turn); a job of
/// an interrupted turn is killed with it — no process left while the
/// server still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_todo_events_jobs_across_turns_and_interrupt_kills_the_job() {
    use common::runtime::{api, count, events_until, fixture, new_thread, new_turn, Server};
    let marker = "62.31337";
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // Turn 1: a list and a short job.
            call(
                "t1",
                "todo",
                json!({"items": [{"id": "a", "text": "warm the cache", "status": "in_progress"}]}),
            ),
            call(
                "b1",
                "shell",
                json!({"command": "sleep 1; echo first-job-out", "background": true}),
            ),
            reply("started"),
            // Turn 2: read the job the first turn started.
            slow(
                Duration::from_millis(1500),
                call("r1", "job_output", json!({"id": "job-1"})),
            ),
            reply("read"),
            // Turn 3: a long job, then the model is slow: interrupted.
            call(
                "b2",
                "shell",
                json!({"command": format!("sleep {marker}"), "background": true}),
            ),
            slow(Duration::from_secs(30), reply("never")),
        ],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({"auto_approve": true})).await;
    new_turn(&s, &thread, "turn one").await;
    let evs = events_until(&s, &thread, 0, |e| count(e, "turn.completed") == 1).await;
    let todo: Vec<&Value> = evs
        .iter()
        .filter(|e| e["event"] == "todo.updated")
        .collect();
    assert_eq!(todo.len(), 1, "{evs:#?}");
    assert_eq!(
        todo[0]["payload"]["items"],
        json!([{"id": "a", "text": "warm the cache", "status": "in_progress"}])
    );
    assert!(todo[0]["turn_id"].is_string() && todo[0]["item_id"].is_null());

    new_turn(&s, &thread, "turn two").await;
    events_until(&s, &thread, 0, |e| count(e, "turn.completed") == 2).await;
    let r1 = sent_result(&model, "r1");
    assert!(
        r1.contains("first-job-out") && r1.contains("exit code: 0"),
        "{r1}"
    );

    let turn = new_turn(&s, &thread, "turn three").await;
    assert!(
        procs::running_within(marker, Duration::from_secs(20)),
        "control: the job never ran"
    );
    let (code, b) = api(
        &s,
        "POST",
        &format!("/v1/threads/{thread}/turns/{turn}/interrupt"),
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 202, "{b}");
    events_until(&s, &thread, 0, |e| count(e, "turn.completed") == 3).await;
    let left = procs::gone_within(marker, Duration::from_secs(2));
    assert!(
        left.is_empty(),
        "the interrupted turn's job is left: {left:?}"
    );
    // The server (the session) is still up.
    let (code, _) = api(&s, "GET", &format!("/v1/threads/{thread}"), None).await;
    assert_eq!(code, 200);
}

/// Operate through `exec --mode operate`: the goal prompt, and the
/// reviewer rule — a turn about to end with two files changed and no
/// reviewer verdict gets one message asking for one; after the reviewer
/// child completed the turn ends. The same script in Work ends at once
/// (positive control: the message is Operate's).
#[test]
fn operate_asks_for_a_reviewer_before_ending_a_multi_file_change() {
    let parent = |reviewed: bool| {
        let mut v = vec![
            call("w1", "write_file", json!({"path": "a.txt", "content": "a"})),
            call("w2", "write_file", json!({"path": "b.txt", "content": "b"})),
            reply("both files written"),
        ];
        if reviewed {
            v.push(call(
                "rv",
                "agent",
                json!({"role": "reviewer", "prompt": "REVIEW-MARK check a.txt and b.txt"}),
            ));
            v.push(reply("reviewed and done"));
        }
        v
    };
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            common::scripted_model::lane("parent", None, parent(true)),
            common::scripted_model::lane(
                "reviewer",
                Some("REVIEW-MARK"),
                vec![reply("LGTM: both files are fine")],
            ),
        ],
    );
    let f = Fixture::new(&model, "");
    let (o, ev) = exec(&f, &["--auto", "--mode", "operate", "write two files"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = model.requests();
    let parent_reqs: Vec<_> = reqs
        .iter()
        .filter(|r| r.lane.as_deref() == Some("parent"))
        .collect();
    let sys = parent_reqs[0].body["messages"][0]["content"]
        .as_str()
        .unwrap();
    assert!(sys.contains("Mode: Operate"), "{sys}");
    // The child's prompt is its role's, not Operate's.
    let child = reqs
        .iter()
        .find(|r| r.lane.as_deref() == Some("reviewer"))
        .unwrap();
    let csys = child.body["messages"][0]["content"].as_str().unwrap();
    assert!(!csys.contains("Mode: Operate"), "{csys}");
    // The 4th parent request carries the loop's one message.
    let nudges: Vec<&Value> = parent_reqs.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("[codewhale Operate]"))
        })
        .collect();
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    let n = nudges[0]["content"].as_str().unwrap();
    assert!(n.contains("2 files changed") && n.contains("a.txt"), "{n}");
    let done = of_type(&ev, "subagent_completed");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["role"], "reviewer");
    assert_eq!(ev.last().unwrap()["status"], "completed");
    assert_eq!(model.lane_left("parent"), 0);

    // Work: the same change ends without the message.
    let model = ScriptedModel::start(Wire::OpenAi, parent(false));
    let f = Fixture::new(&model, "");
    let (o, ev) = exec(&f, &["--auto", "write two files"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(model.requests().len(), 3);
    let sys = model.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!sys.contains("Mode: Operate"), "{sys}");
    assert_eq!(ev.last().unwrap()["status"], "completed");
}

/// The runtime's modes: a thread created `operate`, a per-turn `mode`
/// (`plan` then `work`), `chat` refused per turn and an unknown mode named;
/// the turn's posture follows (Operate's prompt; Plan offers no `todo`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_modes_by_thread_and_by_turn() {
    use common::runtime::{api, count, events_until, fixture, new_thread, Server};
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply("one"), reply("two"), reply("three")],
    );
    let f = fixture(&model);
    let s = Server::start(&f, &[]);
    let thread = new_thread(&s, json!({"mode": "operate"})).await;
    let (code, t) = api(&s, "GET", &format!("/v1/threads/{thread}"), None).await;
    assert_eq!(code, 200);
    assert_eq!(t["thread"]["mode"], "operate", "{t}");
    let turn = |body: Value| {
        let s = &s;
        let thread = thread.clone();
        async move {
            api(
                s,
                "POST",
                &format!("/v1/threads/{thread}/turns"),
                Some(body),
            )
            .await
        }
    };
    let (code, b) = turn(json!({"prompt": "goal", "mode": "chat"})).await;
    assert_eq!(code, 400, "{b}");
    assert!(b.to_string().contains("mode"), "{b}");
    let (code, b) = turn(json!({"prompt": "goal", "mode": "operat"})).await;
    assert_eq!(code, 400, "{b}");
    assert!(
        b.to_string()
            .contains("plan, work (or agent), operate, chat"),
        "{b}"
    );

    let (code, _) = turn(json!({"prompt": "goal"})).await;
    assert_eq!(code, 202);
    events_until(&s, &thread, 0, |e| count(e, "turn.completed") == 1).await;
    let (code, _) = turn(json!({"prompt": "look", "mode": "plan"})).await;
    assert_eq!(code, 202);
    events_until(&s, &thread, 0, |e| count(e, "turn.completed") == 2).await;
    let (code, p) = api(
        &s,
        "PATCH",
        &format!("/v1/threads/{thread}"),
        Some(json!({"mode": "work"})),
    )
    .await;
    assert_eq!(code, 200, "{p}");
    let (code, _) = turn(json!({"prompt": "edit"})).await;
    assert_eq!(code, 202);
    events_until(&s, &thread, 0, |e| count(e, "turn.completed") == 3).await;

    let reqs = model.requests();
    let sys = |i: usize| {
        reqs[i].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let tools = |i: usize| -> Vec<String> {
        reqs[i].body["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(sys(0).contains("Mode: Operate"), "operate thread");
    assert!(tools(0).contains(&"todo".to_string()), "{:?}", tools(0));
    assert!(!sys(1).contains("Mode: Operate"), "per-turn plan");
    assert!(
        !tools(1).contains(&"todo".to_string()),
        "Plan offers no todo"
    );
    assert!(!sys(2).contains("Mode: Operate"), "patched to work");
    assert!(tools(2).contains(&"todo".to_string()), "Work offers todo");
}

/// The parent's requests' `[codewhale Operate]` messages.
fn operate_nudges(model: &ScriptedModel) -> Vec<String> {
    model
        .requests()
        .iter()
        .filter(|r| r.lane.as_deref().is_none_or(|l| l == "parent"))
        .filter_map(|r| r.body["messages"].as_array().cloned())
        .next_back()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .filter(|c| c.contains("[codewhale Operate]"))
        .collect()
}

/// The reviewer rule counts files changed by commands (as the undo
/// snapshots see them), the parent's and a child's: a shell command that
/// changes two files gets the message; one that changes one file does
/// not (the positive control of the count); an `implement` child whose
/// command changes two files gets it too.
#[test]
fn operate_counts_files_changed_by_commands_for_the_reviewer_rule() {
    for (cmd, files) in [
        ("printf a > a.txt; printf b > b.txt", 2),
        ("printf a > a.txt", 1),
    ] {
        let model = ScriptedModel::start(
            Wire::OpenAi,
            vec![
                call("s1", "shell", json!({ "command": cmd })),
                reply("changed by a command"),
                reply("ending without a review"),
            ],
        );
        let f = Fixture::new(&model, "");
        let (o, ev) = exec(&f, &["--auto", "--mode", "operate", "change files"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(result(&ev, "s1")["exit_code"], 0, "{:?}", result(&ev, "s1"));
        assert_eq!(
            std::fs::read_to_string(f.ws.join("a.txt")).unwrap(),
            "a",
            "the command ran"
        );
        let nudges = operate_nudges(&model);
        if files == 2 {
            assert_eq!(nudges.len(), 1, "{nudges:?}");
            assert!(
                nudges[0].contains("2 files changed") && nudges[0].contains("a.txt, b.txt"),
                "{nudges:?}"
            );
            assert_eq!(model.requests().len(), 3);
        } else {
            assert!(nudges.is_empty(), "{nudges:?}");
            assert_eq!(model.requests().len(), 2, "one file: ends at once");
        }
        assert_eq!(ev.last().unwrap()["status"], "completed");
    }
    // A child's command: its changes are the parent's `agent` call's.
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            common::scripted_model::lane(
                "parent",
                None,
                vec![
                    call(
                        "c1",
                        "agent",
                        json!({"role": "implement", "prompt": "CHILD-MARK change two files"}),
                    ),
                    reply("the child changed them"),
                    reply("ending without a review"),
                ],
            ),
            common::scripted_model::lane(
                "child",
                Some("CHILD-MARK"),
                vec![
                    call(
                        "cs",
                        "shell",
                        json!({"command": "mkdir -p src && printf x > src/x.rs && printf y > src/y.rs"}),
                    ),
                    reply("changed src/x.rs and src/y.rs"),
                ],
            ),
        ],
    );
    let f = Fixture::new(&model, "");
    let (o, ev) = exec(&f, &["--auto", "--mode", "operate", "delegate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(f.ws.join("src/y.rs").exists());
    let done = of_type(&ev, "subagent_completed");
    assert_eq!(done[0]["files_changed"], json!([]), "no file tool wrote");
    let nudges = operate_nudges(&model);
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    assert!(nudges[0].contains("src/x.rs, src/y.rs"), "{nudges:?}");
}
