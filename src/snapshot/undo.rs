//! Choosing what `undo` restores (pure; tested on every OS).
//!
//! `undo` reverts the most recent request that has not been undone yet, in
//! one step: it restores the *first* `pre-turn` snapshot of that request
//! (a request may span several turns). The `pre-restore` snapshot taken by
//! an undo records which request it undid (`meta.undoes`), so a second
//! `undo` walks one request further back instead of repeating itself.

use super::error::SnapshotError;
use super::types::{Label, RequestKey, SnapshotId, SnapshotRecord};
use std::collections::{BTreeMap, BTreeSet};

/// Which session `undo` looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UndoScope {
    /// The session of the most recent snapshot that names one (`--last`,
    /// the default); snapshots without a session when none does.
    Last,
    /// One named session (`--session ID`).
    Session(String),
}

/// What `undo` will do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoPlan {
    /// The snapshot to restore: the request's first `pre-turn` snapshot.
    pub target: SnapshotId,
    /// The request being reverted.
    pub request: RequestKey,
}

/// Plan an undo over `records` (oldest first).
pub fn plan_undo(records: &[SnapshotRecord], scope: &UndoScope) -> Result<UndoPlan, SnapshotError> {
    let session: Option<String> = match scope {
        UndoScope::Session(s) => Some(s.clone()),
        UndoScope::Last => records.iter().rev().find_map(|r| r.meta.session_id.clone()),
    };
    let undone: BTreeSet<&RequestKey> = records
        .iter()
        .filter_map(|r| r.meta.undoes.as_ref())
        .collect();
    // For every request in scope: its first pre-turn snapshot and its
    // latest snapshot of any kind (recency decides which request is "last").
    let mut first_pre: BTreeMap<RequestKey, SnapshotId> = BTreeMap::new();
    let mut latest: BTreeMap<RequestKey, SnapshotId> = BTreeMap::new();
    for r in records {
        if matches!(r.label, Label::PreRestore(_)) {
            continue;
        }
        let Some(key) = r.meta.request_key() else {
            continue;
        };
        if key.session_id != session {
            continue;
        }
        if matches!(r.label, Label::PreTurn(_)) {
            first_pre.entry(key.clone()).or_insert(r.id);
        }
        let e = latest.entry(key).or_insert(r.id);
        *e = (*e).max(r.id);
    }
    let nothing = || SnapshotError::NothingToUndo {
        scope: match scope {
            UndoScope::Session(s) => Some(s.clone()),
            UndoScope::Last => None,
        },
    };
    let (request, _) = latest
        .into_iter()
        .filter(|(k, _)| !undone.contains(k))
        .max_by_key(|(_, id)| *id)
        .ok_or_else(nothing)?;
    // Never silently fall back to an older request: that would revert two.
    let target = *first_pre
        .get(&request)
        .ok_or(SnapshotError::PreTurnPruned {
            request: request.request,
        })?;
    Ok(UndoPlan { target, request })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::snapshot::types::SnapshotMeta;

    fn rec(id: u64, label: Label, session: &str, request: Option<u64>) -> SnapshotRecord {
        SnapshotRecord {
            id,
            label,
            created_at: String::new(),
            commit: String::new(),
            tree: String::new(),
            meta: SnapshotMeta {
                session_id: Some(session.into()),
                request,
                ..Default::default()
            },
            warnings: vec![],
        }
    }

    fn undo_of(id: u64, target: u64, session: &str, request: u64) -> SnapshotRecord {
        let mut r = rec(id, Label::PreRestore(target), session, None);
        r.meta.undoes = Some(RequestKey {
            session_id: Some(session.into()),
            request,
        });
        r
    }

    #[test]
    fn reverts_the_whole_latest_request() {
        let recs = vec![
            rec(1, Label::PreTurn(1), "s", Some(1)),
            rec(2, Label::PostTurn(1), "s", Some(1)),
            rec(3, Label::PreTurn(2), "s", Some(2)),
            rec(4, Label::Tool("c1".into()), "s", Some(2)),
            rec(5, Label::PostTurn(2), "s", Some(2)),
            rec(6, Label::PreTurn(3), "s", Some(2)),
            rec(7, Label::PostTurn(3), "s", Some(2)),
        ];
        let p = plan_undo(&recs, &UndoScope::Last).unwrap();
        assert_eq!(p.target, 3);
        assert_eq!(p.request.request, 2);
    }

    #[test]
    fn second_undo_walks_back() {
        let mut recs = vec![
            rec(1, Label::PreTurn(1), "s", Some(1)),
            rec(2, Label::PostTurn(1), "s", Some(1)),
            rec(3, Label::PreTurn(2), "s", Some(2)),
            rec(4, Label::PostTurn(2), "s", Some(2)),
        ];
        recs.push(undo_of(5, 3, "s", 2));
        assert_eq!(plan_undo(&recs, &UndoScope::Last).unwrap().target, 1);
        recs.push(undo_of(6, 1, "s", 1));
        assert!(matches!(
            plan_undo(&recs, &UndoScope::Last),
            Err(SnapshotError::NothingToUndo { .. })
        ));
    }

    #[test]
    fn scopes_by_session() {
        let recs = vec![
            rec(1, Label::PreTurn(1), "a", Some(1)),
            rec(2, Label::PostTurn(1), "a", Some(1)),
            rec(3, Label::PreTurn(1), "b", Some(1)),
            rec(4, Label::PostTurn(1), "b", Some(1)),
        ];
        assert_eq!(plan_undo(&recs, &UndoScope::Last).unwrap().target, 3);
        let p = plan_undo(&recs, &UndoScope::Session("a".into())).unwrap();
        assert_eq!(p.target, 1);
        let err = plan_undo(&recs, &UndoScope::Session("zz".into())).unwrap_err();
        assert!(err.to_string().contains("session zz"), "{err}");
    }

    #[test]
    fn a_request_whose_pre_turn_was_pruned_is_refused() {
        let recs = vec![
            rec(1, Label::PreTurn(1), "s", Some(1)),
            rec(2, Label::PostTurn(1), "s", Some(1)),
            rec(3, Label::PostTurn(2), "s", Some(2)),
        ];
        assert!(matches!(
            plan_undo(&recs, &UndoScope::Last),
            Err(SnapshotError::PreTurnPruned { request: 2 })
        ));
    }
}
