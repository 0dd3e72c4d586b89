#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The TUI's reasoning controls in a real pseudo-terminal
//! (tests/common/pty.rs) against the scripted model: `/model ID EFFORT`
//! reaches the wire (OpenAI's `reasoning_effort`), a bad effort is an
//! error naming the levels, and the model's reasoning is one collapsed
//! line that Ctrl-O expands.
#![cfg(unix)]

use crate::common;

use common::pty::{provider_config, FreshHome, Pty};
use common::scripted_model::{think_reply, ScriptedModel, Wire};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_codewhale");
const T: Duration = Duration::from_secs(20);

#[test]
fn model_effort_reaches_the_wire_and_reasoning_is_collapsed_until_ctrl_o() {
    let reasoning = "I weighed three options and the second one is safest";
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![think_reply(reasoning, "the answer is two")],
    );
    // A custom provider that reasons: `thinking = true` (docs/PROVIDERS.md).
    let config = format!(
        "{}thinking = true\n",
        provider_config(model.kind(), &model.base_url())
    );
    let home = FreshHome::new(&config);
    let pty = Pty::spawn(home.command(Path::new(BIN)), 30, 120);
    pty.wait_for("Ask codewhale", T);
    pty.type_text("/model scripted hard");
    pty.send(b"\r");
    pty.wait_for("unknown reasoning effort `hard`", T);
    pty.wait_for("none, minimal, low, medium, high, xhigh, max", T);
    pty.type_text("/model scripted high");
    pty.send(b"\r");
    pty.wait_for("reasoning effort high for the next turns of scripted", T);
    pty.type_text("which option?");
    pty.send(b"\r");
    pty.wait_for("the answer is two", T);
    let n = reasoning.chars().count();
    let s = pty.wait_for(&format!("thinking … ({n} chars) · Ctrl-O expands"), T);
    assert!(!s.contains("second one is safest"), "collapsed:\n{s}");
    pty.send(b"\x0f");
    pty.wait_for("second one is safest", T);
    pty.wait_for("Ctrl-O collapses", T);
    pty.send(b"\x0f");
    pty.wait_for("Ctrl-O expands", T);
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body["reasoning_effort"], "high", "{}", reqs[0].body);
    pty.send(b"\x04");
}
