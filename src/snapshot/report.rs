//! `undo` and `restore N` as one library call each, with the text they
//! print: `codewhale undo` / `codewhale restore` and the TUI's `/undo` and
//! `/restore N` both call these, so both say the same and neither front
//! end reaches into the other.
//!
//! The store is opened with the user's deny-read policy excluded (the
//! pre-restore snapshot leaves out what the agent's snapshots leave out);
//! that policy is handed in as a plain value by the caller, which owns the
//! configuration.

use super::error::{Disabled, SnapshotError};
use super::{
    ChangeKind, FileChange, Opened, RestoreOutcome, SnapshotId, SnapshotOptions, SnapshotStore,
    UndoScope,
};
use crate::policy::resolve::ResolveError;
use crate::policy::{HostFacts, SandboxPolicy};
use std::path::{Path, PathBuf};

/// Why an undo or restore report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Neither `CODEWHALE_HOME` nor `HOME` names a home.
    #[error("neither CODEWHALE_HOME nor HOME is set; cannot find the snapshot store")]
    NoHome,
    /// The store could not be opened.
    #[error("snapshot store for {}", .workspace.display())]
    Open {
        workspace: PathBuf,
        #[source]
        source: SnapshotError,
    },
    /// Snapshots are off for this workspace (the reason is the message).
    #[error("{0}")]
    Disabled(#[from] Disabled),
    /// The deny-read policy could not be resolved.
    #[error("cannot resolve the sandbox policy for {}", .workspace.display())]
    Resolve {
        workspace: PathBuf,
        #[source]
        source: ResolveError,
    },
    /// The undo or restore itself failed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// The store's options from the environment (`CODEWHALE_HOME`, else `HOME`).
pub fn options() -> Result<SnapshotOptions, ReportError> {
    SnapshotOptions::from_env().ok_or(ReportError::NoHome)
}

/// Open the snapshot store of `workspace` with the deny-read paths of
/// `policy_for(canonical workspace)` excluded.
/// The policy is resolved only for an accepted workspace: the resolution
/// scans it for `.env` files.
pub fn open_excluding(
    workspace: &Path,
    opts: SnapshotOptions,
    policy_for: impl FnOnce(&Path) -> SandboxPolicy,
) -> Result<SnapshotStore, ReportError> {
    let opened = SnapshotStore::open(workspace, opts).map_err(|source| ReportError::Open {
        workspace: workspace.to_path_buf(),
        source,
    })?;
    match opened {
        Opened::Ready(mut store) => {
            let policy = policy_for(store.workspace());
            let resolved =
                crate::policy::resolve(&policy, &HostFacts::detect()).map_err(|source| {
                    ReportError::Resolve {
                        workspace: workspace.to_path_buf(),
                        source,
                    }
                })?;
            store.exclude_resolved_policy(&resolved);
            Ok(*store)
        }
        Opened::Disabled(reason) => Err(reason.into()),
    }
}

/// Undo the latest request in `scope` and say what changed.
pub fn undo(store: &mut SnapshotStore, scope: &UndoScope) -> Result<String, SnapshotError> {
    let out = store.undo(scope)?;
    let who = match &out.plan.request.session_id {
        Some(s) => format!("request {} of session {s}", out.plan.request.request),
        None => format!("request {}", out.plan.request.request),
    };
    let mut text = format!(
        "Undid {who}: restored snapshot {} ({} file(s) changed).\n",
        out.restore.restored,
        out.restore.changes.len()
    );
    text.push_str(&changes_text(&out.restore));
    text.push_str(&format!(
        "To take this undo back: codewhale restore {} --trust\n",
        out.restore.pre_restore
    ));
    Ok(text)
}

/// Restore snapshot `id` and say what changed (the caller checked trust).
pub fn restore(store: &mut SnapshotStore, id: SnapshotId) -> Result<String, SnapshotError> {
    let out = store.restore(id)?;
    let mut text = format!(
        "Restored snapshot {id} ({} file(s) changed).\n",
        out.changes.len()
    );
    text.push_str(&changes_text(&out));
    text.push_str(&format!(
        "To take this restore back: codewhale restore {} --trust\n",
        out.pre_restore
    ));
    Ok(text)
}

fn changes_text(out: &RestoreOutcome) -> String {
    let mut text = String::new();
    for FileChange {
        path,
        kind,
        added_lines,
        removed_lines,
        binary,
        mode_changed,
    } in &out.changes
    {
        let verb = match kind {
            ChangeKind::Added => "recreated",
            ChangeKind::Deleted => "removed",
            ChangeKind::Modified => "reverted",
        };
        let stat = if *binary {
            " (binary)".to_string()
        } else if *added_lines + *removed_lines > 0 {
            format!(" (+{added_lines} −{removed_lines})")
        } else if *mode_changed {
            " (mode)".to_string()
        } else {
            String::new()
        };
        text.push_str(&format!("  {verb} {path}{stat}\n"));
    }
    text
}
