//! A leaf for errors in TOML files that name the file, the line and the
//! key. toml's errors carry a byte span; [`line_col`] and [`key_at`] turn it
//! into a line and column and recover the dotted key (`sandbox.backend`,
//! `rules[2].action`) from the text around it, so every message says where
//! to look. Both `config` and `authz` (its rules file) use it; neither
//! depends on the other for it.

use std::path::{Path, PathBuf};

/// Where in a file something went wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
    /// The dotted key at that position (`sandbox.backend`), when known.
    pub key: Option<String>,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)?;
        if let Some(k) = &self.key {
            write!(f, ", key `{k}`")?;
        }
        Ok(())
    }
}

/// A TOML file that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {location}: {message}")]
    Invalid {
        file: PathBuf,
        location: Location,
        message: String,
    },
}

/// Line and column (1-based) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// The dotted key whose line contains byte `offset`: the nearest `[table]`
/// or `[[array]]` header above it (with the array index) plus the key on
/// that line.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let (line_no, _) = line_col(text, offset);
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(line_no.checked_sub(1)?)?.trim();
    let own = if line.starts_with('[') {
        None
    } else {
        line.split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"').to_string())
            .filter(|k| !k.is_empty())
    };
    let mut header: Option<String> = None;
    for l in lines[..line_no.saturating_sub(1)].iter().rev() {
        let t = l.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let idx = lines[..line_no - 1]
                .iter()
                .filter(|x| x.trim().starts_with(&format!("[[{name}]]")))
                .count()
                .saturating_sub(1);
            header = Some(format!("{}[{idx}]", name.trim()));
            break;
        }
        if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            header = Some(name.trim().to_string());
            break;
        }
    }
    match (header, own) {
        (Some(h), Some(k)) => Some(format!("{h}.{k}")),
        (Some(h), None) => Some(h),
        (None, k) => k,
    }
}

/// Build a [`FileError::Invalid`] from a toml error.
pub fn from_toml(file: &Path, text: &str, err: &toml::de::Error) -> FileError {
    let (location, message) = match err.span() {
        Some(span) => {
            let (line, column) = line_col(text, span.start);
            let key = key_at(text, span.start);
            (Location { line, column, key }, err.message().to_string())
        }
        None => (Location::default(), err.message().to_string()),
    };
    FileError::Invalid {
        file: file.to_path_buf(),
        location,
        message,
    }
}

/// Build a [`FileError::Invalid`] for a semantic error at byte `offset`.
pub fn at(
    file: &Path,
    text: &str,
    offset: usize,
    key: &str,
    message: impl Into<String>,
) -> FileError {
    let (line, column) = line_col(text, offset);
    FileError::Invalid {
        file: file.to_path_buf(),
        location: Location {
            line,
            column,
            key: Some(key.to_string()),
        },
        message: message.into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_keys() {
        let t = "a = 1\n[sandbox]\nbackend = \"x\"\n[[rules]]\ntool='a'\n[[rules]]\naction = 3\n";
        let off = t.find("\"x\"").unwrap_or(0);
        assert_eq!(line_col(t, off), (3, 11));
        assert_eq!(key_at(t, off).as_deref(), Some("sandbox.backend"));
        let off = t.find("3").unwrap_or(0);
        assert_eq!(key_at(t, off).as_deref(), Some("rules[1].action"));
        assert_eq!(key_at(t, 0).as_deref(), Some("a"));
    }
}
