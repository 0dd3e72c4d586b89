//! The head and tail of a tool call's output, kept on its runtime item
//! (`metadata.output_preview`) so a client can show what a command
//! printed without reading the session file: the TUI draws its tool cells
//! from it, and any remote client sees the same. Bounded whatever the
//! output: a few lines at each end, each clipped, and the count of the
//! lines between. The full output stays in the session file only.

use serde::{Deserialize, Serialize};

/// Lines kept at each end.
pub const PREVIEW_LINES: usize = 3;
/// Characters kept of one line.
pub const LINE_CHARS: usize = 400;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputPreview {
    pub head: Vec<String>,
    pub tail: Vec<String>,
    /// Lines between `head` and `tail` (not kept).
    pub hidden_lines: usize,
}

fn clip(l: &str) -> String {
    match l.char_indices().nth(LINE_CHARS) {
        Some((i, _)) => format!("{}…", &l[..i]),
        None => l.to_string(),
    }
}

/// Bytes of a file edit's diff kept on its item.
pub const DIFF_BYTES: usize = 64 * 1024;

/// A file edit's unified diff, bounded for the item: cut at a line end
/// within [`DIFF_BYTES`], with a last line saying how much was left out
/// (raw: whoever draws it sanitises it).
pub fn bounded_diff(diff: &str) -> String {
    if diff.len() <= DIFF_BYTES {
        return diff.to_string();
    }
    let mut end = DIFF_BYTES;
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    let cut = diff[..end].rfind('\n').map_or(0, |i| i + 1);
    format!(
        "{}[… diff cut: {} of {} bytes shown]\n",
        &diff[..cut],
        cut,
        diff.len()
    )
}

/// The preview of `text` (raw: whoever draws it sanitises it).
pub fn output_preview(text: &str) -> OutputPreview {
    let total = text.lines().count();
    if total <= 2 * PREVIEW_LINES {
        return OutputPreview {
            head: text.lines().map(clip).collect(),
            tail: Vec::new(),
            hidden_lines: 0,
        };
    }
    OutputPreview {
        head: text.lines().take(PREVIEW_LINES).map(clip).collect(),
        tail: text.lines().skip(total - PREVIEW_LINES).map(clip).collect(),
        hidden_lines: total - 2 * PREVIEW_LINES,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_all_head() {
        let p = output_preview("a\nb\n");
        assert_eq!(p.head, ["a", "b"]);
        assert!(p.tail.is_empty());
        assert_eq!(p.hidden_lines, 0);
        assert_eq!(output_preview(""), OutputPreview::default());
    }

    #[test]
    fn long_output_keeps_both_ends_and_counts_the_middle() {
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        let p = output_preview(&text);
        assert_eq!(p.head, ["l1", "l2", "l3"]);
        assert_eq!(p.tail, ["l8", "l9", "l10"]);
        assert_eq!(p.hidden_lines, 4);
    }

    #[test]
    fn long_lines_are_clipped() {
        let p = output_preview(&"é".repeat(LINE_CHARS + 10));
        assert_eq!(p.head[0].chars().count(), LINE_CHARS + 1);
        assert!(p.head[0].ends_with('…'));
    }
}
