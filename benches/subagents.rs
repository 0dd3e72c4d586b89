#![allow(clippy::unwrap_used, clippy::expect_used)]
// a bench target may panic
// The shared test modules are included whole; the bench uses part of them.
#![allow(dead_code)]
//! Sub-agents (issue 30, "Speed"; harness = false; figures go in
//! docs/PERFORMANCE.md), through the real binary (`codewhale exec --auto`)
//! against the scripted model on loopback, each run in a fresh fixture:
//!
//! - **Spawn latency**: the parent's response calls `read_file`, then (next
//!   response) `agent` N times. On the model server's clock, the interval
//!   from the parent's request that carries the `read_file` result to each
//!   child's first request is the spawn; the interval from the parent's
//!   first request to that second one (a plain tool round trip: stream,
//!   gates, tool, record) is the baseline of the same run. Goal: the spawn
//!   ≤ 20 ms at p50 and p99.
//! - **Idle children's memory**: 64 `explore` children whose model
//!   requests hang (waiting for their first answer) against the parent
//!   alone waiting for its first answer: `VmRSS` of the codewhale process
//!   in each state. Goal: ≤ 64 MiB for the 64.
//!
//! Run: `cargo bench --bench subagents` (`SUBAGENT_RUNS`, default 10;
//! `SUBAGENT_N=1,8` for some spawn counts only; `SUBAGENT_STRACE=FILE`).

#[path = "../tests/common/cli.rs"]
mod cli;
#[path = "../tests/common/scripted_model/mod.rs"]
mod scripted_model;

use scripted_model::{call, lane, reply, ScriptedModel, Step, Wire};
use serde_json::json;
use std::time::{Duration, Instant};

fn runs() -> usize {
    std::env::var("SUBAGENT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One response with `n` `agent` calls (role `explore`, a marker each).
fn spawns(n: usize, marker: &str) -> Step {
    Step::Reply {
        text: String::new(),
        calls: (0..n)
            .map(|i| {
                (
                    format!("s{i}"),
                    "agent".to_string(),
                    json!({"role": "explore", "prompt": format!("{marker} {i}")}).to_string(),
                )
            })
            .collect(),
    }
}

/// `max_subagents = 64` (a top-level key: before the provider's table).
fn fixture(model: &ScriptedModel) -> cli::Fixture {
    cli::Fixture::with_config(&format!(
        "max_subagents = 64\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.kind(),
        model.base_url()
    ))
}

fn exec_args() -> Vec<&'static str> {
    vec![
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "go",
    ]
}

/// One run: (the plain tool round trip, each child's spawn), in ms.
fn spawn_run(n: usize) -> (f64, Vec<f64>) {
    let model = ScriptedModel::start_lanes(
        Wire::OpenAi,
        vec![
            lane(
                "parent",
                None,
                vec![
                    call("r1", "read_file", json!({"path": "x.txt"})),
                    spawns(n, "LAT-MARK"),
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
    let f = fixture(&model);
    std::fs::write(f.ws.join("x.txt"), "hello\n").unwrap();
    // `SUBAGENT_STRACE=FILE`: run under `strace -f -tt -T` (to see
    // where a spawn's time goes; the figures are then strace's).
    let o = match std::env::var("SUBAGENT_STRACE") {
        Ok(out) => {
            let c = f.cmd(&exec_args());
            let mut s = std::process::Command::new("strace");
            s.args(["-f", "-tt", "-T", "-o", &out])
                .arg(c.get_program())
                .args(c.get_args())
                .env_clear()
                .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
                .current_dir(&f.ws)
                .stdin(std::process::Stdio::null());
            s.output().unwrap()
        }
        Err(_) => f.run(&exec_args()),
    };
    assert_eq!(o.status.code(), Some(0), "{}", cli::stderr(&o));
    let reqs = model.requests();
    let parent: Vec<Instant> = reqs
        .iter()
        .filter(|r| r.lane.as_deref() == Some("parent"))
        .map(|r| r.at)
        .collect();
    assert!(parent.len() >= 2, "parent requests: {}", parent.len());
    let base = (parent[1] - parent[0]).as_secs_f64() * 1000.0;
    let mut ms: Vec<f64> = reqs
        .iter()
        .filter(|r| r.lane.as_deref() == Some("child"))
        .map(|r| (r.at - parent[1]).as_secs_f64() * 1000.0)
        .collect();
    assert_eq!(ms.len(), n);
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (base, ms)
}

fn pct(v: &[f64], p: usize) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() * p).div_ceil(100)).max(1) - 1]
}

fn range(v: &[f64]) -> (f64, f64) {
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The codewhale process's RSS once `want` requests of `lane` hang.
fn idle_rss(children: usize) -> u64 {
    let lanes = if children == 0 {
        vec![lane(
            "parent",
            None,
            vec![Step::Hang {
                text: String::new(),
            }],
        )]
    } else {
        vec![
            lane("parent", None, vec![spawns(children, "IDLE-MARK")]),
            lane(
                "child",
                Some("IDLE-MARK"),
                (0..children)
                    .map(|_| Step::Hang {
                        text: String::new(),
                    })
                    .collect(),
            ),
        ]
    };
    let want_lane = if children == 0 { "parent" } else { "child" };
    let want = children.max(1);
    let model = ScriptedModel::start_lanes(Wire::OpenAi, lanes);
    let f = fixture(&model);
    let mut child = f
        .cmd(&exec_args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while model
        .requests()
        .iter()
        .filter(|r| r.lane.as_deref() == Some(want_lane))
        .count()
        < want
    {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "requests never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the last requests settle into their wait.
    std::thread::sleep(Duration::from_millis(300));
    let rss = rss_kib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    rss
}

fn main() {
    let runs = runs();
    println!(
        "sub-agents bench: {runs} runs each, load average at start {}",
        loadavg()
    );
    // `SUBAGENT_N=1,8`: only these spawn counts (default 1, 8 and 32).
    let counts: Vec<usize> = std::env::var("SUBAGENT_N")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 32]);
    for n in counts {
        let mut base = Vec::new();
        let mut p50 = Vec::new();
        let mut p99 = Vec::new();
        for _ in 0..runs {
            let (b, ms) = spawn_run(n);
            base.push(b);
            p50.push(pct(&ms, 50));
            p99.push(pct(&ms, 99));
        }
        let (b0, b1) = range(&base);
        let (a0, a1) = range(&p50);
        let (c0, c1) = range(&p99);
        println!(
            "spawn, {n} concurrent: p50 {:.1} ms ({a0:.1}–{a1:.1}), p99 {:.1} ms ({c0:.1}–{c1:.1}); \
             plain tool round trip {:.1} ms ({b0:.1}–{b1:.1}); goal p50/p99 ≤ 20 ms",
            pct(&p50, 50),
            pct(&p99, 50),
            pct(&base, 50),
        );
    }
    let mut alone = Vec::new();
    let mut with = Vec::new();
    for _ in 0..runs.min(5) {
        alone.push(idle_rss(0) as f64);
        with.push(idle_rss(64) as f64);
    }
    let extra = (pct(&with, 50) - pct(&alone, 50)) / 1024.0;
    println!(
        "idle memory: parent alone {:.1} MiB, with 64 idle children {:.1} MiB: +{extra:.1} MiB \
         ({:.2} MiB per child); goal ≤ 64 MiB",
        pct(&alone, 50) / 1024.0,
        pct(&with, 50) / 1024.0,
        extra / 64.0
    );
    println!("load average at end {}", loadavg());
}
