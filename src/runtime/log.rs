//! The runtime's one append-only event log (`<codewhale home>/runtime/events.jsonl`).
//!
//! Invariants:
//! - The trailing newline is an append's commit marker: every append is one
//!   `write` of whole lines followed by `fdatasync`, and nothing is
//!   published before that returns.
//! - `seq` is global across all threads, strictly increasing, and never
//!   reused. Writers in several processes (`exec`, `app-server`) share the
//!   file under an exclusive `flock` held for each append; before writing,
//!   a writer reads what others appended since its last look, so it
//!   continues their sequence.
//! - A final fragment without its newline, found while holding the lock, is
//!   a dead writer's uncommitted append (live writers hold the lock while
//!   they write): it is truncated and fsynced even if it parses, and the
//!   sequence number it had reserved is skipped. A `runtime.recovered`
//!   marker carrying that number is committed in the same lock hold, so the
//!   skip survives another restart (the window between the truncation's
//!   fsync and the marker's is the one place a second crash can let the
//!   number be handed out again; nobody can have seen it, as it was never
//!   committed).
//! - A newline-terminated line that is not a valid record, or whose `seq`
//!   does not increase, is not crash debris: replay fails with the file and
//!   line, and nothing is truncated or rewritten.
//!
//! Windows has no `flock` here yet: a second process writing the same log
//! concurrently is not excluded there (documented in docs/RUNTIME_API.md).

use super::event::{LogRecord, NewEvent, LOG_SCHEMA, LOG_VERSION};
use super::model::now_rfc3339;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("runtime event log {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("runtime event log {path}, line {line}: not a valid event record ({reason}); the log is left as it is")]
    Malformed {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What opening the log found at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TornTail {
    /// Bytes of the uncommitted fragment removed.
    pub truncated_bytes: u64,
    /// The sequence number that fragment had reserved (never handed out).
    pub skipped_seq: u64,
}

/// An open event log: the file, how far this process has read it, and the
/// highest sequence number seen or reserved.
pub struct EventLog {
    path: PathBuf,
    file: File,
    /// Bytes of complete lines consumed.
    offset: u64,
    /// Complete lines consumed (for error messages).
    lines: usize,
    last_seq: u64,
}

/// Complete lines parsed from a byte range, and the unterminated rest.
struct Scan {
    records: Vec<LogRecord>,
    consumed: u64,
    lines: usize,
    fragment: Vec<u8>,
}

impl EventLog {
    /// Open (creating it if needed) the log under `dir`, replay every
    /// committed record, and repair a torn tail.
    pub fn open(dir: &Path) -> Result<(EventLog, Vec<LogRecord>, Option<TornTail>), LogError> {
        create_private_dir(dir).map_err(io_err(dir))?;
        let path = dir.join("events.jsonl");
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let mut log = EventLog {
            path,
            file,
            offset: 0,
            lines: 0,
            last_seq: 0,
        };
        let (records, torn) = {
            let _lock = FileLock::exclusive(&log.file).map_err(io_err(&log.path))?;
            let scan = log.scan()?;
            log.consume(&scan);
            let torn = if scan.fragment.is_empty() {
                None
            } else {
                let t = log.cut_fragment(&scan.fragment)?;
                let marker = log.stamp(vec![recovered_marker(&t)], Some(t.skipped_seq + 1));
                log.write_records(&marker)?;
                Some(t)
            };
            (scan.records, torn)
        };
        Ok((log, records, torn))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The highest sequence number committed or reserved so far (as far as
    /// this process has read).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Append events durably (one write, one `fdatasync`). Returns first
    /// what other processes committed since this one last read (in order,
    /// to be applied before), then the new records.
    pub fn append(
        &mut self,
        events: Vec<NewEvent>,
    ) -> Result<(Vec<LogRecord>, Vec<LogRecord>), LogError> {
        let _lock = FileLock::exclusive(&self.file).map_err(io_err(&self.path))?;
        let scan = self.scan()?;
        self.consume(&scan);
        let mut foreign = scan.records;
        let mut events = events;
        let mut first = None;
        if !scan.fragment.is_empty() {
            let t = self.cut_fragment(&scan.fragment)?;
            events.insert(0, recovered_marker(&t));
            first = Some(t.skipped_seq + 1);
        }
        let mut records = self.stamp(events, first);
        self.write_records(&records)?;
        if first.is_some() {
            // The marker is this process's own record, but callers asked
            // only for theirs: hand it over with the foreign ones.
            foreign.push(records.remove(0));
        }
        Ok((foreign, records))
    }

    /// Records other processes committed since the last look, without
    /// taking the lock (an unterminated tail may be a live writer's and is
    /// left alone).
    pub fn poll(&mut self) -> Result<Vec<LogRecord>, LogError> {
        let len = self.file.metadata().map_err(io_err(&self.path))?.len();
        if len <= self.offset {
            return Ok(Vec::new());
        }
        let scan = self.scan()?;
        self.consume(&scan);
        Ok(scan.records)
    }

    fn consume(&mut self, scan: &Scan) {
        self.offset += scan.consumed;
        self.lines += scan.lines;
        if let Some(r) = scan.records.last() {
            self.last_seq = self.last_seq.max(r.seq);
        }
    }

    /// Read from `offset` to the end and parse the complete lines.
    fn scan(&self) -> Result<Scan, LogError> {
        let bytes = read_from(&self.file, self.offset).map_err(io_err(&self.path))?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let mut records = Vec::new();
        let mut last = self.last_seq;
        let mut lines = 0;
        for raw in bytes[..complete].split_inclusive(|b| *b == b'\n') {
            let raw = &raw[..raw.len() - 1];
            lines += 1;
            let line = self.lines + lines;
            let bad = |reason: String| LogError::Malformed {
                path: self.path.clone(),
                line,
                reason,
            };
            let rec: LogRecord = serde_json::from_slice(raw).map_err(|e| bad(e.to_string()))?;
            if rec.schema != LOG_SCHEMA {
                return Err(bad(format!(
                    "schema `{}`, expected `{LOG_SCHEMA}`",
                    rec.schema
                )));
            }
            if rec.seq <= last {
                return Err(bad(format!(
                    "seq {} does not increase (the previous record has {last})",
                    rec.seq
                )));
            }
            last = rec.seq;
            records.push(rec);
        }
        Ok(Scan {
            records,
            consumed: complete as u64,
            lines,
            fragment: bytes[complete..].to_vec(),
        })
    }

    /// Remove an uncommitted fragment (caller holds the lock) and reserve
    /// its sequence number for good.
    fn cut_fragment(&mut self, fragment: &[u8]) -> Result<TornTail, LogError> {
        self.file.set_len(self.offset).map_err(io_err(&self.path))?;
        self.file.sync_all().map_err(io_err(&self.path))?;
        let skipped = fragment_seq(fragment).unwrap_or(0).max(self.last_seq + 1);
        self.last_seq = skipped;
        Ok(TornTail {
            truncated_bytes: fragment.len() as u64,
            skipped_seq: skipped,
        })
    }

    /// Give events their sequence numbers (from `first`, else the next).
    fn stamp(&mut self, events: Vec<NewEvent>, first: Option<u64>) -> Vec<LogRecord> {
        let ts = now_rfc3339();
        let mut seq = first.unwrap_or(self.last_seq + 1);
        events
            .into_iter()
            .map(|e| {
                let r = LogRecord {
                    seq,
                    schema: LOG_SCHEMA.to_string(),
                    v: LOG_VERSION,
                    ts: ts.clone(),
                    event: e.event.to_string(),
                    thread_id: e.thread_id,
                    turn_id: e.turn_id,
                    item_id: e.item_id,
                    payload: e.payload,
                };
                seq += 1;
                r
            })
            .collect()
    }

    /// One write of whole lines and one `fdatasync` (caller holds the
    /// lock). A failed write is cut back so no fragment stays behind; its
    /// sequence numbers stay used either way.
    fn write_records(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        let mut buf = String::new();
        for r in records {
            let line = serde_json::to_string(r).map_err(|e| LogError::Io {
                path: self.path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })?;
            buf.push_str(&line);
            buf.push('\n');
        }
        if let Some(r) = records.last() {
            self.last_seq = self.last_seq.max(r.seq);
        }
        let res = self
            .file
            .write_all(buf.as_bytes())
            .and_then(|_| self.file.sync_data());
        if let Err(e) = res {
            let _ = self.file.set_len(self.offset);
            let _ = self.file.sync_all();
            return Err(LogError::Io {
                path: self.path.clone(),
                source: e,
            });
        }
        self.offset += buf.len() as u64;
        self.lines += records.len();
        Ok(())
    }
}

fn recovered_marker(t: &TornTail) -> NewEvent {
    NewEvent {
        event: "runtime.recovered",
        thread_id: None,
        turn_id: None,
        item_id: None,
        payload: serde_json::json!({
            "truncated_bytes": t.truncated_bytes,
            "skipped_seq": t.skipped_seq,
        }),
    }
}

/// The `seq` a torn fragment had reserved, if its prefix still names it
/// (records are written with `seq` first: `{"seq":N,`).
fn fragment_seq(fragment: &[u8]) -> Option<u64> {
    let rest = fragment.strip_prefix(br#"{"seq":"#)?;
    let digits: Vec<u8> = rest
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    // Without the delimiter after it the number itself may be torn.
    if rest.get(digits.len()) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn read_from(f: &File, offset: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = f.try_clone()?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// The event log holds prompts and tool output: keep the directory private
/// (0700 on Unix when codewhale creates it).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// An exclusive `flock` on the log, released on drop. It keeps the raw
/// descriptor (not a borrow) so the log can be mutated while it is held;
/// every guard is dropped inside the `EventLog` method that took it, while
/// the `File` it came from is alive.
struct FileLock {
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
}

impl FileLock {
    #[cfg(unix)]
    fn exclusive(file: &File) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        loop {
            // SAFETY: `fd` is the open descriptor of `file`; flock only
            // reads the integer.
            let r = unsafe { libc::flock(fd, libc::LOCK_EX) };
            if r == 0 {
                return Ok(FileLock { fd });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    #[cfg(not(unix))]
    fn exclusive(_file: &File) -> std::io::Result<Self> {
        Ok(FileLock {})
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: the descriptor is still open (see the type's doc);
        // unlocking one we locked.
        unsafe {
            libc::flock(self.fd, libc::LOCK_UN);
        }
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
