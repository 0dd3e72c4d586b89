//! The model's to-do list (`todo.updated`), shown above the input while a
//! goal is being worked on: one row per entry with a status mark, done
//! ones dimmed, the header counting what is done. Pure: [`lines`] gives
//! the rows for a width and a row budget (snapshot-tested in render).

use super::sanitize::sanitize;
use crate::runtime::served::{TodoItem, TodoStatus};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Rows the list may take at most (the header included).
pub const MAX_ROWS: usize = 8;

/// The mark shown before an entry.
pub fn mark(s: TodoStatus) -> &'static str {
    match s {
        TodoStatus::Pending => "[ ]",
        TodoStatus::InProgress => "[~]",
        TodoStatus::Done => "[x]",
        TodoStatus::Blocked => "[!]",
    }
}

/// The rows for `items` in `width` columns and at most `rows` rows. When
/// the list is longer, the entries still to do are kept first (done ones
/// are dropped before open ones) and the last row says how many are not
/// shown. Empty when there is no list or no room.
pub fn lines(items: &[TodoItem], width: u16, rows: usize) -> Vec<Line<'static>> {
    let rows = rows.min(MAX_ROWS);
    if items.is_empty() || rows < 2 {
        return Vec::new();
    }
    let done = items
        .iter()
        .filter(|t| t.status == TodoStatus::Done)
        .count();
    let mut out = vec![Line::from(Span::styled(
        format!("to-do {done}/{}", items.len()),
        Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD),
    ))];
    let room = rows - 1;
    let shown: Vec<&TodoItem> = if items.len() <= room {
        items.iter().collect()
    } else {
        // Keep the open entries (in order), then fill with done ones; the
        // last row tells how many are left out.
        let keep = room - 1;
        let mut open: Vec<&TodoItem> = items
            .iter()
            .filter(|t| t.status != TodoStatus::Done)
            .take(keep)
            .collect();
        if open.len() < keep {
            let more = keep - open.len();
            open.extend(
                items
                    .iter()
                    .filter(|t| t.status == TodoStatus::Done)
                    .take(more),
            );
            // Back in the list's order.
            open.sort_by_key(|t| items.iter().position(|i| i.id == t.id));
        }
        open
    };
    let w = width as usize;
    for t in &shown {
        let style = match t.status {
            TodoStatus::Done => Style::default().add_modifier(Modifier::DIM),
            TodoStatus::InProgress => Style::default().fg(Color::Yellow),
            TodoStatus::Blocked => Style::default().fg(Color::Red),
            TodoStatus::Pending => Style::default(),
        };
        let text = format!("{} {}", mark(t.status), sanitize(&t.text));
        out.push(Line::from(Span::styled(clip(&text, w), style)));
    }
    if shown.len() < items.len() {
        out.push(Line::from(Span::styled(
            format!("… {} more", items.len() - shown.len()),
            Style::default().add_modifier(Modifier::DIM),
        )));
    }
    out
}

/// `s` cut to `w` columns (by characters; the marks are ASCII).
fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn item(id: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            id: id.into(),
            text: format!("step {id}"),
            status,
        }
    }

    fn text(l: &[Line<'_>]) -> Vec<String> {
        l.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn each_entry_has_its_mark_and_the_header_counts_done() {
        let l = lines(
            &[
                item("1", TodoStatus::Done),
                item("2", TodoStatus::InProgress),
                item("3", TodoStatus::Blocked),
                item("4", TodoStatus::Pending),
            ],
            40,
            8,
        );
        assert_eq!(
            text(&l),
            vec![
                "to-do 1/4",
                "[x] step 1",
                "[~] step 2",
                "[!] step 3",
                "[ ] step 4"
            ]
        );
        assert!(lines(&[], 40, 8).is_empty());
        assert!(lines(&[item("1", TodoStatus::Done)], 40, 1).is_empty());
    }

    #[test]
    fn a_long_list_keeps_open_entries_and_says_how_many_are_hidden() {
        let mut items: Vec<TodoItem> = (1..=6)
            .map(|i| item(&i.to_string(), TodoStatus::Done))
            .collect();
        items.push(item("7", TodoStatus::Pending));
        items.push(item("8", TodoStatus::InProgress));
        let l = text(&lines(&items, 40, 5));
        assert_eq!(
            l,
            vec![
                "to-do 6/8",
                "[x] step 1",
                "[ ] step 7",
                "[~] step 8",
                "… 5 more"
            ]
        );
        // Narrow: clipped, never wrapped.
        let l = text(&lines(&items[6..], 6, 5));
        assert_eq!(l[1], "[ ] s…");
    }
}
