//! Hidden-Unicode detection (safety floor, gate 6).
//!
//! A command whose displayed text differs from what the shell runs is a
//! prompt-injection vector (Trojan Source, invisible tag payloads). The set
//! rejected is exactly the spec's: C0/C1 controls other than tab and
//! newline; bidi controls U+061C, U+200E, U+200F, U+202A–U+202E,
//! U+2066–U+2069; zero-width and invisible U+200B–U+200D, U+2060–U+2064,
//! U+FEFF, U+180E, U+00AD; tag characters U+E0000–U+E007F; variation
//! selectors that follow an ASCII character; and any other `Cf` code point
//! (general category from the maintained `unicode-general-category` crate).

use unicode_general_category::{get_general_category, GeneralCategory};

/// One hidden character found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hidden {
    pub ch: char,
    /// Character (not byte) position in the command.
    pub position: usize,
    pub what: &'static str,
}

fn is_variation_selector(c: char) -> bool {
    matches!(c as u32, 0xFE00..=0xFE0F | 0xE0100..=0xE01EF)
}

/// Why `c` is hidden, when it is (ignoring the variation-selector context rule).
fn classify(c: char) -> Option<&'static str> {
    let u = c as u32;
    match u {
        0x09 | 0x0A => None,
        0x00..=0x1F | 0x7F => Some("C0 control"),
        0x80..=0x9F => Some("C1 control"),
        0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069 => Some("bidi control"),
        0x200B..=0x200D | 0x2060..=0x2064 | 0xFEFF | 0x180E | 0x00AD => {
            Some("zero-width or invisible")
        }
        0xE0000..=0xE007F => Some("tag character"),
        _ if get_general_category(c) == GeneralCategory::Format => Some("format (Cf) character"),
        _ => None,
    }
}

/// Every hidden character in `text`, in order.
pub fn find_hidden(text: &str) -> Vec<Hidden> {
    let mut found = Vec::new();
    let mut prev: Option<char> = None;
    for (position, ch) in text.chars().enumerate() {
        let what = if is_variation_selector(ch) {
            prev.filter(char::is_ascii)
                .map(|_| "variation selector after ASCII")
        } else {
            classify(ch)
        };
        if let Some(what) = what {
            found.push(Hidden { ch, position, what });
        }
        prev = Some(ch);
    }
    found
}

/// The text with every hidden character shown as `<U+XXXX>` (and other
/// non-printing characters escaped), for the rejection message.
pub fn escape(text: &str) -> String {
    // One pass, in step with `find_hidden`'s positions (linear in the input).
    let hidden = find_hidden(text);
    let mut next = hidden.iter().map(|h| h.position).peekable();
    let mut s = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        let is_hidden = next.peek() == Some(&i);
        if is_hidden {
            next.next();
        }
        if is_hidden || (c.is_control() && c != '\n' && c != '\t') {
            s.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            s.push(c);
        }
    }
    s
}

/// The floor's rejection message, naming each code point and position.
pub fn rejection(text: &str) -> Option<String> {
    let found = find_hidden(text);
    if found.is_empty() {
        return None;
    }
    let list: Vec<String> = found
        .iter()
        .take(8)
        .map(|h| {
            format!(
                "U+{:04X} ({}) at position {}",
                h.ch as u32, h.what, h.position
            )
        })
        .collect();
    let more = if found.len() > 8 {
        format!(" and {} more", found.len() - 8)
    } else {
        String::new()
    };
    // Long commands are shown cut (the positions above still locate everything).
    const SHOWN: usize = 2000;
    let mut shown: String = escape(text).chars().take(SHOWN + 1).collect();
    if shown.chars().count() > SHOWN {
        shown = shown.chars().take(SHOWN).collect::<String>() + "…";
    }
    Some(format!(
        "hidden Unicode in the command: {}{more}; command as received: {shown}",
        list.join(", "),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn spec_set_is_rejected() {
        let cases = [
            '\u{0}',
            '\u{1b}',
            '\u{7f}',
            '\u{85}',
            '\u{061C}',
            '\u{200E}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2066}',
            '\u{2069}',
            '\u{200B}',
            '\u{200D}',
            '\u{2060}',
            '\u{2064}',
            '\u{FEFF}',
            '\u{180E}',
            '\u{00AD}',
            '\u{E0000}',
            '\u{E0041}',
            '\u{E007F}',
            '\u{0600}',
            '\u{FFF9}',
        ];
        for c in cases {
            let s = format!("ls{c} -la");
            let h = find_hidden(&s);
            assert_eq!(h.len(), 1, "U+{:04X}", c as u32);
            assert_eq!(h[0].position, 2);
            assert!(rejection(&s).is_some_and(|m| m.contains(&format!("U+{:04X}", c as u32))));
        }
    }

    #[test]
    fn ordinary_text_passes() {
        for s in [
            "ls -la\tx\ny",
            "echo héllo 日本語 🐋",
            "echo ❤\u{FE0F}",
            "rg 'a|b'",
        ] {
            assert!(find_hidden(s).is_empty(), "{s}");
        }
    }

    #[test]
    fn variation_selector_after_ascii() {
        assert_eq!(find_hidden("a\u{FE0F}").len(), 1);
        assert_eq!(find_hidden("a\u{E0100}").len(), 1);
        assert!(find_hidden("❤\u{FE0F}").is_empty());
    }

    #[test]
    fn escape_shows_code_points() {
        assert_eq!(escape("r\u{200B}m"), "r<U+200B>m");
    }
}
