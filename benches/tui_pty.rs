#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench target may panic
//! Keypress → paint through a real pseudo-terminal (harness = false;
//! figures go in docs/PERFORMANCE.md). The real `codewhale` binary runs in
//! a portable-pty pty against the scripted model server of the tests; its
//! output is parsed by a terminal emulator's parser (vt100) on a reader
//! thread, which stamps the moment the screen first shows what the key
//! should have changed (the draft gains an `x`, or empties again after a
//! Backspace). So a sample is: write the key → the kernel's pty → the
//! TUI's key reader, state machine, frame and write → the pty → parsed.
//!
//! Baseline, same run, same reader and parser: a raw echo round trip
//! through a pty (`cat` with the pty in raw mode, no echo by the line
//! discipline): what the pty and the scheduler cost by themselves.
//!
//! 1. Idle: the TUI waits for input.
//! 2. Streaming: the model streams one delta (a line) every 5 ms, nominally
//!    200 deltas/s (the rate actually reached is printed), all into one
//!    message: sampled from the first delta, and again (a fresh UI) once
//!    the message holds 1,500 deltas (3,000 lines), where a frame that
//!    re-parses the whole message shows.
//!
//! `CODEWHALE_BENCH_BIN=path` runs another build of `codewhale` (two
//! versions compared in the same run conditions).

#[allow(dead_code)] // the bench uses only part of the tests' server
#[path = "../tests/common/scripted_model/mod.rs"]
mod scripted_model;

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};
use scripted_model::{ScriptedModel, Step, Wire};
use std::io::{Read, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROWS: u16 = 30;
const COLS: u16 = 100;
/// Keys per scenario (half `x`, half Backspace).
const SAMPLES: usize = 300;
/// Pause between keys, so each key meets a settled UI.
const GAP: Duration = Duration::from_millis(10);

type Want = Box<dyn Fn(&vt100::Screen, u64) -> bool + Send>;

/// What the reader thread waits for and whom it tells.
struct Watch {
    want: Want,
    tx: mpsc::Sender<Instant>,
}

#[derive(Default)]
struct Dsr(usize);

impl vt100::Callbacks for Dsr {
    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        _i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if c == 'n' && params.first().and_then(|p| p.first()) == Some(&6) {
            self.0 += 1;
        }
    }
}

struct Term {
    _master: Box<dyn MasterPty + Send>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    child: Box<dyn Child + Send + Sync>,
    parser: Arc<Mutex<vt100::Parser<Dsr>>>,
    watch: Arc<Mutex<Option<Watch>>>,
    bytes: Arc<Mutex<u64>>,
}

impl Term {
    fn spawn(cmd: CommandBuilder) -> Term {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let child = pty.slave.spawn_command(cmd).unwrap();
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let writer = Arc::new(Mutex::new(pty.master.take_writer().unwrap()));
        let parser = Arc::new(Mutex::new(vt100::Parser::new_with_callbacks(
            ROWS,
            COLS,
            0,
            Dsr::default(),
        )));
        let watch: Arc<Mutex<Option<Watch>>> = Arc::new(Mutex::new(None));
        let bytes = Arc::new(Mutex::new(0u64));
        let (p, w, b, answer) = (parser.clone(), watch.clone(), bytes.clone(), writer.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let mut p = p.lock().unwrap();
                p.process(&buf[..n]);
                let total = {
                    let mut b = b.lock().unwrap();
                    *b += n as u64;
                    *b
                };
                let mut w = w.lock().unwrap();
                if w.as_ref().is_some_and(|x| (x.want)(p.screen(), total)) {
                    let _ = w.take().unwrap().tx.send(Instant::now());
                }
                drop(w);
                while p.callbacks().0 > 0 {
                    p.callbacks_mut().0 -= 1;
                    let (row, col) = p.screen().cursor_position();
                    let mut a = answer.lock().unwrap();
                    let _ = write!(a, "\x1b[{};{}R", row + 1, col + 1);
                    let _ = a.flush();
                }
            }
        });
        Term {
            _master: pty.master,
            writer,
            child,
            parser,
            watch,
            bytes,
        }
    }

    fn send(&self, b: &[u8]) {
        let mut w = self.writer.lock().unwrap();
        w.write_all(b).unwrap();
        w.flush().unwrap();
    }

    fn screen(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    fn wait_for(&self, what: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.screen().contains(what) {
            assert!(
                Instant::now() < deadline,
                "`{what}` not on screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Write `key`; milliseconds until the screen satisfies `want`.
    fn sample(&self, key: &[u8], want: Want) -> f64 {
        let (tx, rx) = mpsc::channel();
        *self.watch.lock().unwrap() = Some(Watch { want, tx });
        let t0 = Instant::now();
        self.send(key);
        let t1 = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no paint for {key:?} within 10 s:\n{}", self.screen()));
        (t1 - t0).as_secs_f64() * 1e3
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first line inside the input box (under its top border).
fn draft(s: &vt100::Screen) -> String {
    let c = s.contents();
    let mut lines = c.lines().skip_while(|l| !l.starts_with('┌'));
    lines.next();
    lines
        .next()
        .unwrap_or_default()
        .trim_start_matches('│')
        .trim_end()
        .trim_end_matches('│')
        .trim_end()
        .to_string()
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Raw echo round trips: one byte to `cat` and back.
fn baseline() -> Vec<f64> {
    let mut cmd = CommandBuilder::new("sh");
    cmd.args(["-c", "stty raw -echo && echo ready && exec cat"]);
    let t = Term::spawn(cmd);
    t.wait_for("ready", Duration::from_secs(10));
    (0..SAMPLES)
        .map(|_| {
            let want = *t.bytes.lock().unwrap() + 1;
            let ms = t.sample(b"x", Box::new(move |_, total| total >= want));
            std::thread::sleep(GAP);
            ms
        })
        .collect()
}

/// `codewhale` in a fresh home against `model`.
fn tui(model: &ScriptedModel, root: &std::path::Path) -> Term {
    let (home, cw, ws) = (root.join("home"), root.join("cwhome"), root.join("ws"));
    for d in [&home, &cw, &ws, &root.join("tmp"), &root.join("run")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        cw.join("config.toml"),
        format!(
            "provider = \"custom\"\n[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"bench-key\"\nmodel = \"scripted\"\n",
            model.kind(),
            model.base_url()
        ),
    )
    .unwrap();
    // CODEWHALE_BENCH_BIN: another build of the binary (to compare two
    // versions in the same run conditions).
    let bin = std::env::var("CODEWHALE_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_codewhale").to_string());
    let mut cmd = CommandBuilder::new(bin);
    cmd.env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd.env("HOME", &home);
    cmd.env("CODEWHALE_HOME", &cw);
    cmd.env("TMPDIR", root.join("tmp"));
    cmd.env("XDG_RUNTIME_DIR", root.join("run"));
    cmd.env("TERM", "xterm-256color");
    cmd.cwd(&ws);
    let t = Term::spawn(cmd);
    t.wait_for("Ask codewhale", Duration::from_secs(30));
    t
}

/// Alternately `x` (the draft becomes "x") and Backspace (empty again).
fn keys(t: &Term) -> Vec<f64> {
    (0..SAMPLES)
        .map(|i| {
            let ms = if i % 2 == 0 {
                t.sample(b"x", Box::new(|s, _| draft(s) == "x"))
            } else {
                t.sample(b"\x7f", Box::new(|s, _| draft(s).contains("Ask codewhale")))
            };
            std::thread::sleep(GAP);
            ms
        })
        .collect()
}

fn report(what: &str, v: &[f64], base: &[f64]) {
    let (p50, p99, b50, b99) = (pct(v, 0.5), pct(v, 0.99), pct(base, 0.5), pct(base, 0.99));
    println!(
        "{what}: p50 {p50:.2} ms p99 {p99:.2} ms max {:.2} ms | baseline echo p50 {b50:.3} ms p99 {b99:.3} ms | ratio p50 {:.1}x p99 {:.1}x",
        pct(v, 1.0),
        p50 / b50,
        p99 / b99
    );
}

fn main() {
    println!("load before: {}", load());
    let base = baseline();
    println!(
        "baseline: raw pty echo round trip p50 {:.3} ms p99 {:.3} ms ({SAMPLES} samples)",
        pct(&base, 0.5),
        pct(&base, 0.99)
    );

    // Idle.
    let dir = tempfile::tempdir().unwrap();
    let m = ScriptedModel::start(Wire::OpenAi, vec![]);
    let t = tui(&m, dir.path());
    let idle = keys(&t);
    report("keypress -> paint, idle", &idle, &base);
    drop(t);

    // Streaming: one line every 5 ms, far more than the samples need;
    // sampled from the first delta on, then (a fresh UI) once the message
    // is 1,500 deltas long.
    streaming(&base, 0);
    streaming(&base, LONG);
    println!("load after: {}", load());
}

/// Deltas already in the message when the long-message samples start.
const LONG: u64 = 1500;

/// Keypress → paint while the answer streams, from delta `from` on.
fn streaming(base: &[f64], from: u64) {
    let dir = tempfile::tempdir().unwrap();
    let chunks: Vec<String> = (1..=6000)
        .map(|i| format!("delta {i} of the stream\n\n"))
        .collect();
    let m = ScriptedModel::start(
        Wire::OpenAi,
        vec![Step::Trickle {
            chunks,
            every: Duration::from_millis(5),
        }],
    );
    let t = tui(&m, dir.path());
    for c in "stream please".chars() {
        t.send(c.to_string().as_bytes());
        std::thread::sleep(Duration::from_millis(5));
    }
    t.send(b"\r");
    t.wait_for("delta 1 of the stream", Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(120);
    while latest_delta(&t.screen()) < from {
        assert!(Instant::now() < deadline, "delta {from} not reached");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let first = latest_delta(&t.screen());
    let streaming = keys(&t);
    let s = t.screen();
    let (last, secs) = (latest_delta(&s), started.elapsed().as_secs_f64());
    assert!(
        s.contains("Esc to stop"),
        "the stream ended before the samples did:\n{s}"
    );
    report(
        &format!(
            "keypress -> paint, streaming from delta {first} ({:.0} deltas/s reached)",
            (last - first) as f64 / secs
        ),
        &streaming,
        base,
    );
}

/// The highest `delta N` on the screen.
fn latest_delta(s: &str) -> u64 {
    s.split("delta ")
        .filter_map(|p| p.split_whitespace().next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}
