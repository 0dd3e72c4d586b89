#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Auto-Review's model reviewer through the TUI: the real `codewhale` in a
//! real pseudo-terminal (tests/common/pty.rs), Shift+Tab to Auto-Review,
//! the scripted model as worker and (its reviewer lane) reviewer. The
//! commands run in the real sandbox: the allowed one leaves its file, the
//! denied one nothing; no approval card appears; each review is one line;
//! the receipt names the reviewer.

mod common;

use common::pty::{provider_config, FreshHome, Pty};
use common::scripted_model::{call, reply, verdict, ScriptedModel, Wire};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_codewhale");

#[test]
fn the_reviewer_answers_instead_of_a_card_one_line_per_review() {
    let m = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("c1", "shell", json!({"command": "touch reviewed-yes"})),
            call("c2", "shell", json!({"command": "touch reviewed-no"})),
            reply("finished both"),
        ],
    );
    m.reviews(vec![
        verdict("low", "allow", "creates an empty file"),
        verdict("medium", "deny", "not asked for"),
    ]);
    let home = FreshHome::new(&provider_config(m.kind(), &m.base_url()));
    let ws = home.ws.clone();
    let t = Pty::spawn(home.command(Path::new(BIN)), 30, 110);
    t.wait_for("Ask codewhale", Duration::from_secs(20));
    t.send(b"\x1b[Z");
    t.wait_for("Auto-Review", Duration::from_secs(5));
    t.type_text("make the files");
    t.send(b"\r");
    t.wait_for("finished both", Duration::from_secs(30));
    let s = t.wait_idle(Duration::from_secs(30));
    assert!(s.contains("reviewer allowed `"), "{s}");
    assert!(s.contains("reviewer denied `"), "{s}");
    assert!(!s.contains("approval needed"), "{s}");
    assert!(ws.join("reviewed-yes").exists(), "{s}");
    assert!(!ws.join("reviewed-no").exists());
    assert_eq!(m.review_requests().len(), 2);
    let r = String::from_utf8(home.run(Path::new(BIN), &["receipts"]).0).unwrap();
    assert!(r.contains("denied by reviewer"), "{r}");
    t.send(b"\x04");
}
