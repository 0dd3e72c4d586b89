#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Sub-agents' commands under the real OS sandbox, through `codewhale exec`
//! and the scripted model with lanes (docs/SUBAGENTS.md):
//!
//! - the role × posture matrix: under Plan (`--mode plan`: every child
//!   is Plan whatever its role), under `--auto` (Work + Ask, approved,
//!   `workspace-write`) and under Full Access (`--auto --sandbox
//!   danger-full-access`), a `general`, a `test` and an `explore` child
//!   each try a file write, a mutating command and a read-only command;
//!   the host's files are checked after. A `test` child's mutating command
//!   (`mv`; a headless `rm` is held by the safety floor before any sandbox
//!   is involved) is allowed by the gates under both and refused by the
//!   kernel (its sandbox is read-only); the `general` child's identical
//!   command is the positive control;
//! - interrupting the parent while six children run `sleep`: every one of
//!   their processes is gone within a second.
//!
//! NEEDS THE REAL HOST (a real-sandbox test never silently skips).

mod common;

use common::cli::*;
use common::scripted_model::{call, lane, reply, ScriptedModel, Step, Wire};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn fixture(model: &ScriptedModel) -> Fixture {
    Fixture::with_config(&format!(
        "[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ))
}

fn spawns(calls: Vec<(String, Value)>) -> Step {
    Step::Reply {
        text: String::new(),
        calls: calls
            .into_iter()
            .map(|(id, a)| (id, "agent".to_string(), a.to_string()))
            .collect(),
    }
}

/// The child's own events (unwrapped from the parent's stream).
fn child_results(ev: &[Value]) -> Vec<Value> {
    of_type(ev, "subagent")
        .into_iter()
        .map(|e| e["event"].clone())
        .filter(|e| e["type"] == "tool_result")
        .collect()
}

const ROLES: [&str; 3] = ["general", "test", "explore"];

fn matrix(extra: &[&str], posture: &str) {
    let child = |role: &str| {
        vec![
            call(
                &format!("{role}-w"),
                "write_file",
                json!({"path": format!("{role}-w.txt"), "content": "written"}),
            ),
            call(
                &format!("{role}-m"),
                "shell",
                json!({"command": format!("mv victim-{role}.txt moved-{role}.txt")}),
            ),
            call(
                &format!("{role}-r"),
                "shell",
                json!({"command": "cat seed.txt"}),
            ),
            reply(&format!("{role} done")),
        ]
    };
    let mut lanes = vec![lane(
        "parent",
        None,
        vec![
            spawns(
                ROLES
                    .iter()
                    .map(|r| {
                        (
                            format!("s-{r}"),
                            json!({"role": r, "prompt": format!("ROLE-{r} try everything")}),
                        )
                    })
                    .collect(),
            ),
            reply("matrix done"),
        ],
    )];
    for r in ROLES {
        lanes.push(lane(r, Some(&format!("ROLE-{r}")), child(r)));
    }
    let model = ScriptedModel::start_lanes(Wire::OpenAi, lanes);
    let f = fixture(&model);
    std::fs::write(f.ws.join("seed.txt"), "seed\n").unwrap();
    for r in ROLES {
        std::fs::write(f.ws.join(format!("victim-{r}.txt")), "victim\n").unwrap();
    }
    let mut args = vec![
        "exec",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
    ];
    args.extend_from_slice(extra);
    args.push("run the matrix");
    let o = f.run(&args);
    assert_eq!(o.status.code(), Some(0), "{posture}: {}", stderr(&o));
    let ev = stdout_lines(&o);
    let results = child_results(&ev);
    let res = |id: &str| {
        results
            .iter()
            .find(|r| r["call_id"] == id)
            .unwrap_or_else(|| panic!("{posture}: no result for {id}: {results:#?}"))
    };
    if posture == "Plan" {
        // A Plan parent's children are Plan whatever their role: no write
        // tool, no mutating command (the gates), a read-only sandbox.
        for r in ROLES {
            assert_eq!(res(&format!("{r}-w"))["status"], "not_run", "{posture} {r}");
            let m = res(&format!("{r}-m"));
            assert_eq!(m["status"], "not_run", "{posture} {r}: {m}");
            assert!(
                f.ws.join(format!("victim-{r}.txt")).exists(),
                "{posture} {r}"
            );
            assert!(!f.ws.join(format!("{r}-w.txt")).exists(), "{posture} {r}");
            let x = res(&format!("{r}-r"));
            assert_eq!(x["exit_code"], 0, "{posture}: {x}");
        }
        let started = of_type(&ev, "subagent_started");
        for s in started {
            assert_eq!(s["posture"]["mode"], "plan", "{s}");
            assert_eq!(s["posture"]["sandbox"], "read-only", "{s}");
        }
        return;
    }
    // general: everything runs (the positive control).
    assert_eq!(res("general-w")["status"], "ok", "{posture}");
    assert_eq!(
        res("general-m")["exit_code"],
        0,
        "{posture}: {}",
        res("general-m")
    );
    assert!(f.ws.join("general-w.txt").exists(), "{posture}");
    assert!(f.ws.join("moved-general.txt").exists(), "{posture}");
    // test: no write tool; the gates let the command through, the kernel
    // refuses it (read-only sandbox) and the result says so.
    assert_eq!(res("test-w")["status"], "not_run", "{posture}");
    let m = res("test-m");
    assert_ne!(m["exit_code"], 0, "{posture}: {m}");
    assert!(
        m["enforcement"]
            .as_str()
            .unwrap_or("")
            .starts_with("sandboxed"),
        "{posture}: {m}"
    );
    assert!(
        m["output"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{posture}: {m}"
    );
    assert!(
        f.ws.join("victim-test.txt").exists() && !f.ws.join("moved-test.txt").exists(),
        "{posture}: the kernel let `test` move a file"
    );
    assert!(!f.ws.join("test-w.txt").exists(), "{posture}");
    // explore: Plan at the gates: no write tool, no mutating command.
    assert_eq!(res("explore-w")["status"], "not_run", "{posture}");
    assert_eq!(res("explore-m")["status"], "not_run", "{posture}");
    assert!(f.ws.join("victim-explore.txt").exists(), "{posture}");
    // Every role may run a read-only command.
    for r in ROLES {
        let x = res(&format!("{r}-r"));
        assert_eq!(x["exit_code"], 0, "{posture}: {x}");
        assert!(
            x["output"].as_str().unwrap().contains("seed"),
            "{posture}: {x}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.join("seed.txt")).unwrap(),
        "seed\n"
    );
    // The clamped postures, as the records state them.
    let started = of_type(&ev, "subagent_started");
    let sandbox_of =
        |r: &str| started.iter().find(|s| s["role"] == r).unwrap()["posture"]["sandbox"].clone();
    assert_eq!(sandbox_of("test"), "read-only", "{posture}");
    assert_eq!(sandbox_of("explore"), "read-only", "{posture}");
}

#[test]
fn role_by_posture_matrix_under_auto_workspace_write() {
    matrix(&["--auto"], "Work + Ask (--auto)");
}

#[test]
fn role_by_posture_matrix_under_plan() {
    matrix(&["--auto", "--mode", "plan"], "Plan");
}

#[test]
fn role_by_posture_matrix_under_full_access() {
    matrix(
        &["--auto", "--sandbox", "danger-full-access"],
        "Work + Full Access",
    );
}

/// PIDs of processes whose command line is exactly `argv`.
fn procs(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| a.bytes().chain(std::iter::once(0)))
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

#[test]
fn interrupting_the_parent_stops_every_child_and_its_commands_within_a_second() {
    // A duration no other test uses: these are our processes.
    let argv = ["sleep", "67.31"];
    let n = 6;
    let mut lanes = vec![lane(
        "parent",
        None,
        vec![
            spawns(
                (0..n)
                    .map(|i| {
                        (
                            format!("s{i}"),
                            json!({"role": "test", "prompt": format!("SLEEPER {i}")}),
                        )
                    })
                    .collect(),
            ),
            reply("never reached"),
        ],
    )];
    lanes.push(lane(
        "sleeper",
        Some("SLEEPER"),
        (0..n)
            .map(|i| {
                call(
                    &format!("z{i}"),
                    "shell",
                    json!({"command": argv.join(" ")}),
                )
            })
            .collect(),
    ));
    let model = ScriptedModel::start_lanes(Wire::OpenAi, lanes);
    let f = fixture(&model);
    let child = f
        .cmd(&[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "sleep in parallel",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while procs(&argv).len() < n {
        assert!(
            Instant::now() < deadline,
            "the children's commands did not all start: {:?}",
            procs(&argv)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let running = procs(&argv);
    assert_eq!(running.len(), n, "{running:?}");
    let t0 = Instant::now();
    let k = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    while !procs(&argv).is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = t0.elapsed();
    assert!(procs(&argv).is_empty(), "left running: {:?}", procs(&argv));
    assert!(gone <= Duration::from_secs(1), "took {gone:?} to stop them");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let ev = stdout_lines(&out);
    let done = of_type(&ev, "subagent_completed");
    assert_eq!(done.len(), n, "{done:?}");
    assert!(
        done.iter().all(|d| d["status"] == "interrupted"),
        "{done:?}"
    );
}
