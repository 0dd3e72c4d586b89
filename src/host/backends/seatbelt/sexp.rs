//! A tiny S-expression reader for SBPL, enough to check a generated profile
//! is well formed and to find every `(param "X")` it uses.
//!
//! Hand-written because SBPL's `#"…"` raw-string regex literals are not
//! accepted by the general-purpose Lisp readers on crates.io. It is a
//! checker, not an SBPL compiler: it knows lists, atoms, strings, raw
//! strings and `;` comments.

use std::collections::BTreeSet;

/// One parsed form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sexp {
    Atom(String),
    /// `"…"` (escapes resolved).
    Str(String),
    /// `#"…"` (a regex literal; backslashes kept).
    RawStr(String),
    List(Vec<Sexp>),
}

/// A syntax error with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SBPL line {line}: {msg}")]
pub struct SexpError {
    pub line: usize,
    pub msg: String,
}

/// Parse every top-level form of `text`.
pub fn parse(text: &str) -> Result<Vec<Sexp>, SexpError> {
    let mut stack: Vec<(usize, Vec<Sexp>)> = vec![(0, Vec::new())];
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    let err = |line, msg: &str| SexpError {
        line,
        msg: msg.to_string(),
    };
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '(' => stack.push((line, Vec::new())),
            ')' => {
                if stack.len() == 1 {
                    return Err(err(line, "unbalanced ')'"));
                }
                let (_, items) = stack.pop().unwrap_or_default();
                if let Some((_, parent)) = stack.last_mut() {
                    parent.push(Sexp::List(items));
                }
            }
            '"' | '#' => {
                let raw = c == '#';
                if raw && chars.next() != Some('"') {
                    return Err(err(line, "'#' must start a #\"…\" literal"));
                }
                let start = line;
                let mut s = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' if !raw => match chars.next() {
                            Some(e) => s.push(e),
                            None => break,
                        },
                        '\n' => {
                            line += 1;
                            s.push(c);
                        }
                        c => s.push(c),
                    }
                }
                if !closed {
                    return Err(err(start, "unterminated string"));
                }
                let form = if raw { Sexp::RawStr(s) } else { Sexp::Str(s) };
                if let Some((_, top)) = stack.last_mut() {
                    top.push(form);
                }
            }
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || n == '(' || n == ')' || n == '"' || n == ';' {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                if let Some((_, top)) = stack.last_mut() {
                    top.push(Sexp::Atom(s));
                }
            }
        }
    }
    if stack.len() > 1 {
        let open = stack.last().map(|(l, _)| *l).unwrap_or(line);
        return Err(err(open, "unclosed '(' opened here"));
    }
    Ok(stack.pop().map(|(_, v)| v).unwrap_or_default())
}

/// Every name used as `(param "NAME")` anywhere in `forms`.
pub fn params_used(forms: &[Sexp]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    fn walk(f: &Sexp, out: &mut BTreeSet<String>) {
        if let Sexp::List(items) = f {
            if let [Sexp::Atom(head), Sexp::Str(name)] = items.as_slice() {
                if head == "param" {
                    out.insert(name.clone());
                }
            }
            for i in items {
                walk(i, out);
            }
        }
    }
    for f in forms {
        walk(f, &mut out);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_sbpl_shapes() {
        let f = parse("(version 1) ; c\n(allow x (regex #\"^/a\\.b$\") (param \"W\"))").unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(
            f[1],
            Sexp::List(vec![
                Sexp::Atom("allow".into()),
                Sexp::Atom("x".into()),
                Sexp::List(vec![
                    Sexp::Atom("regex".into()),
                    Sexp::RawStr("^/a\\.b$".into())
                ]),
                Sexp::List(vec![Sexp::Atom("param".into()), Sexp::Str("W".into())]),
            ])
        );
        assert_eq!(
            params_used(&f).into_iter().collect::<Vec<_>>(),
            vec!["W".to_string()]
        );
    }

    #[test]
    fn rejects_unbalanced_and_unterminated() {
        assert_eq!(parse("(a\n(b)").unwrap_err().line, 1);
        assert_eq!(parse("(a))").unwrap_err().msg, "unbalanced ')'");
        assert!(parse("(a \"x)").is_err());
        assert!(parse("(a #x)").is_err());
        // A ')' inside a comment or string does not count.
        assert!(parse("(a \")\") ; )\n").is_ok());
    }
}
