//! Snapshot errors, and the reasons snapshots can be switched off.
//!
//! Two different things: a [`SnapshotError`] is a failure of an operation
//! that should have worked (git failed, the record file is corrupt); a
//! [`Disabled`] is a deliberate refusal to keep snapshots for a workspace
//! (it is `/`, the home directory, or too big). A refusal is not an error:
//! the agent keeps running, and every surface shows the reason.

use std::path::PathBuf;

/// Why snapshots are off for a workspace. `Display` is the message shown to
/// the user, naming the limit and how to change it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Disabled {
    /// The workspace is a directory that must never be snapshotted whole
    /// (`/`, a home directory or one of its ancestors, a system directory,
    /// or codewhale's own state directory).
    #[error("snapshots are off: {path} is {why}; run codewhale from a project directory")]
    RefusedPath { path: PathBuf, why: String },
    /// More entries than the entry limit (counted after ignore rules).
    #[error(
        "snapshots are off: {path} has more than {limit} files and directories \
         (not counting ignored ones); add ignore rules or raise [snapshots] max_workspace_entries"
    )]
    TooManyEntries { path: PathBuf, limit: u64 },
    /// More bytes than the size limit (counted after ignore rules).
    #[error(
        "snapshots are off: {path} holds more than {limit_mb} MB of files \
         (not counting ignored ones); add ignore rules or raise [snapshots] max_workspace_mb"
    )]
    TooLarge { path: PathBuf, limit_mb: u64 },
    /// No usable `git` binary.
    #[error(
        "snapshots are off: the git binary was not found ({detail}); install git to enable undo"
    )]
    GitMissing { detail: String },
}

/// A snapshot operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A git invocation failed; `args` is the subcommand line, `stderr` git's message.
    #[error("git {args} failed ({status}): {stderr}")]
    Git {
        args: String,
        status: String,
        stderr: String,
    },
    /// Git printed something we could not parse.
    #[error("unexpected output from git {args}: {detail}")]
    GitOutput { args: String, detail: String },
    /// A filesystem operation on the store or the workspace failed.
    #[error("{context} {path}: {source}")]
    Io {
        context: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The snapshot record file exists but cannot be read as records.
    #[error(
        "snapshot records {path} are corrupt: {detail} (move the file away to start a fresh list)"
    )]
    CorruptRecords { path: PathBuf, detail: String },
    /// No snapshot with that number exists (it may have been pruned).
    #[error("no snapshot {id} (see `codewhale restore --list`; only the newest {keep} are kept)")]
    NoSuchSnapshot { id: u64, keep: usize },
    /// `undo` found no request to revert.
    #[error("nothing to undo{}", scope.as_ref().map(|s| format!(" for session {s}")).unwrap_or_default())]
    NothingToUndo { scope: Option<String> },
    /// The latest request's `pre-turn` snapshot is gone (pruned), so it
    /// cannot be reverted as one step.
    #[error("cannot undo request {request}: its pre-turn snapshot was pruned (use `codewhale restore --list` to pick a snapshot)")]
    PreTurnPruned { request: u64 },
    /// The seed's blob copy ended without its pack and could not be
    /// taken again (see `blobcopy`): snapshots may name blobs the store
    /// lacks.
    #[error(
        "the snapshots' objects are not all in the store: copying them from {} failed: {detail} (a `git gc --prune=now` in your repository may have removed them before the copy ended)",
        from.display()
    )]
    BlobCopy { from: PathBuf, detail: String },
    /// A label string did not parse.
    #[error(
        "bad snapshot label {0:?} (expected pre-turn:N, post-turn:N, tool:ID or pre-restore:N)"
    )]
    BadLabel(String),
}

impl SnapshotError {
    pub(crate) fn io(
        context: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        SnapshotError::Io {
            context,
            path: path.into(),
            source,
        }
    }
}
