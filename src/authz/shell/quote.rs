//! ANSI-C quoting (`$'…'`), decoded as bash decodes it so that
//! `$'\x72m'` is seen as `rm`.

/// `$'…'`: decode the escapes bash decodes (so `$'\x72m'` is `rm`).
pub(crate) fn ansi_c(s: &[char], mut pos: usize, out: &mut String) -> Result<usize, String> {
    loop {
        let Some(c) = s.get(pos).copied() else {
            return Err("unterminated $'…' quote".into());
        };
        pos += 1;
        match c {
            '\'' => return Ok(pos),
            '\\' => {
                let Some(e) = s.get(pos).copied() else {
                    return Err("unterminated $'…' quote".into());
                };
                pos += 1;
                let simple = match e {
                    'n' => Some('\n'),
                    't' => Some('\t'),
                    'r' => Some('\r'),
                    'a' => Some('\x07'),
                    'b' => Some('\x08'),
                    'e' | 'E' => Some('\x1b'),
                    'f' => Some('\x0c'),
                    'v' => Some('\x0b'),
                    '\\' | '\'' | '"' | '?' => Some(e),
                    _ => None,
                };
                if let Some(ch) = simple {
                    out.push(ch);
                    continue;
                }
                let (radix, max) = match e {
                    'x' => (16, 2),
                    'u' => (16, 4),
                    'U' => (16, 8),
                    '0'..='7' => {
                        pos -= 1;
                        (8, 3)
                    }
                    _ => {
                        out.push('\\');
                        out.push(e);
                        continue;
                    }
                };
                let mut v: u32 = 0;
                let mut n = 0;
                while n < max {
                    match s.get(pos).copied().and_then(|d| d.to_digit(radix)) {
                        Some(d) => {
                            v = v.saturating_mul(radix).saturating_add(d);
                            pos += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push(char::from_u32(v).unwrap_or('\u{FFFD}'));
                }
            }
            other => out.push(other),
        }
    }
}
