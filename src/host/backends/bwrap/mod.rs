//! The bubblewrap planner: a pure function from a [`ResolvedPolicy`] to the
//! exact bwrap argv. Pure so it is snapshot-tested on every OS; the spawn
//! step (`spawn.rs`, Linux only) just runs what this returns.
//!
//! Mount order is the security property (later mounts win):
//! 1. namespaces: `--new-session --die-with-parent --unshare-all`
//!    (`--share-net` only when the policy allows network);
//! 2. `--ro-bind / /`, a fresh `/dev`, a fresh `/proc`, a private `/tmp`;
//! 3. paths the private `/tmp` would hide but the policy shows (a workspace,
//!    home or the helper binary living under `/tmp`), read-only;
//! 4. `--bind` for each writable root;
//! 5. the existing directories between a writable root and a protected
//!    path are bound onto themselves, so they cannot be renamed away
//!    (EBUSY);
//! 6. deny-read masks: directories get an empty read-only tmpfs, regular
//!    files an empty read-only regular file (`--ro-bind-data`; a tracked
//!    file with local changes its indexed version, see
//!    `policy::git_view`), sockets and files git must not add `/dev/null`;
//! 7. write-protected paths: existing ones are re-bound read-only onto
//!    themselves;
//! 8. last, each repository's `info/exclude` extended by the masked
//!    untracked names (read-only, over any protected `.git` mount).
//!
//! Protected paths that do not exist are *not* mounted: a mount needs an
//! entry to mount on, and bwrap would create it on the host, in the user's
//! workspace, for the whole run (visible to `git status`, `git add -A`,
//! editors' watchers). They are listed in [`BwrapPlan::guarded_after`]
//! and held by the after-run integrity check (`host::integrity`): created
//! during the run, they are moved into codewhale's quarantine when it
//! ends, and the run is `partial` saying so.
//!
//! Protected paths that are symlinks are refused (see [`PlanError`]): a
//! mount cannot pin a symlink's own directory entry, so the link could be
//! replaced by a regular file inside the writable root.

#[cfg(target_os = "linux")]
pub mod helper;
#[cfg(target_os = "linux")]
pub mod spawn;
pub mod temp_env;

use crate::host::enforcement::{Namespace, PartialItem, Shortfall};
use crate::policy::resolve::{PathKind, ResolvedPolicy};
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Inputs of the plan that are not part of the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BwrapOptions {
    /// Absolute path of the bwrap binary (resolved outside the workspace).
    pub bwrap: PathBuf,
    /// Working directory of the command inside the sandbox.
    pub cwd: PathBuf,
    /// The in-sandbox helper stage: `(codewhale binary, args before the
    /// command)`. `None` runs the command directly (benchmarks, raw probes).
    pub helper: Option<(PathBuf, Vec<OsString>)>,
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// `network = "allowlist"`: the private directory holding the egress
    /// proxy's Unix socket, bound read-only at the same path (connecting
    /// to a socket needs no write access to its mount) so the bridge can
    /// reach it even when it lives under the private `/tmp`.
    pub egress_dir: Option<PathBuf>,
}

/// The plan: the argv plus what the `Enforcement` report should state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BwrapPlan {
    #[serde(serialize_with = "lossy_args")]
    pub argv: Vec<OsString>,
    /// The contents of the `--ro-bind-data` mounts, in argv order: the
    /// spawn step hands bwrap one fd per entry and writes its number over
    /// [`DataMount::arg`] (the plan holds a placeholder there).
    #[serde(skip)]
    pub data: Vec<DataMount>,
    /// Deny-read paths masked by a mount.
    pub masked: Vec<PathBuf>,
    /// Write-protected paths re-mounted read-only (the existing ones).
    pub protected: Vec<PathBuf>,
    /// Missing protected paths inside writable roots: not mounted (that
    /// would create them on the host), held by the after-run check.
    pub guarded_after: Vec<PathBuf>,
    /// Namespaces the argv creates.
    pub namespaces: Vec<Namespace>,
    /// Policy entries the plan could not express (for `Enforcement.partial`).
    pub skipped: Vec<PartialItem>,
}

/// One `--ro-bind-data FD DEST` of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataMount {
    /// The index in the argv of the `FD` argument.
    pub arg: usize,
    /// What bwrap copies into the read-only file at `DEST`.
    pub content: Vec<u8>,
}

/// The placeholder for a data fd until the spawn step has one (what
/// `explain` prints).
pub const DATA_FD_PLACEHOLDER: &str = "@data-fd";

#[derive(Default)]
struct DataMounts(Vec<DataMount>);

impl DataMounts {
    fn push(&mut self, a: &mut Argv, dest: &Path, content: &[u8]) {
        a.flag("--ro-bind-data");
        self.0.push(DataMount {
            arg: a.0.len(),
            content: content.to_vec(),
        });
        a.flag(DATA_FD_PLACEHOLDER);
        a.0.push(dest.as_os_str().to_owned());
    }
}

fn lossy_args<S: serde::Serializer>(a: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(a.iter().map(|x| x.to_string_lossy()))
}

impl BwrapPlan {
    /// The argv as one shell-quoted line, for `explain`.
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| {
                let s = a.to_string_lossy();
                if !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@".contains(c))
                {
                    s.into_owned()
                } else {
                    format!("'{}'", s.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error(
        "protected path {path} is a symlink (to {target}); a sandbox cannot stop a symlink inside \
         a writable root from being replaced, so codewhale refuses to run. Replace the link with \
         the file it points to, or make its directory not writable"
    )]
    SymlinkedProtectedPath { path: PathBuf, target: String },
    #[error("bwrap cannot mount {0}: the path is not valid for a mount point (relative)")]
    RelativePath(PathBuf),
}

/// codewhale's per-user runtime directory under `$XDG_RUNTIME_DIR` (or the
/// temp dir), outside every writable root (older versions kept placeholder
/// mount sources here).
pub fn placeholder_base() -> PathBuf {
    #[cfg(unix)]
    let uid = nix::unistd::getuid().as_raw().to_string();
    #[cfg(not(unix))]
    let uid = "user".to_string();
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("codewhale-{uid}"))
}

/// The namespaces `--unshare-all` creates (minus net with `--share-net`).
const ALL_NAMESPACES: &[Namespace] = &[
    Namespace::User,
    Namespace::Ipc,
    Namespace::Pid,
    Namespace::Net,
    Namespace::Uts,
    Namespace::Cgroup,
    Namespace::Mount,
];

struct Argv(Vec<OsString>);

impl Argv {
    fn flag(&mut self, f: &str) {
        self.0.push(f.into());
    }
    fn one(&mut self, f: &str, a: &Path) {
        self.0.push(f.into());
        self.0.push(a.as_os_str().to_owned());
    }
    fn two(&mut self, f: &str, a: &Path, b: &Path) {
        self.0.push(f.into());
        self.0.push(a.as_os_str().to_owned());
        self.0.push(b.as_os_str().to_owned());
    }
}

fn absolute(p: &Path) -> Result<(), PlanError> {
    if p.is_absolute() {
        Ok(())
    } else {
        Err(PlanError::RelativePath(p.to_path_buf()))
    }
}

/// Build the bwrap argv for `policy`.
pub fn plan(policy: &ResolvedPolicy, opts: &BwrapOptions) -> Result<BwrapPlan, PlanError> {
    let mut a = Argv(vec![opts.bwrap.as_os_str().to_owned()]);
    a.flag("--new-session");
    a.flag("--die-with-parent");
    a.flag("--unshare-all");
    let mut namespaces = ALL_NAMESPACES.to_vec();
    if policy.network {
        a.flag("--share-net");
        namespaces.retain(|n| *n != Namespace::Net);
    }
    a.two("--ro-bind", Path::new("/"), Path::new("/"));
    a.one("--dev", Path::new("/dev"));
    a.one("--proc", Path::new("/proc"));

    let tmp = Path::new("/tmp");
    if policy.private_tmp {
        a.one("--tmpfs", tmp);
        // What the private /tmp hides but the policy means to show.
        let mut reshow: Vec<&Path> = Vec::new();
        reshow.push(&policy.workspace);
        reshow.extend(policy.homes.iter().map(PathBuf::as_path));
        if let Some((exe, _)) = &opts.helper {
            reshow.push(exe);
        }
        let mut seen: Vec<&Path> = Vec::new();
        for p in reshow {
            if p.starts_with(tmp) && p != tmp && !seen.iter().any(|s| p.starts_with(s)) {
                absolute(p)?;
                a.two("--ro-bind-try", p, p);
                seen.push(p);
            }
        }
    }

    for root in &policy.writable_roots {
        absolute(&root.path)?;
        a.two("--bind", &root.path, &root.path);
    }

    // Pin every existing directory between a writable root and a
    // protected path: a bind mount cannot be renamed away (EBUSY), so `mv
    // .git .git2; mkdir .git` cannot sidestep the protected mounts nested
    // inside it. A protected regular file (a `.git` pointer file) seals
    // what lies beneath it. A missing ancestor is not created (that would
    // litter the host): everything beneath it is missing too, and guarded
    // after the run.
    let mut protected = Vec::new();
    let mut guarded_after = Vec::new();
    let mut sealed: Vec<PathBuf> = Vec::new();
    let mut missing: Vec<PathBuf> = Vec::new();
    for (dir, kind) in protected_ancestors(policy) {
        if sealed.iter().any(|f| dir.starts_with(f)) || missing.iter().any(|m| dir.starts_with(m)) {
            continue;
        }
        match kind {
            PathKind::Dir => {}
            PathKind::Missing => {
                missing.push(dir);
                continue;
            }
            PathKind::File if policy.protected.iter().any(|e| e.path == dir) => {
                sealed.push(dir);
                continue;
            }
            _ => {
                return Err(PlanError::SymlinkedProtectedPath {
                    target: std::fs::canonicalize(&dir)
                        .map(|t| t.display().to_string())
                        .unwrap_or_else(|_| "something that is not a directory".into()),
                    path: dir,
                })
            }
        }
        a.two("--bind", &dir, &dir);
    }

    let mut masked = Vec::new();
    let mut data = DataMounts::default();
    // Deny-read paths resolution could not establish: not masked, so partial.
    let mut skipped: Vec<PartialItem> = policy
        .unmasked
        .iter()
        .map(|n| PartialItem::new(Shortfall::DenyRead, n.clone()))
        .collect();
    for e in &policy.deny_read {
        absolute(&e.path)?;
        match e.kind {
            PathKind::Dir => {
                a.one("--tmpfs", &e.path);
                a.one("--remount-ro", &e.path);
                masked.push(e.path.clone());
            }
            // A regular file gets an empty (or, for a tracked file with
            // local changes, its indexed) read-only regular file, so git
            // and tree walkers treat it like any file (`policy::git_view`);
            // `/dev/null` on a `nodev` mount (reads fail) only where git
            // must not be able to add it.
            PathKind::File if !policy.git.is_unreadable(&e.path) => {
                let content = policy.git.indexed_version(&e.path).unwrap_or_default();
                data.push(&mut a, &e.path, content);
                masked.push(e.path.clone());
            }
            PathKind::File | PathKind::Other => {
                a.two("--ro-bind", Path::new("/dev/null"), &e.path);
                masked.push(e.path.clone());
            }
            // The resolver lists a symlink's resolved target as its own
            // entry; a mount on the link would land on the target anyway.
            PathKind::Symlink => {
                if e.target.is_none() {
                    skipped.push(PartialItem::at(
                        Shortfall::DenyRead,
                        &e.path,
                        "a dangling symlink; nothing to hide",
                    ));
                }
            }
            // Nothing to read; creating a mount point would litter.
            PathKind::Missing => {}
        }
    }

    for e in &policy.protected {
        absolute(&e.path)?;
        if !policy.is_under_writable_root(&e.path) {
            // Read-only already (the root is bound read-only).
            continue;
        }
        if is_masked(&e.path, policy)
            || sealed.iter().any(|f| e.path.starts_with(f) && e.path != *f)
        {
            continue;
        }
        match e.kind {
            PathKind::Dir | PathKind::File | PathKind::Other => {
                a.two("--ro-bind", &e.path, &e.path);
                protected.push(e.path.clone());
            }
            PathKind::Symlink => {
                return Err(PlanError::SymlinkedProtectedPath {
                    path: e.path.clone(),
                    target: e
                        .target
                        .as_ref()
                        .map(|t| t.display().to_string())
                        .unwrap_or_else(|| "a missing target".into()),
                })
            }
            PathKind::Missing => guarded_after.push(e.path.clone()),
        }
    }

    // The repositories' `info/exclude`, extended by the masked untracked
    // names, last: over any protected mount of `.git`.
    for o in policy.git.excludes() {
        absolute(&o.path)?;
        data.push(&mut a, &o.path, &o.content);
    }

    if let Some(d) = &opts.egress_dir {
        absolute(d)?;
        a.two("--ro-bind", d, d);
    }
    a.one("--chdir", &opts.cwd);
    if let Some((exe, args)) = &opts.helper {
        a.0.push(exe.as_os_str().to_owned());
        a.0.extend(args.iter().cloned());
    }
    a.flag("--");
    a.0.extend(opts.command.iter().cloned());

    Ok(BwrapPlan {
        argv: a.0,
        data: data.0,
        masked,
        protected,
        guarded_after,
        namespaces,
        skipped,
    })
}

/// Directories strictly between a writable root and a protected path, with
/// what they are on disk now (shallowest first, no duplicates).
fn protected_ancestors(policy: &ResolvedPolicy) -> Vec<(PathBuf, PathKind)> {
    let mut out: Vec<PathBuf> = Vec::new();
    for e in &policy.protected {
        let Some(root) = policy
            .writable_roots
            .iter()
            .filter(|r| e.path.starts_with(&r.path))
            .map(|r| &r.path)
            .max_by_key(|r| r.as_os_str().len())
        else {
            continue;
        };
        let mut cur = e.path.parent();
        while let Some(c) = cur {
            if c == root.as_path() || !c.starts_with(root) {
                break;
            }
            if !out.iter().any(|o| o == c) {
                out.push(c.to_path_buf());
            }
            cur = c.parent();
        }
    }
    out.sort_by_key(|p| (p.components().count(), p.clone()));
    out.into_iter()
        .map(|p| {
            let kind = match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => PathKind::Symlink,
                Ok(m) if m.is_dir() => PathKind::Dir,
                Ok(m) if m.is_file() => PathKind::File,
                Ok(_) => PathKind::Other,
                Err(_) => PathKind::Missing,
            };
            (p, kind)
        })
        .collect()
}

/// Whether a deny-read mask already covers `p` (no point protecting it).
fn is_masked(p: &Path, policy: &ResolvedPolicy) -> bool {
    policy
        .existing_deny_read()
        .any(|d| d.kind == PathKind::Dir && p.starts_with(&d.path))
}
