//! A long session for the compaction tests and bench: many short turns
//! (a prompt of a few hundred bytes, now and then a `read_file` of a
//! 3 KB file, a short answer) against the scripted model under a small
//! context window, so a couple of hundred turns pass the window several
//! times over in seconds.

use super::scripted_model::{call, reply, Faithful, ScriptedModel, Step, Wire};
use serde_json::json;
use std::path::Path;

/// The file the session reads now and then.
pub const NOTES: &str = "notes.txt";

/// Write the workspace's file.
pub fn workspace(ws: &Path) {
    let body: String = (0..60)
        .map(|i| format!("note {i:02}: the build step {i} passed; keep the cache warm.\n"))
        .collect();
    std::fs::write(ws.join(NOTES), body).expect("write notes");
}

/// The prompt of turn `i` (0-based).
pub fn prompt(i: usize) -> String {
    format!(
        "Turn {i}: look at the state of the build again and tell me in one line whether \
         anything changed since the last time you checked; keep the answer short. ({})",
        "detail ".repeat(20)
    )
}

/// Whether turn `i` reads the file before answering.
pub fn reads(i: usize) -> bool {
    i.is_multiple_of(4)
}

/// The model's steps for `turns` turns (summary requests take none: the
/// scripted model answers them itself under a window).
pub fn steps(turns: usize) -> Vec<Step> {
    let mut s = Vec::new();
    for i in 0..turns {
        if reads(i) {
            s.push(call(
                &format!("call_{i}"),
                "read_file",
                json!({"path": NOTES}),
            ));
        }
        s.push(reply(&format!(
            "turn {i} done: nothing changed, the build still passes and the cache is warm."
        )));
    }
    s
}

/// The scripted model (OpenAI wire) playing `turns` turns of the session
/// under a context window of `window` tokens.
pub fn model(turns: usize, window: u64) -> ScriptedModel {
    ScriptedModel::start_faithful(
        Wire::OpenAi,
        steps(turns),
        Faithful {
            context_window: Some(window),
            ..Faithful::default()
        },
    )
}
