//! The system prompt, with the workspace's `AGENTS.md` appended.
//!
//! `AGENTS.md` is read through the file guard (so a symlink to a secret is
//! not pulled into the prompt) and capped.

use super::tools::guard::FsGuard;
use std::path::PathBuf;

/// Bytes of `AGENTS.md` included.
const AGENTS_MD_CAP: usize = 32 * 1024;

const BASE: &str = "You are codewhale, a coding agent running headless in a sandbox. \
Work in the workspace using the tools offered; paths are relative to the workspace. \
Commands run in an OS sandbox: some paths are unreadable or read-only and the network may be off; \
when a tool reports a denial, do not try to work around it. \
When you are done, answer with a concise summary of what you did.";

/// The system prompt and the `AGENTS.md` that went into it (if any).
pub fn system_prompt(guard: &FsGuard, tools: &[&str]) -> (String, Option<PathBuf>) {
    let mut s = BASE.to_string();
    s.push_str(&format!("\n\nWorkspace: {}", guard.workspace().display()));
    if tools.is_empty() {
        s.push_str("\nNo tools are available in this run: answer from the prompt alone.");
    } else {
        s.push_str(&format!("\nTools: {}.", tools.join(", ")));
    }
    let mut used = None;
    if let Ok(path) = guard.check_read("AGENTS.md") {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let mut end = text.len().min(AGENTS_MD_CAP);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            s.push_str("\n\n# Project instructions (AGENTS.md)\n\n");
            s.push_str(&text[..end]);
            used = Some(path);
        }
    }
    (s, used)
}
