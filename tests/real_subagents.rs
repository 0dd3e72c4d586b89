#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Sub-agents' commands under the real OS sandbox, through `codewhale exec`
//! and the scripted model with lanes (docs/SUBAGENTS.md):
//!
//! - the role × posture matrix: under Plan (`--mode plan`: every child
//!   is Plan whatever its role), under `--auto` (Work + Ask, approved,
//!   `workspace-write`), under Auto-Review (a runtime turn, `exec` has
//!   none: `approval_policy = "auto-review"`, the reviewer lane allowing
//!   what it is asked; host state and the records checked) and under Full
//!   Access (`--auto --sandbox danger-full-access`), a child of each of
//!   the seven roles tries a file write, a mutating command, a read-only
//!   command, a file read and a network read (a curl GET of a loopback
//!   server on the host: it connects only under Full Access, for every
//!   role with a shell), each in its own directory (the writers with
//!   it as their write scope: two writers run side by side only so);
//!   the host's files are checked after. A `test` child's mutating command
//!   (`mv`; a headless `rm` is held by the safety floor before any sandbox
//!   is involved) is allowed by the gates under both and refused by the
//!   kernel (its sandbox is read-only); the `general` child's identical
//!   command is the positive control;
//! - interrupting the parent while six children run `sleep`: every one of
//!   their processes is gone within a second;
//! - two concurrent scoped writers, in each sandbox tier: each one's
//!   commands write its own `write_scope` (a directory, a directory made
//!   for it before it started, a single file rewritten in place) and
//!   nothing else of the workspace, not the other's scope either (refused
//!   by the kernel; host state checked after); the rest stays readable,
//!   `.env` stays masked;
//! - a `worktree: true` child's commands (bwrap and the Landlock tier)
//!   write its checkout under codewhale's home, read nothing else of that
//!   home (config with the key, sessions) and cannot write the workspace.
//!
//! NEEDS THE REAL HOST (a real-sandbox test never silently skips).

mod common;

use common::cli::*;
use common::scripted_model::{call, lane, reply, verdict, ScriptedModel, Step, Wire};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn fixture(model: &ScriptedModel) -> Fixture {
    fixture_with(model, "")
}

/// `config`: top-level keys before the provider table.
fn fixture_with(model: &ScriptedModel, config: &str) -> Fixture {
    Fixture::with_config(&format!(
        "{config}[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
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

const ROLES: [&str; 7] = [
    "general",
    "implement",
    "test",
    "explore",
    "reviewer",
    "planner",
    "advisor",
];
/// Roles that write (everything runs for them under Work).
const WRITERS: [&str; 2] = ["general", "implement"];
/// Roles that investigate: Plan at the gates, a read-only sandbox.
const READERS: [&str; 3] = ["explore", "reviewer", "planner"];

/// The parent spawns one child of each role; each child tries a write, a
/// mutating command, a read-only command and a file read in its own
/// directory (the writers with that directory as their write scope).
fn matrix_lanes(port: u16) -> Vec<common::scripted_model::Lane> {
    let child = |role: &str| {
        vec![
            call(
                &format!("{role}-w"),
                "write_file",
                json!({"path": format!("{role}/w.txt"), "content": "written"}),
            ),
            call(
                &format!("{role}-m"),
                "shell",
                json!({"command": format!("mv {role}/victim.txt {role}/moved.txt")}),
            ),
            call(
                &format!("{role}-r"),
                "shell",
                json!({"command": "cat seed.txt"}),
            ),
            call(
                &format!("{role}-f"),
                "read_file",
                json!({"path": "seed.txt"}),
            ),
            call(
                &format!("{role}-n"),
                "shell",
                json!({"command": format!("curl -s -m 3 http://127.0.0.1:{port}/{role}")}),
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
                            if WRITERS.contains(r) {
                                // Two writers run side by side only with
                                // disjoint scopes.
                                json!({"role": r, "prompt": format!("ROLE-{r} try everything"), "write_scope": [r]})
                            } else {
                                json!({"role": r, "prompt": format!("ROLE-{r} try everything")})
                            },
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
    lanes
}

/// A plain HTTP server on the host's loopback: which paths were read.
struct Net {
    port: u16,
    hits: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Net {
    fn start() -> Net {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let h = hits.clone();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let mut buf = [0u8; 1024];
                let n = c.read(&mut buf).unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = req
                    .split(' ')
                    .nth(1)
                    .unwrap_or("")
                    .trim_start_matches('/')
                    .to_string();
                h.lock().unwrap().push(path.clone());
                let _ = c.write_all(
                    format!(
                        "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\nnet-{path}",
                        path.len() + 4
                    )
                    .as_bytes(),
                );
            }
        });
        Net { port, hits }
    }

    fn hits(&self) -> Vec<String> {
        let mut v = self.hits.lock().unwrap().clone();
        v.sort();
        v
    }
}

/// The workspace the matrix starts from.
fn matrix_files(f: &Fixture) {
    std::fs::write(f.ws.join("seed.txt"), "seed\n").unwrap();
    for r in ROLES {
        std::fs::create_dir_all(f.ws.join(r)).unwrap();
        std::fs::write(f.ws.join(format!("{r}/victim.txt")), "victim\n").unwrap();
    }
}

fn matrix(extra: &[&str], posture: &str) {
    matrix_with(extra, posture, "")
}

fn matrix_with(extra: &[&str], posture: &str, config: &str) {
    let net = Net::start();
    let model = ScriptedModel::start_lanes(Wire::OpenAi, matrix_lanes(net.port));
    let f = fixture_with(&model, config);
    matrix_files(&f);
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
                f.ws.join(format!("{r}/victim.txt")).exists(),
                "{posture} {r}"
            );
            assert!(!f.ws.join(format!("{r}/w.txt")).exists(), "{posture} {r}");
        }
        reads(&res, posture);
        network(&res, &net, posture, false);
        let started = of_type(&ev, "subagent_started");
        assert_eq!(started.len(), ROLES.len());
        for s in started {
            assert_eq!(s["posture"]["mode"], "plan", "{s}");
            assert_eq!(s["posture"]["sandbox"], "read-only", "{s}");
        }
        return;
    }
    // The writers: everything runs (the positive control).
    for r in WRITERS {
        assert_eq!(res(&format!("{r}-w"))["status"], "ok", "{posture} {r}");
        let m = res(&format!("{r}-m"));
        assert_eq!(m["exit_code"], 0, "{posture} {r}: {m}");
        assert!(f.ws.join(format!("{r}/w.txt")).exists(), "{posture} {r}");
        assert!(
            f.ws.join(format!("{r}/moved.txt")).exists(),
            "{posture} {r}"
        );
    }
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
        f.ws.join("test/victim.txt").exists() && !f.ws.join("test/moved.txt").exists(),
        "{posture}: the kernel let `test` move a file"
    );
    assert!(!f.ws.join("test/w.txt").exists(), "{posture}");
    // explore, reviewer, planner (Plan at the gates) and advisor (no
    // shell at all): no write tool, no mutating command.
    for r in READERS.iter().chain(&["advisor"]) {
        assert_eq!(res(&format!("{r}-w"))["status"], "not_run", "{posture} {r}");
        let m = res(&format!("{r}-m"));
        assert_eq!(m["status"], "not_run", "{posture} {r}: {m}");
        assert!(
            f.ws.join(format!("{r}/victim.txt")).exists(),
            "{posture} {r}"
        );
        assert!(!f.ws.join(format!("{r}/w.txt")).exists(), "{posture} {r}");
    }
    reads(&res, posture);
    network(&res, &net, posture, posture.contains("Full Access"));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("seed.txt")).unwrap(),
        "seed\n"
    );
    // The clamped postures, as the records state them: every role
    // without writes has a read-only sandbox.
    let started = of_type(&ev, "subagent_started");
    assert_eq!(started.len(), ROLES.len());
    let sandbox_of =
        |r: &str| started.iter().find(|s| s["role"] == r).unwrap()["posture"]["sandbox"].clone();
    for r in READERS.iter().chain(&["test", "advisor"]) {
        assert_eq!(sandbox_of(r), "read-only", "{posture} {r}");
    }
}

/// Every role with a shell gets its network read through the gates (a
/// curl GET); whether it connects is the parent's network, clamped: only
/// under Full Access (network on) does the host's loopback server see
/// them, and never the advisor (no shell).
fn network<'a>(res: &dyn Fn(&str) -> &'a Value, net: &Net, posture: &str, on: bool) {
    for r in ROLES {
        let x = res(&format!("{r}-n"));
        if r == "advisor" {
            assert_eq!(x["status"], "not_run", "{posture}: {x}");
        } else if on {
            assert_eq!(x["exit_code"], 0, "{posture}: {x}");
            assert!(
                x["output"].as_str().unwrap().contains(&format!("net-{r}")),
                "{posture}: {x}"
            );
        } else {
            assert_ne!(x["status"], "not_run", "{posture}: the gates refused {x}");
            assert_ne!(x["exit_code"], 0, "{posture}: {x}");
        }
    }
    let want: Vec<String> = if on {
        let mut v: Vec<String> = ROLES
            .iter()
            .filter(|r| **r != "advisor")
            .map(|r| r.to_string())
            .collect();
        v.sort();
        v
    } else {
        Vec::new()
    };
    assert_eq!(net.hits(), want, "{posture}");
}

/// Every role reads a file with its file tool; every role with a shell
/// runs a read-only command (the advisor has none).
fn reads<'a>(res: &dyn Fn(&str) -> &'a Value, posture: &str) {
    for r in ROLES {
        let f = res(&format!("{r}-f"));
        assert_eq!(f["status"], "ok", "{posture} {r}: {f}");
        let x = res(&format!("{r}-r"));
        if r == "advisor" {
            assert_eq!(x["status"], "not_run", "{posture}: {x}");
        } else {
            assert_eq!(x["exit_code"], 0, "{posture}: {x}");
            assert!(
                x["output"].as_str().unwrap().contains("seed"),
                "{posture}: {x}"
            );
        }
    }
}

#[test]
fn role_by_posture_matrix_under_auto_workspace_write() {
    matrix(&["--auto"], "Work + Ask (--auto)");
}

/// Work under Auto-Review, in a runtime turn (`app-server --http`; `exec`
/// has no Auto-Review): the reviewer lane allows every ordinary question
/// it is asked, nobody is asked, and what a role may not do is still
/// refused by the gates or the kernel. Host state is checked for every
/// role; the reviewer must have been consulted (the writers' mutating
/// commands are ordinary questions), or the column tests nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_by_posture_matrix_under_auto_review() {
    use common::runtime::{count, new_thread, new_turn, until_completed, Server};
    let net = Net::start();
    let model = ScriptedModel::start_lanes(Wire::OpenAi, matrix_lanes(net.port));
    model.reviews(
        (0..40)
            .map(|_| verdict("low", "allow", "inside the workspace"))
            .collect(),
    );
    let f = Fixture::with_config(&format!(
        "provider = \"custom\"\napproval_policy = \"auto-review\"\n\
         [providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ));
    matrix_files(&f);
    let s = Server::start(&f, &["--approval-timeout", "2"]);
    let thread = new_thread(&s, json!({"title": "matrix"})).await;
    new_turn(&s, &thread, "run the matrix").await;
    let evs = until_completed(&s, &thread, 1).await;
    assert_eq!(count(&evs, "subagent.started"), ROLES.len(), "{evs:#?}");
    assert_eq!(count(&evs, "approval.required"), 0, "nobody is asked");
    assert!(
        !model.review_requests().is_empty() && count(&evs, "auto_review.decided") > 0,
        "the reviewer was never consulted: {evs:#?}"
    );
    for r in WRITERS {
        assert!(f.ws.join(format!("{r}/w.txt")).exists(), "{r}: {evs:#?}");
        assert!(f.ws.join(format!("{r}/moved.txt")).exists(), "{r}");
    }
    for r in READERS.iter().chain(&["test", "advisor"]) {
        assert!(f.ws.join(format!("{r}/victim.txt")).exists(), "{r}");
        assert!(!f.ws.join(format!("{r}/moved.txt")).exists(), "{r}");
        assert!(!f.ws.join(format!("{r}/w.txt")).exists(), "{r}");
    }
    // Network off (the default): no child's read connected.
    assert_eq!(net.hits(), Vec::<String>::new());
    for e in evs.iter().filter(|e| e["event"] == "subagent.started") {
        let role = e["payload"]["role"].as_str().unwrap();
        let sandbox = &e["payload"]["posture"]["sandbox"];
        if WRITERS.contains(&role) {
            assert_eq!(sandbox, "workspace-write", "{e}");
        } else {
            assert_eq!(sandbox, "read-only", "{e}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.join("seed.txt")).unwrap(),
        "seed\n"
    );
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

/// Scoped writers' commands are confined by the kernel, in every tier.
#[test]
fn scoped_writers_commands_write_only_their_scope_in_every_tier() {
    use common::sandbox::{no_bwrap, path_without_bwrap, tiers};
    for tier in tiers() {
        let sh = |id: &str, cmd: &str| call(id, "shell", json!({ "command": cmd }));
        let lanes = vec![
            lane(
                "parent",
                None,
                vec![
                    spawns(vec![
                        (
                            "s-a".into(),
                            json!({"role": "implement", "prompt": "WRITER-A work",
                                   "write_scope": ["a", "made/here", "single.txt"]}),
                        ),
                        (
                            "s-b".into(),
                            json!({"role": "implement", "prompt": "WRITER-B work",
                                   "write_scope": ["b"]}),
                        ),
                    ]),
                    reply("writers done"),
                ],
            ),
            lane(
                "a",
                Some("WRITER-A"),
                vec![
                    sh("a-own", "touch a/x"),
                    sh("a-made", "touch made/here/x"),
                    sh("a-single", "echo rewritten > single.txt"),
                    sh("a-outside", "touch outside/x"),
                    sh("a-root", "touch ./root-x"),
                    sh("a-other", "touch b/from-a"),
                    sh("a-parent-of-made", "touch made/x"),
                    sh("a-replace-single", "mv single.txt moved-single.txt"),
                    sh("a-read", "cat readme.txt; cat .env; true"),
                    reply("a done"),
                ],
            ),
            lane(
                "b",
                Some("WRITER-B"),
                vec![
                    sh("b-own", "touch b/x"),
                    sh("b-other", "touch a/from-b"),
                    reply("b done"),
                ],
            ),
        ];
        let model = ScriptedModel::start_lanes(Wire::OpenAi, lanes);
        let f = fixture(&model);
        for d in ["a", "b", "outside"] {
            std::fs::create_dir_all(f.ws.join(d)).unwrap();
        }
        std::fs::write(f.ws.join("single.txt"), "original\n").unwrap();
        std::fs::write(f.ws.join("readme.txt"), "readable\n").unwrap();
        std::fs::write(f.ws.join(".env"), "SECRET=scope-mark\n").unwrap();
        let mut cmd = f.cmd(&[
            "exec",
            "--auto",
            "--backend",
            tier.backend,
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "two writers",
        ]);
        if no_bwrap() {
            cmd.env("PATH", path_without_bwrap());
        }
        let o = cmd.output().unwrap();
        let t = tier.name;
        assert_eq!(o.status.code(), Some(0), "[{t}] {}", stderr(&o));
        let ev = stdout_lines(&o);
        let results = child_results(&ev);
        let res = |id: &str| {
            results
                .iter()
                .find(|r| r["call_id"] == id)
                .unwrap_or_else(|| panic!("[{t}] no result for {id}: {results:#?}"))
                .clone()
        };
        // Every command ran in the tier's sandbox.
        assert_eq!(
            results.len(),
            11,
            "[{t}] {:#?}",
            of_type(&ev, "subagent_completed")
        );
        for r in &results {
            let e = r["enforcement"].as_str().unwrap_or("");
            assert!(e.starts_with("sandboxed") && e.contains(t), "[{t}] {r}");
        }
        // Positive controls: each writer's own scope.
        for id in ["a-own", "a-made", "a-single", "b-own", "a-read"] {
            assert_eq!(res(id)["exit_code"], 0, "[{t}] {id}: {}", res(id));
        }
        assert!(
            f.ws.join("a/x").exists() && f.ws.join("b/x").exists(),
            "[{t}]"
        );
        assert!(f.ws.join("made/here/x").exists(), "[{t}]");
        assert_eq!(
            std::fs::read_to_string(f.ws.join("single.txt")).unwrap(),
            "rewritten\n",
            "[{t}]"
        );
        // Refused by the kernel: outside the scope, the workspace root,
        // the other writer's scope, the made scope's parent, replacing the
        // single file. The gates let each through (`--auto`).
        for (id, path) in [
            ("a-outside", "outside/x"),
            ("a-root", "root-x"),
            ("a-other", "b/from-a"),
            ("b-other", "a/from-b"),
            ("a-parent-of-made", "made/x"),
        ] {
            let r = res(id);
            assert_ne!(r["exit_code"], 0, "[{t}] {id}: {r}");
            assert!(!f.ws.join(path).exists(), "[{t}] {id}: {path} was created");
            // The hint names the scope, not `--writable-root`.
            let out = r["output"].as_str().unwrap();
            assert!(
                out.contains("outside this sub-agent's write scope"),
                "[{t}] {id}: {out}"
            );
        }
        assert_ne!(res("a-replace-single")["exit_code"], 0, "[{t}]");
        assert!(
            f.ws.join("single.txt").exists() && !f.ws.join("moved-single.txt").exists(),
            "[{t}]"
        );
        // The rest of the workspace stays readable; `.env` stays masked
        // (bwrap: an empty file; landlock: the read is refused).
        let read = res("a-read")["output"].as_str().unwrap().to_string();
        assert!(read.contains("readable"), "[{t}] {read}");
        assert!(!read.contains("scope-mark"), "[{t}] {read}");
        // The records state each child's scope.
        let started = of_type(&ev, "subagent_started");
        let scope_of = |id: &str| {
            started.iter().find(|s| s["parent_call_id"] == id).unwrap()["posture"]["write_scope"]
                .clone()
        };
        assert_eq!(
            scope_of("s-a"),
            json!(["a", "made/here", "single.txt"]),
            "[{t}]"
        );
        assert_eq!(scope_of("s-b"), json!(["b"]), "[{t}]");
    }
}

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
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

/// A `worktree: true` child's commands run with its checkout (under
/// codewhale's home, `<home>/worktrees/<name>`) as their workspace: they
/// write there (the positive control), but read nothing else of the home
/// (its `config.toml` with the API key, the parent's session files) and
/// write nothing of the user's workspace. Paths are relative to the
/// checkout: `../..` is codewhale's home, `../../../ws` the workspace.
#[test]
fn a_worktree_childs_commands_write_its_checkout_only_and_read_nothing_else_of_the_home() {
    worktree_child_confined("auto");
}

/// The same on the Landlock tier (no mount namespace: the carve-out is a
/// set of deny-read holes beside the checkout, not masks).
#[test]
fn a_worktree_childs_commands_are_confined_on_the_landlock_tier_too() {
    worktree_child_confined("landlock");
}

fn worktree_child_confined(backend: &str) {
    let sh = |id: &str, cmd: &str| call(id, "shell", json!({ "command": cmd }));
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
                        json!({"role": "general", "prompt": "WT-SANDBOX try", "worktree": true}),
                    ),
                    reply("done"),
                ],
            ),
            lane(
                "child",
                Some("WT-SANDBOX"),
                vec![
                    sh("c-write", "echo made > made.txt && cat made.txt a.txt"),
                    sh("c-config", "cat ../../config.toml"),
                    sh("c-sessions", "cat ../../sessions/*.jsonl"),
                    sh("c-escape", "echo escaped > ../../../ws/escape.txt"),
                    reply("tried"),
                ],
            ),
        ],
    );
    // Outside the commands' private /tmp, as a user's home and workspace
    // are: the workspace is visible to the child, read-only.
    let f = Fixture::with_config_in(
        &format!(
            "[sandbox]\nbackend = \"{backend}\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
            model.kind(),
            model.base_url()
        ),
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    git(&f.ws, &["init", "-q", "-b", "main"]);
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    git(&f.ws, &["add", "-A"]);
    git(&f.ws, &["commit", "-q", "-m", "init"]);
    let o = f.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "delegate",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    let results = child_results(&ev);
    let res = |id: &str| {
        results
            .iter()
            .find(|r| r["call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {results:#?}"))
            .clone()
    };
    // Positive control: it writes and reads its checkout, sandboxed.
    let w = res("c-write");
    assert_eq!(w["exit_code"], 0, "{w}");
    assert!(
        w["enforcement"]
            .as_str()
            .unwrap_or("")
            .starts_with("sandboxed"),
        "{w}"
    );
    let text = w["output"].as_str().unwrap();
    assert!(text.contains("made") && text.contains("one"), "{w}");
    // The home's config (with the key) and sessions are not readable.
    let c = res("c-config");
    assert!(
        !c["output"].as_str().unwrap().contains("test-key"),
        "the child read codewhale's config: {c}"
    );
    // Control for the above: the file is there and holds the key.
    assert!(std::fs::read_to_string(f.cw_home.join("config.toml"))
        .unwrap()
        .contains("test-key"));
    let s = res("c-sessions");
    assert!(
        !s["output"].as_str().unwrap().contains("codewhale.session"),
        "the child read codewhale's sessions: {s}"
    );
    assert!(!f.session_files().is_empty());
    // The user's workspace is not writable from the checkout.
    let e = res("c-escape");
    assert_ne!(e["exit_code"], 0, "{e}");
    if backend == "auto" {
        assert!(
            e["output"]
                .as_str()
                .unwrap()
                .contains("Read-only file system"),
            "{e}"
        );
    }
    assert!(
        !f.ws.join("escape.txt").exists(),
        "the child wrote the workspace"
    );
    // The change came back as a diff; the workspace is as it was.
    let out: Value = serde_json::from_str(
        ev.iter()
            .find(|e| e["type"] == "tool_result" && e["call_id"] == "s1")
            .unwrap()["output"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(out["files_changed"], json!(["made.txt"]), "{out}");
    assert!(!f.ws.join("made.txt").exists());
    assert_eq!(git(&f.ws, &["worktree", "list"]).lines().count(), 1);
}
