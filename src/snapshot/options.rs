//! Snapshot store settings and their defaults.

use crate::policy::ResolvedPolicy;
use std::path::{Path, PathBuf};

/// Keep this many snapshots (newest first).
pub const DEFAULT_KEEP: usize = 50;
/// Prune the store when its files exceed this many bytes (500 MB).
pub const DEFAULT_MAX_STORE_BYTES: u64 = 500 * 1024 * 1024;
/// Refuse workspaces holding more than this many bytes (2 GB, after ignores).
pub const DEFAULT_MAX_WORKSPACE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Refuse workspaces with more than this many entries (after ignores).
pub const DEFAULT_MAX_WORKSPACE_ENTRIES: u64 = 200_000;
/// Re-measure the store size after this many new commits. Measuring walks
/// the object directory, so it is amortised rather than done every time.
pub const DEFAULT_SIZE_CHECK_EVERY: u32 = 16;

/// Settings for [`super::SnapshotStore::open`].
#[derive(Clone, Debug)]
pub struct SnapshotOptions {
    /// `$CODEWHALE_HOME` (stores live under `snapshots/` in it).
    pub codewhale_home: PathBuf,
    pub keep: usize,
    pub max_store_bytes: u64,
    pub max_workspace_bytes: u64,
    pub max_workspace_entries: u64,
    pub size_check_every: u32,
    /// Absolute deny-read paths (from the resolved sandbox policy); those
    /// inside the workspace are never snapshotted. `.env` files are always
    /// left out, whether listed here or not.
    pub deny_read: Vec<PathBuf>,
    /// Home directory candidates (refused as workspaces, with ancestors).
    pub homes: Vec<PathBuf>,
    /// The git binary; `None` looks `git` up on `PATH`.
    pub git: Option<PathBuf>,
    /// The executable that runs the store's journal keeper
    /// (`codewhale __snapshot-keeper`, [`super::keeper`]); `None`: a run
    /// keeps its journal in process. Defaults to what the CLI registered.
    pub keeper: Option<PathBuf>,
    /// Build a journal snapshot's tree from the last one without the side
    /// index ([`super::treebuild`]); off, every journal snapshot goes
    /// through the index (the tests compare the two ways).
    pub build_trees: bool,
    /// A store without an index yet seeds it from the user's while `open`
    /// checks the workspace's size (two cores instead of one after the
    /// other; [`super::seed`]): for a caller that snapshots right after
    /// opening (a run). The blobs are copied only once the size passed.
    pub seed_at_open: bool,
    /// With `seed_at_open`, a store without an index yet also finds or
    /// starts its journal keeper ([`Self::keeper`]) while `open` walks and
    /// seeds, instead of at the first look: the keeper's watches (~50 ms
    /// at 100,000 files) must be in place before that look starts, and
    /// they need nothing the walk or the seed finds. For a caller that
    /// keeps a journal (a run, [`super::SnapshotStore::enable_journal`]).
    pub journal_at_open: bool,
    /// Where the user's git finds its per-user files (see [`UserDirs`]).
    pub user_dirs: UserDirs,
}

/// `$HOME` and `$XDG_CONFIG_HOME` as the user's git sees them: where its
/// global config, attributes file and excludes file live. The seed reads
/// the user's configuration through them, and the side repository's
/// commands are given the same two, so both find the same excludes file
/// (git's default `core.excludesFile`, which the store honours). A caller
/// that is not the user's process — a test — names its own home here and
/// the machine's never plays a part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDirs {
    pub home: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
}

impl UserDirs {
    /// This process's `$HOME` and `$XDG_CONFIG_HOME` (an empty one is unset,
    /// as git reads them).
    pub fn from_env() -> Self {
        let nonempty = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        UserDirs {
            home: nonempty("HOME"),
            xdg_config_home: nonempty("XDG_CONFIG_HOME"),
        }
    }

    /// A user whose home is `home` (no `$XDG_CONFIG_HOME`).
    pub fn at_home(home: impl Into<PathBuf>) -> Self {
        UserDirs {
            home: Some(home.into()),
            xdg_config_home: None,
        }
    }

    /// git's per-user configuration directory for these two
    /// ([`crate::policy::git_code::xdg_git_dir`], git's rule).
    pub fn git_config_dir(&self) -> Option<PathBuf> {
        crate::policy::git_code::xdg_git_dir(
            self.home.as_deref().map(Path::as_os_str),
            self.xdg_config_home.as_deref().map(Path::as_os_str),
        )
    }

    /// Give `cmd` exactly these two (an unset one removed).
    pub fn apply(&self, cmd: &mut std::process::Command) {
        for (key, value) in [
            ("HOME", &self.home),
            ("XDG_CONFIG_HOME", &self.xdg_config_home),
        ] {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
    }
}

impl SnapshotOptions {
    /// Defaults rooted at `codewhale_home`, with this host's home directories.
    pub fn new(codewhale_home: impl Into<PathBuf>) -> Self {
        SnapshotOptions {
            codewhale_home: codewhale_home.into(),
            keep: DEFAULT_KEEP,
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            max_workspace_bytes: DEFAULT_MAX_WORKSPACE_BYTES,
            max_workspace_entries: DEFAULT_MAX_WORKSPACE_ENTRIES,
            size_check_every: DEFAULT_SIZE_CHECK_EVERY,
            deny_read: Vec::new(),
            homes: crate::policy::HostFacts::detect().homes,
            git: None,
            keeper: super::keeper::exe().map(Path::to_path_buf),
            build_trees: true,
            seed_at_open: false,
            journal_at_open: false,
            user_dirs: UserDirs::from_env(),
        }
    }

    /// Defaults under `$CODEWHALE_HOME` (else `~/.codewhale`); `None` when
    /// neither that nor `$HOME` is set.
    pub fn from_env() -> Option<Self> {
        super::layout::codewhale_home().map(Self::new)
    }

    /// Exclude every deny-read path of a resolved sandbox policy.
    pub fn with_resolved_policy(mut self, resolved: &ResolvedPolicy) -> Self {
        self.deny_read.extend(deny_read_paths(resolved));
        self
    }
}

/// Every existing deny-read path of `resolved`, and the targets of the
/// symlinked ones.
pub fn deny_read_paths(resolved: &ResolvedPolicy) -> Vec<PathBuf> {
    resolved
        .existing_deny_read()
        .map(|e| e.path.clone())
        .chain(
            resolved
                .existing_deny_read()
                .filter_map(|e| e.target.clone()),
        )
        .collect()
}
