//! Text from commands, files and the model is drawn as text, never as
//! terminal instructions: every escape sequence (CSI cursor moves and
//! screen clears, OSC titles and OSC 52 clipboard writes, DCS, ...) is
//! removed by `strip-ansi-escapes` (a `vte` parser, so a sequence split
//! oddly is still recognised), then any control character left (BEL,
//! backspace, carriage return, C1 controls) is dropped. Tabs become spaces
//! first (the stripper would drop them).

/// `text` with nothing a terminal would act on, except line feeds.
pub fn sanitize(text: &str) -> String {
    let tabs = text.replace('\t', "    ");
    let stripped = strip_ansi_escapes::strip_str(&tabs);
    stripped
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::sanitize;

    #[test]
    fn hostile_sequences_are_removed() {
        let hostile = concat!(
            "a\x1b[2J\x1b[H",            // clear screen, home
            "b\x1b]0;pwned title\x07",   // set title (BEL)
            "c\x1b]52;c;cHduZWQ=\x1b\\", // OSC 52 clipboard (ST)
            "d\x1b[10;10H\x1b[5A",       // cursor moves
            "e\x1bP+q544e\x1b\\",        // DCS
            "f\r\x08\x07\u{9b}31m",      // CR, BS, BEL, C1 CSI
            "g\tend\n"
        );
        let out = sanitize(hostile);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert!(!out.contains("pwned"), "{out:?}");
        assert!(
            out.starts_with("abcdef") && out.ends_with("g    end\n"),
            "{out:?}"
        );
    }

    #[test]
    fn plain_text_and_unicode_stay() {
        assert_eq!(sanitize("héllo — 世界\nok"), "héllo — 世界\nok");
    }
}
