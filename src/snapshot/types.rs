//! The snapshot vocabulary: ids, labels, metadata, records and changes.

use super::error::SnapshotError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A snapshot's number: monotonic per store, shown by `restore --list` and
/// taken by `restore N`. Never reused, even after pruning.
pub type SnapshotId = u64;

/// Why a snapshot was taken. Serialised as the strings in the docs:
/// `pre-turn:N`, `post-turn:N`, `tool:<call id>`, `pre-restore:<id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Label {
    /// Before turn N of a request can change files.
    PreTurn(u64),
    /// After turn N.
    PostTurn(u64),
    /// Before a file-writing tool call (its call id).
    Tool(String),
    /// Before restoring snapshot N (so the restore can be undone).
    PreRestore(SnapshotId),
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Label::PreTurn(n) => write!(f, "pre-turn:{n}"),
            Label::PostTurn(n) => write!(f, "post-turn:{n}"),
            Label::Tool(id) => write!(f, "tool:{id}"),
            Label::PreRestore(id) => write!(f, "pre-restore:{id}"),
        }
    }
}

impl FromStr for Label {
    type Err = SnapshotError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || SnapshotError::BadLabel(s.to_string());
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        match kind {
            "pre-turn" => rest.parse().map(Label::PreTurn).map_err(|_| bad()),
            "post-turn" => rest.parse().map(Label::PostTurn).map_err(|_| bad()),
            "pre-restore" => rest.parse().map(Label::PreRestore).map_err(|_| bad()),
            "tool" if !rest.is_empty() => Ok(Label::Tool(rest.to_string())),
            _ => Err(bad()),
        }
    }
}

impl Serialize for Label {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One user request in one session: what `undo` reverts as a unit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestKey {
    pub session_id: Option<String>,
    pub request: u64,
}

/// Context recorded with a snapshot (by the agent loop, or by restore).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SnapshotMeta {
    /// The session that took it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The user request number within the session (a multi-line prompt is
    /// one request; one request may span several model turns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<u64>,
    /// The model turn number within the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// For `tool:` snapshots: the tool call id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For the `pre-restore` snapshot taken by `undo`: the request undone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undoes: Option<RequestKey>,
}

impl SnapshotMeta {
    /// The request this snapshot belongs to: `request`, else `turn`.
    pub fn request_key(&self) -> Option<RequestKey> {
        self.request.or(self.turn).map(|request| RequestKey {
            session_id: self.session_id.clone(),
            request,
        })
    }
}

/// One stored snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub id: SnapshotId,
    pub label: Label,
    /// RFC 3339 UTC time it was taken.
    pub created_at: String,
    /// The side repo commit and its tree. Consecutive snapshots with no
    /// change share one commit (the no-change fast path creates none).
    pub commit: String,
    pub tree: String,
    #[serde(default)]
    pub meta: SnapshotMeta,
    /// Files git could not read while snapshotting (left out of this snapshot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// How a file differs between two snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One changed path between two snapshots (renames show as delete + add).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub kind: ChangeKind,
    /// Lines added and removed (0 and 0 for binary files and mode-only changes).
    pub added_lines: u64,
    pub removed_lines: u64,
    pub binary: bool,
    /// Whether the file mode changed (e.g. the exec bit).
    pub mode_changed: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip() {
        for s in [
            "pre-turn:3",
            "post-turn:12",
            "tool:call_abc:1",
            "pre-restore:7",
        ] {
            let l: Label = s.parse().unwrap();
            assert_eq!(l.to_string(), s);
            let json = serde_json::to_string(&l).unwrap();
            assert_eq!(serde_json::from_str::<Label>(&json).unwrap(), l);
        }
        for bad in ["pre-turn", "pre-turn:x", "tool:", "other:1", ""] {
            assert!(bad.parse::<Label>().is_err(), "{bad}");
        }
    }

    #[test]
    fn request_key_falls_back_to_turn() {
        let m = SnapshotMeta {
            session_id: Some("s".into()),
            turn: Some(4),
            ..Default::default()
        };
        assert_eq!(m.request_key().unwrap().request, 4);
        assert!(SnapshotMeta::default().request_key().is_none());
    }
}
