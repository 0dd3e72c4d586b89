//! Appending, reading and recovering session files.

use super::record::{Event, Record, SCHEMA, VERSION};
use super::SessionError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

#[cfg(unix)]
type Locked = nix::fcntl::Flock<File>;
#[cfg(not(unix))]
type Locked = File;

/// Take the exclusive advisory lock without blocking; `None` if another
/// process holds it (a live run).
#[cfg(unix)]
fn try_lock(f: File) -> Option<Locked> {
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).ok()
}
#[cfg(not(unix))]
fn try_lock(f: File) -> Option<Locked> {
    Some(f)
}

/// Session files hold prompts and tool output: keep the directory private
/// to the user (0700 on Unix when codewhale creates it).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// An open, locked session file being appended to.
pub struct SessionLog {
    path: PathBuf,
    file: Locked,
    thread: String,
    seq: u64,
}

impl SessionLog {
    /// Create a new thread file under `dir`.
    pub fn create(dir: &Path) -> Result<Self, SessionError> {
        create_private_dir(dir).map_err(|e| SessionError::io(dir, e))?;
        let stamp = time::OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year][month][day]T[hour][minute][second]"
            ))
            .unwrap_or_default();
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        let thread = format!("{stamp}-{}", &uuid[..12]);
        let path = dir.join(format!("{thread}.jsonl"));
        let f = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| SessionError::io(&path, e))?;
        let file = try_lock(f).ok_or_else(|| {
            SessionError::io(
                &path,
                std::io::Error::other("cannot lock a fresh session file"),
            )
        })?;
        Ok(SessionLog {
            path,
            file,
            thread,
            seq: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// Append one event. It is written (visible to every reader, and kept
    /// if this process dies) before this returns; a record that precedes
    /// a side effect or ends a turn ([`Event::is_commit_point`]) is also
    /// made durable (`fdatasync`), which covers every record before it.
    /// Group commit: a model's streamed text or a child's start-up is not
    /// worth a disk flush each, a tool call is.
    pub fn append(&mut self, turn: u32, event: Event) -> Result<u64, SessionError> {
        let durable = event.is_commit_point();
        self.seq += 1;
        let rec = Record {
            schema: SCHEMA.to_string(),
            v: VERSION,
            seq: self.seq,
            ts: now(),
            thread: self.thread.clone(),
            turn,
            event,
        };
        let mut line = serde_json::to_string(&rec).map_err(|e| {
            SessionError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        line.push('\n');
        let f: &mut File = &mut self.file;
        f.write_all(line.as_bytes())
            .and_then(|_| if durable { f.sync_data() } else { Ok(()) })
            .map_err(|e| SessionError::io(&self.path, e))?;
        Ok(self.seq)
    }
}

/// Every committed record of a file (an unterminated tail is ignored).
pub fn read_records(path: &Path) -> Result<Vec<Record>, SessionError> {
    let text = std::fs::read_to_string(path).map_err(|e| SessionError::io(path, e))?;
    parse_committed(path, &text)
}

fn parse_committed(path: &Path, text: &str) -> Result<Vec<Record>, SessionError> {
    let committed = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    committed
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| SessionError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// Whether a live run holds `path`'s lock (it is being written now). A
/// file that cannot be opened is not live.
pub fn is_live(path: &Path) -> bool {
    match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => try_lock(f).is_none(),
        Err(_) => false,
    }
}

/// What recovery did to one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub path: PathBuf,
    /// Bytes of an uncommitted tail removed.
    pub truncated_bytes: u64,
    /// The turn marked interrupted, if one was open.
    pub interrupted_turn: Option<u32>,
    /// The thread was closed as `interrupted`.
    pub closed: bool,
}

/// Repair one session file, unless a live run holds its lock (`Ok(None)`)
/// or it needs nothing.
pub fn recover_file(path: &Path) -> Result<Option<RecoveryReport>, SessionError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| SessionError::io(path, e))?;
    let Some(mut file) = try_lock(f) else {
        return Ok(None);
    };
    let io = |e| SessionError::io(path, e);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let truncated_bytes = (bytes.len() - keep) as u64;
    if truncated_bytes > 0 {
        file.set_len(keep as u64).map_err(io)?;
        file.sync_all().map_err(io)?;
    }
    let text = String::from_utf8_lossy(&bytes[..keep]);
    let records = parse_committed(path, &text)?;
    let Some(last) = records.last() else {
        return Ok((truncated_bytes > 0).then(|| RecoveryReport {
            path: path.to_path_buf(),
            truncated_bytes,
            ..Default::default()
        }));
    };
    let thread_done = records
        .iter()
        .any(|r| matches!(r.event, Event::ThreadCompleted { .. }));
    if thread_done && truncated_bytes == 0 {
        return Ok(None);
    }
    let mut open_turn = None;
    for r in &records {
        match r.event {
            Event::TurnStarted => open_turn = Some(r.turn),
            Event::TurnCompleted | Event::TurnInterrupted { .. } => open_turn = None,
            _ => {}
        }
    }
    let mut seq = last.seq;
    let thread = last.thread.clone();
    let mut lines = String::new();
    let mut push = |turn: u32, event: Event| -> Result<(), SessionError> {
        seq += 1;
        let rec = Record {
            schema: SCHEMA.to_string(),
            v: VERSION,
            seq,
            ts: now(),
            thread: thread.clone(),
            turn,
            event,
        };
        let l = serde_json::to_string(&rec).map_err(|e| {
            SessionError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        lines.push_str(&l);
        lines.push('\n');
        Ok(())
    };
    push(0, Event::Recovered { truncated_bytes })?;
    if let Some(t) = open_turn {
        push(
            t,
            Event::TurnInterrupted {
                reason: "the process ended mid-turn (found on recovery)".into(),
            },
        )?;
    }
    if !thread_done {
        push(
            0,
            Event::ThreadCompleted {
                status: "interrupted".into(),
            },
        )?;
    }
    file.seek(SeekFrom::End(0)).map_err(io)?;
    file.write_all(lines.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(Some(RecoveryReport {
        path: path.to_path_buf(),
        truncated_bytes,
        interrupted_turn: open_turn,
        closed: !thread_done,
    }))
}

/// Recover every `*.jsonl` under `dir` (missing dir = nothing to do).
pub fn recover_all(dir: &Path) -> Result<Vec<RecoveryReport>, SessionError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "jsonl") {
            if let Some(r) = recover_file(&p)? {
                out.push(r);
            }
        }
    }
    Ok(out)
}
