//! The draft's view after a resize.
//!
//! ratatui-textarea keeps its scroll offset between frames and moves it
//! only as far as the cursor needs: a draft that was scrolled to keep the
//! cursor visible in a narrow (or short) terminal stays scrolled when the
//! terminal grows, so its first characters (or lines) are hidden although
//! they fit. To the person typing that looks like lost keys. On a resize
//! the offset goes back to the top-left and the cursor back where it was;
//! the next frame scrolls only if the cursor needs it at the new size.

use ratatui_textarea::{CursorMove, TextArea};

/// Forget the draft's scroll offset, keeping its text and cursor.
pub fn rewind_view(t: &mut TextArea) {
    let (top, left) = t.scroll_offset();
    if (top, left) == (0, 0) {
        return;
    }
    let cursor = t.cursor();
    let delta = |v: u16| -(i16::try_from(v).unwrap_or(i16::MAX));
    // Scrolling moves the cursor into the old viewport; it goes back
    // below (rows and columns of a draft fit in u16: the box is drawn).
    t.scroll((delta(top), delta(left)));
    let at = |v: usize| u16::try_from(v).unwrap_or(u16::MAX);
    t.move_cursor(CursorMove::Jump(at(cursor.0), at(cursor.1)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::widgets::Widget;

    fn draw(t: &TextArea, width: u16, height: u16) -> Vec<String> {
        let area = Rect::new(0, 0, width, height);
        let mut b = Buffer::empty(area);
        t.render(area, &mut b);
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| b[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    fn typed(lines: &[&str]) -> TextArea<'static> {
        let mut t = TextArea::default();
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                t.insert_newline();
            }
            t.insert_str(*l);
        }
        t
    }

    #[test]
    fn a_draft_scrolled_in_a_narrow_terminal_shows_whole_when_it_widens() {
        let mut t = typed(&["typed in the storm"]);
        // 18 columns: the cursor after the last char needs a 19th.
        assert_eq!(draw(&t, 18, 1), ["yped in the storm"]);
        // Without the rewind the wider frame keeps the offset.
        assert_eq!(draw(&t.clone(), 40, 1), ["yped in the storm"]);
        rewind_view(&mut t);
        assert_eq!(draw(&t, 40, 1), ["typed in the storm"]);
        // The cursor stayed at the end: the next key appends.
        assert_eq!(t.cursor(), (0, 18));
        t.insert_char('!');
        assert_eq!(t.lines(), ["typed in the storm!"]);
    }

    #[test]
    fn lines_scrolled_off_a_short_box_come_back_when_it_grows() {
        let mut t = typed(&["one", "two", "three"]);
        assert_eq!(draw(&t, 10, 1), ["three"]);
        rewind_view(&mut t);
        assert_eq!(draw(&t, 10, 3), ["one", "two", "three"]);
        assert_eq!(t.cursor(), (2, 5));
    }

    #[test]
    fn the_cursor_in_the_middle_stays_where_it_was() {
        let mut t = typed(&["abcdefghijklmnopqrstuvwxyz"]);
        t.move_cursor(CursorMove::Jump(0, 20));
        assert_eq!(draw(&t, 8, 1), ["nopqrstu"]);
        rewind_view(&mut t);
        assert_eq!(t.cursor(), (0, 20));
        assert_eq!(draw(&t, 30, 1), ["abcdefghijklmnopqrstuvwxyz"]);
        // Still narrow after the resize: scrolled again, just enough.
        rewind_view(&mut t);
        assert_eq!(draw(&t, 8, 1), ["nopqrstu"]);
    }

    #[test]
    fn an_unscrolled_draft_is_left_alone() {
        let mut t = typed(&["short"]);
        assert_eq!(draw(&t, 20, 1), ["short"]);
        rewind_view(&mut t);
        assert_eq!(t.cursor(), (0, 5));
        assert_eq!(draw(&t, 20, 1), ["short"]);
    }
}
