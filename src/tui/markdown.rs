//! Agent text as styled lines: pulldown-cmark parses, this maps its events
//! to ratatui spans (headings, emphasis, inline code, code blocks, lists,
//! quotes, links). Text arrives sanitised (no escape sequences).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// The parser's options (the same for a whole message and for its parts).
fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// Render markdown `src` to unwrapped lines.
pub fn render(src: &str) -> Vec<Line<'static>> {
    let mut r = Renderer::default();
    r.feed(src);
    let mut lines = r.finish();
    trim_blank_tail(&mut lines);
    lines
}

/// No trailing blank lines (the transcript adds its own spacing).
pub fn trim_blank_tail(lines: &mut Vec<Line<'static>>) {
    while lines.last().is_some_and(|l| l.spans.is_empty()) {
        lines.pop();
    }
}

/// Maps pulldown-cmark's events to lines. It can be fed a message in
/// parts (see [`super::stream_md`]): all of its state (the open line, the
/// style and list stacks, whether the last line already given out was
/// text) survives [`Renderer::take_lines`], so feeding the parts of a text
/// split where the parser's events split gives exactly the lines of the
/// whole.
#[derive(Clone, Debug, Default)]
pub struct Renderer {
    lines: Vec<Line<'static>>,
    cur: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// List nesting: `Some(n)` numbered (next number), `None` bullets.
    lists: Vec<Option<u64>>,
    quote: usize,
    in_code: bool,
    /// Whether the last line handed out by [`Renderer::take_lines`] had
    /// text (what [`Renderer::blank`] looks at once `lines` is empty).
    before_text: bool,
}

impl Renderer {
    /// Parse `src` as one markdown document and map its events.
    pub fn feed(&mut self, src: &str) {
        for ev in Parser::new_ext(src, options()) {
            self.event(ev);
        }
    }

    /// The lines finished so far (the open line stays).
    pub fn take_lines(&mut self) -> Vec<Line<'static>> {
        if let Some(l) = self.lines.last() {
            self.before_text = !l.spans.is_empty();
        }
        std::mem::take(&mut self.lines)
    }

    /// Close the open line and give out the rest (untrimmed).
    pub fn finish(mut self) -> Vec<Line<'static>> {
        self.flush();
        self.lines
    }
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |acc, s| acc.patch(*s))
    }

    fn prefix(&self) -> String {
        let mut p = "│ ".repeat(self.quote);
        if self.in_code {
            p.push_str("    ");
        }
        p
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            let spans = std::mem::take(&mut self.cur);
            self.lines.push(Line::from(spans));
        }
    }

    fn blank(&mut self) {
        self.flush();
        let after_text = match self.lines.last() {
            Some(l) => !l.spans.is_empty(),
            None => self.before_text,
        };
        if after_text {
            self.lines.push(Line::default());
        }
    }

    fn push_text(&mut self, t: &str) {
        let style = self.style();
        for (i, part) in t.split('\n').enumerate() {
            if i > 0 {
                self.flush();
            }
            if part.is_empty() {
                continue;
            }
            if self.cur.is_empty() {
                let p = self.prefix();
                if !p.is_empty() {
                    self.cur
                        .push(Span::styled(p, Style::default().fg(Color::DarkGray)));
                }
            }
            self.cur.push(Span::styled(part.to_string(), style));
        }
    }

    fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => {
                if self.in_code {
                    let code = t.strip_suffix('\n').unwrap_or(&t).to_string();
                    self.styles.push(Style::default().fg(Color::Green));
                    for l in code.split('\n') {
                        self.push_text(l);
                        self.flush();
                    }
                    self.styles.pop();
                } else {
                    self.push_text(&t);
                }
            }
            Event::Code(t) => {
                self.styles.push(Style::default().fg(Color::Yellow));
                self.push_text(&t);
                self.styles.pop();
            }
            Event::SoftBreak => self.push_text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.blank();
                self.lines.push(Line::from(Span::styled(
                    "───",
                    Style::default().fg(Color::DarkGray),
                )));
            }
            Event::TaskListMarker(done) => self.push_text(if done { "[x] " } else { "[ ] " }),
            Event::Html(t) | Event::InlineHtml(t) => self.push_text(&t),
            Event::FootnoteReference(t) => self.push_text(&format!("[{t}]")),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.push_text(&t),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.blank();
                let st = Style::default().add_modifier(Modifier::BOLD);
                let st = if level == HeadingLevel::H1 {
                    st.fg(Color::Cyan).add_modifier(Modifier::UNDERLINED)
                } else {
                    st.fg(Color::Cyan)
                };
                self.styles.push(st);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                if let CodeBlockKind::Fenced(lang) = kind {
                    if !lang.is_empty() {
                        self.lines.push(Line::from(Span::styled(
                            format!("    {lang}"),
                            Style::default().fg(Color::DarkGray),
                        )));
                    }
                }
                self.in_code = true;
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_string(),
                };
                let p = self.prefix();
                self.cur
                    .push(Span::raw(format!("{p}{}{marker}", "  ".repeat(depth))));
            }
            Tag::Emphasis => self
                .styles
                .push(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self
                .styles
                .push(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => self.styles.push(
                Style::default()
                    .fg(Color::Blue)
                    .add_modifier(Modifier::UNDERLINED),
            ),
            _ => self.styles.push(Style::default()),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.blank(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.in_code = false;
                self.blank();
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.blank();
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Link
            | TagEnd::Image
            | TagEnd::Table
            | TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::FootnoteDefinition
            | TagEnd::HtmlBlock
            | TagEnd::MetadataBlock(_)
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::render;

    fn text(src: &str) -> Vec<String> {
        render(src)
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn blocks_become_lines() {
        let out =
            text("# Plan\n\nDo **this** and `that`.\n\n- one\n- two\n\n```rust\nfn x() {}\n```\n");
        assert_eq!(
            out,
            [
                "Plan",
                "",
                "Do this and that.",
                "",
                "• one",
                "• two",
                "",
                "    rust",
                "    fn x() {}"
            ]
        );
    }

    #[test]
    fn numbered_lists_count() {
        assert_eq!(text("1. a\n2. b\n"), ["1. a", "2. b"]);
    }
}
