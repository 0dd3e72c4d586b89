//! The record file (`snapshots.json`): the list of snapshots with their
//! labels and metadata, and the next id.
//!
//! The side repository holds the content; this file holds what each
//! snapshot *means*. It is rewritten whole (it never exceeds the keep
//! limit) through a temp file + rename, so a crash leaves the old or the
//! new list, never a torn one.

use super::error::SnapshotError;
use super::types::{SnapshotId, SnapshotRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

const VERSION: u32 = 1;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Records {
    pub version: u32,
    /// The id the next snapshot gets (ids are never reused).
    pub next_id: SnapshotId,
    /// Oldest first.
    pub snapshots: Vec<SnapshotRecord>,
}

impl Records {
    pub fn new() -> Self {
        Records {
            version: VERSION,
            next_id: 1,
            snapshots: Vec::new(),
        }
    }

    /// Read `path`; a missing file is an empty list.
    pub fn load(path: &Path) -> Result<Self, SnapshotError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Records::new()),
            Err(e) => return Err(SnapshotError::io("cannot read", path, e)),
        };
        let recs: Records =
            serde_json::from_str(&text).map_err(|e| SnapshotError::CorruptRecords {
                path: path.to_path_buf(),
                detail: format!("line {} column {}: {e}", e.line(), e.column()),
            })?;
        if recs.version != VERSION {
            return Err(SnapshotError::CorruptRecords {
                path: path.to_path_buf(),
                detail: format!("version {} (this codewhale reads {VERSION})", recs.version),
            });
        }
        Ok(recs)
    }

    /// Atomically replace `path` with this list.
    pub fn save(&self, path: &Path) -> Result<(), SnapshotError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| SnapshotError::io("cannot create a temp file in", dir, e))?;
        let json = serde_json::to_vec_pretty(self).map_err(|e| SnapshotError::CorruptRecords {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        tmp.write_all(&json)
            .and_then(|_| tmp.as_file().sync_all())
            .map_err(|e| SnapshotError::io("cannot write", tmp.path().to_path_buf(), e))?;
        tmp.persist(path)
            .map_err(|e| SnapshotError::io("cannot replace", path, e.error))?;
        Ok(())
    }

    pub fn get(&self, id: SnapshotId) -> Option<&SnapshotRecord> {
        self.snapshots.iter().find(|r| r.id == id)
    }

    pub fn last(&self) -> Option<&SnapshotRecord> {
        self.snapshots.last()
    }

    /// Drop the oldest records beyond `keep` (or `count` of them), and
    /// return the commits no kept record references any more (their refs
    /// can be deleted).
    pub fn drop_oldest(&mut self, count: usize) -> Vec<String> {
        let count = count.min(self.snapshots.len());
        let dropped: Vec<SnapshotRecord> = self.snapshots.drain(..count).collect();
        let live: BTreeSet<&str> = self.snapshots.iter().map(|r| r.commit.as_str()).collect();
        let mut orphaned: Vec<String> = dropped
            .into_iter()
            .map(|r| r.commit)
            .filter(|c| !live.contains(c.as_str()))
            .collect();
        orphaned.sort();
        orphaned.dedup();
        orphaned
    }

    /// Keep only the newest `keep`; returns orphaned commits.
    pub fn prune_to(&mut self, keep: usize) -> Vec<String> {
        let excess = self.snapshots.len().saturating_sub(keep);
        self.drop_oldest(excess)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::snapshot::types::{Label, SnapshotMeta};

    fn rec(id: u64, commit: &str) -> SnapshotRecord {
        SnapshotRecord {
            id,
            label: Label::PreTurn(id),
            created_at: "2026-01-01T00:00:00Z".into(),
            commit: commit.into(),
            tree: format!("t{commit}"),
            meta: SnapshotMeta::default(),
            warnings: vec![],
        }
    }

    #[test]
    fn pruning_keeps_shared_commits() {
        let mut r = Records::new();
        r.snapshots = vec![rec(1, "a"), rec(2, "b"), rec(3, "b"), rec(4, "c")];
        let orphaned = r.prune_to(2);
        assert_eq!(orphaned, vec!["a".to_string()]);
        assert_eq!(
            r.snapshots.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert!(r.prune_to(5).is_empty());
    }

    #[test]
    fn save_load_round_trip_and_corruption_is_named() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("snapshots.json");
        assert_eq!(Records::load(&p).unwrap(), Records::new());
        let mut r = Records::new();
        r.snapshots.push(rec(1, "a"));
        r.next_id = 2;
        r.save(&p).unwrap();
        assert_eq!(Records::load(&p).unwrap(), r);
        std::fs::write(&p, "{ not json").unwrap();
        let err = Records::load(&p).unwrap_err().to_string();
        assert!(
            err.contains("snapshots.json") && err.contains("line 1"),
            "{err}"
        );
    }
}
