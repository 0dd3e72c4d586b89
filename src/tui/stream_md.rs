//! A streaming agent message rendered as markdown without re-parsing all
//! of it on every frame.
//!
//! Why: the transcript is redrawn on the ~16 ms commit clock while an
//! answer streams, and rendering the whole growing message from scratch
//! each time (sanitise, parse, map, wrap) made every frame cost more than
//! the one before: the keys typed meanwhile waited behind it (issue 17).
//!
//! How: the message's text only grows (the state machine appends
//! committed lines). It is cut, once, at *closed block boundaries*: the
//! start of a line where everything before it is a finished markdown
//! block that nothing after it can change. Everything before the last
//! such cut is parsed once and its lines (and, in
//! [`super::transcript`], its wrapped rows) are kept; only the text after
//! it — the block still growing — is parsed again on a frame. The
//! renderer's own state at the cut is kept too, so the lines are exactly
//! those of a from-scratch [`markdown::render`] (checked against it for
//! random texts and random split points in the tests).
//!
//! A cut is made at the start of line `L` when, in the sanitised text:
//! - the line before `L` is blank, and `L` starts in column 0 with a
//!   character that cannot continue a list (`-`, `+`, `*`, a digit) or
//!   an indented block (space): after a blank line such a line ends every
//!   paragraph, list, block quote and indented code block (CommonMark
//!   4.8, 5.1, 5.2, 4.4; lazy continuation needs a paragraph that is
//!   still open, and the blank line closed it);
//! - `L` is outside every fenced code block. Fences are tracked line by
//!   line by CommonMark 4.5's rules: an opening fence is at most three
//!   spaces in, three or more of one of `` ` `` / `~` (a backtick fence's
//!   info string holds no backtick); it is closed by at least as many of
//!   the same character, at most three spaces in, then only spaces. A
//!   fence in column 0 is always a top-level fence (no container holds
//!   a line that is not indented, except a paragraph's lazy line, which a
//!   fence is not). A fence 1–3 spaces in may belong to a list item; any
//!   later non-blank line indented less than the fence ends that item, so
//!   the tracker can no longer tell: it stops cutting (below);
//!
//! and it stops cutting for the rest of the message (what is already cut
//! stays valid: nothing after a cut changes what is before it) at:
//! - a line whose first non-space character (at most three spaces in) is
//!   `<`: HTML blocks (4.6) have their own end conditions, some across
//!   blank lines, and one can hide a fence;
//! - a table row (a line with `|`) followed by a fence line: whether the
//!   fence ends the table is left to the parser;
//! - an escape character or a C1 control: [`sanitize`] runs a terminal
//!   parser over the text, and only text without those is sanitised the
//!   same in parts as whole (every other character maps on its own: tabs
//!   become spaces, controls are dropped).
//!
//! A link reference definition (`[label]: url`, 4.7) changes links
//! anywhere in the document, before it too: any `]:` in the message turns
//! the cutting off altogether, and the message is rendered whole on each
//! frame as before.

use super::markdown::Renderer;
use super::sanitize::sanitize;
use ratatui::text::Line;

/// One agent message's lines, kept across frames.
#[derive(Clone, Debug, Default)]
pub struct StreamMarkdown {
    /// The raw text scanned so far (whole lines): the next frame's text
    /// must start with it, else everything is rebuilt.
    scanned: String,
    /// `scanned[..fixed]` is cut off: parsed once, its lines in `lines`.
    fixed: usize,
    /// The lines of `scanned[..fixed]`, untrimmed.
    lines: Vec<Line<'static>>,
    /// The renderer's state after `scanned[..fixed]`.
    renderer: Renderer,
    scan: Scan,
    /// The text after the cut and its lines (what the last frame built).
    tail_src: String,
    tail: Vec<Line<'static>>,
    /// The message is rendered whole (a `]:` was seen).
    whole: bool,
}

/// The line scanner's state at the end of `scanned`.
#[derive(Clone, Debug, Default)]
struct Scan {
    prev_blank: bool,
    fence: Option<Fence>,
    /// Inside a run of lines that may be a table.
    table: bool,
    /// No more cuts in this message.
    stopped: bool,
}

#[derive(Clone, Copy, Debug)]
struct Fence {
    ch: u8,
    len: usize,
    indent: usize,
}

/// What [`StreamMarkdown::update`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Changed {
    /// New lines were appended to [`StreamMarkdown::fixed_lines`].
    pub fixed: bool,
    /// The tail was rebuilt.
    pub tail: bool,
    /// Everything was rebuilt (the text did not extend the last one).
    pub reset: bool,
}

impl StreamMarkdown {
    /// Bring the lines up to date with `text` (the message's committed
    /// raw text). Only what is new since the last call is scanned, and
    /// only the text after the last cut is parsed.
    pub fn update(&mut self, text: &str) -> Changed {
        let mut ch = Changed {
            fixed: false,
            tail: false,
            reset: false,
        };
        if !text.starts_with(self.scanned.as_str()) {
            *self = StreamMarkdown::default();
            ch.reset = true;
        }
        let was_whole = self.whole;
        if !self.whole {
            // Whole lines only: the last, unfinished one may still grow.
            let end = text.rfind('\n').map_or(0, |i| i + 1);
            let mut cut = None;
            if end > self.scanned.len() {
                let new = &text[self.scanned.len()..end];
                let mut at = self.scanned.len();
                for line in new.split_inclusive('\n') {
                    match self.scan.line(line) {
                        Step::Cut => cut = Some(at),
                        Step::Whole => {
                            self.whole = true;
                            break;
                        }
                        Step::Go => {}
                    }
                    at += line.len();
                }
                self.scanned.push_str(new);
            }
            if !self.whole && text[end..].contains("]:") {
                self.whole = true;
            }
            if self.whole && !was_whole {
                self.fixed = 0;
                self.lines.clear();
                self.renderer = Renderer::default();
                ch.reset = true;
            } else if let Some(c) = cut.filter(|c| *c > self.fixed) {
                self.renderer.feed(&sanitize(&text[self.fixed..c]));
                self.lines.extend(self.renderer.take_lines());
                self.fixed = c;
                ch.fixed = true;
            }
        }
        let fixed = if self.whole { 0 } else { self.fixed };
        let tail_src = &text[fixed..];
        if ch.reset || ch.fixed || tail_src != self.tail_src {
            let mut r = self.renderer.clone();
            r.feed(&sanitize(tail_src));
            self.tail = r.finish();
            self.tail_src = tail_src.to_string();
            ch.tail = true;
        }
        ch
    }

    /// The lines of the text before the cut, untrimmed (they only grow,
    /// until a reset).
    pub fn fixed_lines(&self) -> &[Line<'static>] {
        &self.lines
    }

    /// The lines of the text after the cut, untrimmed.
    pub fn tail_lines(&self) -> &[Line<'static>] {
        &self.tail
    }

    /// How many lines, from the end of the fixed lines then the tail, are
    /// blank and dropped by [`markdown::render`]'s trimming: (from the
    /// fixed lines, from the tail).
    pub fn trimmed(&self) -> (usize, usize) {
        let blank_run =
            |ls: &[Line<'static>]| ls.iter().rev().take_while(|l| l.spans.is_empty()).count();
        let t = blank_run(&self.tail);
        if t == self.tail.len() {
            (blank_run(&self.lines), t)
        } else {
            (0, t)
        }
    }

    /// The message's lines, as [`markdown::render`] of the whole
    /// (sanitised) text gives them.
    pub fn lines(&self) -> Vec<Line<'static>> {
        let (a, b) = self.trimmed();
        let mut out: Vec<Line<'static>> = self.lines[..self.lines.len() - a].to_vec();
        out.extend_from_slice(&self.tail[..self.tail.len() - b]);
        out
    }

    /// Bytes of the text before the cut (for tests and the bench).
    pub fn fixed_len(&self) -> usize {
        if self.whole {
            0
        } else {
            self.fixed
        }
    }
}

enum Step {
    /// A cut may be made at the start of this line.
    Cut,
    /// No cut here.
    Go,
    /// Render the message whole from now on.
    Whole,
}

impl Scan {
    /// Look at one raw line (with its `\n`).
    fn line(&mut self, raw: &str) -> Step {
        if raw.contains("]:") {
            return Step::Whole;
        }
        if self.stopped {
            return Step::Go;
        }
        if raw
            .chars()
            .any(|c| c == '\u{1b}' || ('\u{80}'..='\u{9f}').contains(&c))
        {
            self.stopped = true;
            return Step::Go;
        }
        let clean = sanitize(raw);
        let l = clean.strip_suffix('\n').unwrap_or(&clean);
        let blank = l.trim_matches(' ').is_empty();
        let indent = l.len() - l.trim_start_matches(' ').len();
        let rest = &l[indent..];
        let mut step = Step::Go;
        if let Some(f) = self.fence {
            if f.indent > 0 && !blank && indent < f.indent {
                // A list item this fence may be in has ended, or not.
                self.stopped = true;
            } else if indent <= 3 && closes(rest, f) {
                self.fence = None;
            }
        } else {
            let first = l.bytes().next();
            if self.prev_blank
                && !blank
                && !matches!(first, Some(b' ' | b'-' | b'+' | b'*' | b'0'..=b'9'))
            {
                step = Step::Cut;
            }
            if indent <= 3 && rest.starts_with('<') {
                self.stopped = true;
            } else if let Some(f) = (indent <= 3).then(|| opens(rest, indent)).flatten() {
                if self.table {
                    self.stopped = true;
                }
                self.fence = Some(f);
            }
            if blank {
                self.table = false;
            } else if l.contains('|') {
                self.table = true;
            }
        }
        self.prev_blank = blank;
        step
    }
}

/// An opening fence: `rest` is the line after its indentation.
fn opens(rest: &str, indent: usize) -> Option<Fence> {
    let ch = *rest.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|b| *b == ch).count();
    if len < 3 {
        return None;
    }
    if ch == b'`' && rest[len..].contains('`') {
        return None;
    }
    Some(Fence { ch, len, indent })
}

/// A closing fence for `f`: `rest` is the line after its indentation.
fn closes(rest: &str, f: Fence) -> bool {
    let len = rest.bytes().take_while(|b| *b == f.ch).count();
    len >= f.len && rest[len..].trim_matches(' ').is_empty()
}

#[cfg(test)]
#[path = "stream_md_tests.rs"]
mod tests;
