//! Undo snapshots kept outside the user's `.git`.
//!
//! Before and after every turn that can change files, and before each
//! file-writing tool call, the agent loop calls [`SnapshotStore::snapshot`].
//! Snapshots live in a side repository under
//! `$CODEWHALE_HOME/snapshots/<project hash>/<worktree hash>/.git`; see
//! `docs/UNDO.md` for the user-facing contract.
//!
//! Invariants:
//! - The user's repository is never read for behaviour nor written: every
//!   git call names the side git dir, the workspace as work tree and the
//!   side index explicitly, with system/global config off, hooks and
//!   fsmonitor off, and `GIT_*` variables scrubbed ([`git`]). A store's
//!   first snapshot may start from a copy of the user's index and copy
//!   the objects it reaches from the user's store ([`seed`]): read only,
//!   and never when a conversion could make those blobs differ from the
//!   files' bytes.
//! - `.env`/`.env.*` files and every deny-read path inside the workspace are
//!   excluded by pathspec on `git add`, so their bytes never enter the side
//!   object store (a `.gitignore` negation cannot re-include them).
//! - Restore takes a `pre-restore:<id>` snapshot first, so every restore
//!   can itself be undone; it never touches conversation history.
//! - Within a run, a store with a change journal ([`journal`],
//!   [`SnapshotStore::enable_journal`]) adds only the paths that changed
//!   since its last snapshot; whenever the journal is unsure, the
//!   snapshot is a full `git add -A` as without it.
//! - Refusal is not failure: [`Opened::Disabled`] carries the reason,
//!   which every surface shows.

pub mod blobcopy;
pub mod error;
pub mod git;
pub mod guard;
pub mod journal;
pub mod keeper;
pub mod layout;
pub mod lock;
pub mod options;
pub mod present;
pub mod records;
pub mod report;
pub mod seed;
pub mod store;
pub mod treebuild;
pub mod types;
pub mod undo;

pub use error::{Disabled, SnapshotError};
pub use options::{SnapshotOptions, UserDirs};
pub use store::{
    Opened, OpenedAhead, Opening, RestoreOutcome, SnapshotStore, SnapshotWay, UndoOutcome,
};
pub use types::{
    ChangeKind, FileChange, Label, RequestKey, SnapshotId, SnapshotMeta, SnapshotRecord,
};
pub use undo::{UndoPlan, UndoScope};
