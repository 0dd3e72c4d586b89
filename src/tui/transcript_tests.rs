//! The kept rows against a from-scratch build of the same screen.

use super::TranscriptCache;
use crate::tui::render::{cell_lines, wrap};
use crate::tui::state::{Cell, ToolCell};
use proptest::prelude::*;
use ratatui::text::Line;

/// The transcript as it was built before the cache: every cell from the
/// newest back, wrapped, until the area (plus the scroll) is full.
fn scratch(cells: &[Cell], width: usize, height: usize, scroll: usize) -> Vec<Line<'static>> {
    let want = height + scroll;
    let mut rows: Vec<Line<'static>> = Vec::new();
    for cell in cells.iter().rev() {
        let mut lines = Vec::new();
        for l in cell_lines(cell) {
            lines.extend(wrap(l, width));
        }
        lines.push(Line::default());
        lines.extend(rows);
        rows = lines;
        if rows.len() >= want {
            break;
        }
    }
    let end = rows.len() - scroll.min(rows.len());
    let start = end.saturating_sub(height);
    rows.drain(start..end).collect()
}

fn agent(id: &str, text: &str) -> Cell {
    Cell::Agent {
        item_id: id.into(),
        text: text.into(),
        pending: String::new(),
        done: false,
    }
}

fn tool(status: Option<&str>) -> Cell {
    Cell::Tool(Box::new(ToolCell {
        item_id: "t".into(),
        call_id: "c".into(),
        tool: "shell".into(),
        title: "cargo test".into(),
        status: status.map(str::to_string),
        ..ToolCell::default()
    }))
}

#[test]
fn a_streaming_message_matches_a_scratch_build_at_every_line() {
    let text = "# Answer\n\nFirst a paragraph that is long enough to wrap at a narrow width.\n\n- one\n- two\n\n```\ncode line\n\nmore\n```\n\nDone.\n";
    let mut cells = vec![Cell::User("do it".into()), tool(Some("ok"))];
    cells.push(agent("m", ""));
    let mut cache = TranscriptCache::default();
    for (i, _) in text.match_indices('\n') {
        cells[2] = agent("m", &text[..=i]);
        for (h, s) in [(8, 0), (30, 0), (5, 3)] {
            assert_eq!(
                cache.visible(&cells, 24, h, s),
                scratch(&cells, 24, h, s),
                "after {i} bytes, height {h} scroll {s}"
            );
        }
    }
}

#[test]
fn a_resize_rewraps_the_kept_rows() {
    let long = "word ".repeat(40);
    let cells = vec![
        Cell::User(long.clone()),
        agent("m", &format!("{long}\n\n{long}\n\nend\n")),
    ];
    let mut cache = TranscriptCache::default();
    for w in [80, 20, 7, 80, 1, 33] {
        assert_eq!(
            cache.visible(&cells, w, 50, 0),
            scratch(&cells, w, 50, 0),
            "width {w}"
        );
    }
}

#[test]
fn a_changed_cell_is_rebuilt_and_a_cleared_transcript_forgotten() {
    let mut cache = TranscriptCache::default();
    let mut cells = vec![Cell::User("a".into()), tool(None)];
    assert_eq!(cache.visible(&cells, 40, 10, 0), scratch(&cells, 40, 10, 0));
    cells[1] = tool(Some("failed"));
    assert_eq!(cache.visible(&cells, 40, 10, 0), scratch(&cells, 40, 10, 0));
    cells.clear();
    assert!(cache.visible(&cells, 40, 10, 0).is_empty());
    // A new message in the old one's place (another id, other text).
    cells.push(agent("m2", "new\n"));
    assert_eq!(cache.visible(&cells, 40, 10, 0), scratch(&cells, 40, 10, 0));
}

const TEXTS: &[&str] = &[
    "para\n\n",
    "- a\n- b\n\n",
    "```\nx\n\ny\n```\n\n",
    "> q\n\n",
    "a long line of words that wraps around at small widths for sure\n\n",
    "| a |\n|---|\n| 1 |\n\n",
    "\n",
    "# H\n",
    "1. one\n\n2. two\n\n",
];

#[derive(Clone, Debug)]
enum Op {
    User,
    Grow(usize),
    NewAgent,
    Tool(bool),
    Clear,
    Frame {
        width: usize,
        height: usize,
        scroll: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::User),
        (0..TEXTS.len()).prop_map(Op::Grow),
        (0..TEXTS.len()).prop_map(Op::Grow),
        (0..TEXTS.len()).prop_map(Op::Grow),
        Just(Op::NewAgent),
        any::<bool>().prop_map(Op::Tool),
        Just(Op::Clear),
        (1usize..60, 1usize..30, 0usize..20).prop_map(|(width, height, scroll)| Op::Frame {
            width,
            height,
            scroll
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_sessions_match_a_scratch_build(ops in proptest::collection::vec(op(), 1..60)) {
        let mut cache = TranscriptCache::default();
        let mut cells: Vec<Cell> = Vec::new();
        let mut next_id = 0;
        let (mut width, mut height, mut scroll) = (40, 12, 0);
        for op in ops {
            match op {
                Op::User => cells.push(Cell::User("ask".into())),
                Op::NewAgent => {
                    next_id += 1;
                    cells.push(agent(&format!("m{next_id}"), ""));
                }
                Op::Grow(i) => {
                    if let Some(Cell::Agent { text, .. }) = cells
                        .iter_mut()
                        .rev()
                        .find(|c| matches!(c, Cell::Agent { .. }))
                    {
                        text.push_str(TEXTS[i]);
                    }
                }
                Op::Tool(done) => {
                    match cells.last_mut() {
                        Some(Cell::Tool(t)) if t.status.is_none() && done => {
                            t.status = Some("ok".into());
                        }
                        _ => cells.push(tool(None)),
                    }
                }
                Op::Clear => cells.clear(),
                Op::Frame { width: w, height: h, scroll: s } => {
                    (width, height, scroll) = (w, h, s);
                }
            }
            prop_assert_eq!(
                cache.visible(&cells, width, height, scroll),
                scratch(&cells, width, height, scroll)
            );
        }
    }
}
