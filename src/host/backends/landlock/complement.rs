//! The complement walk: expressing "everything under `root` except these
//! holes" with an allow-list.
//!
//! Landlock rules are unions: a right granted on a directory covers every
//! descendant. To withhold a right from a hole `root/a/b/hole` the walk
//! grants it on `root`'s children except `a`, on `a`'s children except `b`,
//! and on `b`'s children except `hole`. Only the directories on a path to a
//! hole are listed, so the cost is bounded by (number of holes × depth ×
//! directory width), measured in `benches/landlock_ruleset.rs`.
//!
//! Invariants:
//! - Symlinks are never followed and never granted: access through a symlink
//!   is checked by the kernel at the target's real position, which gets its
//!   own rule (or not) from the walk. Granting a rule "on" a symlink would, with
//!   a following open, land on the target — exactly the bug a symlink to
//!   `~/.ssh` would exploit.
//! - Holes are real locations (ancestors canonicalised, last component not
//!   followed); a hole that does not exist still carves its nearest existing
//!   ancestors, so the hole cannot appear later inside a granted tree.
//! - A directory the walk cannot list gets nothing (fails closed) and is
//!   reported.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A trie of hole paths relative to one root.
#[derive(Debug, Default)]
struct Node {
    hole: bool,
    children: BTreeMap<OsString, Node>,
}

impl Node {
    fn insert(&mut self, rel: &Path) {
        let mut node = self;
        for c in rel.components() {
            if node.hole {
                return; // already withheld wholesale
            }
            node = node
                .children
                .entry(c.as_os_str().to_os_string())
                .or_default();
        }
        node.hole = true;
        node.children.clear();
    }
}

/// One path the walk grants the right on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub is_dir: bool,
}

/// Counters for benchmarks and `sandbox explain`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WalkStats {
    /// Directories listed (the carved ones).
    pub dirs_listed: usize,
    /// Entries seen in those listings.
    pub entries_seen: usize,
    /// Symlinks skipped (never granted, never followed).
    pub symlinks_skipped: usize,
    /// The directories listed, in walk order: a cached plan is only reused
    /// while none of them changed (see `landlock_cache`).
    #[serde(skip)]
    pub listed: Vec<PathBuf>,
}

/// What one walk produced.
#[derive(Debug, Default)]
pub struct Walk {
    pub grants: Vec<Grant>,
    /// Directories that lost the right on themselves (new entries created in
    /// them during the run do not get it).
    pub carved: Vec<PathBuf>,
    /// Directories that could not be listed: nothing beneath them is granted.
    pub unlistable: Vec<(PathBuf, String)>,
    pub stats: WalkStats,
}

/// Grant a right on everything under `root` except `holes` (absolute, real
/// locations; holes outside `root` are ignored, a hole at or above `root`
/// withholds the whole root).
pub fn complement(root: &Path, holes: &[PathBuf]) -> Walk {
    let mut trie = Node::default();
    for h in holes {
        if root.starts_with(h) {
            // The root itself lies inside a hole: grant nothing.
            return Walk::default();
        }
        if let Ok(rel) = h.strip_prefix(root) {
            trie.insert(rel);
        }
    }
    let mut walk = Walk::default();
    if trie.children.is_empty() {
        walk.grants.push(Grant {
            path: root.to_path_buf(),
            is_dir: root.is_dir(),
        });
        return walk;
    }
    carve(root, &trie, &mut walk);
    walk
}

fn carve(dir: &Path, node: &Node, walk: &mut Walk) {
    walk.carved.push(dir.to_path_buf());
    walk.stats.dirs_listed += 1;
    walk.stats.listed.push(dir.to_path_buf());
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            walk.unlistable.push((dir.to_path_buf(), e.to_string()));
            return;
        }
    };
    // Sorted so plans are deterministic (snapshot-friendly).
    let mut entries: Vec<(OsString, std::fs::FileType)> = Vec::new();
    for d in rd {
        match d.and_then(|d| Ok((d.file_name(), d.file_type()?))) {
            Ok(e) => entries.push(e),
            Err(e) => walk.unlistable.push((dir.to_path_buf(), e.to_string())),
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    walk.stats.entries_seen += entries.len();
    for (name, ft) in entries {
        if ft.is_symlink() {
            walk.stats.symlinks_skipped += 1;
            continue;
        }
        let path = dir.join(&name);
        match node.children.get(&name) {
            Some(child) if child.hole => {}
            Some(child) if ft.is_dir() => carve(&path, child, walk),
            // A hole "beneath" a non-directory cannot exist: grant it.
            _ => walk.grants.push(Grant {
                path,
                is_dir: ft.is_dir(),
            }),
        }
    }
}

/// The real location of `p`: every ancestor canonicalised (symlinks in
/// ancestors resolved), the last component kept as is (not followed). For a
/// path whose parent does not exist, the nearest existing ancestor is
/// canonicalised and the rest appended.
pub fn real_location(p: &Path) -> PathBuf {
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return p.to_path_buf();
    };
    match std::fs::canonicalize(parent) {
        Ok(c) => c.join(name),
        Err(_) => real_location(parent).join(name),
    }
}
