//! Opening a store with its slow half on a thread, for a run whose model
//! answers meanwhile.
//!
//! [`SnapshotStore::open`] decides and builds in one call. At a
//! workspace's first run, building is most of it: `git init`, the seed's
//! chain of git commands over the user's index, the journal keeper's
//! start (its watches on every directory) — ~0.1–0.2 s at 100,000 files,
//! before the model was even asked. [`SnapshotStore::open_ahead`] makes
//! every decision a run announces at its start on the calling thread (git
//! there, the workspace's path checks, the size limits: a refusal is the
//! same [`Disabled`], at the same moment) and leaves the building to a
//! thread, which the run joins before its first snapshot — while the
//! model answers its first request. Nothing is written before the
//! decisions but the size walk's cache; a build that fails says so when
//! joined, as a snapshot that fails does.

use super::{Prelude, SnapshotStore};
use crate::snapshot::error::{Disabled, SnapshotError};
use crate::snapshot::options::SnapshotOptions;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The result of [`SnapshotStore::open_ahead`].
#[derive(Debug)]
pub enum OpenedAhead {
    /// Snapshots are refused for this workspace (as [`super::Opened::Disabled`]).
    Disabled(Disabled),
    /// The store is being built.
    Opening(Opening),
}

/// A store being built on a thread.
#[derive(Debug)]
pub struct Opening {
    dir: PathBuf,
    thread: JoinHandle<Result<Box<SnapshotStore>, SnapshotError>>,
}

impl Opening {
    /// The store's directory (known before it is built).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the build is over (joining would not wait).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// The store, once built; or why it could not be.
    pub fn wait(self) -> Result<Box<SnapshotStore>, SnapshotError> {
        self.thread.join().unwrap_or_else(|_| {
            Err(SnapshotError::io(
                "building the snapshot store panicked:",
                &self.dir,
                std::io::Error::other("the thread panicked"),
            ))
        })
    }
}

impl SnapshotStore {
    /// [`Self::open`], with the store built on a thread (see the module
    /// docs): the refusals are decided here, the size walk included; the
    /// keeper, when wanted, starts beside the build on that thread and is
    /// in place before the store is handed over.
    pub fn open_ahead(
        workspace: &Path,
        opts: SnapshotOptions,
    ) -> Result<OpenedAhead, SnapshotError> {
        let pre = match Prelude::take(workspace, &opts)? {
            Ok(pre) => pre,
            Err(d) => return Ok(OpenedAhead::Disabled(d)),
        };
        let fresh_size = match pre.size_check(&opts) {
            Ok(fresh) => fresh,
            Err(d) => return Ok(OpenedAhead::Disabled(d)),
        };
        let dir = pre.dir.clone();
        let thread = std::thread::Builder::new()
            .name("snapshot-open".into())
            .spawn(move || {
                let (store, keeper) = std::thread::scope(|s| {
                    let keeper = pre
                        .keeper_wanted(&opts)
                        .map(|exe| s.spawn(|| pre.keeper(exe, &opts)));
                    let store = Self::build(
                        &pre.workspace,
                        &pre.dir,
                        pre.bin.clone(),
                        pre.skip_hash,
                        opts.clone(),
                    );
                    (store, keeper.and_then(|k| k.join().ok().flatten()))
                });
                let mut store = store?;
                store.attach_keeper(keeper);
                // Written once the directory exists (the build made it).
                pre.keep_size(fresh_size);
                Ok(Box::new(store))
            })
            .map_err(|e| SnapshotError::io("cannot start a thread to build the store", &dir, e))?;
        Ok(OpenedAhead::Opening(Opening { dir, thread }))
    }
}
