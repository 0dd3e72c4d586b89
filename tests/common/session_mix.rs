//! A realistic coding session for the scripted model: a workspace of
//! source files of 1–20 KB and an `AGENTS.md`, and a script of tool calls
//! mixing reads, edits, searches and commands whose outputs are 1–20 KB,
//! ending in a text answer. Deterministic (no clock, no randomness).
#![allow(dead_code)]

use super::scripted_model::{call, reply, Step};
use serde_json::json;
use std::path::Path;

/// File `i`'s size: 1 KB … 20 KB across the files.
fn size(i: usize, files: usize) -> usize {
    1_024 + (19 * 1_024 * i) / files.max(2).saturating_sub(1)
}

/// Line `j` of file `i` (unique, so edits can name one).
fn line(i: usize, j: usize) -> String {
    format!(
        "pub fn item_{i}_{j}(x: u64) -> u64 {{ x.wrapping_mul({}) ^ {} }}\n",
        31 + j,
        i * 7 + j
    )
}

/// Writes `files` source files under `src/` and an `AGENTS.md`.
pub fn workspace(ws: &Path, files: usize) {
    std::fs::create_dir_all(ws.join("src")).unwrap();
    for i in 0..files {
        let mut text = String::new();
        let mut j = 0;
        while text.len() < size(i, files) {
            text.push_str(&line(i, j));
            j += 1;
        }
        std::fs::write(ws.join(format!("src/f{i}.rs")), text).unwrap();
    }
    let mut agents = String::from("# Project conventions\n\n");
    for k in 0..40 {
        agents.push_str(&format!(
            "- Rule {k}: keep functions small, name errors after what failed, and test every public item.\n"
        ));
    }
    std::fs::write(ws.join("AGENTS.md"), agents).unwrap();
}

/// `turns` model turns: `turns - 1` tool calls, then the answer. Without
/// `shell`, reads stand in for the commands (no execution host needed).
pub fn script(turns: usize, files: usize, shell: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    for t in 0..turns.saturating_sub(1) {
        let i = (t * 7) % files;
        let id = format!("c{t}");
        steps.push(match t % 4 {
            0 => call(&id, "read_file", json!({"path": format!("src/f{i}.rs")})),
            1 => call(
                &id,
                "edit_file",
                json!({"path": format!("src/f{i}.rs"), "old_string": line(i, 0),
                       "new_string": format!("// edited in turn {t}\n{}", line(i, 0))}),
            ),
            2 if !shell => call(&id, "read_file", json!({"path": format!("src/f{i}.rs")})),
            2 => call(
                &id,
                "shell",
                json!({"command": format!("head -c {} src/f{i}.rs", size(i, files))}),
            ),
            _ => call(
                &id,
                "search",
                json!({"pattern": format!("item_{i}_1[0-9]")}),
            ),
        });
    }
    steps.push(reply("All edits are in; the tests pass."));
    steps
}
