//! Durable session records: a thread of turns and items, appended as JSONL.
//!
//! Invariants:
//! - The trailing newline is the commit marker. Each event is written as one
//!   `write_all` of `json + "\n"` followed by `fsync`; a line without its
//!   newline was never committed.
//! - On start ([`recover_all`]), an unterminated last fragment is truncated
//!   away (and the file fsynced), never reused; a thread whose last turn
//!   neither completed nor was interrupted is marked interrupted.
//! - A live run holds an exclusive `flock` on its file, so recovery never
//!   touches a session that is still being written. Unix only: elsewhere
//!   there is no lock yet, so two concurrent runs on Windows can mark each
//!   other's open session interrupted (documented in `docs/EXEC.md`).

pub mod record;
mod store;

pub use record::{
    cost_label, ChangedFile, Event, Record, Verdict, SCHEMA, SNAPSHOT_EVENTS_VERSION, VERSION,
};
pub use store::{is_live, read_records, recover_all, recover_file, RecoveryReport, SessionLog};

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("session file {path}, line {line}: {source}")]
    Parse {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

impl SessionError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// `<codewhale home>/sessions`.
pub fn sessions_dir(home: &Path) -> PathBuf {
    home.join("sessions")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "store_tests.rs"]
mod tests;
