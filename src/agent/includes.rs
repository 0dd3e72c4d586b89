//! `@path` includes in imported instruction files (`CLAUDE.md` and the
//! other names of `project_instruction_imports`), in the syntax Claude
//! Code documents for `CLAUDE.md` ("Import additional files": `@path`
//! after a space or at a line's start, not inside code spans or blocks,
//! at most five hops deep).
//!
//! Stricter than Claude Code: only a relative path is followed, resolved
//! against the including file's directory, with no `..`, and it must
//! resolve (symlinks followed) inside the workspace; it is read through the
//! file guard and bounded like any instruction file. Included text is for
//! the model, never configuration.

use std::path::{Component, Path, PathBuf};

/// Hops from an imported file to the deepest file it may pull in.
pub const MAX_DEPTH: usize = 5;

/// The `@path` references of `text`, in order: after whitespace or at a
/// line's start, outside fenced code blocks and inline code spans; `\ `
/// stands for a space in a path.
pub fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Even segments are outside inline code spans.
        for (i, seg) in line.split('`').enumerate() {
            if i % 2 == 1 {
                continue;
            }
            let mut prev_space = true;
            for (at, c) in seg.char_indices() {
                if c == '@' && prev_space {
                    let mut path = String::new();
                    let rest = &seg[at + 1..];
                    let mut it = rest.chars().peekable();
                    while let Some(ch) = it.next() {
                        if ch == '\\' && it.peek() == Some(&' ') {
                            path.push(' ');
                            it.next();
                        } else if ch.is_whitespace() {
                            break;
                        } else {
                            path.push(ch);
                        }
                    }
                    let path = path.trim_end_matches([',', ';', ':', ')']).to_string();
                    if !path.is_empty() {
                        out.push(path);
                    }
                }
                prev_space = c.is_whitespace();
            }
        }
    }
    out
}

/// Where `reference` (from the file `including`) points, if it may be
/// followed: `Ok(None)` when no such file exists (an `@name` that is not a
/// path), `Err(why)` when it is refused.
pub fn resolve(
    including: &Path,
    reference: &str,
    ws_real: &Path,
) -> Result<Option<PathBuf>, String> {
    let p = Path::new(reference);
    if p.is_absolute() || reference.starts_with('~') {
        return Err("absolute and home paths are not followed".into());
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("`..` is not followed".into());
    }
    let base = including.parent().unwrap_or(Path::new("."));
    let candidate = base.join(p);
    if !candidate.is_file() {
        return Ok(None);
    }
    let real = std::fs::canonicalize(&candidate).map_err(|e| e.to_string())?;
    if !real.starts_with(ws_real) {
        return Err(format!(
            "resolves outside the workspace ({}); not followed",
            real.display()
        ));
    }
    Ok(Some(candidate))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn references_outside_code_only() {
        let t = "See @docs/a.md and @b.md, mail me@x.org\n`@not/this.md`\n```\n@nor/this.md\n```\n@my\\ file.md\n";
        assert_eq!(references(t), vec!["docs/a.md", "b.md", "my file.md"]);
    }

    #[test]
    fn resolve_refuses_escapes() {
        let t = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("docs")).unwrap();
        std::fs::write(ws.join("docs/a.md"), "A").unwrap();
        std::fs::write(ws.parent().unwrap().join("out.md"), "OUT").unwrap();
        let inc = ws.join("CLAUDE.md");
        assert_eq!(
            resolve(&inc, "docs/a.md", &ws).unwrap(),
            Some(ws.join("docs/a.md"))
        );
        assert_eq!(resolve(&inc, "missing.md", &ws).unwrap(), None);
        assert!(resolve(&inc, "../out.md", &ws).unwrap_err().contains(".."));
        assert!(resolve(&inc, "/etc/passwd", &ws).is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(ws.parent().unwrap().join("out.md"), ws.join("link.md"))
                .unwrap();
            assert!(resolve(&inc, "link.md", &ws)
                .unwrap_err()
                .contains("outside"));
        }
    }
}
