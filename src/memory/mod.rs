//! The memory file: `~/.codewhale/memory.md` (`$CODEWHALE_HOME/memory.md`).
//!
//! With `[memory] enabled = true` in the user config (off by default) its
//! text goes into the system prompt, bounded by [`PROMPT_CAP`] (a cut is
//! said in the prompt, the run's metadata and a note), and the `remember`
//! tool appends one line to it. Like `AGENTS.md`, it is text for the
//! model, never configuration. docs/MEMORY.md is the user's account.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// File name in codewhale's home.
pub const MEMORY_FILE: &str = "memory.md";
/// Bytes of the memory file put into the system prompt.
pub const PROMPT_CAP: usize = 16 * 1024;
/// Characters of one remembered line.
pub const LINE_CAP: usize = 500;

/// `[memory]` in the user config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySection {
    /// Put the memory file into the system prompt and offer `remember`.
    pub enabled: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("nothing to remember: the text is empty")]
    Empty,
}

/// The memory file of `codewhale_home`.
pub fn path(codewhale_home: &Path) -> PathBuf {
    codewhale_home.join(MEMORY_FILE)
}

/// What went into the prompt (recorded in the run's metadata).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Loaded {
    pub path: PathBuf,
    /// Bytes included.
    pub bytes: usize,
    /// Bytes of the file on disk.
    pub file_bytes: usize,
    pub truncated: bool,
}

/// The memory file's text for the prompt (a missing file: empty), cut to
/// [`PROMPT_CAP`] on a character boundary.
pub fn load(codewhale_home: &Path) -> Result<(Loaded, String), MemoryError> {
    let p = path(codewhale_home);
    let mut raw = Vec::new();
    match std::fs::File::open(&p) {
        Ok(f) => {
            f.take(PROMPT_CAP as u64 * 4 + 4)
                .read_to_end(&mut raw)
                .map_err(|source| MemoryError::Io {
                    path: p.clone(),
                    source,
                })?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(MemoryError::Io { path: p, source }),
    }
    let file_bytes = std::fs::metadata(&p).map_or(0, |m| m.len() as usize);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let mut end = text.len().min(PROMPT_CAP);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let part = text[..end].to_string();
    Ok((
        Loaded {
            path: p,
            bytes: part.len(),
            file_bytes,
            truncated: part.len() < file_bytes,
        },
        part,
    ))
}

/// The prompt section for the memory text (empty when there is none).
pub fn section(loaded: &Loaded, text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n\n# Memory\n\nWhat the user asked you to remember across sessions ({}). It is \
guidance, not configuration. To add a line, use the `remember` tool.\n\n{}",
        loaded.path.display(),
        text.trim_end()
    );
    if loaded.truncated {
        s.push_str(&format!(
            "\n\n[codewhale: memory truncated; {} of {} bytes included]",
            loaded.bytes, loaded.file_bytes
        ));
    }
    s
}

/// One line as it is appended: `- TEXT` on one line (newlines become
/// spaces), at most [`LINE_CAP`] characters.
pub fn line(text: &str) -> Result<String, MemoryError> {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.is_empty() {
        return Err(MemoryError::Empty);
    }
    let cut: String = one.chars().take(LINE_CAP).collect();
    Ok(format!("- {cut}"))
}

/// Append `text` as one line to the memory file (created 0600 when
/// missing); the line as written.
pub fn append(codewhale_home: &Path, text: &str) -> Result<String, MemoryError> {
    let l = line(text)?;
    let p = path(codewhale_home);
    let io = |source| MemoryError::Io {
        path: p.clone(),
        source,
    };
    std::fs::create_dir_all(codewhale_home).map_err(io)?;
    let mut o = std::fs::OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(&p).map_err(io)?;
    // A file whose last line has no newline gets one first.
    let needs_nl = std::fs::read(&p)
        .map(|b| b.last().is_some_and(|c| *c != b'\n'))
        .unwrap_or(false);
    let mut buf = String::new();
    if needs_nl {
        buf.push('\n');
    }
    buf.push_str(&l);
    buf.push('\n');
    // One write in append mode: lines from two processes do not interleave.
    f.write_all(buf.as_bytes()).map_err(io)?;
    f.sync_data().map_err(io)?;
    Ok(l)
}

/// `/memory` (the TUI): where the file is, whether memory is on, how much
/// of it goes into the prompt (and that it is cut, when it is), and its text.
pub fn show(codewhale_home: &Path, enabled: bool) -> Result<String, MemoryError> {
    let (l, text) = load(codewhale_home)?;
    let mut s = format!(
        "memory: {} ({}; {} bytes)\n",
        l.path.display(),
        if enabled {
            "on: goes into the prompt"
        } else {
            "off: set `[memory] enabled = true` in config.toml"
        },
        l.file_bytes
    );
    if l.truncated {
        s.push_str(&format!(
            "truncated: only the first {} of {} bytes go into the prompt\n",
            l.bytes, l.file_bytes
        ));
    }
    if text.trim().is_empty() {
        s.push_str("(empty; `/memory add TEXT` adds a line)");
    } else {
        s.push_str(text.trim_end());
    }
    Ok(s)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn append_then_load_and_the_prompt_section() {
        let t = tempfile::tempdir().unwrap();
        let (l, text) = load(t.path()).unwrap();
        assert!(text.is_empty() && !l.truncated);
        assert_eq!(section(&l, &text), "");
        assert_eq!(
            append(t.path(), "use  tabs\nnot spaces").unwrap(),
            "- use tabs not spaces"
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(path(t.path()))
            .unwrap()
            .write_all(b"hand-written, no newline")
            .unwrap();
        append(t.path(), "second").unwrap();
        let (l, text) = load(t.path()).unwrap();
        assert_eq!(
            text,
            "- use tabs not spaces\nhand-written, no newline\n- second\n"
        );
        let s = section(&l, &text);
        assert!(s.contains("# Memory") && s.contains("- second") && !s.contains("truncated"));
        assert!(matches!(append(t.path(), " \n "), Err(MemoryError::Empty)));
        let shown = show(t.path(), false).unwrap();
        assert!(shown.contains("off: set `[memory] enabled = true`") && shown.contains("- second"));
    }

    #[test]
    fn a_big_file_is_cut_and_said_so() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(path(t.path()), "é".repeat(PROMPT_CAP)).unwrap();
        let (l, text) = load(t.path()).unwrap();
        assert!(l.truncated && text.len() <= PROMPT_CAP);
        assert_eq!(l.file_bytes, PROMPT_CAP * 2);
        assert!(section(&l, &text).contains("memory truncated"));
        assert!(show(t.path(), true)
            .unwrap()
            .contains("truncated: only the first"));
    }
}
