//! The streaming renderer against a from-scratch render: for every text
//! and every way of growing it, the lines are those of
//! `markdown::render(sanitize(text))`.

use super::StreamMarkdown;
use crate::tui::markdown;
use crate::tui::sanitize::sanitize;
use proptest::prelude::*;
use ratatui::text::Line;

fn scratch(text: &str) -> Vec<Line<'static>> {
    markdown::render(&sanitize(text))
}

/// Grow `text` through the prefixes ending at `cuts` (byte offsets, in
/// order; each is moved back to a char boundary), then to the whole,
/// checking every step.
fn grow(text: &str, cuts: &[usize]) -> StreamMarkdown {
    let mut md = StreamMarkdown::default();
    let mut ends: Vec<usize> = cuts
        .iter()
        .map(|&c| {
            let mut c = c.min(text.len());
            while !text.is_char_boundary(c) {
                c -= 1;
            }
            c
        })
        .collect();
    ends.sort_unstable();
    ends.push(text.len());
    for e in ends {
        let t = &text[..e];
        md.update(t);
        assert_eq!(
            md.lines(),
            scratch(t),
            "after {e} bytes of {text:?} (cut at {})",
            md.fixed_len()
        );
    }
    md
}

/// Every prefix that ends a line, one after another (how the commit
/// clock grows a message), then every byte prefix on a fresh renderer
/// each... in one pass: line by line first, then the rest.
fn grow_by_lines(text: &str) -> StreamMarkdown {
    let cuts: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
    grow(text, &cuts)
}

const SAMPLES: &[&str] = &[
    "# Plan\n\nDo **this** and `that`.\n\n- one\n- two\n\n```rust\nfn x() {}\n```\n\nDone.\n",
    "Para one\nstill one.\n\nPara two.\n\n## Head\n\nText *em* and ~~gone~~.\n",
    // A list that turns loose after a later blank line: earlier items change.
    "- a\n- b\n\n- c\n\nafter\n\n1. x\n2. y\n\n3. z\n\nend\n",
    // Nested lists and a fence inside an item.
    "1. Step\n   ```bash\n   cargo test\n   ```\n2. Next\n   - inner\n   - more\n\nText\n\nMore text\n",
    // A fence with blank lines and markdown-looking lines inside.
    "Intro\n\n```\nline\n\n# not a heading\n\n- not a list\n```\n\nOutro\n\n~~~~\n~~~\nstill code\n\n~~~~\n\nend\n",
    // A backtick line that is not a fence (info string with a backtick).
    "``` a`b\n\ntext\n\n```\ncode\n\nz\n```\n\nq\n",
    // An item's fence ended by an unindented line, then a real fence.
    "- a\n  ```\nfoo\n```\nbar\n\nbaz\n\n```\n\nqux\n",
    // Block quotes, rules, indented code across blank lines.
    "> quoted\n> more\n\n> again\n\n---\n\n    code\n\n    more code\n\nplain\n",
    // Tables, one followed by a fence.
    "| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n\n| x |\n|---|\n```\ncode\n\nin\n```\n\nend\n",
    // HTML blocks.
    "<div>\n~~~\n\ntext\n\n~~~\nmore\n\nx\n",
    "text\n\n<!-- a\n\nb -->\n\nafter\n\n<pre>\n\n```\n</pre>\n\nz\n",
    // A link reference definition after its use, and before.
    "See [the docs][d].\n\nMore.\n\n[d]: https://example.com\n\nEnd [d].\n",
    // Escapes, tabs, carriage returns and controls (sanitised first).
    "a\tb\r\n\r\n\x07c\n\n\x1b]0;title\x07\n\nd\x1b[2J\n\ne\n",
    "x\n\n\u{9b}31m red\n\ny\n",
    // Setext headings and thematic breaks.
    "Title\n=====\n\nSub\n---\n\n***\n\n___\n\ntext\n",
    // Task lists, emphasis across soft breaks, a hard break.
    "- [x] done\n- [ ] todo\n\n*one\ntwo*  \nthree\n\n**bold**\n",
    // Wide characters and emoji.
    "世界 — héllo\n\n🐋 whale\n\n`code 世界`\n",
];

#[test]
fn samples_grown_line_by_line_match_a_scratch_render() {
    for s in SAMPLES {
        grow_by_lines(s);
    }
}

#[test]
fn samples_grown_at_every_byte_match_a_scratch_render() {
    for s in SAMPLES {
        let cuts: Vec<usize> = (0..s.len()).collect();
        grow(s, &cuts);
    }
}

#[test]
fn paragraphs_are_cut_so_only_the_last_block_is_parsed_again() {
    let text: String = (1..=50)
        .map(|i| format!("delta {i} of the stream\n\n"))
        .collect();
    let md = grow_by_lines(&text);
    // Cut before the last paragraph: only it is in the tail.
    let last = text.rfind("delta 50").unwrap();
    assert_eq!(md.fixed_len(), last);
    assert_eq!(md.tail_lines().len(), 2, "{:?}", md.tail_lines());
}

#[test]
fn a_code_block_split_across_deltas_is_never_cut_inside() {
    let text = "Here:\n\n```rust\nfn a() {}\n\nWord\n\nfn b() {}\n```\n\nDone\n";
    let mut md = StreamMarkdown::default();
    let open = text.find("```rust").unwrap();
    for (i, _) in text.match_indices('\n') {
        let t = &text[..=i];
        md.update(t);
        assert_eq!(md.lines(), scratch(t));
        if i < text.find("\n\nDone").unwrap() {
            assert!(md.fixed_len() <= open, "cut inside the fence at {i}");
        }
    }
    assert_eq!(md.fixed_len(), text.find("Done").unwrap());
}

#[test]
fn a_list_split_across_deltas_is_never_cut_inside() {
    // The blank line before `- c` makes the whole list loose: `a` and `b`
    // gain blank lines between them once `c` arrives.
    let text = "Steps\n\n- a\n- b\n\n- c\n\nafter\n";
    let mut md = StreamMarkdown::default();
    md.update("Steps\n\n- a\n- b\n\n");
    let before = md.lines();
    md.update(text);
    assert_eq!(md.lines(), scratch(text));
    assert_ne!(before, md.lines()[..before.len()].to_vec());
    assert_eq!(md.fixed_len(), text.find("after").unwrap());
}

#[test]
fn a_reference_definition_renders_the_message_whole() {
    let text = "See [x][d].\n\nMore.\n\n[d]: https://e.com\n";
    let md = grow_by_lines(text);
    assert_eq!(md.fixed_len(), 0);
    // The definition made the earlier text a link (styled, one span).
    let first = &md.lines()[0];
    assert_eq!(
        first
            .spans
            .iter()
            .map(|s| s.content.as_ref())
            .collect::<String>(),
        "See x."
    );
}

#[test]
fn an_escape_character_stops_cutting_where_it_is() {
    let text = "one\n\ntwo\n\n\x1b]0;t\n\nthree\n\nfour\n";
    let md = grow_by_lines(text);
    // The last cut is before the block ahead of the escape.
    assert_eq!(md.fixed_len(), text.find("two").unwrap());
}

#[test]
fn text_that_does_not_extend_the_last_starts_over() {
    let mut md = StreamMarkdown::default();
    md.update("first\n\nsecond\n\nthird\n");
    assert!(md.fixed_len() > 0);
    let ch = md.update("other\n");
    assert!(ch.reset);
    assert_eq!(md.lines(), scratch("other\n"));
}

#[test]
fn an_unchanged_text_rebuilds_nothing() {
    let mut md = StreamMarkdown::default();
    md.update("a\n\nb\n\nc");
    let ch = md.update("a\n\nb\n\nc");
    assert!(!ch.tail && !ch.fixed && !ch.reset);
}

#[test]
fn sanitize_of_parts_is_sanitize_of_the_whole_without_escapes() {
    let text = "a\tb\r\n\x07c\x08d\x7f\u{7}é世\u{a0}\n\x18x\x1ay\n";
    for i in 0..=text.len() {
        if text.is_char_boundary(i) {
            let (a, b) = text.split_at(i);
            assert_eq!(sanitize(a) + &sanitize(b), sanitize(text), "split at {i}");
        }
    }
}

/// Lines that exercise every construct the cutter reasons about.
const PIECES: &[&str] = &[
    "",
    "",
    "",
    "text",
    "more text",
    "# Heading",
    "## Sub",
    "- item",
    "* star",
    "+ plus",
    "1. one",
    "2) two",
    "  - nested",
    "   continued",
    "    indented code",
    "> quote",
    ">",
    "```",
    "```rust",
    "~~~",
    "````",
    "  ```",
    "   ~~~",
    "``` a`b",
    "| a | b |",
    "|---|---|",
    "a | b",
    "<div>",
    "<!-- c",
    "-->",
    "<pre>",
    "</pre>",
    "---",
    "***",
    "===",
    "[x]: /u",
    "[x]",
    "`code`",
    "**bold",
    "bold**",
    "_em_",
    "\tTab",
    "a  ",
    "\\",
    "- [ ] task",
    "10. ten",
    "\u{1b}[1m",
    "世界",
    "&amp;",
    "<span>",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_texts_grown_at_random_points_match(
        picks in proptest::collection::vec(0..PIECES.len(), 1..40),
        cuts in proptest::collection::vec(0usize..2000, 0..12),
        by_line in any::<bool>(),
    ) {
        let text: String = picks.iter().map(|&i| format!("{}\n", PIECES[i])).collect();
        if by_line {
            grow_by_lines(&text);
        }
        grow(&text, &cuts);
    }
}
