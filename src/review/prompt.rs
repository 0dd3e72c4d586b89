//! The reviewer's task: what to review, how, and the one answer shape.

use super::answer::SCHEMA;
use super::diff::Diff;

/// The diff text shown in the prompt at most (bytes); the reviewer reads
/// the rest of a larger change with its read-only tools.
pub const MAX_DIFF: usize = 400 * 1024;

/// The first message of the reviewer's run.
pub fn task(target: &str, diff: &Diff) -> String {
    let mut p = String::with_capacity(diff.text.len().min(MAX_DIFF) + 4096);
    p.push_str(&format!(
        "You are reviewing code changes ({target}). You are read-only: you may read files \
         and run read-only commands to understand the change; you never change anything.\n\
         Report real problems (bugs, security issues, data loss, broken contracts, missing \
         tests), each at a line of the new version of a changed file. Severity is one of \
         critical, high, medium, low, info.\n\
         Your final answer must be exactly one JSON object valid under this JSON Schema, and \
         nothing else:\n{SCHEMA}\n\nChanged files ({}):\n",
        diff.files.len()
    ));
    for f in &diff.files {
        let old = f
            .old_path
            .as_deref()
            .map(|o| format!(" (from {o})"))
            .unwrap_or_default();
        let bin = if f.binary { ", binary" } else { "" };
        p.push_str(&format!("- {}{old}: {:?}{bin}\n", f.path, f.status));
    }
    p.push_str("\nThe diff:\n```diff\n");
    if diff.text.len() > MAX_DIFF {
        let mut cut = MAX_DIFF;
        while !diff.text.is_char_boundary(cut) {
            cut -= 1;
        }
        p.push_str(&diff.text[..cut]);
        p.push_str(&format!(
            "\n… (diff cut at {MAX_DIFF} of {} bytes: read the remaining files yourself)\n",
            diff.text.len()
        ));
    } else {
        p.push_str(&diff.text);
    }
    p.push_str("```\n");
    p
}
