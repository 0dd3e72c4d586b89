#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench target may panic
//! Auto-Review's reviewer overhead beside the model call (harness = false;
//! prints p50/p99; figures go in docs/PERFORMANCE.md): per review, build
//! the document from the call and the verdict, encode it, build the exact
//! request body, parse the answer, count it in the breaker and apply it to
//! the verdict. Target: p99 ≤ 2 ms (issue #31, "Speed"). The network
//! request itself is not part of it.

use codewhale::agent::review::request_body;
use codewhale::authz::reviewer::{parse_answer, Breaker, ReviewDocument, ReviewInputs};
use codewhale::authz::{Approval, DecidedBy, Decision, Gate, Mode, Posture, ToolCall, Verdict};
use codewhale::net::NetworkMode;
use codewhale::policy::SandboxMode;
use codewhale::provider::registry::ProviderSettings;
use std::path::Path;
use std::time::Instant;

/// This thread's CPU time in ms: the work itself, without the time the
/// scheduler gave other processes (the machine may be shared).
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let settings = ProviderSettings::openai_compatible("bench", "http://127.0.0.1:1/v1", "m");
    let posture = Posture::new(Mode::Work, Approval::AutoReview);
    let mut q = Verdict::decided(
        Decision::Ask,
        DecidedBy::Posture,
        Gate::Baseline,
        "`cargo run` is not read-only",
    );
    q.sandbox = Some(SandboxMode::WorkspaceWrite);
    q.to_reviewer = true;
    // A realistic call, and a large one (a 32 KiB patch).
    let small = ToolCall::shell("cargo run --example x -- --flag value", "/w");
    let patch = format!(
        "*** Begin Patch\n*** Update File: src/lib.rs\n{}*** End Patch\n",
        "+    let x = compute(a, b, c);\n".repeat(1100)
    );
    let large = ToolCall::new("apply_patch", serde_json::json!({"patch": patch}), "/w");
    let answer =
        r#"{"risk": "low", "decision": "allow", "reason": "runs an example of the crate"}"#;
    for (name, call) in [("shell command", &small), ("32 KiB patch", &large)] {
        let mut times = Vec::with_capacity(20_000);
        let mut cpu = Vec::with_capacity(20_000);
        let mut breaker = Breaker::new();
        for i in 0..20_000 {
            let t = Instant::now();
            let c = cpu_ms();
            let doc = ReviewDocument::build(&ReviewInputs {
                call,
                verdict: &q,
                posture: &posture,
                network: NetworkMode::Off,
                workspace: Path::new("/w"),
                workspace_trusted: false,
            });
            let body = request_body(&settings, &doc).expect("under 64 KiB");
            let v = parse_answer(answer);
            if breaker.record(&v).is_some() {
                breaker.reset();
            }
            let out = q.clone().answer_review(&v);
            std::hint::black_box((body, out));
            if i >= 1000 {
                cpu.push(cpu_ms() - c);
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let p50 = percentile(&mut times, 0.50);
        let p99 = percentile(&mut times, 0.99);
        let c50 = percentile(&mut cpu, 0.50);
        let c99 = percentile(&mut cpu, 0.99);
        println!(
            "auto-review overhead ({name}): wall p50 {p50:.3} ms, p99 {p99:.3} ms; thread CPU p50 {c50:.3} ms, p99 {c99:.3} ms over {} reviews (target p99 ≤ 2 ms)",
            times.len()
        );
        // The CPU time is the overhead itself; wall-clock p99 on a loaded
        // machine also counts time the scheduler gave other processes.
        // Held in an optimised build (`cargo bench`); an unoptimised one
        // (`--profile dev`) only reports.
        if !cfg!(debug_assertions) {
            assert!(c99 <= 2.0, "CPU p99 {c99:.3} ms over the 2 ms target");
        }
    }
}
