#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale web`'s page in a real headless Chromium (Debian's, installed
//! by ci/setup; never a downloaded browser), driven over the DevTools
//! protocol by tests/clients/web_browser.py: the link and its cookie, a
//! turn whose write is denied in the page, a reload with a question
//! pending, a rebinding Host and a sibling port's cross-origin POST.
#![cfg(unix)]

use super::web_server::Web;
use crate::common;

use common::runtime::{fixture, TOKEN};
use common::scripted_model::{call, reply, trickle, ScriptedModel, Wire};
use serde_json::json;
use std::ffi::OsStr;
use std::time::Duration;

#[test]
fn the_page_in_chromium_denies_reloads_allows_and_refuses_cross_origin() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            // Outside the workspace: gate 4 asks; the page denies.
            call(
                "w1",
                "write_file",
                json!({"path": "../web-denied.txt", "content": "x"}),
            ),
            reply("denied then done"),
            // Inside the workspace, a mutating command: Ask asks; the page
            // allows it (the positive control), and it runs sandboxed.
            call(
                "w2",
                "shell",
                json!({"command": "echo y > web-allowed.txt"}),
            ),
            reply("allowed then done"),
        ],
    );
    let f = fixture(&model);
    let w = Web::start(&f);
    // A screenshot for docs/ when asked (CODEWHALE_WEB_SCREENSHOT=path).
    let shot = std::env::var("CODEWHALE_WEB_SCREENSHOT").unwrap_or_else(|_| "-".into());
    let v = common::runtime::browser_client(
        "web_browser.py",
        &f,
        TOKEN,
        &[OsStr::new(&w.link), f.ws.as_os_str(), OsStr::new(&shot)],
    );
    assert_eq!(v["ok"], true, "{v}");
    assert!(!f.root.join("web-denied.txt").exists());
    assert_eq!(
        std::fs::read_to_string(f.ws.join("web-allowed.txt")).unwrap(),
        "y\n"
    );
    let printed = w.out.lock().unwrap().clone();
    assert!(!printed.contains(TOKEN));
}

/// The text the offline tests stream: long enough that 3 s offline falls
/// in the middle of it (60 deltas, one every 100 ms).
fn long_answer() -> String {
    (1..=30)
        .map(|i| format!("word{i:02} "))
        .collect::<String>()
        .trim_end()
        .to_string()
}

fn offline_check(url: &str, mode: &str, f: &common::cli::Fixture, text: &str) -> serde_json::Value {
    common::runtime::browser_client(
        "web_offline.py",
        f,
        TOKEN,
        &[OsStr::new(url), OsStr::new(mode), OsStr::new(text)],
    )
}

#[test]
fn three_seconds_offline_mid_stream_loses_and_repeats_nothing() {
    let text = long_answer();
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![trickle(&text, 60, Duration::from_millis(100))],
    );
    let f = fixture(&model);
    let w = Web::start(&f);
    let v = offline_check(&w.link, "web", &f, &text);
    println!("{v}");
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn the_phone_page_too_survives_three_seconds_offline() {
    let text = long_answer();
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![trickle(&text, 60, Duration::from_millis(100))],
    );
    let f = fixture(&model);
    let s = common::runtime::Server::start(&f, &["--mobile", "--host", "127.0.0.1"]);
    let v = offline_check(&s.base, "mobile", &f, &text);
    println!("{v}");
    assert_eq!(v["ok"], true, "{v}");
}
