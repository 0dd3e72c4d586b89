//! The side-repository store: take, list, diff and restore snapshots.
//!
//! Per snapshot: one `git add -A` into the store's own index (git's stat
//! cache in that index makes an unchanged file cost one `lstat`), one
//! `write-tree`, and — only when the tree differs from the previous
//! snapshot's — one `commit-tree` + `update-ref`. Commits have no parents,
//! so pruning a snapshot is deleting its ref.

use super::blobcopy;
use super::error::{Disabled, SnapshotError};
use super::git::{self, Git};
use super::guard;
use super::journal::Journal;
use super::keeper::Keeper;
use super::layout;
use super::lock::StoreLock;
use super::options::SnapshotOptions;
use super::records::Records;
use super::seed;
use super::treebuild::{self, LastLook};
use super::types::{ChangeKind, FileChange, Label, SnapshotId, SnapshotMeta, SnapshotRecord};
use super::undo::{plan_undo, UndoPlan, UndoScope};
use crate::policy::env_scan::WorkspaceListing;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod ahead;
pub use ahead::{OpenedAhead, Opening};

/// Above this many paths changed since the last snapshot, a snapshot is a
/// full `git add -A` (it costs one `git status`; git matches each of its
/// index entries against each pathspec named).
const MAX_JOURNAL_PATHSPECS: usize = 1000;

/// Ref namespace holding one ref per live commit.
const REF_PREFIX: &str = "refs/codewhale/";

/// The result of [`SnapshotStore::open`]: a store, or the reason snapshots
/// are off for this workspace (show it; do not treat it as a failure).
#[derive(Debug)]
pub enum Opened {
    Ready(Box<SnapshotStore>),
    Disabled(Disabled),
}

impl Opened {
    pub fn into_store(self) -> Option<SnapshotStore> {
        match self {
            Opened::Ready(s) => Some(*s),
            Opened::Disabled(_) => None,
        }
    }
}

/// What a restore did.
#[derive(Clone, Debug)]
pub struct RestoreOutcome {
    /// The snapshot now in the working folder.
    pub restored: SnapshotId,
    /// The snapshot taken just before (restore it to undo this restore).
    pub pre_restore: SnapshotId,
    /// How the working folder changed (from the pre-restore state).
    pub changes: Vec<FileChange>,
}

/// What an undo did.
#[derive(Clone, Debug)]
pub struct UndoOutcome {
    pub plan: UndoPlan,
    pub restore: RestoreOutcome,
}

/// Snapshots of one workspace.
#[derive(Debug)]
pub struct SnapshotStore {
    git: Git,
    workspace: PathBuf,
    dir: PathBuf,
    records_path: PathBuf,
    records: Records,
    /// Pathspec exclusions for secrets and deny-read files.
    excludes: Vec<String>,
    opts: SnapshotOptions,
    commits_since_size_check: u32,
    /// How the side index was first filled, when this store did it
    /// (`Ok`: from the user's index, [`seed`]).
    seed: Option<Result<(), seed::NoSeed>>,
    /// A seed `open` prepared ([`SnapshotOptions::seed_at_open`]), with the
    /// token its [`SEED_MARK`] file holds while it is not used.
    pending_seed: Option<(String, Result<seed::Prepared, seed::NoSeed>)>,
    /// Whether to keep a change journal ([`Self::enable_journal`]).
    journal_wanted: bool,
    /// The live journal: every change since the last snapshot is in it.
    journal: Option<JournalSource>,
    /// How the last snapshot was taken (for tests and the bench).
    last_way: Option<SnapshotWay>,
    /// The last two trees compared and their changes: a turn's loop asks
    /// for the same pair twice (the tool call's and the turn's), and trees
    /// never change under their names.
    last_diff: std::sync::Mutex<DiffMemo>,
}

/// Two trees compared, and their changes.
type DiffMemo = Option<((String, String), Vec<FileChange>)>;

/// Where a store's change journal lives.
#[derive(Debug)]
enum JournalSource {
    /// In this process: it ends with the store.
    Local(Journal),
    /// In the store's keeper process ([`super::keeper`]): it outlives the run, so
    /// the next run's first snapshot needs no full look either.
    Keeper(Keeper),
}

/// The file recording which exclusions the side index was last filled
/// with in full: a keeper's paths are enough only while they are the same.
const EXCLUDES_FILE: &str = "journal-excludes";

/// Present while a side index seeded by `open` is not used yet: the token
/// of the store that seeded it, and the name of its pack of the user's
/// trees ([`SnapshotStore::clear_unfinished_seed`]).
const SEED_MARK: &str = "seed-pending";

/// How a snapshot looked at the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotWay {
    /// `git add -A` over the whole workspace; with the reason the journal
    /// was not used, when one was wanted.
    Full { no_journal: Option<String> },
    /// Only the journal's paths (this many) were taken: into a tree built
    /// from the last one ([`treebuild`]; `index: None`), or through the
    /// side index, with the reason the tree was not built.
    Journal { paths: usize, index: Option<String> },
}

/// What every way of opening a store decides first, before anything is
/// written: git's presence and version, the workspace's path checks, and
/// where its store lives. The size limits are checked with
/// [`Prelude::size_check`].
struct Prelude {
    workspace: PathBuf,
    bin: PathBuf,
    skip_hash: bool,
    dir: PathBuf,
    /// Whether the store directory was there before this open (a refusal
    /// removes one it made).
    existed: bool,
    size_cache: PathBuf,
    /// A seed to prepare: the store has no side index yet.
    seed_now: bool,
    /// The user's index: a whole size walk takes tracked sizes from it.
    user_index: Option<PathBuf>,
    /// The directories this process's `.env` scan just read whole, taken
    /// (and so let go) at every open: a whole size walk counts from them.
    listing: Option<WorkspaceListing>,
}

impl Prelude {
    /// `Ok(Err(_))`: snapshots are refused for this workspace.
    fn take(
        workspace: &Path,
        opts: &SnapshotOptions,
    ) -> Result<Result<Prelude, Disabled>, SnapshotError> {
        let workspace = std::fs::canonicalize(workspace)
            .map_err(|e| SnapshotError::io("cannot open workspace", workspace, e))?;
        let listing = crate::policy::env_scan::take_listing(&workspace);
        if !workspace.is_dir() {
            return Err(SnapshotError::io(
                "workspace is not a directory:",
                &workspace,
                std::io::Error::from(std::io::ErrorKind::NotADirectory),
            ));
        }
        let bin = match opts
            .git
            .clone()
            .map(Ok)
            .unwrap_or_else(|| which::which("git"))
        {
            Ok(b) => b,
            Err(e) => {
                return Ok(Err(Disabled::GitMissing {
                    detail: e.to_string(),
                }))
            }
        };
        let skip_hash = match git::probe(&bin) {
            Ok(version) => git::supports_skip_hash(&version),
            Err(detail) => return Ok(Err(Disabled::GitMissing { detail })),
        };
        if let Err(d) = guard::check_path(&workspace, &opts.homes, &opts.codewhale_home) {
            return Ok(Err(d));
        }
        let dir = layout::store_dir(&opts.codewhale_home, &workspace);
        let existed = dir.exists();
        let size_cache = dir.join("size-check");
        let seed_now = opts.seed_at_open && !dir.join("index").exists();
        let user_index = seed::UserRepo::find(&workspace).map(|r| r.index());
        Ok(Ok(Prelude {
            workspace,
            bin,
            skip_hash,
            dir,
            existed,
            size_cache,
            seed_now,
            user_index,
            listing,
        }))
    }

    /// The size limits, from the cached walk where it still holds.
    fn size_check(&self, opts: &SnapshotOptions) -> Result<Option<Vec<u8>>, Disabled> {
        guard::check_size_cached(
            &self.workspace,
            opts.max_workspace_entries,
            opts.max_workspace_bytes,
            &self.size_cache,
            self.user_index.as_deref(),
            self.listing.as_ref(),
        )
    }

    /// The keeper's program, when this open starts one: a seed now and a
    /// journal wanted from the start.
    fn keeper_wanted<'a>(&self, opts: &'a SnapshotOptions) -> Option<&'a Path> {
        opts.keeper
            .as_deref()
            .filter(|_| self.seed_now && opts.journal_at_open)
    }

    /// The store's keeper: the one already there, or one started now.
    fn keeper(&self, exe: &Path, opts: &SnapshotOptions) -> Option<Keeper> {
        std::fs::create_dir_all(&self.dir).ok()?;
        Keeper::find(&self.dir)
            .or_else(|| Keeper::start(exe, &self.dir, &self.workspace, &opts.codewhale_home).ok())
    }

    /// Keep new size totals, whole or not at all (a torn file would not
    /// parse: the next open walks again).
    fn keep_size(&self, fresh: Option<Vec<u8>>) {
        if let Some(bytes) = fresh {
            let tmp = self.size_cache.with_extension("tmp");
            if std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, &self.size_cache);
            }
        }
    }
}

impl SnapshotStore {
    /// Open (creating if needed) the store for `workspace`.
    ///
    /// Returns [`Opened::Disabled`] with the reason when the workspace is
    /// refused (a root, a home, a system directory, over a size limit) or
    /// git is missing; errors only when something that should work failed.
    pub fn open(workspace: &Path, opts: SnapshotOptions) -> Result<Opened, SnapshotError> {
        let pre = match Prelude::take(workspace, &opts)? {
            Ok(pre) => pre,
            Err(d) => return Ok(Opened::Disabled(d)),
        };
        let dir = &pre.dir;
        // With a seed to prepare, the size walk runs beside it: nothing the
        // seed writes outlives a refusal, and it copies no blob (see
        // `seed::Prepared`). The keeper, when wanted, starts beside both.
        let (size, store, keeper) = if pre.seed_now {
            std::thread::scope(|s| {
                let size = s.spawn(|| pre.size_check(&opts));
                let keeper = pre
                    .keeper_wanted(&opts)
                    .map(|exe| s.spawn(|| pre.keeper(exe, &opts)));
                let store = Self::build(
                    &pre.workspace,
                    dir,
                    pre.bin.clone(),
                    pre.skip_hash,
                    opts.clone(),
                );
                let size = size.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
                // A keeper that did not start is started again at the
                // first look (which says why, if it fails there too).
                let keeper = keeper.and_then(|k| k.join().ok().flatten());
                (size, Some(store), keeper)
            })
        } else {
            (pre.size_check(&opts), None, None)
        };
        let fresh_size = match size {
            Ok(fresh) => fresh,
            Err(d) => {
                if let Some(Ok(mut store)) = store {
                    store.drop_pending_seed();
                }
                if !pre.existed {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Ok(Opened::Disabled(d));
            }
        };
        let mut store = match store {
            Some(s) => s?,
            None => Self::build(&pre.workspace, dir, pre.bin.clone(), pre.skip_hash, opts)?,
        };
        store.attach_keeper(keeper);
        pre.keep_size(fresh_size);
        Ok(Opened::Ready(Box::new(store)))
    }

    /// A keeper that answered at open: the first look resets it (its
    /// watches are in place already).
    fn attach_keeper(&mut self, keeper: Option<Keeper>) {
        if let Some(k) = keeper {
            self.journal = Some(JournalSource::Keeper(k));
        }
    }

    /// The store in `dir` for `workspace` (created if needed), and its
    /// seed when `opts.seed_at_open` and it has no index yet.
    fn build(
        workspace: &Path,
        dir: &Path,
        bin: PathBuf,
        skip_hash: bool,
        opts: SnapshotOptions,
    ) -> Result<SnapshotStore, SnapshotError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| SnapshotError::io("cannot create snapshot store", dir, e))?;
        let git = Git::new(
            bin,
            dir.join(".git"),
            workspace.to_path_buf(),
            dir.join("index"),
            opts.user_dirs.clone(),
        )
        .with_skip_hash(skip_hash);
        if !dir.join(".git").join("HEAD").exists() {
            git.run(&["init", "-q", "--template="])?;
        }
        write_if_changed(&dir.join(".git/info/exclude"), &layout::exclude_file_text())?;
        write_if_changed(&dir.join(".git/info/attributes"), layout::ATTRIBUTES)?;
        write_if_changed(
            &dir.join("workspace"),
            &format!("{}\n", workspace.display()),
        )?;
        let mut excludes: Vec<String> = layout::SECRET_PATHSPECS
            .iter()
            .map(|s| s.to_string())
            .collect();
        excludes.extend(layout::deny_read_pathspecs(workspace, &opts.deny_read));
        let records_path = dir.join("snapshots.json");
        let lock = StoreLock::acquire(dir)?;
        if !skip_hash && git::index_has_null_checksum(git.index()) {
            // Written by a newer git than this one: it would refuse the
            // file. The next snapshot fills a new index (a full look).
            let _ = std::fs::remove_file(git.index());
        }
        // A copy cut short (a run killed) is taken again now; a running
        // one is left to finish. One that cannot be taken again stays
        // pending, and every restore names the failure.
        let _ = blobcopy::settle(&git, dir, false);
        let records = Records::load(&records_path)?;
        let seed_at_open = opts.seed_at_open;
        let mut store = SnapshotStore {
            git,
            workspace: workspace.to_path_buf(),
            dir: dir.to_path_buf(),
            records_path,
            records,
            excludes,
            opts,
            commits_since_size_check: 0,
            seed: None,
            pending_seed: None,
            journal_wanted: false,
            journal: None,
            last_way: None,
            last_diff: std::sync::Mutex::new(None),
        };
        store.enforce_size_cap()?;
        if seed_at_open {
            store.clear_unfinished_seed();
            if !store.git.index().exists() {
                let token = seed_token();
                let mark = store.dir.join(SEED_MARK);
                write_if_changed(&mark, &format!("{token}\n"))?;
                let prepared = seed::prepare(
                    &store.git,
                    store.git.bin(),
                    &store.workspace,
                    &store.excludes,
                );
                store.pending_seed = Some((token, prepared));
            }
        }
        drop(lock);
        Ok(store)
    }

    /// Under the store lock: a side index another process seeded and has
    /// not used yet (its [`SEED_MARK`] is there with a token other than
    /// this store's) names blobs only the user's store holds — a look on
    /// it would make a snapshot a `git gc` there can break. It goes (the
    /// index, the user's trees copied ahead, the mark). A store whose own
    /// mark is gone (cleared so by another) drops its seed: the index is
    /// someone else's now.
    fn clear_unfinished_seed(&mut self) {
        let mark = self.dir.join(SEED_MARK);
        let text = std::fs::read_to_string(&mark).ok();
        let mine = |token: &str| {
            text.as_deref()
                .and_then(|t| t.lines().next())
                .is_some_and(|t| t == token)
        };
        if self.pending_seed.as_ref().is_some_and(|(t, _)| mine(t)) {
            return;
        }
        self.pending_seed = None;
        let Some(text) = text else {
            return;
        };
        let _ = std::fs::remove_file(self.git.index());
        // A mark an earlier codewhale wrote may name the user's trees it
        // copied ahead (now they are copied only when the seed is used).
        if let Some(name) = text.lines().nth(1) {
            seed::drop_pack(&self.git, name);
        }
        LastLook::clear(&self.dir);
        let _ = std::fs::remove_file(&mark);
    }

    /// This store's own unused seed goes (a refusal after `open` seeded).
    fn drop_pending_seed(&mut self) {
        if let Some((token, prepared)) = self.pending_seed.take() {
            let mark = self.dir.join(SEED_MARK);
            if std::fs::read_to_string(&mark).is_ok_and(|t| t.trim() == token) {
                if let Ok(p) = prepared {
                    p.abandon(&self.git);
                }
                let _ = std::fs::remove_file(&mark);
            }
        }
    }

    /// Keep a change journal of the workspace while this store lives (a
    /// run): after the next full snapshot, snapshots add only the paths
    /// that changed ([`super::journal`]). For a process that takes many
    /// snapshots; a one-shot command gains nothing from it.
    pub fn enable_journal(&mut self) {
        self.journal_wanted = true;
        if self.journal.is_none() && self.opts.keeper.is_some() {
            // A keeper left by an earlier run: its paths are all that
            // changed since that run's last snapshot.
            self.journal = Keeper::find(&self.dir).map(JournalSource::Keeper);
        }
    }

    /// How the last snapshot of this store looked at the workspace.
    pub fn last_way(&self) -> Option<&SnapshotWay> {
        self.last_way.as_ref()
    }

    /// Also leave out every deny-read path of `resolved` that lies in the
    /// workspace, from the next snapshot on (same as
    /// [`SnapshotOptions::with_resolved_policy`] at open).
    pub fn exclude_resolved_policy(&mut self, resolved: &crate::policy::ResolvedPolicy) {
        let paths = super::options::deny_read_paths(resolved);
        for spec in layout::deny_read_pathspecs(&self.workspace, &paths) {
            if !self.excludes.contains(&spec) {
                self.excludes.push(spec);
                // Paths it holds may now be excluded: look at all again.
                self.journal = None;
            }
        }
    }

    /// The canonical workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The store directory (side repo in `.git`, records in `snapshots.json`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The side repository's git dir.
    pub fn git_dir(&self) -> &Path {
        self.git.git_dir()
    }

    /// All kept snapshots, oldest first.
    pub fn list(&self) -> &[SnapshotRecord] {
        &self.records.snapshots
    }

    pub fn get(&self, id: SnapshotId) -> Option<&SnapshotRecord> {
        self.records.get(id)
    }

    /// Snapshot the workspace now.
    pub fn snapshot(
        &mut self,
        label: Label,
        meta: SnapshotMeta,
    ) -> Result<SnapshotId, SnapshotError> {
        let _lock = self.lock_and_reload()?;
        self.snapshot_inner(label, meta, true)
    }

    /// Record `label` as the same state as snapshot `of`, without running
    /// git: for a caller that knows nothing ran since `of` was taken (the
    /// turn loop takes `pre-turn:N` and the turn's first `tool:` snapshot
    /// back to back, with no tool and no model call between them).
    pub fn snapshot_unchanged_since(
        &mut self,
        of: SnapshotId,
        label: Label,
        meta: SnapshotMeta,
    ) -> Result<SnapshotId, SnapshotError> {
        let _lock = self.lock_and_reload()?;
        let Some(base) = self.records.get(of).cloned() else {
            return Err(SnapshotError::NoSuchSnapshot {
                id: of,
                keep: self.opts.keep,
            });
        };
        let id = self.records.next_id;
        self.records.snapshots.push(SnapshotRecord {
            id,
            label,
            created_at: now_rfc3339(),
            commit: base.commit,
            tree: base.tree,
            meta,
            warnings: base.warnings,
        });
        self.records.next_id = id + 1;
        let orphaned = self.records.prune_to(self.opts.keep.max(1));
        self.delete_refs(&orphaned)?;
        self.records.save(&self.records_path)?;
        Ok(id)
    }

    /// Take now the look the next snapshot would take as a full one (a
    /// store's first, or one with no journal to continue from), without
    /// recording a snapshot: it fills the side index, notes the tree and
    /// starts the journal, so the next snapshot adds only what changed
    /// since. A run calls it on a thread as soon as the store is open
    /// (the turn loop's `RunSnapshots`): at 100,000 files that look is
    /// most of a first run's cost, and it then overlaps the model's first
    /// answer instead of following it. Nothing is recorded; the seed's
    /// blob copy it starts is settled before anything reads those blobs
    /// ([`blobcopy`]), and a look cut short leaves what a snapshot cut
    /// short leaves. `Ok(false)`: nothing to do (the next
    /// look continues a journal, or no journal is wanted or possible here
    /// and the look would have to be taken again).
    pub fn look_ahead(&mut self) -> Result<bool, SnapshotError> {
        if !self.journal_wanted || !cfg!(target_os = "linux") {
            return Ok(false);
        }
        let _lock = self.lock_and_reload()?;
        self.clear_unfinished_seed();
        let first = !self.git.index().exists() || self.pending_seed.is_some();
        if !first && self.journal.is_some() {
            return Ok(false);
        }
        if first {
            self.first_look()?;
        } else {
            self.look()?;
        }
        Ok(true)
    }

    /// Take the store lock and re-read the records another process may
    /// have changed since we last looked.
    fn lock_and_reload(&mut self) -> Result<StoreLock, SnapshotError> {
        let lock = StoreLock::acquire(&self.dir)?;
        self.records = Records::load(&self.records_path)?;
        Ok(lock)
    }

    /// Re-read the record file (to see snapshots other processes took).
    pub fn reload(&mut self) -> Result<(), SnapshotError> {
        self.lock_and_reload().map(drop)
    }

    fn snapshot_inner(
        &mut self,
        label: Label,
        meta: SnapshotMeta,
        allow_gc: bool,
    ) -> Result<SnapshotId, SnapshotError> {
        // A store without an index yet starts from the user's (see
        // `seed`); if git then fails on it, the index is dropped and the
        // snapshot taken the long way, as without a seed.
        self.clear_unfinished_seed();
        let (warnings, tree) = if self.git.index().exists() && self.pending_seed.is_none() {
            self.look()?
        } else {
            self.first_look()?
        };
        let id = self.records.next_id;
        let commit = match self.records.last() {
            Some(last) if last.tree == tree => last.commit.clone(),
            _ => {
                let msg = format!("codewhale snapshot {id} {label}");
                let commit = self.git.run(&["commit-tree", &tree, "-m", &msg])?.line();
                check_hash("commit-tree", &commit)?;
                let refname = format!("{REF_PREFIX}{commit}");
                self.git.run(&["update-ref", &refname, &commit])?;
                self.commits_since_size_check += 1;
                commit
            }
        };
        self.records.snapshots.push(SnapshotRecord {
            id,
            label,
            created_at: now_rfc3339(),
            commit,
            tree,
            meta,
            warnings,
        });
        self.records.next_id = id + 1;
        let orphaned = self.records.prune_to(self.opts.keep.max(1));
        self.delete_refs(&orphaned)?;
        self.records.save(&self.records_path)?;
        if allow_gc && self.commits_since_size_check >= self.opts.size_check_every.max(1) {
            self.enforce_size_cap()?;
        }
        Ok(id)
    }

    /// The first snapshot of an empty store: seeded from the user's index
    /// when that can be trusted, else `git add -A` of everything.
    fn first_look(&mut self) -> Result<(Vec<String>, String), SnapshotError> {
        let no_journal = self.restart_journal();
        let r = match self.pending_seed.take() {
            Some((_, prepared)) => {
                // Used now, whatever comes of it.
                let _ = std::fs::remove_file(self.dir.join(SEED_MARK));
                prepared
            }
            None => seed::prepare(&self.git, self.git.bin(), &self.workspace, &self.excludes),
        };
        let (r, seeded) = match r {
            Ok(p) => (Ok(()), Some(p)),
            Err(why) => (Err(why), None),
        };
        self.seed = Some(r);
        let r = match seeded {
            None => self.add_and_write_tree(true, None),
            Some(seeded) => match self.seeded_add(seeded) {
                Ok(r) => Ok(r),
                Err(why) => {
                    let _ = std::fs::remove_file(self.git.index());
                    self.seed = Some(Err(why));
                    self.add_and_write_tree(true, None)
                }
            },
        };
        self.after_full_look(r, no_journal)
    }

    /// Drop the journal and, when one is wanted, start a new one (before
    /// the full look it will continue from); why there is none, if not.
    /// With a registered keeper executable the journal is the store's
    /// keeper (reset, or started when none answers); the run keeps its own
    /// only when no keeper can be had.
    fn restart_journal(&mut self) -> Option<String> {
        let old = self.journal.take();
        if !self.journal_wanted {
            return None;
        }
        if let Some(exe) = self.opts.keeper.clone() {
            let found = match old {
                Some(JournalSource::Keeper(k)) => Some(k),
                _ => Keeper::find(&self.dir),
            };
            let kept = match found {
                Some(k) if k.reset().is_ok() => Ok(k),
                _ => Keeper::start(&exe, &self.dir, &self.workspace, &self.opts.codewhale_home),
            };
            if let Ok(k) = kept {
                self.journal = Some(JournalSource::Keeper(k));
                return None;
            }
        }
        match Journal::start(&self.workspace) {
            Ok(j) => {
                self.journal = Some(JournalSource::Local(j));
                None
            }
            Err(why) => Some(why),
        }
    }

    /// What [`EXCLUDES_FILE`] holds for this store's exclusions now.
    fn excludes_fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(env!("CARGO_PKG_VERSION"));
        h.update([0]);
        h.update(layout::exclude_file_text());
        for e in &self.excludes {
            h.update([0]);
            h.update(e);
        }
        format!("{}\n", hex::encode(h.finalize()))
    }

    fn after_full_look(
        &mut self,
        r: Result<(Vec<String>, String), SnapshotError>,
        no_journal: Option<String>,
    ) -> Result<(Vec<String>, String), SnapshotError> {
        match &r {
            // Its changes were not taken: the next look is a full one.
            Err(_) => self.journal = None,
            Ok((_, tree)) => {
                self.save_last_look(tree, true)?;
                let _ =
                    write_if_changed(&self.dir.join(EXCLUDES_FILE), &self.excludes_fingerprint());
            }
        }
        self.last_way = Some(SnapshotWay::Full { no_journal });
        r
    }

    fn save_last_look(&self, tree: &str, index_holds_it: bool) -> Result<(), SnapshotError> {
        LastLook {
            tree: tree.to_string(),
            index_holds_it,
            index_file: index_holds_it
                .then(|| treebuild::index_identity(self.git.index()))
                .flatten(),
        }
        .save(&self.dir)
    }

    /// Bring the side index up to the last look's tree when that tree was
    /// built without it (`read-tree --reset`: a one-tree merge without `-u`, so an entry whose
    /// blob is unchanged keeps its stat data and no file is hashed again).
    /// On failure the index is dropped (the next look hashes everything)
    /// and the error returned: a journal look must not use it then.
    fn index_in_step(&self) -> Result<(), SnapshotError> {
        let Some(last) = LastLook::load(&self.dir) else {
            return Ok(());
        };
        if last.index_holds_it || !self.git.index().exists() {
            return Ok(());
        }
        match self.git.run(&["read-tree", "--reset", &last.tree]) {
            Ok(_) => self.save_last_look(&last.tree, true),
            Err(e) => {
                let _ = std::fs::remove_file(self.git.index());
                LastLook::clear(&self.dir);
                Err(e)
            }
        }
    }

    /// The first snapshot from a seeded index: the tree names blobs the
    /// copy started after the look brings in ([`blobcopy`]; settled before
    /// anything reads them), and trees that are either in the seed's pack
    /// of the index's cache-tree trees (those `write-tree` reused) or written
    /// by it. That pack is made beside the look (on two cores the look
    /// leaves the other idle at times; the pack's `pack-objects` is
    /// single-threaded) and waited for before the first `write-tree`. The
    /// blob copy starts only once the look is taken: beside `add -u` and
    /// `ls-files -o` it took a third process's share of two cores. When
    /// the seed is abandoned its tree pack goes: the full look that follows
    /// must write every tree it needs rather than find one in a pack about
    /// to be deleted (its `write-tree` comes after).
    fn seeded_add(&self, seeded: seed::Prepared) -> Result<(Vec<String>, String), seed::NoSeed> {
        let (looked, pack) = std::thread::scope(|s| {
            let copying = std::thread::Builder::new()
                .name("seed-trees".into())
                .spawn_scoped(s, || seeded.copy_trees(&self.git));
            let index = self.seeded_index();
            // Every `write-tree` below reuses the pack's trees: it waits.
            let pack = match copying {
                Ok(h) => h.join().ok().flatten(),
                Err(_) => seeded.copy_trees(&self.git),
            };
            let looked = match index {
                Ok(Some(warnings)) => self.write_seeded_tree(warnings),
                Ok(None) => self.add_and_write_tree(false, None),
                Err(e) => Err(e),
            };
            (looked.map_err(|e| seed::NoSeed::Index(e.to_string())), pack)
        });
        let copied = match &looked {
            Ok(_) => seeded.copy(&self.git, &self.dir),
            Err(_) => Ok(()),
        };
        if looked.is_err() || copied.is_err() {
            if let Some(name) = &pack {
                seed::drop_pack(&self.git, name);
            }
        }
        let (warnings, tree) = looked?;
        copied?;
        Ok((warnings, tree))
    }

    /// A seeded index's look: `add -u` (the tracked files; only those the
    /// user's git would see changed are hashed) beside `ls-files -o` (the
    /// untracked files the ignore rules keep), then those added by name,
    /// with secrets and deny-read paths left out by name as the journal's
    /// index way does. The same tree as `add -A` with the exclusions
    /// (`tests/it/snapshot_seed.rs`) in less time: git matches the `.env`
    /// globs against every one of 100,000 paths (~0.1 s), and the two
    /// halves run on two cores. Its warnings, or `Ok(None)` when an
    /// exclusion cannot be judged by name or too many files are new:
    /// `add -A` decides then.
    fn seeded_index(&self) -> Result<Option<Vec<String>>, SnapshotError> {
        let Ok(left) = treebuild::LeftOut::new(&self.excludes) else {
            return Ok(None);
        };
        let git = &self.git;
        let (updated, others) = std::thread::scope(|s| {
            let others = s.spawn(|| git.run(&["ls-files", "-z", "-o", "--exclude-standard"]));
            let updated = git.run_tolerant(&["add", "-u", "--ignore-errors"]);
            (updated, others.join())
        });
        let (updated, Ok(others)) = (updated?, others) else {
            return Ok(None);
        };
        let others = others?;
        let (nested, new): (Vec<&[u8]>, Vec<&[u8]>) = others
            .stdout
            .split(|b| *b == 0)
            .filter(|r| !r.is_empty())
            // A nested repository is listed with a trailing slash: never
            // added (see `drop_embedded`).
            .partition(|r| r.ends_with(b"/"));
        let new: Vec<PathBuf> = new
            .into_iter()
            .filter(|p| !left.contains_git(p))
            .map(treebuild::from_git)
            .collect();
        if new.len() > MAX_JOURNAL_PATHSPECS {
            return Ok(None);
        }
        let mut warnings = warning_lines(&updated.stderr);
        warnings.extend(nested.iter().map(|r| {
            let name = String::from_utf8_lossy(&r[..r.len() - 1]);
            format!("warning: nested repository not snapshotted: {name}")
        }));
        warnings.extend(self.add_by_name(&new)?);
        Ok(Some(warnings))
    }

    /// The seeded index's tree (`--missing-ok`: its blobs are being copied).
    fn write_seeded_tree(
        &self,
        warnings: Vec<String>,
    ) -> Result<(Vec<String>, String), SnapshotError> {
        let tree = self.git.run(&["write-tree", "--missing-ok"])?.line();
        check_hash("write-tree", &tree)?;
        Ok((warnings, tree))
    }

    /// A snapshot of an existing side index: only the journal's paths when
    /// it has them, else (or when adding them fails) `git add -A`.
    fn look(&mut self) -> Result<(Vec<String>, String), SnapshotError> {
        let same_excludes = matches!(self.journal, Some(JournalSource::Keeper(_)))
            && std::fs::read_to_string(self.dir.join(EXCLUDES_FILE))
                .is_ok_and(|f| f == self.excludes_fingerprint());
        let took = match &mut self.journal {
            Some(JournalSource::Local(j)) => Some(j.take()),
            Some(JournalSource::Keeper(_)) if !same_excludes => Some(Err(
                "the exclusions changed since the side index was last filled".to_string(),
            )),
            Some(JournalSource::Keeper(k)) => Some(k.take()),
            None => None,
        };
        // Shared by every process of this store (and its keeper): the
        // journal's paths are changes since that look.
        let last = LastLook::load(&self.dir);
        let why = match took {
            Some(Ok(paths)) if paths.is_empty() && last.is_some() => {
                if let Some(JournalSource::Keeper(k)) = &self.journal {
                    let _ = k.ack();
                }
                self.last_way = Some(SnapshotWay::Journal {
                    paths: 0,
                    index: None,
                });
                let tree = last.map(|l| l.tree).unwrap_or_default();
                return Ok((Vec::new(), tree));
            }
            Some(Ok(paths)) => match hard_linked(&self.workspace, &paths) {
                Some(p) => Some(format!(
                    "{} has other hard links (a change through one is not seen at the others)",
                    p.display()
                )),
                None => match self.journal_look(&paths, last) {
                    Ok(Some((r, index))) => {
                        if let Some(JournalSource::Keeper(k)) = &self.journal {
                            // Not acknowledged (the keeper gone): the same
                            // paths come again, which adds nothing wrong.
                            let _ = k.ack();
                        }
                        self.last_way = Some(SnapshotWay::Journal {
                            paths: paths.len(),
                            index,
                        });
                        return Ok(r);
                    }
                    Ok(None) => Some(format!(
                        "more than {MAX_JOURNAL_PATHSPECS} paths changed, or one cannot be \
                         looked at here: a full look decides"
                    )),
                    Err(e) => Some(format!("adding the journal's paths failed: {e}")),
                },
            },
            Some(Err(why)) => Some(why),
            None => None,
        };
        let started = self.restart_journal();
        // A failure drops the index: `add -A` then hashes everything.
        let _ = self.index_in_step();
        let known = LastLook::load(&self.dir);
        let r = self.add_and_write_tree(true, known.as_ref());
        self.after_full_look(r, why.or(started))
    }

    /// The journal's `paths` taken onto the last look's tree: built
    /// without the index when [`treebuild`] can, else through the index
    /// (brought up to that tree first), with the reason. `Ok(None)` as
    /// [`Self::add_paths_and_write_tree`].
    #[allow(clippy::type_complexity)]
    fn journal_look(
        &self,
        paths: &[PathBuf],
        last: Option<LastLook>,
    ) -> Result<Option<((Vec<String>, String), Option<String>)>, SnapshotError> {
        let declined = match last {
            None => "no record of the last look's tree".to_string(),
            Some(_) if !self.opts.build_trees => "building trees is switched off".to_string(),
            Some(last) => match treebuild::build(
                &self.git,
                &self.workspace,
                &last.tree,
                paths,
                &self.excludes,
                MAX_JOURNAL_PATHSPECS,
                blobcopy::pending(&self.dir).is_some(),
            ) {
                Ok(tree) => {
                    self.save_last_look(&tree, false)?;
                    return Ok(Some(((Vec::new(), tree), None)));
                }
                Err(why) => why,
            },
        };
        self.index_in_step()?;
        let Some(r) = self.add_paths_and_write_tree(paths)? else {
            return Ok(None);
        };
        self.save_last_look(&r.1, true)?;
        Ok(Some((r, Some(declined))))
    }

    /// The journal's paths into the side index, as `add -A` of each would
    /// take them: a path gone from the workspace out (`rm --cached -r`,
    /// silent for a path never added); a directory (made, or removed and
    /// made again) listed, every file below it named and every index entry
    /// below it no longer there out; then every named file `add -A`ed by
    /// literal pathspec — `.env` and deny-read paths left out before git
    /// sees them — and `write-tree`. `Ok(None)` when more than
    /// [`MAX_JOURNAL_PATHSPECS`] paths would be named (git matches every
    /// index entry against every pathspec: a full `add -A` is cheaper
    /// then), a path cannot be `lstat`ed for another reason than being
    /// gone, or an exclusion is not a literal path (named to git as it is,
    /// by a full `add -A`).
    fn add_paths_and_write_tree(
        &self,
        paths: &[PathBuf],
    ) -> Result<Option<(Vec<String>, String)>, SnapshotError> {
        // Deny-read paths are left out here, like `.env` paths, and not
        // named to git as exclusions: git 2.47 does not add a file of an
        // untracked directory named by pathspec when any exclusion is also
        // given (found by `tests/it/snapshot_treebuild.rs`).
        // An exclusion of another form would be dropped here: a full
        // `add -A`, which names them all to git, decides then.
        let Ok(left) = treebuild::LeftOut::new(&self.excludes) else {
            return Ok(None);
        };
        let left_out = |p: &Path| left.contains(p);
        let mut gone: Vec<PathBuf> = Vec::new();
        let mut here: Vec<PathBuf> = Vec::new();
        let mut relisted: Vec<&Path> = Vec::new();
        for p in paths {
            match std::fs::symlink_metadata(self.workspace.join(p)) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    gone.push(p.clone())
                }
                // Present but unreadable here (permissions, a name too
                // long): not a deletion; a full `add -A` decides.
                Err(_) => return Ok(None),
                Ok(m) if m.is_dir() => {
                    relisted.push(p);
                    here.extend(files_below(&self.workspace, p)?);
                }
                Ok(_) => here.push(p.clone()),
            }
        }
        here.retain(|p| !left_out(p));
        if gone.len() + here.len() + relisted.len() > MAX_JOURNAL_PATHSPECS {
            return Ok(None);
        }
        if !relisted.is_empty() {
            // A tracked file still there stays tracked (so `add` takes it
            // even when ignored); one no longer there goes.
            let mut args: Vec<&std::ffi::OsStr> = ["--literal-pathspecs", "ls-files", "-z", "--"]
                .iter()
                .map(std::ffi::OsStr::new)
                .collect();
            args.extend(relisted.iter().map(|p| p.as_os_str()));
            let listed = self.git.run(&args)?;
            let present: std::collections::HashSet<&Path> =
                here.iter().map(PathBuf::as_path).collect();
            let mut was: Vec<PathBuf> = Vec::new();
            for rec in listed.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
                let p = treebuild::from_git(rec);
                if !present.contains(p.as_path()) && !left_out(&p) {
                    was.push(p);
                }
            }
            gone.extend(was);
        }
        if gone.len() + here.len() > MAX_JOURNAL_PATHSPECS {
            return Ok(None);
        }
        self.untrack(&gone, false)?;
        let warnings = self.add_by_name(&here)?;
        let tree = self.git.run(&self.write_tree_args(true))?.line();
        check_hash("write-tree", &tree)?;
        Ok(Some((warnings, tree)))
    }

    /// `write-tree`, checking that every object the tree names is in the
    /// store when `verify` — unless the seed's blob copy is not settled
    /// yet, whose blobs are there only once it is ([`blobcopy`]).
    fn write_tree_args(&self, verify: bool) -> Vec<&'static str> {
        if verify && blobcopy::pending(&self.dir).is_none() {
            vec!["write-tree"]
        } else {
            vec!["write-tree", "--missing-ok"]
        }
    }

    /// Wait for the seed's blob copy, when one is pending (see
    /// [`blobcopy`]; the caller holds the store lock): before anything
    /// that reads blobs or drops objects.
    fn settle_copy(&self) -> Result<(), SnapshotError> {
        blobcopy::settle(&self.git, &self.dir, true)
    }

    /// Wait until every snapshot's objects are in the store: the seed's
    /// blob copy, which a run leaves running in the background, finished
    /// (or taken again, when it was cut short). For a caller that reads
    /// the side store itself (a test, a benchmark); a restore does this
    /// on its own.
    pub fn finish_copy(&self) -> Result<(), SnapshotError> {
        let _lock = StoreLock::acquire(&self.dir)?;
        self.settle_copy()
    }

    /// `git add -A` (minus the exclusions) and `write-tree`: the warnings
    /// git printed and the tree. With `known` (the last look) and an index
    /// `add` did not write, its tree without a `write-tree`.
    fn add_and_write_tree(
        &self,
        verify: bool,
        known: Option<&LastLook>,
    ) -> Result<(Vec<String>, String), SnapshotError> {
        let mut args: Vec<&str> = vec!["add", "-A", "--ignore-errors", "--", "."];
        args.extend(self.excludes.iter().map(String::as_str));
        let added = self.git.run_tolerant(&args)?;
        let warnings = self.drop_embedded(&added.stderr)?;
        if let Some(k) = known.filter(|k| k.index_holds_it && k.index_file.is_some()) {
            if k.index_file == treebuild::index_identity(self.git.index()) {
                return Ok((warnings, k.tree.clone()));
            }
        }
        let write_tree = self.write_tree_args(verify);
        let tree = self.git.run(&write_tree)?.line();
        check_hash("write-tree", &tree)?;
        Ok((warnings, tree))
    }

    /// Take the nested repositories `git add` just put in the side index
    /// (its "adding embedded git repository" warnings) out again before
    /// the tree is written; the snapshot's warnings, saying so.
    ///
    /// Why: once a gitlink sits in the side index, the next `git add`
    /// refreshing it runs `git status` *inside* that repository, with that
    /// repository's own configuration and attributes — a clean filter they
    /// name runs on the host, outside any sandbox, and a sandboxed command
    /// can make such a repository (`git init sub`, a config, a changed
    /// file). The user's own `git status` never looks inside a repository
    /// their index does not track, and neither does the store now: a
    /// nested repository is not snapshotted (the user's own submodules,
    /// seeded from their index, are looked at as their git does; the
    /// sandbox protects and audits those configurations). A name git's
    /// message cannot carry back (not UTF-8) fails the snapshot rather
    /// than leave the gitlink in.
    fn drop_embedded(&self, stderr: &str) -> Result<Vec<String>, SnapshotError> {
        let mut warnings = Vec::new();
        let mut nested: Vec<PathBuf> = Vec::new();
        for line in warning_lines(stderr) {
            match line.strip_prefix(EMBEDDED) {
                Some(p) => {
                    warnings.push(format!("warning: nested repository not snapshotted: {p}"));
                    nested.push(PathBuf::from(p));
                }
                None => warnings.push(line),
            }
        }
        if nested.is_empty() {
            return Ok(warnings);
        }
        if let Some(p) = nested
            .iter()
            .find(|p| std::fs::symlink_metadata(self.workspace.join(p).join(".git")).is_err())
        {
            return Err(SnapshotError::GitOutput {
                args: "add".into(),
                detail: format!(
                    "a nested repository added under a name its warning does not carry \
                     back ({}): the snapshot is not taken",
                    p.display()
                ),
            });
        }
        self.untrack(&nested, true)?;
        Ok(warnings)
    }

    /// `git add -A` of `paths` (workspace-relative, named literally): the
    /// snapshot's warnings ([`Self::drop_embedded`]). Nothing to add: none.
    fn add_by_name(&self, paths: &[PathBuf]) -> Result<Vec<String>, SnapshotError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let added = self.git.run_stdin_tolerant(
            &[
                "add",
                "-A",
                "--ignore-errors",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &literal_specs(paths),
        )?;
        self.drop_embedded(&added.stderr)
    }

    /// `git rm --cached -r` of `paths` (named literally) from the side
    /// index; `force` also when the index entry differs from the file and
    /// `HEAD` (a gitlink `add` just wrote).
    fn untrack(&self, paths: &[PathBuf], force: bool) -> Result<(), SnapshotError> {
        if paths.is_empty() {
            return Ok(());
        }
        let mut args = vec!["rm", "--cached", "-r", "-q", "--ignore-unmatch"];
        if force {
            args.push("-f");
        }
        args.extend(["--pathspec-from-file=-", "--pathspec-file-nul"]);
        self.git.run_stdin(&args, &literal_specs(paths)).map(drop)
    }

    /// Whether this store's side index was first filled from the user's
    /// index (`None`: this store found an index already there).
    pub fn seeded_from_user_index(&self) -> Option<bool> {
        self.seed.as_ref().map(Result::is_ok)
    }

    /// Why the side index was not filled from the user's, if it was not.
    pub fn seed_refusal(&self) -> Option<&seed::NoSeed> {
        self.seed.as_ref().and_then(|r| r.as_ref().err())
    }

    /// Files that differ from snapshot `a` to snapshot `b`.
    pub fn diff(&self, a: SnapshotId, b: SnapshotId) -> Result<Vec<FileChange>, SnapshotError> {
        let ta = self.tree_of(a)?;
        let tb = self.tree_of(b)?;
        self.diff_trees(&ta, &tb)
    }

    fn tree_of(&self, id: SnapshotId) -> Result<String, SnapshotError> {
        self.records
            .get(id)
            .map(|r| r.tree.clone())
            .ok_or(SnapshotError::NoSuchSnapshot {
                id,
                keep: self.opts.keep,
            })
    }

    fn diff_trees(&self, a: &str, b: &str) -> Result<Vec<FileChange>, SnapshotError> {
        if a == b {
            return Ok(Vec::new());
        }
        let key = (a.to_string(), b.to_string());
        if let Ok(memo) = self.last_diff.lock() {
            if let Some((k, changes)) = memo.as_ref() {
                if *k == key {
                    return Ok(changes.clone());
                }
            }
        }
        // Blobs a pending copy brings in are read where they are now.
        let git = match blobcopy::pending(&self.dir) {
            Some(from) => self.git.without_index().with_alternate(&from),
            None => self.git.without_index(),
        };
        let out = git.run(&[
            "diff-tree",
            "-r",
            "-z",
            "--raw",
            "--numstat",
            "--no-renames",
            a,
            b,
        ])?;
        let changes = parse_diff_tree(&out.stdout)?;
        if let Ok(mut memo) = self.last_diff.lock() {
            *memo = Some((key, changes.clone()));
        }
        Ok(changes)
    }

    /// Restore the working folder to snapshot `id`, after taking a
    /// `pre-restore:<id>` snapshot. Tracked files not in `id` are deleted,
    /// missing ones recreated, contents and modes reset. Ignored and
    /// excluded files (build output, `.env`) are left alone.
    pub fn restore(&mut self, id: SnapshotId) -> Result<RestoreOutcome, SnapshotError> {
        let _lock = self.lock_and_reload()?;
        self.restore_with(id, SnapshotMeta::default())
    }

    fn restore_with(
        &mut self,
        id: SnapshotId,
        meta: SnapshotMeta,
    ) -> Result<RestoreOutcome, SnapshotError> {
        let target = self.tree_of(id)?;
        // Every blob the target names is in the store before it is read.
        self.settle_copy()?;
        // No gc here: the target's objects must survive until read-tree.
        let pre = self.snapshot_inner(Label::PreRestore(id), meta, false)?;
        let pre_tree = self.tree_of(pre)?;
        let changes = self.diff_trees(&pre_tree, &target)?;
        if !changes.is_empty() {
            // `-u` deletes what the index has and the target has not: the
            // index must hold the pre-restore tree.
            self.index_in_step()?;
            LastLook::clear(&self.dir);
            self.git.run(&["read-tree", "--reset", "-u", &target])?;
            self.save_last_look(&target, true)?;
        }
        Ok(RestoreOutcome {
            restored: id,
            pre_restore: pre,
            changes,
        })
    }

    /// Plan what `undo` would restore, without changing anything.
    pub fn plan_undo(&self, scope: &UndoScope) -> Result<UndoPlan, SnapshotError> {
        plan_undo(&self.records.snapshots, scope)
    }

    /// Revert the most recent not-yet-undone request in `scope`, in one step.
    pub fn undo(&mut self, scope: &UndoScope) -> Result<UndoOutcome, SnapshotError> {
        let _lock = self.lock_and_reload()?;
        let plan = self.plan_undo(scope)?;
        let meta = SnapshotMeta {
            session_id: plan.request.session_id.clone(),
            undoes: Some(plan.request.clone()),
            ..Default::default()
        };
        let restore = self.restore_with(plan.target, meta)?;
        Ok(UndoOutcome { plan, restore })
    }

    /// Bytes used by the side repository's files.
    pub fn store_bytes(&self) -> u64 {
        walkdir::WalkDir::new(self.git.git_dir())
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// When the store is over its size cap: drop the oldest quarter of the
    /// snapshots (never the newest), collect garbage, and repeat.
    fn enforce_size_cap(&mut self) -> Result<(), SnapshotError> {
        self.commits_since_size_check = 0;
        let mut size = self.store_bytes();
        let mut changed = false;
        while size > self.opts.max_store_bytes && self.records.snapshots.len() > 1 {
            let n = (self.records.snapshots.len() / 4).max(1);
            let n = n.min(self.records.snapshots.len() - 1);
            let orphaned = self.records.drop_oldest(n);
            self.delete_refs(&orphaned)?;
            // A copy still writing its pack would lose it to the prune.
            self.settle_copy()?;
            self.git.run(&["gc", "--prune=now", "--quiet"])?;
            size = self.store_bytes();
            changed = true;
        }
        if changed {
            self.records.save(&self.records_path)?;
        }
        Ok(())
    }

    fn delete_refs(&self, commits: &[String]) -> Result<(), SnapshotError> {
        if commits.is_empty() {
            return Ok(());
        }
        let script: String = commits
            .iter()
            .map(|c| format!("delete {REF_PREFIX}{c}\n"))
            .collect();
        self.git
            .run_stdin(&["update-ref", "--stdin"], script.as_bytes())?;
        Ok(())
    }
}

/// The first of `paths` that is a file with more than one link: inotify
/// reports a write under the name it was made through only, so a journal
/// cannot tell which other workspace paths changed with it.
fn hard_linked(workspace: &Path, paths: &[PathBuf]) -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        paths
            .iter()
            .find(|p| {
                std::fs::symlink_metadata(workspace.join(p))
                    .is_ok_and(|m| m.is_file() && m.nlink() > 1)
            })
            .cloned()
    }
    #[cfg(not(unix))]
    {
        let _ = (workspace, paths);
        None
    }
}

/// A token no other store of this machine holds at the same time: the
/// process, the time in nanoseconds and a count within the process (an
/// app server opens one store per session, possibly in the same instant).
fn seed_token() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}-{nanos}-{n}", std::process::id())
}

/// How `git add` names a nested repository it took as a gitlink (its
/// messages are in English: the store's git runs with `LC_ALL=C`).
const EMBEDDED: &str = "warning: adding embedded git repository: ";

/// The lines of git's stderr a snapshot reports (an unreadable file
/// skipped by `--ignore-errors`, say).
fn warning_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with("error:") || l.starts_with("warning:"))
        .map(str::to_string)
        .collect()
}

/// `paths` as NUL-separated literal pathspecs (`--pathspec-file-nul`).
fn literal_specs(paths: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(b":(literal)");
        out.extend_from_slice(p.as_os_str().as_encoded_bytes());
        out.push(0);
    }
    out
}

/// Files and symlinks below `rel` (a directory of `workspace`), relative
/// to the workspace; directories git never snapshots (`.git`, the
/// built-in excluded names) are not entered.
fn files_below(workspace: &Path, rel: &Path) -> Result<Vec<PathBuf>, SnapshotError> {
    let mut out = Vec::new();
    let walk = walkdir::WalkDir::new(workspace.join(rel))
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir()
                    && e.file_name().to_str().is_some_and(guard::skipped_dir))
        });
    for e in walk {
        let e = match e {
            Ok(e) => e,
            // Gone since: the journal has its removal for the next time.
            Err(e)
                if e.io_error().map(std::io::Error::kind) == Some(std::io::ErrorKind::NotFound) =>
            {
                continue
            }
            Err(e) => {
                let path = e.path().unwrap_or(workspace).to_path_buf();
                return Err(SnapshotError::io(
                    "cannot list",
                    path,
                    e.into_io_error()
                        .unwrap_or_else(|| std::io::Error::other("walk failed")),
                ));
            }
        };
        if !e.file_type().is_dir() {
            if let Ok(r) = e.path().strip_prefix(workspace) {
                out.push(r.to_path_buf());
            }
        }
    }
    Ok(out)
}

fn check_hash(what: &str, s: &str) -> Result<(), SnapshotError> {
    if git::is_object_id(s.as_bytes()) {
        Ok(())
    } else {
        Err(SnapshotError::GitOutput {
            args: what.to_string(),
            detail: format!("expected an object id, got {s:?}"),
        })
    }
}

fn write_if_changed(path: &Path, text: &str) -> Result<(), SnapshotError> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| SnapshotError::io("cannot create", parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| SnapshotError::io("cannot write", path, e))
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Parse `git diff-tree -r -z --raw --numstat` output: raw records
/// (`:<old mode> <new mode> <old> <new> <status>\0<path>\0`) followed by
/// numstat records (`<added>\t<removed>\t<path>\0`, `-` for binary).
pub fn parse_diff_tree(out: &[u8]) -> Result<Vec<FileChange>, SnapshotError> {
    let bad = |detail: String| SnapshotError::GitOutput {
        args: "diff-tree".into(),
        detail,
    };
    let text = String::from_utf8_lossy(out);
    let mut fields = text.split('\0').filter(|f| !f.is_empty());
    let mut changes: BTreeMap<String, FileChange> = BTreeMap::new();
    while let Some(field) = fields.next() {
        if let Some(raw) = field.strip_prefix(':') {
            let parts: Vec<&str> = raw.split(' ').collect();
            let [old_mode, new_mode, _, _, status] = parts[..] else {
                return Err(bad(format!("raw record {field:?}")));
            };
            let path = fields
                .next()
                .ok_or_else(|| bad(format!("raw record {field:?} without a path")))?;
            let kind = match status.chars().next() {
                Some('A') => ChangeKind::Added,
                Some('D') => ChangeKind::Deleted,
                _ => ChangeKind::Modified,
            };
            changes.insert(
                path.to_string(),
                FileChange {
                    path: path.to_string(),
                    kind,
                    added_lines: 0,
                    removed_lines: 0,
                    binary: false,
                    mode_changed: kind == ChangeKind::Modified && old_mode != new_mode,
                },
            );
        } else {
            let mut it = field.splitn(3, '\t');
            let (Some(a), Some(r), Some(path)) = (it.next(), it.next(), it.next()) else {
                return Err(bad(format!("numstat record {field:?}")));
            };
            let Some(c) = changes.get_mut(path) else {
                return Err(bad(format!("numstat for {path:?} without a raw record")));
            };
            if a == "-" || r == "-" {
                c.binary = true;
            } else {
                c.added_lines = a.parse().map_err(|_| bad(format!("numstat {field:?}")))?;
                c.removed_lines = r.parse().map_err(|_| bad(format!("numstat {field:?}")))?;
            }
        }
    }
    Ok(changes.into_values().collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn seed_tokens_differ_within_one_instant() {
        let t: std::collections::HashSet<String> = (0..100).map(|_| seed_token()).collect();
        assert_eq!(t.len(), 100);
    }

    #[test]
    fn parses_raw_and_numstat_records() {
        let z = "0".repeat(40);
        let h = "a".repeat(40);
        let out = format!(
            ":100644 100755 {h} {h} M\0run.sh\0:000000 100644 {z} {h} A\0dir/tab\there.txt\0\
             :100644 000000 {h} {z} D\0img.png\0\
             0\t0\trun.sh\0003\t0\tdir/tab\there.txt\0-\t-\timg.png\0"
        );
        let c = parse_diff_tree(out.as_bytes()).unwrap();
        assert_eq!(c.len(), 3);
        let tab = c.iter().find(|c| c.path == "dir/tab\there.txt").unwrap();
        assert_eq!((tab.kind, tab.added_lines), (ChangeKind::Added, 3));
        let img = c.iter().find(|c| c.path == "img.png").unwrap();
        assert!(img.binary && img.kind == ChangeKind::Deleted);
        let sh = c.iter().find(|c| c.path == "run.sh").unwrap();
        assert!(sh.mode_changed && sh.kind == ChangeKind::Modified);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_diff_tree(b":100644 M\0x\0").is_err());
        assert!(parse_diff_tree(b"1\t2\tunknown\0").is_err());
        assert!(parse_diff_tree(b"").unwrap().is_empty());
    }
}
