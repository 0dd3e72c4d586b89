//! Making recorded text safe to show: mask secrets, escape control and
//! bidi characters, then cut to a length limit — in that order.
//!
//! Masking comes first so a cut can never leave the visible half of a
//! secret behind (a 40-character token cut at 30 would no longer match the
//! token pattern). Escaping comes before the cut so the limit counts what
//! is shown, and the cut never splits an escape sequence.

use regex::Regex;
use std::sync::LazyLock;

/// A command line is shown up to this many characters.
pub const COMMAND_LIMIT: usize = 200;
/// A search query is shown up to this many characters.
pub const QUERY_LIMIT: usize = 120;
/// An error line is shown up to this many characters.
pub const ERROR_LIMIT: usize = 160;
/// The reason of a partial sandbox item is shown up to this many characters.
pub const PARTIAL_LIMIT: usize = 320;
/// A receipt title (the first line of the prompt).
pub const TITLE_LIMIT: usize = 80;
/// A path is shown up to this many characters.
pub const PATH_LIMIT: usize = 200;

/// What a masked secret is replaced with.
pub const MASK: &str = "***";

/// One masking rule: a pattern and its replacement (`$name` groups kept).
struct Rule {
    re: Regex,
    with: &'static str,
}

fn rule(pattern: &str, with: &'static str) -> Option<Rule> {
    // The patterns are constants tested below; a bad one would only ever
    // drop its own rule, never the others.
    Regex::new(pattern).ok().map(|re| Rule { re, with })
}

/// Applied in order: PEM blocks first (they contain `key`-like words), then
/// bearer tokens, well-known token shapes, and `key=value` pairs.
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        // A PEM block, or a BEGIN line whose END was cut off: all of it.
        rule(
            r"(?s)-----BEGIN [A-Z0-9 ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\z)",
            "[PEM block masked]",
        ),
        // `Authorization: Bearer xyz`, `bearer xyz`.
        rule(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+", "$1 ***"),
        rule(r"(?i)\b(basic)\s+[A-Za-z0-9+/=]{8,}", "$1 ***"),
        // Provider / forge tokens by their shape.
        rule(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{8,}", "sk-***"),
        rule(r"\b(gh[pousr]_|github_pat_)[A-Za-z0-9_]{16,}", "${1}***"),
        rule(r"\b(glpat-|xox[abposr]-)[A-Za-z0-9_-]{8,}", "${1}***"),
        rule(r"\bAKIA[0-9A-Z]{16}\b", "AKIA***"),
        // key=value / key: value for key-like names (also `--api-key=v`
        // and `--password v`), quoted or not.
        rule(
            r#"(?i)(?P<k>(?:--?|\b)[A-Za-z0-9_.-]*(?:key|token|secret|passw(?:or)?d|pwd|credential|auth)[A-Za-z0-9_.-]*)(?P<sep>\s*[=:]\s*|\s+)(?P<v>"[^"]*"|'[^']*'|[^\s"';&|]+)"#,
            "$k$sep***",
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// Replace secrets in `text` with [`MASK`] (keeping the key name or the
/// token's public prefix, so the reader knows what was there).
pub fn mask_secrets(text: &str) -> String {
    let mut s = text.to_string();
    for r in RULES.iter() {
        if r.re.is_match(&s) {
            s = mask_with(&r.re, &s, r.with);
        }
    }
    s
}

/// `key value` pairs separated only by whitespace are masked only when the
/// key looks like a flag (`--token v`) — `cat secret.txt` is not a secret.
fn mask_with(re: &Regex, s: &str, with: &str) -> String {
    re.replace_all(s, |c: &regex::Captures<'_>| {
        if let (Some(k), Some(sep)) = (c.name("k"), c.name("sep")) {
            let spaced = sep.as_str().trim().is_empty();
            if spaced && !k.as_str().starts_with('-') {
                return c[0].to_string();
            }
            // `Authorization: Bearer ***` was already masked by its own rule.
            let v = c.name("v").map_or("", |v| v.as_str());
            if v.eq_ignore_ascii_case("bearer") || v.eq_ignore_ascii_case("basic") {
                return c[0].to_string();
            }
        }
        let mut out = String::new();
        c.expand(with, &mut out);
        out
    })
    .into_owned()
}

/// Bidirectional-text controls that can make shown text read differently
/// from what it is (Trojan Source).
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// How one character is shown.
fn escaped(c: char) -> String {
    match c {
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        c if c.is_control() || is_bidi(c) => format!("\\u{{{:04x}}}", c as u32),
        c => c.to_string(),
    }
}

/// Escape control and bidi characters (no masking, no cut).
pub fn escape_controls(text: &str) -> String {
    text.chars().map(escaped).collect()
}

/// Mask, escape, then cut to `limit` characters (the last one an `…`
/// when cut). The result never exceeds `limit` characters.
pub fn clip(text: &str, limit: usize) -> String {
    let masked = mask_secrets(text);
    let pieces: Vec<String> = masked.chars().map(escaped).collect();
    let total: usize = pieces.iter().map(|p| p.chars().count()).sum();
    if total <= limit {
        return pieces.concat();
    }
    let mut out = String::new();
    let mut used = 0;
    for p in &pieces {
        let n = p.chars().count();
        if used + n + 1 > limit {
            break;
        }
        out.push_str(p);
        used += n;
    }
    if limit > 0 {
        out.push('…');
    }
    out
}

/// The first non-empty line of `text`, clipped (for error lines and titles).
pub fn first_line(text: &str, limit: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = text.trim().lines().count() > 1;
    let clipped = clip(line.trim(), limit);
    if more && !clipped.ends_with('…') && clipped.chars().count() < limit {
        format!("{clipped}…")
    } else {
        clipped
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// `rule()` drops a pattern that does not compile; none may.
    #[test]
    fn every_masking_rule_compiles() {
        assert_eq!(RULES.len(), 8);
    }

    #[test]
    fn clip_never_exceeds_the_limit() {
        for limit in 0..12 {
            let s = clip("ab\u{202e}cd\nef API_KEY=zzzzzz", limit);
            assert!(s.chars().count() <= limit.max(1), "{limit}: {s}");
        }
    }
}
