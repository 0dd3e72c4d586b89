#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `worktree: true` sub-agents through `codewhale exec` and the scripted
//! model with lanes (docs/SUBAGENTS.md, "Worktree children"): the child
//! works in its own checkout under codewhale's home, the user's workspace
//! stays as it was until the parent applies the returned diff with its own
//! `apply_patch`, the user's `git worktree list` never shows the checkout,
//! and the checkout is gone afterwards. Commands in the OS sandbox are in
//! `tests/real_subagents.rs`.

use crate::common;

use common::cli::*;
use common::scripted_model::{call, lane, reply, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn fixture(model: &ScriptedModel) -> Fixture {
    Fixture::with_config(&format!(
        "[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ))
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn exec(f: &Fixture, prompt: &str) -> (std::process::Output, Vec<Value>) {
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "--auto",
        prompt,
    ]);
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

fn output(ev: &[Value], id: &str) -> Value {
    serde_json::from_str(result(ev, id)["output"].as_str().unwrap()).unwrap_or(Value::Null)
}

/// What git's diff of the child's edit is, without its `diff --git` and
/// `index` lines (which `apply_patch` skips): the patch the parent's
/// script applies, and what the child's result must carry.
const PATCH: &str = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n one\n+two\n";

#[test]
fn a_worktree_child_edits_its_checkout_and_the_parent_applies_the_diff() {
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
                        json!({"role": "general", "prompt": "WT-CHILD add a line to a.txt", "worktree": true}),
                    ),
                    // Before applying: the workspace is as it was.
                    call("p-read", "read_file", json!({"path": "a.txt"})),
                    call("p-apply", "apply_patch", json!({"patch": PATCH})),
                    reply("applied the child's change"),
                ],
            ),
            lane(
                "child",
                Some("WT-CHILD"),
                vec![
                    // The parent's uncommitted state is in the checkout.
                    call("c-read", "read_file", json!({"path": "u.txt"})),
                    call(
                        "c-write",
                        "write_file",
                        json!({"path": "a.txt", "content": "one\ntwo\n"}),
                    ),
                    reply("added the line"),
                ],
            ),
        ],
    );
    let f = fixture(&model);
    git(&f.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    git(&f.ws, &["add", "-A"]);
    git(&f.ws, &["commit", "-q", "-m", "init"]);
    std::fs::write(f.ws.join("u.txt"), "uncommitted\n").unwrap();
    let (o, ev) = exec(&f, "delegate the edit");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(model.lane_left("child"), 0);
    assert_eq!(model.lane_left("parent"), 0);

    // The child read the uncommitted file in its checkout.
    let child: Vec<&Value> = of_type(&ev, "subagent")
        .into_iter()
        .map(|e| &e["event"])
        .filter(|e| e["type"] == "tool_result")
        .collect();
    let c_read = child.iter().find(|e| e["call_id"] == "c-read").unwrap();
    assert!(
        c_read["output"].as_str().unwrap().contains("uncommitted"),
        "{c_read}"
    );
    // Its result: the diff, the file, and that the workspace is unchanged.
    let out = output(&ev, "s1");
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(out["worktree"], true, "{out}");
    assert_eq!(out["files_changed"], json!(["a.txt"]), "{out}");
    let diff: String = out["diff"]
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("diff --git ") && !l.starts_with("index "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(diff, PATCH, "{out}");
    assert!(
        out["note"].as_str().unwrap().contains("apply_patch"),
        "{out}"
    );
    // The agent call itself touched no workspace file.
    assert_eq!(result(&ev, "s1")["files_touched"], json!([]), "{out}");
    let done = of_type(&ev, "subagent_completed");
    assert_eq!(done[0]["files_changed"], json!(["a.txt"]), "{done:?}");
    // Until the parent applied it, the workspace was unchanged.
    let before = result(&ev, "p-read")["output"].as_str().unwrap();
    assert!(
        before.contains("one") && !before.contains("two"),
        "{before}"
    );
    assert_eq!(result(&ev, "p-apply")["status"], "ok");
    assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"one\ntwo\n");
    assert_eq!(std::fs::read(f.ws.join("u.txt")).unwrap(), b"uncommitted\n");
    // The user's repository has one worktree, and the checkout is gone.
    assert_eq!(git(&f.ws, &["worktree", "list"]).lines().count(), 1);
    let left: Vec<_> = std::fs::read_dir(f.cw_home.join("worktrees"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let r = f.run(&["receipts", "--last", "--format", "json"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
    common::receipts::validate(&receipt);
    // The receipt: the child's write is in its checkout (under the
    // sub-agent), the workspace's change is the parent's apply_patch.
    let actions = receipt["actions"].as_array().unwrap();
    let sub = actions.iter().find(|a| a["kind"] == "sub_agent").unwrap();
    let kid = &sub["children"][0];
    assert_eq!(kid["tool"], "write_file", "{sub}");
    assert!(
        kid["files"][0]["path"]
            .as_str()
            .unwrap()
            .starts_with(&f.cw_home.join("worktrees").display().to_string()),
        "{sub}"
    );
    let apply = actions.iter().find(|a| a["call_id"] == "p-apply").unwrap();
    assert_eq!(apply["files"][0]["path"], "a.txt", "{apply}");
    assert_eq!(receipt["totals"]["files_changed"], 1, "{receipt:#}");
    // `undo` reverts the parent's apply (the change entered through its
    // own edit tool).
    let u = f.run(&["undo", "--last"]);
    assert_eq!(u.status.code(), Some(0), "{}", stderr(&u));
    assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"one\n");
}

#[test]
fn a_parent_that_does_not_apply_the_diff_leaves_the_workspace_as_it_was() {
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
                        json!({"role": "implement", "prompt": "WT-CHILD rewrite", "worktree": true}),
                    ),
                    reply("not keeping it"),
                ],
            ),
            lane(
                "child",
                Some("WT-CHILD"),
                vec![
                    call(
                        "c-write",
                        "write_file",
                        json!({"path": "a.txt", "content": "rewritten\n"}),
                    ),
                    call(
                        "c-new",
                        "write_file",
                        json!({"path": "dir/new.txt", "content": "new\n"}),
                    ),
                    reply("rewrote"),
                ],
            ),
        ],
    );
    let f = fixture(&model);
    git(&f.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    git(&f.ws, &["add", "-A"]);
    git(&f.ws, &["commit", "-q", "-m", "init"]);
    let (o, ev) = exec(&f, "delegate");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = output(&ev, "s1");
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(
        out["files_changed"],
        json!(["a.txt", "dir/new.txt"]),
        "{out}"
    );
    assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"one\n");
    assert!(!f.ws.join("dir").exists());
    assert_eq!(git(&f.ws, &["status", "--porcelain"]), "");
}

#[test]
fn worktree_outside_a_repository_and_with_a_write_scope_are_tool_errors() {
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
                        json!({"role": "general", "prompt": "WT-CHILD edit", "worktree": true}),
                    ),
                    call(
                        "s2",
                        "agent",
                        json!({"role": "general", "prompt": "WT-CHILD edit", "worktree": true, "write_scope": ["a.txt"]}),
                    ),
                    reply("could not"),
                ],
            ),
            lane("child", Some("WT-CHILD"), vec![reply("must never run")]),
        ],
    );
    let f = fixture(&model);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    let (o, ev) = exec(&f, "delegate");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(model.lane_left("child"), 1, "a child ran");
    let r1 = result(&ev, "s1");
    assert_eq!(r1["status"], "error", "{r1}");
    let out = output(&ev, "s1");
    assert_eq!(out["status"], "failed", "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("needs a git repository"),
        "{out}"
    );
    let r2 = result(&ev, "s2");
    assert_eq!(r2["status"], "error", "{r2}");
    assert!(
        r2["output"]
            .as_str()
            .unwrap()
            .contains("`write_scope` does not apply"),
        "{r2}"
    );
    assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"one\n");
}

#[test]
fn interrupting_a_worktree_child_removes_its_checkout() {
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
                        json!({"role": "general", "prompt": "WT-HANG wait", "worktree": true}),
                    ),
                    reply("never reached"),
                ],
            ),
            lane(
                "child",
                Some("WT-HANG"),
                vec![common::scripted_model::Step::Hang {
                    text: "thinking".into(),
                }],
            ),
        ],
    );
    let f = fixture(&model);
    git(&f.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    git(&f.ws, &["add", "-A"]);
    git(&f.ws, &["commit", "-q", "-m", "init"]);
    let child = f
        .cmd(&[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "delegate",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let dir = f.cw_home.join("worktrees");
    let checkouts = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // The checkout exists while the child waits on the model.
    while checkouts().is_empty()
        || model
            .requests()
            .iter()
            .all(|r| r.lane.as_deref() != Some("child"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(checkouts()[0].join("a.txt").exists());
    let k = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(git(&f.ws, &["status", "--porcelain"]), "");
}

#[test]
fn a_result_too_large_to_return_whole_is_an_error_naming_its_size() {
    // The diff alone fits 64 KiB; JSON-encoded in the result it does not.
    let big: String = (0..5500).map(|i| format!("{i:09}\n")).collect();
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
                        json!({"role": "general", "prompt": "WT-BIG write", "worktree": true}),
                    ),
                    reply("too big"),
                ],
            ),
            lane(
                "child",
                Some("WT-BIG"),
                vec![
                    call(
                        "c-write",
                        "write_file",
                        json!({"path": "big.txt", "content": big}),
                    ),
                    reply("wrote"),
                ],
            ),
        ],
    );
    let f = fixture(&model);
    git(&f.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    git(&f.ws, &["add", "-A"]);
    git(&f.ws, &["commit", "-q", "-m", "init"]);
    let (o, ev) = exec(&f, "delegate");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = result(&ev, "s1");
    assert_eq!(r["status"], "error", "{r}");
    assert_eq!(r["truncated"], false, "{r}");
    let out = output(&ev, "s1");
    assert_eq!(out["status"], "failed", "{out}");
    let err = out["error"].as_str().unwrap();
    assert!(err.contains("above the 65536-byte bound"), "{err}");
    assert!(out.get("diff").is_none(), "{out}");
    assert_eq!(out["files_changed"], json!(["big.txt"]), "{out}");
    let done = of_type(&ev, "subagent_completed");
    assert_eq!(done[0]["status"], "failed", "{done:?}");
    assert!(!f.ws.join("big.txt").exists());
    let left: Vec<_> = std::fs::read_dir(f.cw_home.join("worktrees"))
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_worktree_writer_holds_no_write_scope_and_runs_beside_a_workspace_writer() {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    common::scripted_model::Step::Reply {
                        text: String::new(),
                        calls: vec![
                            (
                                "s-ws".into(),
                                "agent".into(),
                                json!({"role": "general", "prompt": "WS-WRITER edit b"})
                                    .to_string(),
                            ),
                            (
                                "s-wt".into(),
                                "agent".into(),
                                json!({"role": "implement", "prompt": "WT-WRITER edit a", "worktree": true})
                                    .to_string(),
                            ),
                        ],
                    },
                    reply("both done"),
                ],
            ),
            lane(
                "ws",
                Some("WS-WRITER"),
                vec![
                    call("w1", "write_file", json!({"path": "b.txt", "content": "b\n"})),
                    reply("b written"),
                ],
            ),
            lane(
                "wt",
                Some("WT-WRITER"),
                vec![
                    call("t1", "write_file", json!({"path": "a.txt", "content": "A\n"})),
                    reply("a written"),
                ],
            ),
        ],
    );
    let f = fixture(&model);
    git(&f.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    git(&f.ws, &["add", "-A"]);
    git(&f.ws, &["commit", "-q", "-m", "init"]);
    let (o, ev) = exec(&f, "two writers");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(output(&ev, "s-ws")["status"], "completed");
    let wt = output(&ev, "s-wt");
    assert_eq!(wt["status"], "completed", "{wt}");
    assert_eq!(wt["files_changed"], json!(["a.txt"]), "{wt}");
    assert_eq!(std::fs::read(f.ws.join("b.txt")).unwrap(), b"b\n");
    assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"one\n");
}
