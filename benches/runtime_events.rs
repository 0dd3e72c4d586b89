#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench target may panic
//! Runtime event log benchmarks (harness = false; prints medians and
//! ranges; figures go in docs/PERFORMANCE.md):
//! 1. durable append (`EventLog::append`, one event each) against a raw
//!    `write` + `fdatasync` loop of lines of the same size, same directory,
//!    same run: the ratio;
//! 2. replaying 100,000 committed events of one thread through a
//!    subscription into SSE framing (`id:`/`event:`/`data:` text, in
//!    process: no socket), events/s;
//! 3. 64 subscribers on one busy thread: lag from commit to delivery, p99.

use codewhale::runtime::log::EventLog;
use codewhale::runtime::{NewEvent, NewThread, Runtime};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn ev(i: u64) -> NewEvent {
    NewEvent::item(
        "item.delta",
        "thr_bench",
        "turn_bench",
        "item_bench",
        json!({"delta": format!("fragment {i} of a streamed agent message"), "kind": "agent_message"}),
    )
}

fn append_ratio(n: u64) -> (f64, f64, f64) {
    let dir = tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into()))
        .expect("tempdir");
    let (mut log, _, _) = EventLog::open(&dir.path().join("rt")).expect("open");
    let t = Instant::now();
    let mut bytes = 0usize;
    for i in 0..n {
        let (_, r) = log.append(vec![ev(i)]).expect("append");
        bytes += serde_json::to_string(&r[0])
            .map(|s| s.len() + 1)
            .unwrap_or(0);
    }
    let ours = t.elapsed().as_secs_f64();
    let line = vec![b'x'; bytes / n as usize];
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("raw.jsonl"))
        .expect("raw");
    let t = Instant::now();
    for _ in 0..n {
        f.write_all(&line).expect("write");
        f.sync_data().expect("fdatasync");
    }
    let raw = t.elapsed().as_secs_f64();
    (ours / raw, n as f64 / ours, n as f64 / raw)
}

fn replay(n: u64) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rt, _) = Runtime::open_dir(dir.path()).expect("open");
    let t = rt
        .create_thread(NewThread {
            model: "m".into(),
            workspace: "/".into(),
            mode: codewhale::runtime::ThreadMode::Chat,
            ..Default::default()
        })
        .expect("thread");
    let mut i = 0;
    while i < n {
        let batch: Vec<NewEvent> = (i..(i + 1000).min(n))
            .map(|k| {
                let mut e = ev(k);
                e.thread_id = Some(t.id.clone());
                e
            })
            .collect();
        rt.append(batch).expect("append");
        i += 1000;
    }
    let start = Instant::now();
    let mut sub = rt.subscribe(&t.id, 0, None);
    let mut count = 0u64;
    let mut sse = String::new();
    loop {
        let b = sub.durable_batch();
        if b.is_empty() {
            break;
        }
        for e in b {
            sse.clear();
            sse.push_str(&format!(
                "id: {}\nevent: {}\ndata: {}\n\n",
                e["seq"],
                e["event"].as_str().unwrap_or(""),
                e
            ));
            count += 1;
        }
    }
    assert!(count > n, "replayed {count}");
    count as f64 / start.elapsed().as_secs_f64()
}

fn lag_p99(subscribers: usize, events: u64) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rt, _) = Runtime::open_dir(dir.path()).expect("open");
    let t = rt
        .create_thread(NewThread {
            model: "m".into(),
            workspace: "/".into(),
            mode: codewhale::runtime::ThreadMode::Chat,
            ..Default::default()
        })
        .expect("thread");
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let committed = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let lags = tokio_rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..subscribers {
            let mut sub = rt.subscribe(&t.id, 0, None);
            let c = committed.clone();
            tasks.push(tokio::spawn(async move {
                let mut lags = Vec::new();
                while lags.len() < events as usize + 1 {
                    let Some(b) = sub.next().await else { break };
                    let now = Instant::now();
                    for e in b {
                        let seq = e["seq"].as_u64().unwrap_or(0);
                        let at = c.lock().map(|m| m.get(&seq).copied()).ok().flatten();
                        lags.push(at.map_or(0.0, |a: Instant| now.duration_since(a).as_secs_f64()));
                    }
                }
                lags
            }));
        }
        let rt2 = rt.clone();
        let tid = t.id.clone();
        let c = committed.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..events {
                let mut e = ev(i);
                e.thread_id = Some(tid.clone());
                let r = rt2.append(vec![e]).expect("append");
                if let Ok(mut m) = c.lock() {
                    m.insert(r[0].seq, Instant::now());
                }
            }
        })
        .await
        .expect("writer");
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("sub"));
        }
        all
    });
    let mut lags = lags;
    lags.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    lags[(lags.len() * 99) / 100] * 1000.0
}

fn main() {
    let rounds = 5;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("runtime_events: load {}", load.trim());
    let mut ratios = Vec::new();
    for _ in 0..rounds {
        let (r, ours, raw) = append_ratio(500);
        println!("  append: {ours:.0}/s durable, raw write+fdatasync {raw:.0}/s, ratio {r:.2}x");
        ratios.push(r);
    }
    let (lo, hi) = (
        ratios.iter().cloned().fold(f64::MAX, f64::min),
        ratios.iter().cloned().fold(0.0, f64::max),
    );
    println!(
        "append ratio vs raw: median {:.2}x (range {lo:.2}-{hi:.2}x)",
        median(&mut ratios)
    );
    let mut rep: Vec<f64> = (0..3).map(|_| replay(100_000)).collect();
    println!(
        "replay of 100,000 events to SSE framing: median {:.0} events/s",
        median(&mut rep)
    );
    let mut lag: Vec<f64> = (0..3).map(|_| lag_p99(64, 300)).collect();
    println!(
        "64 subscribers, 300 events on one thread: lag p99 median {:.2} ms",
        median(&mut lag)
    );
    let _ = Duration::ZERO;
}
