//! The local write guard of the sync-back: the same write-protected rules as
//! the local backends, applied on the host to files a remote command changed.
//!
//! Why: a remote sandbox can write anything in its copy of the workspace. If
//! sync-back copied `.git/hooks/pre-commit` or `.envrc` home, the remote
//! command would run code on the host later — exactly what the protected
//! table exists to stop. So every path coming back is checked here:
//!
//! - it must be a plain relative path (no `..`, no root, no NUL);
//! - it must not be, or lie under, a `resolved.protected` path (or its
//!   symlink target) or a deny-read path (a remote `.env` must not
//!   overwrite the user's secrets file);
//! - `.git/hooks`, `.git/config`, `.git/modules/*/{hooks,config}` and `.git`
//!   pointer files are refused at any depth (nested repositories run hooks
//!   too), compared case-insensitively (case-insensitive filesystems);
//! - under a scoped writer's `write_scope` (the workspace is then not a
//!   writable root), it must lie inside one of the writable roots the
//!   scope resolved to: the remote copy is writable whole, the host's
//!   workspace only where the scope says;
//! - no existing ancestor inside the workspace may be a symlink, and the
//!   file itself must not be a symlink or a directory: sync never follows a
//!   link out of the workspace.
//!
//! Files are written to a temporary sibling and renamed into place, so even
//! a symlink raced in after the check is replaced, not followed.

use crate::policy::{ResolvedPolicy, SandboxMode};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

#[derive(Clone, Debug)]
pub struct WriteGuard {
    workspace: PathBuf,
    /// Lower-cased protected and deny-read paths (and symlink targets).
    blocked: Vec<(String, String)>,
    nested_git_rule: bool,
    /// A scoped writer's writable roots (`None`: the whole workspace).
    scope: Option<Vec<PathBuf>>,
}

impl WriteGuard {
    pub fn new(resolved: &ResolvedPolicy) -> Self {
        let mut blocked = Vec::new();
        for e in &resolved.protected {
            for p in std::iter::once(&e.path).chain(e.target.iter()) {
                blocked.push((lower(p), format!("write-protected: {}", e.reason)));
            }
        }
        for e in &resolved.deny_read {
            for p in std::iter::once(&e.path).chain(e.target.iter()) {
                blocked.push((lower(p), format!("deny-read: {}", e.reason)));
            }
        }
        let scoped = resolved.mode == SandboxMode::WorkspaceWrite
            && !resolved
                .writable_roots
                .iter()
                .any(|r| r.path == resolved.workspace);
        WriteGuard {
            workspace: resolved.workspace.clone(),
            blocked,
            nested_git_rule: resolved.mode != SandboxMode::DangerFullAccess,
            scope: scoped.then(|| {
                resolved
                    .writable_roots
                    .iter()
                    .map(|r| r.path.clone())
                    .collect()
            }),
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Validate `rel` lexically against the tables; returns the local path.
    pub fn check(&self, rel: &str) -> Result<PathBuf, String> {
        let rel_path = Path::new(rel);
        if rel.is_empty() || rel.contains('\0') {
            return Err("empty or NUL in path".into());
        }
        let mut names = Vec::new();
        for c in rel_path.components() {
            match c {
                Component::Normal(n) => names.push(n.to_string_lossy().to_ascii_lowercase()),
                Component::CurDir => {}
                _ => return Err("not a plain relative path (`..` or absolute)".into()),
            }
        }
        if names.is_empty() {
            return Err("names the workspace itself".into());
        }
        let local = self.workspace.join(rel_path);
        if let Some(roots) = &self.scope {
            if !roots.iter().any(|r| local.starts_with(r)) {
                return Err("outside this sub-agent's write scope".into());
            }
        }
        let local_l = lower(&local);
        for (p, why) in &self.blocked {
            if local_l == *p || local_l.starts_with(&format!("{p}/")) {
                return Err(why.clone());
            }
        }
        if self.nested_git_rule {
            if let Some(why) = nested_git(&names) {
                return Err(why.into());
            }
        }
        Ok(local)
    }

    /// [`Self::check`] plus the on-disk checks (symlinked ancestors, the
    /// target being a link or a directory). Call right before writing.
    pub fn check_on_disk(&self, rel: &str) -> Result<PathBuf, String> {
        let local = self.check(rel)?;
        let mut cur = self.workspace.clone();
        let parent_rel = Path::new(rel).parent().unwrap_or(Path::new(""));
        for c in parent_rel.components() {
            if let Component::Normal(n) = c {
                cur.push(n);
                match std::fs::symlink_metadata(&cur) {
                    Ok(m) if m.file_type().is_symlink() => {
                        return Err(format!(
                            "{} is a symlink locally; not followed",
                            cur.display()
                        ))
                    }
                    Ok(m) if !m.is_dir() => {
                        return Err(format!("{} is not a directory locally", cur.display()))
                    }
                    _ => {}
                }
            }
        }
        match std::fs::symlink_metadata(&local) {
            Ok(m) if m.file_type().is_symlink() => Err("is a symlink locally; not replaced".into()),
            Ok(m) if m.is_dir() => Err("is a directory locally".into()),
            _ => Ok(local),
        }
    }

    /// Write `bytes` to `rel` (temp file + rename; keeps an existing file's
    /// permissions, sets the executable bits when `exec` and the file is new).
    pub fn write(&self, rel: &str, bytes: &[u8], exec: bool) -> Result<PathBuf, String> {
        let local = self.check_on_disk(rel)?;
        let parent = local.parent().ok_or("has no parent directory")?;
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        // Re-check after creating directories: they must still be plain dirs.
        self.check_on_disk(rel)?;
        let old_perm = std::fs::metadata(&local).ok().map(|m| m.permissions());
        let mut tmp = tempfile::NamedTempFile::new_in(parent)
            .map_err(|e| format!("temp file in {}: {e}", parent.display()))?;
        tmp.write_all(bytes).map_err(|e| format!("writing: {e}"))?;
        let perm = match old_perm {
            Some(p) => Some(p),
            None => new_file_permissions(exec),
        };
        if let Some(p) = perm {
            tmp.as_file()
                .set_permissions(p)
                .map_err(|e| format!("chmod: {e}"))?;
        }
        tmp.persist(&local)
            .map_err(|e| format!("renaming into place: {}", e.error))?;
        Ok(local)
    }

    /// Remove `rel` (a regular file) locally.
    pub fn delete(&self, rel: &str) -> Result<PathBuf, String> {
        let local = self.check_on_disk(rel)?;
        match std::fs::remove_file(&local) {
            Ok(()) => Ok(local),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(local),
            Err(e) => Err(format!("removing: {e}")),
        }
    }
}

#[cfg(unix)]
fn new_file_permissions(exec: bool) -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(if exec {
        0o755
    } else {
        0o644
    }))
}

#[cfg(not(unix))]
fn new_file_permissions(_exec: bool) -> Option<std::fs::Permissions> {
    None
}

fn lower(p: &Path) -> String {
    p.to_string_lossy().to_ascii_lowercase()
}

/// The git rules that apply at any depth, on lower-cased names.
fn nested_git(names: &[String]) -> Option<&'static str> {
    for (i, n) in names.iter().enumerate() {
        if n != ".git" {
            continue;
        }
        let rest = &names[i + 1..];
        match rest {
            [] => return Some("a .git pointer file redirects hooks and config"),
            [h, ..] if h == "hooks" => return Some("git hooks run on the host"),
            [c] if c == "config" => return Some("git config can run host commands"),
            [m, _, h, ..] if m == "modules" && h == "hooks" => {
                return Some("submodule hooks run on the host")
            }
            [m, _, c] if m == "modules" && c == "config" => {
                return Some("submodule config can name host commands")
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "guard_tests.rs"]
mod tests;
