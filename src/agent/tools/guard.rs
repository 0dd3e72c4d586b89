//! In-process enforcement of the sandbox policy for the file tools, so a
//! file tool is never a way around the sandbox a command would run in.
//!
//! Both the lexical path and the symlink-resolved path are checked (the
//! longest existing ancestor is canonicalised, the rest appended), against
//! the same [`ResolvedPolicy`] the OS backends plan from:
//! - read: denied under any deny-read entry (or its symlink target) and for
//!   workspace `.env`-style names, even ones created after resolution;
//! - write: `read-only` writes nothing; `workspace-write` writes only under
//!   a writable root and never under a write-protected entry or a deny-read
//!   one; `danger-full-access` / `external-sandbox` add no local checks
//!   (that is what those modes mean; the label says so).
//!
//! Residual risk (documented in `docs/EXEC.md`): a path swapped for a
//! symlink between the check and the open is not caught here.

use crate::policy::resolve::{normalize, ResolvedPolicy};
use crate::policy::{tables, SandboxMode};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuardError {
    #[error("{path}: unreadable under the sandbox policy ({reason})")]
    DenyRead { path: PathBuf, reason: String },
    #[error("{path}: write-protected ({reason})")]
    WriteProtected { path: PathBuf, reason: String },
    #[error("{path}: outside the writable roots of workspace-write")]
    OutsideWritable { path: PathBuf },
    #[error("{path}: the sandbox is read-only")]
    ReadOnly { path: PathBuf },
}

/// Checks paths against a resolved policy.
#[derive(Clone, Debug)]
pub struct FsGuard {
    mode: SandboxMode,
    workspace: PathBuf,
    writable: Vec<PathBuf>,
    protected: Vec<(PathBuf, String)>,
    deny_read: Vec<(PathBuf, String)>,
}

fn with_targets(entries: &[crate::policy::resolve::PathEntry]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in entries {
        out.push((e.path.clone(), e.reason.clone()));
        if let Some(t) = &e.target {
            out.push((t.clone(), e.reason.clone()));
        }
    }
    out
}

impl FsGuard {
    pub fn new(r: &ResolvedPolicy) -> Self {
        FsGuard {
            mode: r.mode,
            workspace: r.workspace.clone(),
            writable: r.writable_roots.iter().map(|e| e.path.clone()).collect(),
            protected: with_targets(&r.protected),
            deny_read: with_targets(&r.deny_read),
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// (lexical absolute path, symlink-resolved path).
    pub fn locate(&self, raw: &str) -> (PathBuf, PathBuf) {
        let p = Path::new(raw);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.workspace.join(p)
        };
        let lexical = normalize(&abs);
        (lexical.clone(), real_path(&lexical))
    }

    fn deny_read_hit(&self, paths: [&Path; 2]) -> Option<String> {
        if self.mode == SandboxMode::DangerFullAccess {
            return None;
        }
        for p in paths {
            if let Some((_, why)) = self.deny_read.iter().find(|(d, _)| p.starts_with(d)) {
                return Some(why.clone());
            }
            let env_name = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(tables::is_env_file_name);
            if env_name && crate::policy::paths::inside_workspace(p, &self.workspace) {
                return Some(tables::ENV_FILE_REASON.to_string());
            }
        }
        None
    }

    /// The path to open for reading, or why not.
    pub fn check_read(&self, raw: &str) -> Result<PathBuf, GuardError> {
        let (lexical, real) = self.locate(raw);
        match self.deny_read_hit([&lexical, &real]) {
            Some(reason) => Err(GuardError::DenyRead {
                path: lexical,
                reason,
            }),
            None => Ok(real),
        }
    }

    /// The path to write, or why not.
    pub fn check_write(&self, raw: &str) -> Result<PathBuf, GuardError> {
        let (lexical, real) = self.locate(raw);
        if let Some(reason) = self.deny_read_hit([&lexical, &real]) {
            return Err(GuardError::DenyRead {
                path: lexical,
                reason,
            });
        }
        match self.mode {
            SandboxMode::DangerFullAccess | SandboxMode::ExternalSandbox => return Ok(real),
            SandboxMode::ReadOnly => return Err(GuardError::ReadOnly { path: lexical }),
            SandboxMode::WorkspaceWrite => {}
        }
        for p in [&lexical, &real] {
            if let Some((_, why)) = self.protected.iter().find(|(d, _)| p.starts_with(d)) {
                return Err(GuardError::WriteProtected {
                    path: lexical.clone(),
                    reason: why.clone(),
                });
            }
        }
        if !self.writable.iter().any(|w| real.starts_with(w)) {
            return Err(GuardError::OutsideWritable { path: lexical });
        }
        Ok(real)
    }
}

/// Canonicalise the longest existing ancestor and append the rest, so a
/// path that does not exist yet still resolves through symlinked parents.
fn real_path(lexical: &Path) -> PathBuf {
    let mut existing = lexical.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return lexical.to_path_buf(),
        }
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "guard_tests.rs"]
mod tests;
