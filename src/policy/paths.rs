//! Path primitives of resolution: what a path is on disk, lexical
//! normalisation, table expansion and canonicalisation with a per-call
//! memo. Nothing here knows about the policy's tables.

use super::facts::HostFacts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// What a path is on disk at resolution time (`symlink_metadata`, not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    Dir,
    File,
    Symlink,
    /// Does not exist yet. `dir_hint` on the entry says what it would be.
    Missing,
    /// A socket, fifo or device.
    Other,
}

/// One concrete path with why it is in the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEntry {
    /// The path as spelled (absolute, lexically normalised).
    pub path: PathBuf,
    pub kind: PathKind,
    /// For a symlink: its fully resolved target (if that resolves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<PathBuf>,
    /// Whether the entry is (or would be created as) a directory.
    pub dir_hint: bool,
    pub reason: String,
}

/// Lexically normalise an absolute path: drop `.`, fold `..` and `//`.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// "Inside the workspace": `path` (absolute), with `.` and `..` folded, is
/// the workspace or under it. The one definition gate 4 (does a file write
/// need asking?) and the file tools' guard (is a `.env`-named file the
/// workspace's?) both use. Pure, so the gates stay pure; a caller that has
/// resolved symlinks asks about the resolved path too (the guard checks
/// both the lexical and the resolved path).
pub fn inside_workspace(path: &Path, workspace: &Path) -> bool {
    normalize(path).starts_with(normalize(workspace))
}

#[cfg(test)]
mod inside_tests {
    use super::inside_workspace;
    use std::path::Path;

    #[test]
    fn inside_is_component_wise_after_folding_dot_dot() {
        let ws = Path::new("/w/proj");
        for p in [
            "/w/proj",
            "/w/proj/a/b",
            "/w/proj/a/../b",
            "/w/other/../proj/x",
        ] {
            assert!(inside_workspace(Path::new(p), ws), "{p}");
        }
        for p in [
            "/w/proj2/a",
            "/w",
            "/w/proj/../x",
            "/w/proj/a/../../x",
            "/etc",
        ] {
            assert!(!inside_workspace(Path::new(p), ws), "{p}");
        }
        assert!(inside_workspace(
            Path::new("/w/proj/x"),
            Path::new("/w/./proj/")
        ));
    }
}

pub(super) fn kind_of(p: &Path) -> PathKind {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => PathKind::Symlink,
        Ok(m) if m.is_dir() => PathKind::Dir,
        Ok(m) if m.is_file() => PathKind::File,
        Ok(_) => PathKind::Other,
        Err(_) => PathKind::Missing,
    }
}

pub(super) fn entry(path: PathBuf, dir_hint: bool, reason: &str) -> PathEntry {
    let kind = kind_of(&path);
    let target = if kind == PathKind::Symlink {
        std::fs::canonicalize(&path).ok()
    } else {
        None
    };
    let dir_hint = match kind {
        PathKind::Dir => true,
        PathKind::File | PathKind::Other => false,
        PathKind::Symlink => target.as_deref().map(Path::is_dir).unwrap_or(dir_hint),
        PathKind::Missing => dir_hint,
    };
    PathEntry {
        path,
        kind,
        target,
        dir_hint,
        reason: reason.to_string(),
    }
}

/// Expand a table path with `*` components under `base`.
pub(super) fn expand(base: &Path, rel: &str) -> Vec<PathBuf> {
    let mut acc = vec![base.to_path_buf()];
    for part in rel.split('/') {
        if part == "*" {
            let mut next = Vec::new();
            for dir in &acc {
                if let Ok(rd) = std::fs::read_dir(dir) {
                    let mut names: Vec<PathBuf> = rd
                        .flatten()
                        .map(|d| d.path())
                        .filter(|p| p.is_dir())
                        .collect();
                    names.sort();
                    next.extend(names);
                }
            }
            acc = next;
        } else {
            for p in &mut acc {
                p.push(part);
            }
        }
    }
    acc
}

/// Expand a user-config entry (`~/x`, `/abs`, or workspace-relative).
pub(super) fn expand_user_entry(raw: &str, facts: &HostFacts, workspace: &Path) -> Vec<PathBuf> {
    if let Some(rest) = raw.strip_prefix("~/") {
        facts
            .homes
            .iter()
            .map(|h| normalize(&h.join(rest)))
            .collect()
    } else if raw.starts_with('/') {
        vec![normalize(Path::new(raw))]
    } else {
        vec![normalize(&workspace.join(raw))]
    }
}

/// Resolve the git pointer file at `root/.git` (worktrees, submodules):
/// returns the pointed-to git dir and its common dir.
pub(super) fn git_pointer_targets(root: &Path) -> Vec<PathBuf> {
    let dotgit = root.join(".git");
    let Ok(text) = std::fs::read_to_string(&dotgit) else {
        return Vec::new();
    };
    let Some(rel) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let gitdir = normalize(&root.join(rel.trim()));
    let mut out = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        out.push(normalize(&gitdir.join(common.trim())));
    }
    out
}

/// Push `e` unless its path is already present.
pub(super) fn push_unique(list: &mut Vec<PathEntry>, seen: &mut BTreeSet<PathBuf>, e: PathEntry) {
    if seen.insert(e.path.clone()) {
        list.push(e);
    }
}

/// `std::fs::canonicalize` with the parents' answers remembered for one
/// resolution: the tables put dozens of entries under the same few
/// directories (each home, the workspace), and `realpath` would walk
/// every component of each of them again (resolution runs on every call).
#[derive(Default)]
pub(super) struct Canon(std::collections::HashMap<PathBuf, Option<PathBuf>>);

impl Canon {
    /// The canonical form of `p`, or `None` when it does not exist (as
    /// `canonicalize`): the parent's canonical form joined with the last
    /// component, unless that component is a symlink (then resolved whole).
    pub(super) fn of(&mut self, p: &Path) -> Option<PathBuf> {
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            return std::fs::canonicalize(p).ok();
        };
        let cp = self
            .0
            .entry(parent.to_path_buf())
            .or_insert_with(|| std::fs::canonicalize(parent).ok())
            .clone()?;
        let meta = std::fs::symlink_metadata(p).ok()?;
        if meta.file_type().is_symlink() {
            return std::fs::canonicalize(p).ok();
        }
        Some(cp.join(name))
    }
}

/// Add `path` and, when symlinks make it differ, its canonical form.
pub(super) fn push_with_canonical(
    canon: &mut Canon,
    list: &mut Vec<PathEntry>,
    seen: &mut BTreeSet<PathBuf>,
    path: PathBuf,
    dir: bool,
    reason: &str,
) {
    let e = entry(path.clone(), dir, reason);
    // A path that does not exist has no canonical form (`canonicalize`
    // fails on it): skip the per-component `readlink` walk, which is most
    // of the resolution time for the (mostly absent) deny-read table.
    let canonical = match e.kind {
        PathKind::Missing => None,
        _ => canon.of(&path),
    };
    push_unique(list, seen, e);
    if let Some(c) = canonical {
        if c != path {
            push_unique(list, seen, entry(c, dir, reason));
        }
    }
}
