#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Sub-agents end to end through `codewhale exec` and the scripted model
//! with lanes (the parent's script, and each child's, recognised by a
//! marker in the child's first user message): the running-agent cap, the
//! depth limit, write scopes, undo of the children's edits, a headless
//! child's question, an unknown role, and the clamp's tool set. Commands
//! in the OS sandbox are in `tests/real_subagents.rs`.

use crate::common;

use common::cli::*;
use common::scripted_model::{call, lane, reply, slow, ScriptedModel, Step, Wire};
use serde_json::{json, Value};
use std::time::Duration;

fn fixture(model: &ScriptedModel, top: &str) -> Fixture {
    Fixture::with_config(&format!(
        "{top}\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ))
}

/// One response with several `agent` calls.
fn spawns(calls: Vec<(String, Value)>) -> Step {
    Step::Reply {
        text: String::new(),
        calls: calls
            .into_iter()
            .map(|(id, a)| (id, "agent".to_string(), a.to_string()))
            .collect(),
    }
}

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
        .unwrap_or_else(|| panic!("no tool_result for {id}"))
}

fn output(ev: &[Value], id: &str) -> Value {
    serde_json::from_str(result(ev, id)["output"].as_str().unwrap()).unwrap_or(Value::Null)
}

#[test]
fn twenty_children_under_a_cap_of_four_never_run_more_than_four_at_once() {
    let n = 20;
    let parent = vec![
        spawns(
            (0..n)
                .map(|i| {
                    (
                        format!("s{i}"),
                        json!({"role": "explore", "prompt": format!("CHILD-MARK look at part {i}")}),
                    )
                })
                .collect(),
        ),
        reply("all parts looked at"),
    ];
    let children = (0..n)
        .map(|_| slow(Duration::from_millis(300), reply("part looked at")))
        .collect();
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane("parent", None, parent),
            lane("child", Some("CHILD-MARK"), children),
        ],
    );
    let f = fixture(&model, "max_subagents = 4");
    let (o, ev) = exec(&f, &["--auto", "split the work"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let peak = model.peak_in_flight("child");
    assert!(peak <= 4, "peak in flight {peak} > max_subagents 4");
    assert!(peak >= 2, "children did not run concurrently (peak {peak})");
    assert_eq!(model.lane_left("child"), 0);
    assert_eq!(of_type(&ev, "subagent_started").len(), n);
    let done = of_type(&ev, "subagent_completed");
    assert_eq!(done.len(), n);
    assert!(done.iter().all(|d| d["status"] == "completed"), "{done:?}");
    for i in 0..n {
        let out = output(&ev, &format!("s{i}"));
        assert_eq!(out["status"], "completed", "{out}");
        assert_eq!(out["answer"], "part looked at");
    }
    // Each child saw only its prompt as user input, and an explorer's
    // tools: no writes.
    for r in model
        .requests()
        .iter()
        .filter(|r| r.lane.as_deref() == Some("child"))
    {
        let msgs = r.body["messages"].as_array().unwrap();
        let users: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "user").collect();
        assert_eq!(users.len(), 1, "{msgs:?}");
        let sys = msgs[0]["content"].as_str().unwrap();
        assert!(sys.contains("role `explore`"), "{sys}");
        let tools: Vec<&str> = r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert!(
            !tools.contains(&"write_file") && tools.contains(&"read_file"),
            "{tools:?}"
        );
    }
    // The children's events are on the parent's stream, tagged.
    assert!(of_type(&ev, "subagent")
        .iter()
        .any(|e| e["event"]["type"] == "turn_usage"));
    // No child session file where `receipts --last` looks.
    let top: Vec<_> = f
        .session_files()
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(top.len(), 1, "{top:?}");
}

#[test]
fn depth_three_is_not_offered_agent_and_a_fourth_level_is_refused() {
    let go = |marker: &str| json!({"role": "general", "prompt": format!("{marker} go deeper")});
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![call("p1", "agent", go("LVL-ONE")), reply("top done")],
            ),
            lane(
                "one",
                Some("LVL-ONE"),
                vec![call("o1", "agent", go("LVL-TWO")), reply("one done")],
            ),
            lane(
                "two",
                Some("LVL-TWO"),
                vec![call("t1", "agent", go("LVL-THREE")), reply("two done")],
            ),
            lane(
                "three",
                Some("LVL-THREE"),
                vec![call("h1", "agent", go("LVL-FOUR")), reply("three done")],
            ),
            lane("four", Some("LVL-FOUR"), vec![reply("must never run")]),
        ],
    );
    let f = fixture(&model, "");
    let (o, ev) = exec(&f, &["--auto", "go deep"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(model.lane_left("four"), 1, "a depth-4 agent ran");
    let tools_of = |lane: &str| -> Vec<String> {
        let r = model.requests();
        let lanes: Vec<_> = r.iter().map(|r| r.lane.clone()).collect();
        let r = r
            .iter()
            .find(|r| r.lane.as_deref() == Some(lane))
            .unwrap_or_else(|| panic!("no request in lane {lane}: {lanes:?}\n{ev:#?}"));
        r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(tools_of("parent").contains(&"agent".to_string()));
    assert!(tools_of("two").contains(&"agent".to_string()));
    assert!(!tools_of("three").contains(&"agent".to_string()));
    // The depth-3 agent's call was refused at admission.
    let refused = of_type(&ev, "subagent")
        .into_iter()
        .map(|e| &e["event"])
        .flat_map(|e| {
            // Unwrap nested forwarding down to the depth-3 agent's events.
            let mut cur = e;
            while cur["type"] == "subagent" {
                cur = &cur["event"];
            }
            Some(cur.clone())
        })
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "h1")
        .expect("the depth-3 agent's agent call");
    assert_eq!(refused["status"], "not_run", "{refused}");
    assert!(
        refused["output"]
            .as_str()
            .unwrap()
            .contains("not available"),
        "{refused}"
    );
    assert_eq!(output(&ev, "p1")["status"], "completed");
}

#[test]
fn three_writers_edit_disjoint_files_and_undo_restores_the_tree_byte_exact() {
    let edit = |n: u32| {
        call(
            &format!("w{n}"),
            "write_file",
            json!({"path": format!("f{n}.txt"), "content": format!("changed by child {n}\n")}),
        )
    };
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    spawns(
                        (1..=3)
                            .map(|n| {
                                (
                                    format!("s{n}"),
                                    json!({"role": "implement", "write_scope": [format!("f{n}.txt")],
                                           "prompt": format!("EDIT-{n} change f{n}.txt")}),
                                )
                            })
                            .collect(),
                    ),
                    reply("three files changed"),
                ],
            ),
            lane("e1", Some("EDIT-1"), vec![edit(1), reply("f1 done")]),
            lane("e2", Some("EDIT-2"), vec![edit(2), reply("f2 done")]),
            lane("e3", Some("EDIT-3"), vec![edit(3), reply("f3 done")]),
        ],
    );
    let f = fixture(&model, "");
    for n in 1..=3 {
        std::fs::write(
            f.ws.join(format!("f{n}.txt")),
            format!("original {n}\n\u{0}bytes"),
        )
        .unwrap();
    }
    let before: Vec<Vec<u8>> = (1..=3)
        .map(|n| std::fs::read(f.ws.join(format!("f{n}.txt"))).unwrap())
        .collect();
    let (o, ev) = exec(&f, &["--auto", "change three files"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for n in 1..=3 {
        assert_eq!(
            std::fs::read_to_string(f.ws.join(format!("f{n}.txt"))).unwrap(),
            format!("changed by child {n}\n")
        );
        let out = output(&ev, &format!("s{n}"));
        assert_eq!(out["status"], "completed", "{out}");
        assert_eq!(out["files_changed"].as_array().unwrap().len(), 1, "{out}");
    }
    // The receipt shows the tree: each `agent` call a `sub_agent` action
    // with the child's own write nested under it, decided by the posture.
    let r = f.run(&["receipts", "--last", "--format", "json"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(receipt["schema"], "codewhale.receipt/v3");
    common::receipts::validate(&receipt);
    let subs: Vec<&Value> = receipt["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "sub_agent")
        .collect();
    assert_eq!(subs.len(), 3, "{receipt:#}");
    assert_eq!(receipt["totals"]["sub_agents"], 3);
    for s in &subs {
        assert_eq!(s["agent"]["role"], "implement", "{s}");
        let kids = s["children"].as_array().unwrap();
        assert_eq!(kids.len(), 1, "{s}");
        assert_eq!(kids[0]["kind"], "file_change", "{s}");
        assert_eq!(kids[0]["status"], "succeeded", "{s}");
    }
    let md = f.run(&["receipts", "--last"]);
    assert!(String::from_utf8_lossy(&md.stdout).contains("sub-agent a1 (implement)"));
    let u = f.run(&["undo", "--last"]);
    assert_eq!(u.status.code(), Some(0), "{}", stderr(&u));
    let after: Vec<Vec<u8>> = (1..=3)
        .map(|n| std::fs::read(f.ws.join(format!("f{n}.txt"))).unwrap())
        .collect();
    assert_eq!(after, before, "undo did not restore the children's files");
}

#[test]
fn overlapping_writers_are_refused_before_anything_is_written() {
    let w = |id: &str, marker: &str| {
        (
            id.to_string(),
            json!({"role": "general", "prompt": format!("{marker} write")}),
        )
    };
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![spawns(vec![w("s1", "WA"), w("s2", "WB")]), reply("done")],
            ),
            lane(
                "a",
                Some("WA"),
                vec![
                    call("x", "write_file", json!({"path": "a.txt", "content": "a"})),
                    reply("a written"),
                ],
            ),
            lane(
                "b",
                Some("WB"),
                vec![
                    call("y", "write_file", json!({"path": "b.txt", "content": "b"})),
                    reply("b written"),
                ],
            ),
        ],
    );
    let f = fixture(&model, "");
    let (o, ev) = exec(&f, &["--auto", "two writers"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The first (no scope: the whole workspace) ran; the second was
    // refused before it started, so its lane was never asked.
    assert_eq!(output(&ev, "s1")["status"], "completed");
    let r = result(&ev, "s2");
    assert_eq!(r["status"], "denied", "{r}");
    assert!(r["output"].as_str().unwrap().contains("overlaps"), "{r}");
    assert_eq!(model.lane_left("b"), 2);
    assert!(!f.ws.join("b.txt").exists());
    assert!(f.ws.join("a.txt").exists());
}

#[test]
fn an_unknown_role_is_a_tool_error_naming_the_roles() {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![lane(
            "parent",
            None,
            vec![
                call("s1", "agent", json!({"role": "hacker", "prompt": "x"})),
                reply("ok"),
            ],
        )],
    );
    let f = fixture(&model, "");
    let (o, ev) = exec(&f, &["--auto", "spawn"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = result(&ev, "s1");
    assert_eq!(r["status"], "error");
    let text = r["output"].as_str().unwrap();
    for role in [
        "general",
        "implement",
        "test",
        "explore",
        "reviewer",
        "planner",
        "advisor",
    ] {
        assert!(text.contains(role), "{text}");
    }
    assert!(of_type(&ev, "subagent_started").is_empty());
}

#[test]
fn a_headless_childs_question_is_denied_no_response_and_a_test_child_cannot_write() {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    spawns(vec![
                        (
                            "s1".into(),
                            json!({"role": "general", "prompt": "ASKER touch"}),
                        ),
                        (
                            "s2".into(),
                            json!({"role": "test", "prompt": "TESTER write"}),
                        ),
                    ]),
                    reply("done"),
                ],
            ),
            lane(
                "asker",
                Some("ASKER"),
                vec![
                    call("q", "shell", json!({"command": "touch made-by-child"})),
                    reply("asked"),
                ],
            ),
            lane(
                "tester",
                Some("TESTER"),
                vec![
                    call("t", "write_file", json!({"path": "t.txt", "content": "x"})),
                    reply("tried"),
                ],
            ),
        ],
    );
    let f = fixture(&model, "");
    // Without --auto: nobody answers; the tools are given explicitly.
    let (o, ev) = exec(
        &f,
        &[
            "--allowed-tools",
            "read_file,write_file,shell,agent",
            "two children",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let inner = |id: &str| {
        of_type(&ev, "subagent")
            .into_iter()
            .map(|e| e["event"].clone())
            .find(|e| e["type"] == "tool_result" && e["call_id"] == id)
            .unwrap_or_else(|| panic!("no child result {id}"))
    };
    let q = inner("q");
    assert_eq!(q["status"], "not_run", "{q}");
    assert!(q["output"].as_str().unwrap().contains("no response"), "{q}");
    assert!(!f.ws.join("made-by-child").exists());
    let t = inner("t");
    assert_eq!(t["status"], "not_run", "{t}");
    assert!(!f.ws.join("t.txt").exists());
    // The clamped posture is on the started event: read-only for `test`.
    let started = of_type(&ev, "subagent_started");
    let test = started.iter().find(|s| s["role"] == "test").unwrap();
    assert_eq!(test["posture"]["sandbox"], "read-only", "{test}");
    assert_eq!(test["posture"]["headless"], true);
}

#[test]
fn the_token_budget_stops_child_turns_and_later_spawns_with_status_limit() {
    let read = |id: &str| call(id, "read_file", json!({"path": "seed.txt"}));
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    call(
                        "s1",
                        "agent",
                        json!({"role": "explore", "prompt": "BUDGET-A read"}),
                    ),
                    call(
                        "s2",
                        "agent",
                        json!({"role": "explore", "prompt": "BUDGET-B read"}),
                    ),
                    reply("stopped by the budget"),
                ],
            ),
            lane(
                "a",
                Some("BUDGET-A"),
                vec![read("r1"), read("r2"), reply("never reached")],
            ),
            lane("b", Some("BUDGET-B"), vec![reply("never reached")]),
        ],
    );
    // Each scripted request reports 100 + 20 tokens.
    let f = fixture(&model, "[subagents]\ntoken_budget = 200");
    std::fs::write(f.ws.join("seed.txt"), "seed\n").unwrap();
    let (o, ev) = exec(&f, &["--auto", "spend"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let a = output(&ev, "s1");
    assert_eq!(a["status"], "limit", "{a}");
    assert_eq!(model.lane_left("a"), 1, "the child's third turn ran");
    let b = result(&ev, "s2");
    assert_eq!(b["status"], "denied", "{b}");
    let b_out: Value = serde_json::from_str(b["output"].as_str().unwrap()).unwrap();
    assert_eq!(b_out["status"], "limit", "{b_out}");
    assert_eq!(model.lane_left("b"), 1);
    // The parent's totals count the child's tokens (3 parent + 2 child requests).
    let done = of_type(&ev, "done")[0];
    assert_eq!(done["input_tokens"], 500, "{done}");
}

#[test]
fn max_subagents_above_64_is_a_config_error_naming_the_file_and_key() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("unused")]);
    let f = fixture(&model, "max_subagents = 65");
    let (o, _) = exec(&f, &["--auto", "hi"]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(err.contains("config.toml"), "{err}");
    assert!(err.contains("max_subagents"), "{err}");
    assert!(err.contains("64"), "{err}");
    assert_eq!(model.requests().len(), 0);
}

#[test]
fn a_stalled_child_is_stopped_at_its_stall_limit_and_the_parent_goes_on() {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    call(
                        "s1",
                        "agent",
                        json!({"role": "explore", "prompt": "STALLER look"}),
                    ),
                    reply("went on without it"),
                ],
            ),
            lane(
                "staller",
                Some("STALLER"),
                vec![Step::Hang {
                    text: "thinking".into(),
                }],
            ),
        ],
    );
    let f = fixture(&model, "[subagents]\nstall_secs = 1");
    let started = std::time::Instant::now();
    let (o, ev) = exec(&f, &["--auto", "look"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(20));
    let out = output(&ev, "s1");
    assert_eq!(out["status"], "failed", "{out}");
    assert!(out["error"].as_str().unwrap().contains("stall"), "{out}");
    let done = of_type(&ev, "done")[0];
    assert_eq!(done["status"], "completed");
}

#[test]
fn a_writer_with_a_scope_cannot_write_outside_it() {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    call(
                        "s1",
                        "agent",
                        json!({"role": "implement", "write_scope": ["src"], "prompt": "SCOPED edit"}),
                    ),
                    reply("done"),
                ],
            ),
            lane(
                "scoped",
                Some("SCOPED"),
                vec![
                    call(
                        "in",
                        "write_file",
                        json!({"path": "src/ok.txt", "content": "in"}),
                    ),
                    call(
                        "out",
                        "write_file",
                        json!({"path": "src/../top.txt", "content": "out"}),
                    ),
                    reply("tried both"),
                ],
            ),
        ],
    );
    let f = fixture(&model, "");
    std::fs::create_dir_all(f.ws.join("src")).unwrap();
    let (o, ev) = exec(&f, &["--auto", "scoped"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let inner = |id: &str| {
        of_type(&ev, "subagent")
            .into_iter()
            .map(|e| e["event"].clone())
            .find(|e| e["type"] == "tool_result" && e["call_id"] == id)
            .unwrap_or_else(|| panic!("no child result {id}"))
    };
    assert_eq!(inner("in")["status"], "ok");
    let out = inner("out");
    assert_eq!(out["status"], "not_run", "{out}");
    assert!(
        out["output"].as_str().unwrap().contains("write scope"),
        "{out}"
    );
    assert!(f.ws.join("src/ok.txt").exists());
    assert!(!f.ws.join("top.txt").exists());
    let sys = model
        .requests()
        .into_iter()
        .find(|r| r.lane.as_deref() == Some("scoped"))
        .unwrap();
    assert!(sys.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("write scope): src"));
}

/// Spawn latency (tool call → the child's first model request), measured
/// on the scripted model's clock: the parent's request that returned the
/// calls is answered at once, so its arrival bounds the call from below.
/// Printed for docs/PERFORMANCE.md; the bound here is only a regression
/// guard for a debug build on a shared machine.
#[test]
fn spawn_latency_is_recorded() {
    for n in [1, 32] {
        let (p50, p99) = spawn_latency(n);
        eprintln!("spawn latency over {n} concurrent spawn(s): p50 {p50:.1} ms, p99 {p99:.1} ms");
        assert!(p99 < 5_000.0, "p99 {p99} ms");
    }
}

fn spawn_latency(n: usize) -> (f64, f64) {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    spawns(
                        (0..n)
                            .map(|i| {
                                (
                                    format!("s{i}"),
                                    json!({"role": "explore", "prompt": format!("LAT-MARK {i}")}),
                                )
                            })
                            .collect(),
                    ),
                    reply("done"),
                ],
            ),
            lane(
                "child",
                Some("LAT-MARK"),
                (0..n).map(|_| reply("ok")).collect(),
            ),
        ],
    );
    let f = fixture(&model, "max_subagents = 64");
    let (o, _) = exec(&f, &["--auto", "spawn many"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = model.requests();
    let t0 = reqs
        .iter()
        .find(|r| r.lane.as_deref() == Some("parent"))
        .unwrap()
        .at;
    let mut ms: Vec<f64> = reqs
        .iter()
        .filter(|r| r.lane.as_deref() == Some("child"))
        .map(|r| (r.at - t0).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(ms.len(), n);
    (ms[n / 2], ms[(n * 99).div_ceil(100) - 1])
}

/// A write scope that leads out of the workspace (a symlink to a sibling
/// directory) is refused before the child does anything: the child fails,
/// naming the path, and nothing is written through the link (host state
/// checked). The same call with an in-workspace scope runs (positive
/// control).
#[cfg(unix)]
#[test]
fn a_write_scope_through_a_symlink_out_of_the_workspace_fails_the_child() {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    call(
                        "s1",
                        "agent",
                        json!({"role": "implement", "write_scope": ["out"], "prompt": "ESCAPE write"}),
                    ),
                    call(
                        "s2",
                        "agent",
                        json!({"role": "implement", "write_scope": ["inside"], "prompt": "INSIDE write"}),
                    ),
                    reply("done"),
                ],
            ),
            lane(
                "escape",
                Some("ESCAPE"),
                vec![
                    call(
                        "e1",
                        "write_file",
                        json!({"path": "out/x.txt", "content": "x"}),
                    ),
                    reply("tried"),
                ],
            ),
            lane(
                "inside",
                Some("INSIDE"),
                vec![
                    call(
                        "i1",
                        "write_file",
                        json!({"path": "inside/x.txt", "content": "x"}),
                    ),
                    reply("wrote"),
                ],
            ),
        ],
    );
    let f = fixture(&model, "");
    let elsewhere = f.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, f.ws.join("out")).unwrap();
    let (o, ev) = exec(&f, &["--auto", "scoped"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let done = of_type(&ev, "subagent_completed");
    let by = |call: &str| done.iter().find(|d| d["parent_call_id"] == call).unwrap();
    let esc = by("s1");
    assert_eq!(esc["status"], "failed", "{esc}");
    let why = esc["reason"].as_str().unwrap();
    assert!(
        why.contains("write scope out") && why.contains("leads out"),
        "{why}"
    );
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    assert_eq!(
        model.lane_left("escape"),
        2,
        "the child never asked its model"
    );
    // Positive control: a scope that does not exist yet is made and used.
    assert_eq!(by("s2")["status"], "completed", "{}", by("s2"));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("inside/x.txt")).unwrap(),
        "x"
    );
}
