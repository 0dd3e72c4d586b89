//! `GET /v1/snapshots`: the undo snapshots of a workspace, newest first,
//! read from the same store `codewhale undo` / `codewhale restore --list`
//! use (found the same way: `SnapshotOptions::from_env`, else the server's
//! home). Read-only: nothing here restores.

use super::error::ApiError;
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::path::Path;

/// Seconds since the epoch of an RFC 3339 time (`null` if unparsable).
fn unix(ts: &str) -> Option<i64> {
    time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// The newest `limit` snapshots of `ws` as the contract lists them (`id`,
/// `label`, `timestamp`), plus what `restore --list --json` shows. A
/// workspace whose snapshots are off lists none.
pub fn list(home: &Path, ws: &Path, limit: usize) -> Result<Value, ApiError> {
    let opts = crate::snapshot::SnapshotOptions::from_env()
        .unwrap_or_else(|| crate::snapshot::SnapshotOptions::new(home));
    let opened = crate::snapshot::SnapshotStore::open(ws, opts).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "snapshot_store",
            e.to_string(),
        )
    })?;
    let Some(store) = opened.into_store() else {
        return Ok(json!([]));
    };
    let items: Vec<Value> = store
        .list()
        .iter()
        .rev()
        .take(limit)
        .map(|r| {
            json!({
                "id": r.id.to_string(),
                "number": r.id,
                "label": r.label.to_string(),
                "timestamp": unix(&r.created_at),
                "created_at": r.created_at,
                "session_id": r.meta.session_id,
                "request": r.meta.request,
                "turn": r.meta.turn,
                "tool_call_id": r.meta.tool_call_id,
            })
        })
        .collect();
    Ok(Value::Array(items))
}
