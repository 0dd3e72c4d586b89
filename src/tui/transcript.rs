//! The transcript's rows, kept between frames.
//!
//! Why: the transcript is drawn on every key and on every commit tick
//! while an answer streams; building each visible cell's lines again
//! (sanitise, markdown, wrap) made a frame cost as much as the cells on
//! screen — for a long streaming answer, the whole answer — and a key
//! typed meanwhile waited behind it (issue 17).
//!
//! What is kept: per cell, its wrapped rows at the current width (a
//! resize re-wraps). A cell is rebuilt only when it changed (compared
//! with the copy kept of it); an agent message is kept as a
//! [`StreamMarkdown`], so a growing message re-parses only its last,
//! still open block and re-wraps only that block's lines. A frame then
//! copies only the rows that are on screen. The result is the same as
//! [`super::render::cell_lines`] wrapped by [`super::render::wrap`] cell by
//! cell, which the tests check against a from-scratch build.

use super::render::{cell_lines, wrap};
use super::state::Cell;
use super::stream_md::StreamMarkdown;
use ratatui::text::Line;

/// Rows of the transcript's cells, by index in [`super::state::State::transcript`].
#[derive(Debug, Default)]
pub struct TranscriptCache {
    width: usize,
    entries: Vec<Entry>,
}

#[derive(Debug, Default)]
enum Entry {
    #[default]
    Empty,
    /// Any cell but an agent message: the copy it was built from.
    Fixed {
        cell: Cell,
        rows: Vec<Line<'static>>,
    },
    Agent(Box<AgentRows>),
}

#[derive(Debug, Default)]
struct AgentRows {
    item_id: String,
    md: StreamMarkdown,
    /// The wrapped rows of `md.fixed_lines()[..wrapped]`.
    fixed_rows: Vec<Line<'static>>,
    wrapped: usize,
    /// The wrapped rows of `md.tail_lines()`.
    tail_rows: Vec<Line<'static>>,
}

/// The blank row after every cell.
const SPACER: &[Line<'static>] = &[Line {
    style: ratatui::style::Style::new(),
    alignment: None,
    spans: Vec::new(),
}];

impl AgentRows {
    fn update(&mut self, text: &str, width: usize) {
        let ch = self.md.update(text);
        if ch.reset {
            self.fixed_rows.clear();
            self.wrapped = 0;
        }
        let fixed = self.md.fixed_lines();
        for l in &fixed[self.wrapped..] {
            self.fixed_rows.extend(wrap(l.clone(), width));
        }
        self.wrapped = fixed.len();
        if ch.tail || ch.reset {
            self.tail_rows = rows_of(self.md.tail_lines(), width);
        }
    }

    /// The rows as [`markdown::render`] + wrap give them: the trailing
    /// blank lines are dropped (each blank line is exactly one row).
    fn segments(&self) -> [&[Line<'static>]; 3] {
        let (a, b) = self.md.trimmed();
        [
            &self.fixed_rows[..self.fixed_rows.len() - a],
            &self.tail_rows[..self.tail_rows.len() - b],
            SPACER,
        ]
    }

    fn rewrap(&mut self, width: usize) {
        self.fixed_rows = rows_of(&self.md.fixed_lines()[..self.wrapped], width);
        self.tail_rows = rows_of(self.md.tail_lines(), width);
    }
}

fn rows_of(lines: &[Line<'static>], width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for l in lines {
        out.extend(wrap(l.clone(), width));
    }
    out
}

impl TranscriptCache {
    /// The rows to draw in a `width` × `height` area, `scroll` rows back
    /// from the bottom: the newest cells at the bottom, each followed by
    /// a blank row; only the cells needed to fill the area (plus the
    /// scroll offset) are brought up to date, and only the rows shown are
    /// copied.
    pub fn visible(
        &mut self,
        cells: &[Cell],
        width: usize,
        height: usize,
        scroll: usize,
    ) -> Vec<Line<'static>> {
        if width != self.width {
            self.width = width;
            for e in &mut self.entries {
                match e {
                    Entry::Agent(a) => a.rewrap(width),
                    _ => *e = Entry::Empty,
                }
            }
        }
        self.entries.truncate(cells.len());
        self.entries.resize_with(cells.len(), Entry::default);
        let want = height + scroll;
        // Bring the newest cells up to date until the area is full.
        let mut first = cells.len();
        let mut total = 0;
        while first > 0 && total < want {
            first -= 1;
            self.refresh(first, &cells[first]);
            total += self.entries[first]
                .segments()
                .iter()
                .map(|s| s.len())
                .sum::<usize>();
        }
        let end = total - scroll.min(total);
        let start = end.saturating_sub(height);
        let mut out = Vec::with_capacity(end - start);
        let mut at = 0;
        for e in &self.entries[first..] {
            for seg in e.segments() {
                let (lo, hi) = (at, at + seg.len());
                at = hi;
                if hi <= start || lo >= end {
                    continue;
                }
                let from = start.max(lo) - lo;
                let to = end.min(hi) - lo;
                out.extend_from_slice(&seg[from..to]);
            }
            if at >= end {
                break;
            }
        }
        out
    }

    fn refresh(&mut self, i: usize, cell: &Cell) {
        let width = self.width;
        let e = &mut self.entries[i];
        match (cell, &mut *e) {
            (Cell::Agent { item_id, text, .. }, Entry::Agent(a)) if a.item_id == *item_id => {
                a.update(text, width);
            }
            (Cell::Agent { item_id, text, .. }, _) => {
                let mut a = Box::new(AgentRows {
                    item_id: item_id.clone(),
                    ..AgentRows::default()
                });
                a.update(text, width);
                *e = Entry::Agent(a);
            }
            (c, Entry::Fixed { cell, .. }) if *cell == *c => {}
            (c, _) => {
                let mut rows = Vec::new();
                for l in cell_lines(c) {
                    rows.extend(wrap(l, width));
                }
                rows.push(Line::default());
                *e = Entry::Fixed {
                    cell: c.clone(),
                    rows,
                };
            }
        }
    }
}

impl Entry {
    fn segments(&self) -> [&[Line<'static>]; 3] {
        match self {
            Entry::Empty => [&[], &[], &[]],
            Entry::Fixed { rows, .. } => [rows, &[], &[]],
            Entry::Agent(a) => a.segments(),
        }
    }
}

#[cfg(test)]
#[path = "transcript_tests.rs"]
mod tests;
