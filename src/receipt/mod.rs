//! Receipts: what a session did and did not do, rebuilt read-only from its
//! session file.
//!
//! Invariants:
//! - Read-only: building a receipt reads one session file and nothing
//!   else — no model call, no tool run, no file write, not even the
//!   snapshot store (the diffs it needs were saved into the session when
//!   the run took its snapshots). The same file always gives the same
//!   receipt.
//! - Every recorded string shown is masked for secrets, then escaped
//!   (control and bidi characters), then clipped ([`sanitize`]), in that
//!   order. Raw tool output and model reasoning are never exported.
//! - A receipt states its own limits: `not_recorded` and `claim_ceiling`
//!   (a local record, not a safety certification).

pub mod build;
pub mod markdown;
pub mod model;
pub mod sanitize;

pub use build::build;
pub use markdown::render as render_markdown;
pub use model::{Receipt, CLAIM_CEILING, MAX_ACTIONS, RECEIPT_SCHEMA};

use crate::session::{read_records, SessionError};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("session file {path} has no committed records")]
    Empty { path: PathBuf },
    #[error("session file {path} has no turn {turn} (it has turns 1 to {turns})")]
    NoSuchTurn {
        path: PathBuf,
        turn: u32,
        turns: u32,
    },
    #[error("no session {id} in {dir}")]
    NoSuchSession { id: String, dir: PathBuf },
    #[error("no sessions in {dir} yet (run `codewhale exec` first)")]
    NoSessions { dir: PathBuf },
    #[error("cannot read the sessions directory {dir}: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// The receipt of the session file at `path`.
pub fn from_file(path: &Path, turn: Option<u32>) -> Result<Receipt, ReceiptError> {
    let records = read_records(path)?;
    build(&records, path, turn)
}

/// The session file for `id` in `dir`: a thread id (the file stem), or a
/// path to a `.jsonl` file.
pub fn find_session(dir: &Path, id: &str) -> Result<PathBuf, ReceiptError> {
    let as_path = Path::new(id);
    if id.ends_with(".jsonl") && as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    let candidate = dir.join(format!("{id}.jsonl"));
    if !id.contains(['/', '\\']) && candidate.is_file() {
        return Ok(candidate);
    }
    Err(ReceiptError::NoSuchSession {
        id: id.to_string(),
        dir: dir.to_path_buf(),
    })
}

/// The most recent session file in `dir`: the one started last. Thread ids
/// begin with their UTC start time (`YYYYMMDDTHHMMSS`), so that prefix
/// orders them; the modified time breaks ties within one second. (Modified
/// time alone would not do: recovering an old session appends to it.)
pub fn last_session(dir: &Path) -> Result<PathBuf, ReceiptError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReceiptError::NoSessions {
                dir: dir.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(ReceiptError::Dir {
                dir: dir.to_path_buf(),
                source,
            })
        }
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| {
            let m = std::fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            let stamp: String = stem.chars().take(15).collect();
            Some(((stamp, m, stem), p))
        })
        .max()
        .map(|(_, p)| p)
        .ok_or_else(|| ReceiptError::NoSessions {
            dir: dir.to_path_buf(),
        })
}
