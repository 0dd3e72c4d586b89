//! What one protected path is on disk: captured before a run, compared
//! after it, and restored from when the run changed it.
//!
//! Only the protected paths themselves are read (a file's bytes, a
//! protected directory's small tree such as `.git/hooks`), never the
//! workspace around them. Contents are kept in a content-addressed object
//! store in codewhale's state directory, so a path that did not change
//! since the last run costs a hash, not a copy.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A protected directory bigger than this is not guarded (reported).
pub const MAX_TREE_ENTRIES: usize = 512;
/// A protected file bigger than this is not guarded (reported).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// One entry of a protected directory's tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    /// Relative to the protected directory, `/`-separated.
    pub rel: String,
    pub node: Node,
}

/// A filesystem node as far as the guard cares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Node {
    File {
        sha256: String,
        mode: u32,
    },
    Dir {
        mode: u32,
    },
    Symlink {
        target: String,
    },
    /// A socket, fifo or device: never restored, only moved away.
    Other,
}

/// The state of one protected path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum State {
    Missing,
    File {
        sha256: String,
        mode: u32,
    },
    Dir {
        mode: u32,
        tree: Vec<TreeEntry>,
    },
    Symlink {
        target: String,
    },
    Other,
    /// An ancestor between the writable root and the path is a symlink or
    /// not a directory: the path is not where it seems.
    AncestorReplaced {
        ancestor: PathBuf,
    },
    /// Too big to keep a copy of, or unreadable: not guarded.
    Unguardable {
        why: String,
    },
}

/// Where file contents are kept (`objects/<sha256>`).
pub struct Objects {
    pub dir: PathBuf,
}

impl Objects {
    fn path(&self, sha: &str) -> PathBuf {
        self.dir.join(sha)
    }

    /// Hash `p` and keep its bytes unless an object with that hash exists.
    fn store(&self, p: &Path) -> std::io::Result<String> {
        let mut f = std::fs::File::open(p)?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        let sha = hex::encode(Sha256::digest(&bytes));
        let dst = self.path(&sha);
        if !dst.exists() {
            let tmp = self.dir.join(format!(".tmp-{}-{sha}", std::process::id()));
            std::fs::write(&tmp, &bytes)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&tmp, &dst)?;
        }
        Ok(sha)
    }

    /// Hash `p` without keeping it (the after-run comparison).
    fn hash(p: &Path) -> std::io::Result<String> {
        let mut f = std::fs::File::open(p)?;
        let mut h = Sha256::new();
        std::io::copy(&mut f, &mut h)?;
        Ok(hex::encode(h.finalize()))
    }

    /// Write object `sha` to `dst` with `mode` (dst must not exist).
    pub fn restore(&self, sha: &str, dst: &Path, mode: u32) -> std::io::Result<()> {
        std::fs::copy(self.path(sha), dst)?;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode & 0o7777))
    }
}

/// The first ancestor strictly between `root` and `p` that is not a real
/// directory (a symlink or a file), if any. Missing ancestors are fine.
pub fn replaced_ancestor(root: &Path, p: &Path) -> Option<PathBuf> {
    let rel = p.strip_prefix(root).ok()?;
    let mut cur = root.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Some(cur),
            Err(_) => return None,
        }
    }
    None
}

/// Capture `p` (under `root`). `objects` keeps the contents when given
/// (before the run); without it only hashes are computed (after the run).
pub fn capture(root: &Path, p: &Path, objects: Option<&Objects>) -> State {
    if let Some(a) = replaced_ancestor(root, p) {
        return State::AncestorReplaced { ancestor: a };
    }
    let meta = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return State::Missing,
        Err(e) => return State::Unguardable { why: e.to_string() },
    };
    match node(p, &meta, objects) {
        Ok(Node::File { sha256, mode }) => State::File { sha256, mode },
        Ok(Node::Symlink { target }) => State::Symlink { target },
        Ok(Node::Other) => State::Other,
        Ok(Node::Dir { mode }) => {
            let mut tree = Vec::new();
            match walk(p, "", objects, &mut tree) {
                Ok(()) => State::Dir { mode, tree },
                Err(why) => State::Unguardable { why },
            }
        }
        Err(why) => State::Unguardable { why },
    }
}

fn node(p: &Path, meta: &std::fs::Metadata, objects: Option<&Objects>) -> Result<Node, String> {
    let ft = meta.file_type();
    let mode = meta.mode() & 0o7777;
    if ft.is_symlink() {
        let t = std::fs::read_link(p).map_err(|e| e.to_string())?;
        return Ok(Node::Symlink {
            target: t.to_string_lossy().into_owned(),
        });
    }
    if ft.is_dir() {
        return Ok(Node::Dir { mode });
    }
    if !ft.is_file() {
        return Ok(Node::Other);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} is larger than {} MiB; no copy is kept",
            p.display(),
            MAX_FILE_BYTES >> 20
        ));
    }
    let sha = match objects {
        Some(o) => o.store(p),
        None => Objects::hash(p),
    }
    .map_err(|e| format!("reading {}: {e}", p.display()))?;
    Ok(Node::File { sha256: sha, mode })
}

fn walk(
    dir: &Path,
    prefix: &str,
    objects: Option<&Objects>,
    out: &mut Vec<TreeEntry>,
) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
    let mut names: Vec<_> = rd
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("listing {}: {e}", dir.display()))?;
    names.sort();
    for name in names {
        if out.len() >= MAX_TREE_ENTRIES {
            return Err(format!(
                "more than {MAX_TREE_ENTRIES} entries; no copy is kept"
            ));
        }
        let p = dir.join(&name);
        let rel = format!("{prefix}{}", name.to_string_lossy());
        let meta = std::fs::symlink_metadata(&p).map_err(|e| e.to_string())?;
        let n = node(&p, &meta, objects)?;
        let is_dir = matches!(n, Node::Dir { .. });
        out.push(TreeEntry {
            rel: rel.clone(),
            node: n,
        });
        if is_dir {
            walk(&p, &format!("{rel}/"), objects, out)?;
        }
    }
    Ok(())
}

/// Whether two states are the same for the guard. Directory modes and
/// file modes count (a hook made executable is a change).
pub fn same(a: &State, b: &State) -> bool {
    a == b
}

/// Recreate `state` at `p` (which must not exist). Missing parents are
/// created only when `make_parents` (the path's directory is gone).
pub fn restore(objects: &Objects, state: &State, p: &Path) -> std::io::Result<()> {
    match state {
        State::File { sha256, mode } => objects.restore(sha256, p, *mode),
        State::Dir { mode, tree } => {
            std::fs::create_dir(p)?;
            for e in tree {
                let dst = p.join(&e.rel);
                match &e.node {
                    Node::File { sha256, mode } => objects.restore(sha256, &dst, *mode)?,
                    Node::Dir { mode } => {
                        std::fs::create_dir(&dst)?;
                        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(*mode))?;
                    }
                    Node::Symlink { target } => std::os::unix::fs::symlink(target, &dst)?,
                    Node::Other => {}
                }
            }
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(*mode))
        }
        State::Symlink { target } => std::os::unix::fs::symlink(target, p),
        State::Missing
        | State::Other
        | State::AncestorReplaced { .. }
        | State::Unguardable { .. } => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn fx() -> (tempfile::TempDir, PathBuf, Objects) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let od = t.path().join("objects");
        std::fs::create_dir(&od).unwrap();
        (t, root, Objects { dir: od })
    }

    #[test]
    fn a_tree_round_trips_and_a_change_is_seen() {
        let (_t, root, o) = fx();
        let hooks = root.join(".git/hooks");
        std::fs::create_dir_all(hooks.join("sub")).unwrap();
        std::fs::write(hooks.join("pre-commit.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(hooks.join("sub/x"), "x").unwrap();
        let before = capture(&root, &hooks, Some(&o));
        assert!(
            matches!(&before, State::Dir { tree, .. } if tree.len() == 3),
            "{before:?}"
        );
        assert!(same(&before, &capture(&root, &hooks, None)));
        std::fs::write(hooks.join("pre-commit"), "evil").unwrap();
        let after = capture(&root, &hooks, None);
        assert!(!same(&before, &after));
        std::fs::remove_dir_all(&hooks).unwrap();
        restore(&o, &before, &hooks).unwrap();
        assert!(same(&before, &capture(&root, &hooks, None)));
        assert_eq!(std::fs::read(hooks.join("sub/x")).unwrap(), b"x");
    }

    #[test]
    fn a_symlinked_ancestor_is_reported_not_followed() {
        let (t, root, _o) = fx();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("config"), "x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(".git")).unwrap();
        let s = capture(&root, &root.join(".git/config"), None);
        assert_eq!(
            s,
            State::AncestorReplaced {
                ancestor: root.join(".git")
            }
        );
        // Control: a real directory is followed into.
        std::fs::remove_file(root.join(".git")).unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "x").unwrap();
        assert!(matches!(
            capture(&root, &root.join(".git/config"), None),
            State::File { .. }
        ));
    }

    #[test]
    fn missing_and_mode_changes_count() {
        let (_t, root, o) = fx();
        let p = root.join(".envrc");
        assert_eq!(capture(&root, &p, Some(&o)), State::Missing);
        std::fs::write(&p, "x").unwrap();
        let a = capture(&root, &p, Some(&o));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!same(&a, &capture(&root, &p, None)));
    }
}
