//! The opener: makes the command's own new files readable next to a masked
//! `.env` in the landlock tier.
//!
//! A deny-read hole such as `<ws>/.env` is carved with the complement walk:
//! read is granted on `<ws>`'s existing children except `.env`, not on
//! `<ws>` itself. An entry the command creates in `<ws>` later (`target/`,
//! `build/`, `new.txt`) has no rule, inherits `<ws>`'s rights (write, no
//! read), and a Landlock domain can never gain rules. So, only while such a
//! carve exists in a writable root, the command gets one more seccomp
//! filter ([`bpf`]) that turns the open family into user notifications,
//! and a supervisor thread in codewhale ([`serve`]) either hands each call
//! back to the kernel (`CONTINUE`: Landlock judges, as without the opener)
//! or — only for a path beneath a *new* entry of a carved root — opens the
//! file itself and installs the fd in the command. Its safety rules are in
//! [`serve`]; the pure parts are in [`decide`].
//!
//! What it does not do: `execve` is not an open, and Landlock's execute
//! right is checked on the file itself, so a binary the command builds in
//! such an entry (`./target/debug/app`, `cargo test`'s test binaries)
//! cannot be executed in the same run. Reported `over-restricted`.

pub mod bpf;
pub mod decide;
pub mod serve;

use super::plan::LandlockPlan;
use super::rights::{READ_FILE, WRITE_FILE};
use crate::policy::resolve::{PathKind, ResolvedPolicy};
use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub use serve::{Stats, Supervisor};

/// How many entries of a deny-read directory inside a writable root are
/// recorded (so a secret moved out of it is still known by its inode);
/// beyond that the opener stays off.
pub const DENY_DIR_LIMIT: usize = 20_000;

/// One carved directory inside a writable region.
#[derive(Debug)]
pub struct Root {
    pub path: PathBuf,
    /// `O_PATH` handle: every open of the opener is relative to it.
    pub fd: OwnedFd,
    /// Inodes of the entries Landlock has a rule for (or that are carved
    /// themselves): opens beneath them are the kernel's to judge.
    pub known: HashSet<(u64, u64)>,
    /// Whether the domain lets the command write here (new entries inherit
    /// it): the opener never opens for writing otherwise.
    pub writable: bool,
}

/// Everything the supervisor consults.
#[derive(Debug)]
pub struct Spec {
    pub roots: Vec<Root>,
    /// Deny-read items' inodes, and every inode beneath a deny-read
    /// directory inside a writable region.
    pub deny_inodes: HashSet<(u64, u64)>,
    /// Deny-read items' paths (as spelled and their real locations).
    pub deny_paths: Vec<PathBuf>,
}

fn ino(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

impl Spec {
    /// The spec for `plan`, `Ok(None)` when nothing is carved inside a
    /// writable region (the opener is not used), `Err` with the reason
    /// when it is needed but cannot be set up safely.
    pub fn build(policy: &ResolvedPolicy, plan: &LandlockPlan) -> Result<Option<Spec>, String> {
        if plan.opener_dirs.is_empty() {
            return Ok(None);
        }
        if bpf::this_arch().is_none() {
            return Err(format!(
                "not offered on {} (x86_64 and aarch64 only)",
                std::env::consts::ARCH
            ));
        }
        let mut regions: Vec<PathBuf> = policy
            .writable_roots
            .iter()
            .map(|r| r.path.clone())
            .collect();
        regions.extend(plan.tmpdir.iter().cloned());
        let mut deny_inodes = HashSet::new();
        let mut deny_paths = Vec::new();
        for e in &policy.deny_read {
            deny_paths.push(e.path.clone());
            let real = super::complement::real_location(&e.path);
            if real != e.path {
                deny_paths.push(real.clone());
            }
            if let Some(t) = &e.target {
                deny_paths.push(t.clone());
            }
            if e.kind == PathKind::Missing {
                continue;
            }
            for p in [Some(&e.path), e.target.as_ref()].into_iter().flatten() {
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    deny_inodes.insert(ino(&m));
                    let inside = regions.iter().any(|r| p.starts_with(r));
                    if m.is_dir() && inside {
                        record_tree(p, &mut deny_inodes)?;
                    }
                }
            }
        }
        let mut roots = Vec::new();
        for dir in &plan.opener_dirs {
            let fd = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(dir)
                .map_err(|e| format!("opening {}: {e}", dir.display()))?;
            let mut known = HashSet::new();
            let children = plan
                .rules
                .iter()
                .filter(|r| r.access.contains(READ_FILE))
                .map(|r| &r.path)
                .chain(plan.opener_dirs.iter())
                .chain(plan.carved_dirs.iter())
                .filter(|p| p.parent() == Some(dir.as_path()));
            for c in children {
                if let Ok(m) = std::fs::symlink_metadata(c) {
                    known.insert(ino(&m));
                }
            }
            let writable = plan
                .rules
                .iter()
                .any(|r| r.is_dir && dir.starts_with(&r.path) && r.access.contains(WRITE_FILE));
            roots.push(Root {
                path: dir.clone(),
                fd: fd.into(),
                known,
                writable,
            });
        }
        Ok(Some(Spec {
            roots,
            deny_inodes,
            deny_paths,
        }))
    }

    /// The carved roots, for the report.
    pub fn root_paths(&self) -> Vec<&Path> {
        self.roots.iter().map(|r| r.path.as_path()).collect()
    }
}

/// Record every inode beneath `dir` (not following symlinks).
fn record_tree(dir: &Path, into: &mut HashSet<(u64, u64)>) -> Result<(), String> {
    for (n, e) in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .enumerate()
    {
        if n > DENY_DIR_LIMIT {
            return Err(format!(
                "deny-read directory {} has more than {DENY_DIR_LIMIT} entries (a secret moved out \
                 of it could not be recognised)",
                dir.display()
            ));
        }
        let e = e.map_err(|e| format!("listing deny-read directory {}: {e}", dir.display()))?;
        let m = e
            .metadata()
            .map_err(|err| format!("stat of {}: {err}", e.path().display()))?;
        into.insert(ino(&m));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
