//! Drawing a [`State`] into a ratatui frame. Pure: the same state and
//! size give the same buffer (the snapshot tests rely on it). Layout, top
//! to bottom: the transcript (only the cells that fit are built, newest at
//! the bottom), the model's to-do list when it keeps one, a flash line, the input (or the approval card in its
//! place), the footer.

use super::markdown;
use super::sanitize::sanitize;
use super::state::{Card, Cell, Choice, FooterInfo, State, ToolCell};
use super::tokens::human;
pub use super::transcript::TranscriptCache;
use crate::authz::Approval;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;
use ratatui_textarea::TextArea;
use unicode_width::UnicodeWidthChar;

/// Rows of the input box's text (it grows with the draft up to this).
const INPUT_MAX_ROWS: u16 = 6;

/// Draw the whole screen, building every visible cell from scratch (the
/// snapshot tests and one-off frames).
pub fn draw(f: &mut Frame, st: &State, input: &TextArea) {
    draw_cached(f, st, input, &mut TranscriptCache::default());
}

/// Draw the whole screen, reusing the transcript rows `cache` kept from
/// earlier frames (the app's loop: see [`TranscriptCache`]).
pub fn draw_cached(f: &mut Frame, st: &State, input: &TextArea, cache: &mut TranscriptCache) {
    let area = f.area();
    let footer_h = 1;
    // The flash line: a message, else while a turn runs how to stop it.
    let flash_text = st.flash.clone().or_else(|| {
        // (A card says how to stop on its own.)
        st.turn.as_ref().filter(|_| st.card.is_none()).map(|_| {
            if st.stopping {
                "stopping…".to_string()
            } else {
                "working… Esc to stop".to_string()
            }
        })
    });
    let flash_h = u16::from(flash_text.is_some());
    let boxed = |lines: Vec<Line<'static>>, title: String, color: Color| {
        let want = lines.len() as u16 + 2;
        if area.width >= 24 && area.height > want + footer_h + flash_h {
            BottomKind::Boxed(lines, want, title, color)
        } else {
            BottomKind::OneLine
        }
    };
    let bottom = match (&st.card, &st.ask, &st.picker) {
        (None, None, None) if st.handoff.is_some() => boxed(
            st.handoff
                .as_ref()
                .map(super::handoff::lines)
                .unwrap_or_default(),
            " plan ready ".into(),
            Color::Cyan,
        ),
        (None, Some(a), _) => boxed(
            super::picker_render::ask_lines(a),
            " first run ".into(),
            Color::Yellow,
        ),
        (None, None, Some(p)) => {
            let (title, lines) = super::picker_render::picker_lines(p, area.width);
            boxed(lines, title, Color::Cyan)
        }
        (Some(c), _, _) => {
            let lines = card_lines(c, area.width);
            let want = lines.len() as u16 + 2;
            // The card must leave one transcript row and the footer.
            if area.width >= 24 && area.height > want + footer_h + flash_h {
                BottomKind::Card(lines, want)
            } else {
                BottomKind::CardLine
            }
        }
        (None, None, None) => {
            let rows = (input.lines().len() as u16).clamp(1, INPUT_MAX_ROWS);
            let h = (rows + 2).min(area.height.saturating_sub(footer_h + flash_h));
            BottomKind::Input(h)
        }
    };
    let bottom_h = match &bottom {
        BottomKind::Card(_, h) | BottomKind::Input(h) | BottomKind::Boxed(_, h, _, _) => *h,
        BottomKind::CardLine | BottomKind::OneLine => 1,
    };
    // The to-do list above the flash line and the input, when the model
    // keeps one, leaving at least one transcript row.
    let todo_room = area
        .height
        .saturating_sub(footer_h + flash_h + bottom_h + 1) as usize;
    let todo_lines = super::todo::lines(&st.todos, area.width, todo_room);
    let todo_h = todo_lines.len() as u16;
    let [body, todo, flash, bot, foot] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(todo_h),
        Constraint::Length(flash_h),
        Constraint::Length(bottom_h),
        Constraint::Length(footer_h),
    ])
    .areas(area);
    transcript(f, st, body, cache);
    if todo_h > 0 {
        f.render_widget(Clear, todo);
        f.render_widget(Paragraph::new(todo_lines), todo);
    }
    if let Some(m) = &flash_text {
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                clip(m, flash.width as usize),
                Style::default().fg(Color::Yellow),
            ))),
            flash,
        );
    }
    match bottom {
        BottomKind::Input(_) => f.render_widget(input, bot),
        BottomKind::Card(lines, _) => {
            f.render_widget(Clear, bot);
            let block = Block::default()
                .borders(Borders::ALL)
                .border_style(Style::default().fg(Color::Yellow))
                .title(" approval needed ");
            f.render_widget(Paragraph::new(lines).block(block), bot);
        }
        BottomKind::CardLine => {
            if let Some(c) = &st.card {
                f.render_widget(Paragraph::new(card_fallback(c, bot.width)), bot);
            }
        }
        BottomKind::Boxed(lines, _, title, color) => {
            f.render_widget(Clear, bot);
            let block = Block::default()
                .borders(Borders::ALL)
                .border_style(Style::default().fg(color))
                .title(title);
            f.render_widget(Paragraph::new(lines).block(block), bot);
        }
        BottomKind::OneLine => {
            let line = match (&st.ask, &st.picker, &st.handoff) {
                (Some(a), _, _) => super::picker_render::ask_fallback(a),
                (None, Some(p), _) => super::picker_render::picker_fallback(p),
                (None, None, Some(h)) => super::handoff::fallback(h),
                (None, None, None) => Line::default(),
            };
            f.render_widget(Paragraph::new(line), bot);
        }
    }
    f.render_widget(Paragraph::new(footer_line(st, foot.width)), foot);
}

enum BottomKind {
    Input(u16),
    Card(Vec<Line<'static>>, u16),
    CardLine,
    /// The first run's question or the `/provider` picker: lines, height,
    /// title, border colour.
    Boxed(Vec<Line<'static>>, u16, String, Color),
    /// Either of those in one line (a small terminal).
    OneLine,
}

/// The footer: mode · permission · sandbox backend and level · model ·
/// tokens and cost. Full Access is red.
pub fn footer_line(st: &State, width: u16) -> Line<'static> {
    let f: &FooterInfo = &st.footer;
    let perm_style = match st.permission {
        Approval::FullAccess => Style::default()
            .fg(Color::White)
            .bg(Color::Red)
            .add_modifier(Modifier::BOLD),
        Approval::AutoReview => Style::default().fg(Color::Magenta),
        _ => Style::default().fg(Color::Green),
    };
    let sandbox = if st.permission == Approval::FullAccess {
        match &f.full_access_capped {
            None => "sandbox off".to_string(),
            Some(m) => format!("{} {} ({m}: settings cap it)", f.backend, f.level),
        }
    } else {
        format!("{} {}", f.backend, f.level)
    };
    let cost = match f.cost_usd {
        Some(c) => format!("${c:.4}"),
        None => "cost ?".to_string(),
    };
    let tokens = f.input_tokens + f.output_tokens;
    let (ctx, ctx_style) = context_part(f);
    // Figures (context, tokens and cost) are shown whole or not at all:
    // a clipped `$0.0021` would read as `$0`.
    let parts: Vec<(Span<'static>, bool)> = vec![
        (
            Span::styled(
                format!(" {} ", st.mode.label()),
                Style::default().fg(Color::Black).bg(Color::Cyan),
            ),
            true,
        ),
        (Span::raw(" "), true),
        (
            Span::styled(
                match &st.auto_review_paused {
                    Some(_) if st.permission == Approval::Ask => {
                        "Ask (Auto-Review paused)".to_string()
                    }
                    _ => st.permission.label().to_string(),
                },
                perm_style,
            ),
            true,
        ),
        (Span::raw(" · "), true),
        (
            Span::styled(sandbox, Style::default().fg(Color::Blue)),
            true,
        ),
        (Span::raw(" · "), true),
        (Span::raw(f.model.clone()), true),
        (Span::raw(" · "), false),
        (Span::styled(ctx, ctx_style), false),
        (Span::raw(" · "), false),
        (Span::raw(format!("{} tok {cost}", human(tokens))), false),
    ];
    let mut used = 0usize;
    let mut out = Vec::new();
    for (s, clippable) in parts {
        let w = str_width(&s.content);
        if used + w > width as usize {
            let room = (width as usize).saturating_sub(used);
            if room > 0 && clippable {
                out.push(Span::styled(clip(&s.content, room), s.style));
            }
            break;
        }
        used += w;
        out.push(s);
    }
    // No dangling separator when the next figure did not fit.
    if out.last().is_some_and(|s| s.content == " · ") {
        out.pop();
    }
    Line::from(out)
}

/// How full the model's context is: a percentage of the catalogue's
/// window (yellow from 80 %, red from 95 %; `/model` names the window), the bare token count when
/// the window is not known, `ctx ?` before any request reported usage
/// against an unknown window.
fn context_part(f: &FooterInfo) -> (String, Style) {
    match (f.context_window, f.context_tokens) {
        (Some(w), c) if w > 0 => {
            let c = c.unwrap_or(0);
            let pct = (c.saturating_mul(100) / u64::from(w)).min(999);
            let style = match pct {
                95.. => Style::default().fg(Color::Red),
                80.. => Style::default().fg(Color::Yellow),
                _ => Style::default(),
            };
            (format!("ctx {pct}%"), style)
        }
        (_, Some(c)) => (format!("ctx {}", human(c)), Style::default()),
        _ => ("ctx ?".to_string(), Style::default()),
    }
}

/// The card's text: what it wants to do, where, under which posture, why,
/// and the three answers with the default (deny) highlighted.
pub fn card_lines(c: &Card, width: u16) -> Vec<Line<'static>> {
    let inner = width.saturating_sub(2) as usize;
    let label = Style::default().fg(Color::DarkGray);
    let mut lines = Vec::new();
    let what = match (&c.command, &c.path) {
        (Some(cmd), _) => format!("$ {}", sanitize(cmd)),
        (None, Some(p)) => format!("{} {}", c.tool, sanitize(p)),
        (None, None) => c.tool.clone(),
    };
    for l in what.lines() {
        lines.extend(wrap(
            Line::from(Span::styled(
                l.to_string(),
                Style::default().add_modifier(Modifier::BOLD),
            )),
            inner,
        ));
    }
    if let Some(d) = &c.diff {
        for l in d.lines().take(8) {
            lines.extend(wrap(diff_line(&sanitize(l)), inner));
        }
    }
    if !c.cwd.is_empty() {
        lines.push(Line::from(vec![
            Span::styled("cwd ", label),
            Span::raw(sanitize(&c.cwd)),
        ]));
    }
    lines.push(Line::from(vec![
        Span::styled("posture ", label),
        Span::raw(c.posture.clone()),
    ]));
    lines.extend(wrap(
        Line::from(vec![
            Span::styled("why ", label),
            Span::raw(sanitize(&c.reason)),
        ]),
        inner,
    ));
    if c.hold {
        lines.push(Line::from(Span::styled(
            "a hold: `a` approves this call only",
            Style::default().fg(Color::Red),
        )));
    }
    let mut choices = Vec::new();
    for ch in Choice::ALL {
        let st = if ch == c.selected {
            Style::default()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        choices.push(Span::styled(format!("[{}]", ch.label()), st));
        choices.push(Span::raw(" "));
    }
    choices.push(Span::styled("Esc stop", label));
    lines.extend(wrap(Line::from(choices), inner));
    lines
}

/// The card in one line, for terminals too small for the box: the
/// question is still asked, never decided silently.
pub fn card_fallback(c: &Card, width: u16) -> Line<'static> {
    let what = c
        .command
        .clone()
        .or_else(|| c.path.clone())
        .unwrap_or_else(|| c.tool.clone());
    let text = format!(
        "approve {} `{}`? y/a/[n] Esc",
        c.tool,
        sanitize(&what).replace('\n', " ")
    );
    // Keep the answer keys visible: clip the command, not the keys.
    let keys = " y/a/[n] Esc";
    let w = width as usize;
    let text = if str_width(&text) <= w {
        text
    } else {
        let head = clip(&text, w.saturating_sub(str_width(keys) + 1));
        format!("{head}…{keys}")
    };
    Line::from(Span::styled(
        clip(&text, w),
        Style::default().fg(Color::Black).bg(Color::Yellow),
    ))
}

fn transcript(f: &mut Frame, st: &State, area: Rect, cache: &mut TranscriptCache) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    // Only the cells that fill the screen (plus the scroll offset) are
    // looked at, and only the rows shown are copied.
    let visible = cache.visible(
        &st.transcript,
        area.width as usize,
        area.height as usize,
        st.scroll,
    );
    f.render_widget(Paragraph::new(visible), area);
}

/// One cell as unwrapped lines.
pub fn cell_lines(cell: &Cell) -> Vec<Line<'static>> {
    match cell {
        Cell::User(t) => sanitize(t)
            .lines()
            .enumerate()
            .map(|(i, l)| {
                Line::from(vec![
                    Span::styled(
                        if i == 0 { "› " } else { "  " },
                        Style::default()
                            .fg(Color::Cyan)
                            .add_modifier(Modifier::BOLD),
                    ),
                    Span::raw(l.to_string()),
                ])
            })
            .collect(),
        Cell::Agent { text, .. } => markdown::render(&sanitize(text)),
        Cell::Tool(t) => tool_lines(t),
        Cell::Reasoning { text, expanded } => reasoning_lines(text, *expanded),
        Cell::Notice { error, text } => {
            let st = if *error {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::DarkGray)
            };
            sanitize(text)
                .lines()
                .map(|l| Line::from(Span::styled(l.to_string(), st)))
                .collect()
        }
    }
}

/// A reasoning cell: one dim line while collapsed; the (sanitised) text
/// under it once Ctrl-O expands it.
fn reasoning_lines(text: &str, expanded: bool) -> Vec<Line<'static>> {
    let dim = Style::default().fg(Color::DarkGray);
    let n = text.chars().count();
    let head = if expanded {
        format!("thinking ({n} chars) · Ctrl-O collapses")
    } else {
        format!("thinking … ({n} chars) · Ctrl-O expands")
    };
    let mut out = vec![Line::from(Span::styled(
        head,
        dim.add_modifier(Modifier::ITALIC),
    ))];
    if expanded {
        out.extend(
            sanitize(text)
                .lines()
                .map(|l| Line::from(Span::styled(format!("  {l}"), dim))),
        );
    }
    out
}

fn tool_lines(t: &ToolCell) -> Vec<Line<'static>> {
    let dim = Style::default().fg(Color::DarkGray);
    let (mark, mark_style) = match t.status.as_deref() {
        None => ("…", Style::default().fg(Color::Yellow)),
        Some("ok") | Some("completed") => ("✓", Style::default().fg(Color::Green)),
        Some(_) => ("✗", Style::default().fg(Color::Red)),
    };
    let title = if t.tool == "shell" {
        format!("$ {}", sanitize(&t.title))
    } else {
        format!("{} {}", t.tool, sanitize(&t.title))
    };
    let mut facts = Vec::new();
    if let Some(c) = t.exit_code {
        facts.push(format!("exit {c}"));
    }
    if let Some(d) = t.duration_ms {
        facts.push(format!("{d} ms"));
    }
    if let Some(v) = &t.approval {
        facts.push(v.decided_phrase());
    } else if let Some(st) = &t.status {
        if st != "ok" && st != "completed" {
            facts.push(st.clone());
        }
    }
    let mut head = vec![
        Span::styled(format!("{mark} "), mark_style),
        Span::styled(
            title.replace('\n', " "),
            Style::default().add_modifier(Modifier::BOLD),
        ),
    ];
    if !facts.is_empty() {
        head.push(Span::styled(format!("  {}", facts.join(" · ")), dim));
    }
    let mut out = vec![Line::from(head)];
    if let Some(d) = &t.diff {
        for l in d.lines() {
            let mut line = diff_line(&sanitize(l));
            line.spans.insert(0, Span::raw("  "));
            out.push(line);
        }
    }
    if let Some((h, tail, hidden)) = &t.output {
        for l in h {
            out.push(Line::from(Span::styled(format!("  │ {l}"), dim)));
        }
        if *hidden > 0 {
            out.push(Line::from(Span::styled(
                format!("  │ … {hidden} more lines (full output in the session)"),
                dim.add_modifier(Modifier::ITALIC),
            )));
        }
        for l in tail {
            out.push(Line::from(Span::styled(format!("  │ {l}"), dim)));
        }
    }
    out
}

fn diff_line(l: &str) -> Line<'static> {
    let st = if l.starts_with("+++") || l.starts_with("---") {
        Style::default().add_modifier(Modifier::BOLD)
    } else if l.starts_with('+') {
        Style::default().fg(Color::Green)
    } else if l.starts_with('-') {
        Style::default().fg(Color::Red)
    } else if l.starts_with("@@") {
        Style::default().fg(Color::Cyan)
    } else {
        Style::default()
    };
    Line::from(Span::styled(l.to_string(), st))
}

fn str_width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `s` cut to at most `w` columns.
fn clip(s: &str, w: usize) -> String {
    let mut used = 0;
    let mut out = String::new();
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw > w {
            break;
        }
        used += cw;
        out.push(c);
    }
    out
}

/// Hard-wrap a styled line at `width` columns (by character, so the row
/// count is exact and only visible cells need building).
pub fn wrap(line: Line<'static>, width: usize) -> Vec<Line<'static>> {
    if width == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for span in line.spans {
        let mut buf = String::new();
        for c in span.content.chars() {
            let cw = c.width().unwrap_or(0);
            if used + cw > width {
                if !buf.is_empty() {
                    cur.push(Span::styled(std::mem::take(&mut buf), span.style));
                }
                out.push(Line::from(std::mem::take(&mut cur)));
                used = 0;
            }
            buf.push(c);
            used += cw;
        }
        if !buf.is_empty() {
            cur.push(Span::styled(buf, span.style));
        }
    }
    out.push(Line::from(cur));
    out
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
