//! Drawing the `/provider` picker, its masked key field and the first
//! run's local-Ollama question, in the input's place. Pure (the snapshot
//! tests rely on it). The key field shows one bullet per character typed,
//! never a character of the key.

use super::first_run::{LocalAsk, STATE_FILE};
use super::provider_picker::{KeyEntry, Picker, Presence};
use super::sanitize::sanitize;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Rows of the provider list shown at once.
pub const LIST_ROWS: usize = 10;

/// The bullet a key character shows as.
pub const BULLET: char = '•';

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// The picker's lines (inside its box) and the box's title.
pub fn picker_lines(p: &Picker, width: u16) -> (String, Vec<Line<'static>>) {
    match &p.entry {
        Some(e) => (format!(" key for {} ", e.provider), entry_lines(e)),
        None => (" /provider ".into(), list_lines(p, width)),
    }
}

fn list_lines(p: &Picker, width: u16) -> Vec<Line<'static>> {
    let inner = width.saturating_sub(2) as usize;
    let vis = p.visible();
    let mut out = vec![Line::from(vec![
        Span::styled("filter ", dim()),
        Span::raw(sanitize(&p.filter)),
        Span::styled("▏", Style::default().fg(Color::Cyan)),
        Span::styled(format!("  {} of {}", vis.len(), p.rows.len()), dim()),
    ])];
    // A window of rows that keeps the selection in view.
    let start = p.selected.saturating_sub(LIST_ROWS - 1);
    let id_w = vis.iter().map(|r| r.id.chars().count()).max().unwrap_or(0);
    for (i, r) in vis.iter().enumerate().skip(start).take(LIST_ROWS) {
        let sel = i == p.selected;
        let mark = if sel { "› " } else { "  " };
        let status = match (r.local, r.key) {
            (true, _) | (_, Presence::NotNeeded) => "local, no key",
            (_, Presence::Set) => "key set",
            (_, Presence::Missing) => "no key",
        };
        let cur = if r.id == p.current { " (current)" } else { "" };
        let text = format!(
            "{mark}{:<id_w$}  {:<14} {}{cur}",
            r.id,
            status,
            sanitize(&r.name)
        );
        let text: String = text.chars().take(inner).collect();
        let style = if sel {
            Style::default()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD)
        } else if r.key == Presence::Missing && !r.local {
            dim()
        } else {
            Style::default()
        };
        out.push(Line::from(Span::styled(text, style)));
    }
    if vis.is_empty() {
        out.push(Line::from(Span::styled("  no provider matches", dim())));
    }
    out.push(Line::from(Span::styled(
        "type to filter · ↑↓ move · Enter choose (asks for a key if none) · Esc close",
        dim(),
    )));
    out
}

fn entry_lines(e: &KeyEntry) -> Vec<Line<'static>> {
    let bullets: String = std::iter::repeat_n(BULLET, e.secret.chars()).collect();
    let mut out = vec![
        Line::from(vec![
            Span::styled("key ", dim()),
            Span::raw(bullets),
            Span::styled("▏", Style::default().fg(Color::Cyan)),
        ]),
        Line::from(Span::styled(
            "stored as `codewhale auth set` stores it (auth.json, mode 0600); never shown",
            dim(),
        )),
    ];
    if let Some(n) = &e.note {
        out.push(Line::from(Span::styled(
            sanitize(n),
            Style::default().fg(Color::Red),
        )));
    }
    out.push(Line::from(Span::styled(
        "type or paste the key · Enter store · Esc back",
        dim(),
    )));
    out
}

/// The local-Ollama question's lines (inside its box).
pub fn ask_lines(a: &LocalAsk) -> Vec<Line<'static>> {
    vec![
        Line::from(Span::styled(
            format!("Use local Ollama model {}? y/N", sanitize(&a.model)),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(vec![
            Span::styled("at ", dim()),
            Span::raw(sanitize(&a.root)),
            Span::styled(" · no provider key is set up", dim()),
        ]),
        Line::from(vec![
            Span::styled("[y yes]", Style::default()),
            Span::raw(" "),
            Span::styled(
                "[n no, pick a provider]",
                Style::default()
                    .fg(Color::Black)
                    .bg(Color::Yellow)
                    .add_modifier(Modifier::BOLD),
            ),
        ]),
        Line::from(Span::styled(
            format!("asked once: the answer is kept in $CODEWHALE_HOME/{STATE_FILE}"),
            dim(),
        )),
    ]
}

/// The question in one line, for terminals too small for the box.
pub fn ask_fallback(a: &LocalAsk) -> Line<'static> {
    Line::from(Span::styled(
        format!("Use local Ollama model {}? y/[N]", sanitize(&a.model)),
        Style::default().fg(Color::Black).bg(Color::Yellow),
    ))
}

/// The picker in one line, for terminals too small for the box.
pub fn picker_fallback(p: &Picker) -> Line<'static> {
    let text = match &p.entry {
        Some(e) => format!(
            "key for {}: {}",
            e.provider,
            std::iter::repeat_n(BULLET, e.secret.chars()).collect::<String>()
        ),
        None => format!(
            "provider: {} › {} (Enter, Esc)",
            sanitize(&p.filter),
            p.selected_row().map(|r| r.id.as_str()).unwrap_or("none")
        ),
    };
    Line::from(Span::styled(
        text,
        Style::default().fg(Color::Black).bg(Color::Cyan),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "picker_render_tests.rs"]
mod tests;
