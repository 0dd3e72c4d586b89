//! Turning a [`SandboxPolicy`] into concrete paths, once, before planning.
//!
//! Resolution reads the filesystem (existence, symlinks, `.git` pointer
//! files, a scan for `.env` files) but never changes it. Every
//! backend plans from the same [`ResolvedPolicy`], so the bwrap argv, the
//! Landlock ruleset and the Seatbelt parameters agree by construction.
//! Host facts live in [`super::facts`], path primitives in [`super::paths`].

use super::git_view::GitView;
use super::paths::{
    entry, expand, expand_user_entry, git_pointer_targets, kind_of, push_unique,
    push_with_canonical, Canon,
};
use super::tables::{self, Anchor, Entry};
use super::{EnvPolicy, LandlockHoles, SandboxMode, SandboxPolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use super::facts::HostFacts;
pub use super::paths::{normalize, PathEntry, PathKind};

/// The directory of codewhale's home holding `worktree: true` sub-agents'
/// checkouts (`<home>/worktrees/<name>`): the one part of the home a
/// command whose workspace is such a checkout may read and write (see
/// [`resolve`]'s deny-read of the home).
pub const CHECKOUTS_DIR: &str = "worktrees";

/// Reasons of the writable roots that get the write-protected table
/// (toolchain caches do not: see [`resolve`]).
const WORKSPACE_REASON: &str = "the workspace";
const EXTRA_ROOT_REASON: &str = "extra writable root";
const SCOPE_REASON: &str = "write scope";

/// The policy with every table expanded to concrete paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPolicy {
    pub mode: SandboxMode,
    pub network: bool,
    pub private_tmp: bool,
    /// Canonical workspace path.
    pub workspace: PathBuf,
    /// Canonical, existing writable directories (empty unless `workspace-write`).
    pub writable_roots: Vec<PathEntry>,
    /// Paths that stay read-only inside the writable roots.
    pub protected: Vec<PathEntry>,
    /// Paths that must be unreadable (existing ones, plus missing table
    /// entries for backends that can express rules on absent paths).
    pub deny_read: Vec<PathEntry>,
    pub homes: Vec<PathBuf>,
    /// `network = "allowlist"`: the egress proxy's lists (see `src/net/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::net::EgressSpec>,
    pub env: EnvPolicy,
    /// The landlock tier's hole strategies.
    #[serde(default)]
    pub landlock: LandlockHoles,
    /// Things resolution could not do (for the `Enforcement` report).
    pub notes: Vec<String>,
    /// Deny-read paths resolution could not establish (a directory the
    /// `.env` scan could not list, …), one line each naming the path and
    /// why. Every backend adds these to the run's `partial` list: the run
    /// is never `full` while a secret may be readable.
    #[serde(default)]
    pub unmasked: Vec<String>,
    /// What git inside the sandbox sees of deny-read files in
    /// repositories: tracked ones left readable, indexed versions and
    /// `info/exclude` overlays (see [`super::git_view`]).
    #[serde(default, skip_serializing_if = "GitView::is_empty")]
    pub git: GitView,
}

impl ResolvedPolicy {
    /// Deny-read entries that exist on disk.
    pub fn existing_deny_read(&self) -> impl Iterator<Item = &PathEntry> {
        self.deny_read
            .iter()
            .filter(|e| e.kind != PathKind::Missing)
    }

    /// Whether `p` lies inside one of the writable roots (lexically).
    pub fn is_under_writable_root(&self, p: &Path) -> bool {
        self.writable_roots.iter().any(|r| p.starts_with(&r.path))
    }
}

/// Errors that make a policy unusable.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("workspace {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("writable root {path}: {source}")]
    WritableRoot {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A `write_scope` path that leads out of the workspace (`..`, an
    /// absolute path, a symlink to elsewhere).
    #[error("write scope {path}: {why}")]
    WriteScope { path: PathBuf, why: String },
}
/// Every workspace `.env` file (see [`super::env_scan`]); what could not
/// be scanned goes to `unmasked`.
fn scan_env_files(
    canon: &mut Canon,
    workspace: &Path,
    out: &mut Vec<PathEntry>,
    seen: &mut BTreeSet<PathBuf>,
    unmasked: &mut Vec<String>,
) {
    let scan = super::env_scan::scan_cached(workspace);
    for f in scan.files {
        push_with_canonical(canon, out, seen, f, false, tables::ENV_FILE_REASON);
    }
    unmasked.extend(scan.unmasked);
}

fn cache_roots(policy: &SandboxPolicy, facts: &HostFacts) -> Vec<(PathBuf, &'static str)> {
    let mut out = Vec::new();
    let Some(home) = facts.primary_home() else {
        return out;
    };
    let c = &policy.caches;
    if c.cargo {
        let cargo = facts
            .cargo_home
            .clone()
            .unwrap_or_else(|| home.join(".cargo"));
        out.push((cargo.join("registry"), "cargo registry cache"));
        out.push((cargo.join("git"), "cargo git cache"));
    }
    if c.npm {
        out.push((home.join(".npm"), "npm cache"));
    }
    let xdg = facts
        .xdg_cache_home
        .clone()
        .unwrap_or_else(|| home.join(".cache"));
    if c.xdg_cache {
        out.push((xdg.clone(), "XDG cache (pip, go-build, …)"));
    }
    if c.go {
        out.push((home.join("go/pkg/mod"), "Go module cache"));
        out.push((xdg.join("go-build"), "Go build cache"));
    }
    if c.pip {
        out.push((xdg.join("pip"), "pip cache"));
    }
    out
}

/// Whether `policy` denies any read (the `.env` scan, the deny-read
/// tables): every mode but full access. [`resolve`] and
/// [`warm_env_scan`] ask here.
fn denies_reads(policy: &SandboxPolicy) -> bool {
    policy.mode != SandboxMode::DangerFullAccess
}

/// Bring this process's `.env` scan of `policy`'s workspace up to date
/// ahead of the next [`resolve`], which then finds it current: the same
/// scan `resolve` makes (same root, same cache), with nothing decided
/// from it here. For a caller with a core to spare before its next
/// command — the agent while its first snapshot's look runs: the first
/// scan after the process's opening one sets up the scan's inotify watch
/// (one per directory, ~25 ms at 1,100 directories), and the command's
/// own `resolve` right before it runs still scans (then one `read` of the
/// watch) and decides what is masked.
pub fn warm_env_scan(policy: &SandboxPolicy) {
    if let Some(root) = env_scan_root(policy) {
        super::env_scan::scan_cached(&root);
    }
}

/// Ask the next `resolve` of `policy` to keep its workspace `.env` scan's
/// listings whole when it reads every directory (a process's first look
/// at a workspace with no saved listings): an undo snapshot store opened
/// next counts its first size walk from them
/// ([`super::env_scan::keep_listing`]). Keyed as `resolve` scans: the
/// canonical workspace.
pub fn keep_workspace_listing(policy: &SandboxPolicy) {
    if let Some(root) = env_scan_root(policy) {
        super::env_scan::keep_listing(&root);
    }
}

/// The root [`resolve`] scans for `.env` files under `policy` — its
/// canonical workspace, when the policy denies reads and the workspace is
/// a directory — for the callers that prepare that scan
/// ([`warm_env_scan`], [`keep_workspace_listing`]).
fn env_scan_root(policy: &SandboxPolicy) -> Option<PathBuf> {
    if !denies_reads(policy) {
        return None;
    }
    std::fs::canonicalize(&policy.workspace)
        .ok()
        .filter(|w| w.is_dir())
}

/// Resolve `policy` against the filesystem and `facts`.
pub fn resolve(policy: &SandboxPolicy, facts: &HostFacts) -> Result<ResolvedPolicy, ResolveError> {
    let workspace =
        std::fs::canonicalize(&policy.workspace).map_err(|source| ResolveError::Workspace {
            path: policy.workspace.clone(),
            source,
        })?;
    if !workspace.is_dir() {
        return Err(ResolveError::NotADirectory(workspace));
    }
    let mut notes = Vec::new();
    let mut writable_roots = Vec::new();
    let mut seen_roots = BTreeSet::new();
    if policy.mode == SandboxMode::WorkspaceWrite {
        match &policy.write_scope {
            None => push_unique(
                &mut writable_roots,
                &mut seen_roots,
                entry(workspace.clone(), true, WORKSPACE_REASON),
            ),
            Some(scope) => {
                for e in scope_roots(&workspace, scope, &mut notes)? {
                    push_unique(&mut writable_roots, &mut seen_roots, e);
                }
            }
        }
        for r in &policy.writable_roots {
            let c = std::fs::canonicalize(r).map_err(|source| ResolveError::WritableRoot {
                path: r.clone(),
                source,
            })?;
            push_unique(
                &mut writable_roots,
                &mut seen_roots,
                entry(c, true, EXTRA_ROOT_REASON),
            );
        }
        for (p, why) in cache_roots(policy, facts) {
            // `lstat` first: an absent cache (the common case) then costs
            // one syscall instead of a `readlink` per path component.
            let canonical = match kind_of(&p) {
                PathKind::Missing => Err(std::io::ErrorKind::NotFound.into()),
                _ => std::fs::canonicalize(&p),
            };
            match canonical {
                Ok(c) if c.is_dir() => {
                    push_unique(&mut writable_roots, &mut seen_roots, entry(c, true, why))
                }
                _ => notes.push(format!(
                    "{} ({why}) does not exist; not made writable",
                    p.display()
                )),
            }
        }
    }

    // Write-protected paths: only meaningful inside writable roots, and
    // expanded for the workspace and the roots the user named — not for the
    // toolchain caches, where `.git/hooks` or `.bashrc` run nothing on the
    // host (and each entry costs a mount or a rule in every backend).
    let mut protected = Vec::new();
    let mut seen_prot = BTreeSet::new();
    let roots: Vec<PathBuf> = writable_roots
        .iter()
        .filter(|r| r.reason == WORKSPACE_REASON || r.reason == EXTRA_ROOT_REASON)
        .map(|r| r.path.clone())
        .collect();
    // A write scope keeps exactly the workspace's table (`.git/hooks`
    // stays protected in a scope of `.git`): the table is expanded from
    // the workspace as without a scope, and the backends hold the entries
    // that fall inside a scope (the others are read-only already).
    let roots: Vec<PathBuf> =
        if policy.mode == SandboxMode::WorkspaceWrite && policy.write_scope.is_some() {
            std::iter::once(workspace.clone()).chain(roots).collect()
        } else {
            roots
        };
    for root in &roots {
        for t in tables::PROTECT_WRITE
            .iter()
            .filter(|t| t.anchor == Anchor::WritableRoot)
        {
            for p in expand(root, t.path) {
                push_unique(&mut protected, &mut seen_prot, entry(p, t.dir, t.reason));
            }
        }
        if kind_of(&root.join(".git")) == PathKind::File {
            push_unique(
                &mut protected,
                &mut seen_prot,
                entry(
                    root.join(".git"),
                    false,
                    "git pointer file: redirecting it redirects hooks and config",
                ),
            );
            for gitdir in git_pointer_targets(root) {
                push_unique(
                    &mut protected,
                    &mut seen_prot,
                    entry(
                        gitdir.join("hooks"),
                        true,
                        "hooks of the repository a .git pointer names",
                    ),
                );
                push_unique(
                    &mut protected,
                    &mut seen_prot,
                    entry(
                        gitdir.join("config"),
                        false,
                        "config of the repository a .git pointer names",
                    ),
                );
                push_unique(
                    &mut protected,
                    &mut seen_prot,
                    entry(
                        gitdir.join("commondir"),
                        false,
                        "names the repository whose config applies to the one a .git pointer names",
                    ),
                );
            }
        }
    }
    // Wherever the repositories' own configuration points git for code
    // or configuration (core.hooksPath, include.path): read with git's
    // rules, held like `.git/hooks` when inside a writable root.
    for root in &roots {
        if kind_of(&root.join(".git")) == PathKind::Missing {
            continue;
        }
        for g in super::git_code::observe(root) {
            if roots.iter().any(|r| g.path.starts_with(r)) {
                push_unique(
                    &mut protected,
                    &mut seen_prot,
                    entry(g.path, g.dir, g.reason),
                );
            }
        }
    }
    for raw in &policy.extra_protect_write {
        for p in expand_user_entry(raw, facts, &workspace) {
            push_unique(
                &mut protected,
                &mut seen_prot,
                entry(p, false, "user config: [sandbox] protect_write"),
            );
        }
    }
    // Symlinked protected paths: protect what they point at as well.
    let targets: Vec<PathEntry> = protected
        .iter()
        .filter_map(|e| {
            e.target
                .clone()
                .map(|t| entry(t, e.dir_hint, "target of a symlinked protected path"))
        })
        .collect();
    for t in targets {
        push_unique(&mut protected, &mut seen_prot, t);
    }
    // A write scope that is (or lies inside) a write-protected path is no
    // writable root: protection wins over the scope (a root equal to a
    // protected path would be no hole in it, so neither the landlock
    // tier's after-run check nor a mount would hold it).
    writable_roots.retain(|r| {
        let held = r.reason == SCOPE_REASON
            && protected.iter().any(|p| {
                r.path.starts_with(&p.path)
                    || p.target.as_ref().is_some_and(|t| r.path.starts_with(t))
            });
        if held {
            notes.push(format!(
                "write scope {} is write-protected; not made writable",
                r.path.display()
            ));
        }
        !held
    });

    // Deny-read paths.
    let mut deny_read = Vec::new();
    let mut seen_deny = BTreeSet::new();
    let mut unmasked = Vec::new();
    let mut git = GitView::default();
    if denies_reads(policy) {
        let mut canon = Canon::default();
        for t in tables::DENY_READ {
            if t.anchor == Anchor::Home && t.path == tables::CODEWHALE_HOME {
                for h in &facts.homes {
                    push_state_home(
                        &mut canon,
                        &normalize(&h.join(t.path)),
                        &workspace,
                        t.reason,
                        &mut deny_read,
                        &mut seen_deny,
                    );
                }
                continue;
            }
            push_table_entry(&mut canon, t, facts, &mut deny_read, &mut seen_deny);
        }
        for raw in &policy.extra_deny_read {
            for p in expand_user_entry(raw, facts, &workspace) {
                push_with_canonical(
                    &mut canon,
                    &mut deny_read,
                    &mut seen_deny,
                    p,
                    false,
                    "user config: [sandbox] deny_read",
                );
            }
        }
        if let Some(h) = &policy.state_home {
            push_state_home(
                &mut canon,
                h,
                &workspace,
                "codewhale's own home ($CODEWHALE_HOME): keys, sessions and snapshots",
                &mut deny_read,
                &mut seen_deny,
            );
        }
        scan_env_files(
            &mut canon,
            &workspace,
            &mut deny_read,
            &mut seen_deny,
            &mut unmasked,
        );
        git = super::git_view::resolve(&mut deny_read, &workspace);
        unmasked.extend(git.notes.iter().cloned());
    }

    Ok(ResolvedPolicy {
        mode: policy.mode,
        network: policy.network,
        private_tmp: policy.private_tmp,
        workspace,
        writable_roots,
        protected,
        deny_read,
        homes: facts.homes.clone(),
        egress: if policy.network {
            None
        } else {
            policy.egress.clone()
        },
        env: offline_env(policy),
        landlock: policy.landlock,
        notes,
        unmasked,
        git,
    })
}

/// A scoped writer's writable roots: each `write_scope` path that exists,
/// canonical, inside the workspace (a directory, or a single file: that
/// file alone is writable, in place). A path that does not exist is no
/// root (noted: nothing is writable there, never its parent); one that
/// leads out of the workspace is an error.
fn scope_roots(
    workspace: &Path,
    scope: &[PathBuf],
    notes: &mut Vec<String>,
) -> Result<Vec<PathEntry>, ResolveError> {
    let mut out = Vec::new();
    for rel in scope {
        let bad = |why: &str| ResolveError::WriteScope {
            path: rel.clone(),
            why: why.into(),
        };
        if rel.is_absolute()
            || rel.components().any(|c| {
                !matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            })
        {
            return Err(bad("not a workspace-relative path without `..`"));
        }
        let lexical = normalize(&workspace.join(rel));
        let real = match std::fs::canonicalize(&lexical) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                notes.push(format!(
                    "write scope {} does not exist; nothing is writable there",
                    rel.display()
                ));
                continue;
            }
            Err(e) => return Err(bad(&e.to_string())),
        };
        if !real.starts_with(workspace) {
            return Err(bad(&format!(
                "leads out of the workspace (to {})",
                real.display()
            )));
        }
        let dir = real.is_dir();
        out.push(if real == workspace {
            entry(real, true, WORKSPACE_REASON)
        } else {
            entry(real, dir, SCOPE_REASON)
        });
    }
    Ok(out)
}

/// Settings that make the common package managers fail at once instead of
/// retrying for seconds to a minute when the network is off (measured:
/// npm 70 s, cargo 11 s, pip 8 s; shared/research/real-workloads.md D5).
/// Retrying cannot succeed without a network, and a cached answer is still
/// served, so nothing that would succeed changes. The user's own
/// `[sandbox.env] set` wins.
pub const OFFLINE_ENV: &[(&str, &str)] = &[
    // npm config `fetch-retries` (docs.npmjs.com, "config").
    ("npm_config_fetch_retries", "0"),
    // cargo config `net.retry` (doc.rust-lang.org/cargo, "Configuration").
    ("CARGO_NET_RETRY", "0"),
    // pip `--retries` (pip.pypa.io, "pip install" general options).
    ("PIP_RETRIES", "0"),
];

/// The command's environment policy: the user's, plus [`OFFLINE_ENV`]
/// when the network is off (not "allowlist": a proxy is there to answer).
fn offline_env(policy: &SandboxPolicy) -> EnvPolicy {
    let mut env = policy.env.clone();
    if !policy.network && policy.egress.is_none() && policy.mode.is_sandboxed() {
        for (k, v) in OFFLINE_ENV {
            env.set
                .entry((*k).to_string())
                .or_insert_with(|| (*v).to_string());
        }
    }
    env
}

/// The checkout of a `worktree: true` sub-agent that `workspace` lies in:
/// `<home>/worktrees/<name>` when the canonical workspace is inside one
/// (the whole checkout, so a workspace in a subdirectory of the repository
/// still sees the rest of its checkout).
fn own_checkout(home: &Path, workspace: &Path) -> Option<PathBuf> {
    let dir = home.join(CHECKOUTS_DIR);
    let rest = workspace.strip_prefix(&dir).ok()?;
    match rest.components().next()? {
        std::path::Component::Normal(name) => Some(dir.join(name)),
        _ => None,
    }
}

/// Deny codewhale's home `home`, except the sub-agent checkout the
/// workspace lies in ([`own_checkout`]). Outside a checkout: the home as
/// one entry. Inside one: every entry of the home but `worktrees/`, and
/// every entry of `worktrees/` but the workspace's checkout (its lock
/// file and the other children's checkouts included), so keys, sessions,
/// snapshots and the rest stay unreadable while the child's commands
/// work in their own checkout. A directory on that path that cannot be
/// listed falls back to denying the home whole (over-restricted, never
/// wider). Entries created in those two directories after resolution are
/// not covered (each command resolves afresh).
fn push_state_home(
    canon: &mut Canon,
    home: &Path,
    workspace: &Path,
    reason: &str,
    out: &mut Vec<PathEntry>,
    seen: &mut BTreeSet<PathBuf>,
) {
    let whole = |canon: &mut Canon, out: &mut Vec<PathEntry>, seen: &mut BTreeSet<PathBuf>| {
        push_with_canonical(canon, out, seen, home.to_path_buf(), true, reason)
    };
    let Some(real) = canon.of(home) else {
        return whole(canon, out, seen);
    };
    let Some(checkout) = own_checkout(&real, workspace) else {
        return whole(canon, out, seen);
    };
    let keep = [real.join(CHECKOUTS_DIR), checkout];
    let mut siblings = Vec::new();
    for dir in [&real, &keep[0]] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return whole(canon, out, seen);
        };
        for e in rd {
            let Ok(e) = e else {
                return whole(canon, out, seen);
            };
            let p = e.path();
            if !keep.contains(&p) {
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                siblings.push((p, is_dir));
            }
        }
    }
    for (p, is_dir) in siblings {
        push_with_canonical(canon, out, seen, p, is_dir, reason);
    }
}

fn push_table_entry(
    canon: &mut Canon,
    t: &Entry,
    facts: &HostFacts,
    out: &mut Vec<PathEntry>,
    seen: &mut BTreeSet<PathBuf>,
) {
    match t.anchor {
        Anchor::Home => {
            for h in &facts.homes {
                push_with_canonical(
                    canon,
                    out,
                    seen,
                    normalize(&h.join(t.path)),
                    t.dir,
                    t.reason,
                );
            }
        }
        Anchor::Absolute => {
            push_with_canonical(canon, out, seen, PathBuf::from(t.path), t.dir, t.reason)
        }
        Anchor::WritableRoot => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::fs;

    fn facts(home: &Path) -> HostFacts {
        HostFacts {
            homes: vec![home.to_path_buf()],
            cargo_home: None,
            xdg_cache_home: None,
        }
    }

    #[test]
    fn normalize_folds_tricks() {
        assert_eq!(
            normalize(Path::new("/a//b/./c/../d/.")),
            PathBuf::from("/a/b/d")
        );
    }

    #[test]
    fn workspace_write_protects_and_denies() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let ws = t.path().join("ws");
        fs::create_dir_all(home.join(".ssh")).unwrap();
        fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        fs::create_dir_all(ws.join(".git/modules/sub/hooks")).unwrap();
        fs::write(ws.join(".env"), "X=1").unwrap();
        fs::write(ws.join(".env.example"), "X=").unwrap();
        fs::create_dir_all(ws.join("app")).unwrap();
        fs::write(ws.join("app/.env.local"), "X=1").unwrap();
        let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let r = resolve(&p, &facts(&home)).unwrap();
        let ws = fs::canonicalize(&ws).unwrap();
        assert_eq!(r.writable_roots[0].path, ws);
        let prot: Vec<_> = r.protected.iter().map(|e| e.path.clone()).collect();
        assert!(prot.contains(&ws.join(".git/hooks")));
        assert!(prot.contains(&ws.join(".git/config")));
        assert!(prot.contains(&ws.join(".git/modules/sub/hooks")));
        assert!(prot.contains(&ws.join(".envrc")));
        let envrc = r
            .protected
            .iter()
            .find(|e| e.path == ws.join(".envrc"))
            .unwrap();
        assert_eq!(envrc.kind, PathKind::Missing);
        let deny: Vec<_> = r.deny_read.iter().map(|e| e.path.clone()).collect();
        assert!(deny.contains(&home.join(".ssh")));
        assert!(deny.contains(&ws.join(".env")));
        assert!(deny.contains(&ws.join("app/.env.local")));
        assert!(!deny.contains(&ws.join(".env.example")));
    }

    /// The agent warms the scan beside its first snapshot (its watch set
    /// up there); a `.env` made after that, deep down, is still masked by
    /// the command's own `resolve`.
    #[test]
    fn a_env_made_after_the_scan_was_warmed_is_still_masked() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("a/b/c/d")).unwrap();
        let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let opening = resolve(&p, &facts(&home)).unwrap();
        let canon = fs::canonicalize(&ws).unwrap();
        let secret = canon.join("a/b/c/d/.env");
        assert!(!opening.deny_read.iter().any(|e| e.path == secret));
        warm_env_scan(&p);
        fs::write(ws.join("a/b/c/d/.env"), "S=1").unwrap();
        let r = resolve(&p, &facts(&home)).unwrap();
        assert!(
            r.deny_read.iter().any(|e| e.path == secret),
            "{:?}",
            r.deny_read
        );
    }

    #[test]
    fn caches_are_writable_but_get_no_protected_table() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let ws = t.path().join("ws");
        fs::create_dir_all(home.join(".npm")).unwrap();
        fs::create_dir_all(&ws).unwrap();
        let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let r = resolve(&p, &facts(&home)).unwrap();
        let npm = fs::canonicalize(home.join(".npm")).unwrap();
        assert!(r.writable_roots.iter().any(|e| e.path == npm));
        assert!(!r.protected.iter().any(|e| e.path.starts_with(&npm)));
        let ws = fs::canonicalize(&ws).unwrap();
        assert!(r.protected.iter().any(|e| e.path == ws.join(".envrc")));
    }

    #[test]
    fn read_only_has_no_writable_roots() {
        let t = tempfile::tempdir().unwrap();
        let p = SandboxPolicy::new(SandboxMode::ReadOnly, t.path());
        let r = resolve(&p, &facts(t.path())).unwrap();
        assert!(r.writable_roots.is_empty());
        assert!(r.protected.is_empty());
        assert!(!r.deny_read.is_empty());
    }

    #[test]
    fn full_access_denies_nothing() {
        let t = tempfile::tempdir().unwrap();
        let p = SandboxPolicy::new(SandboxMode::DangerFullAccess, t.path());
        assert!(resolve(&p, &facts(t.path())).unwrap().deny_read.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_deny_read_is_matched_canonically() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let real = t.path().join("real-ssh");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink(&real, home.join(".ssh")).unwrap();
        let p = SandboxPolicy::new(SandboxMode::ReadOnly, t.path());
        let r = resolve(&p, &facts(&home)).unwrap();
        let deny: Vec<_> = r.deny_read.iter().map(|e| e.path.clone()).collect();
        assert!(deny.contains(&home.join(".ssh")));
        assert!(deny.contains(&fs::canonicalize(&real).unwrap()));
    }

    #[test]
    fn git_pointer_targets_are_protected() {
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("main");
        let wt = t.path().join("wt");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        fs::create_dir_all(&wt).unwrap();
        fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &wt);
        let r = resolve(&p, &facts(t.path())).unwrap();
        let prot: Vec<_> = r.protected.iter().map(|e| e.path.clone()).collect();
        let wt = fs::canonicalize(&wt).unwrap();
        assert!(prot.contains(&wt.join(".git")));
        assert!(
            prot.iter().any(|p| p.ends_with("main/.git/hooks")),
            "{prot:?}"
        );
        assert!(
            prot.iter().any(|p| p.ends_with("main/.git/config")),
            "{prot:?}"
        );
    }

    #[test]
    fn a_write_scope_replaces_the_workspace_root() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("src/a/.git/hooks")).unwrap();
        fs::create_dir_all(ws.join("docs")).unwrap();
        fs::write(ws.join("docs/one.md"), "x").unwrap();
        fs::write(ws.join(".env"), "X=1").unwrap();
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        p.writable_roots.push(t.path().join("ws/docs"));
        p.write_scope = Some(vec!["./src/a".into(), "docs/one.md".into(), "new".into()]);
        let r = resolve(&p, &facts(t.path())).unwrap();
        let ws = fs::canonicalize(&ws).unwrap();
        let roots: Vec<_> = r
            .writable_roots
            .iter()
            .map(|e| (e.path.clone(), e.kind))
            .collect();
        assert!(!roots.iter().any(|(p, _)| *p == ws), "{roots:?}");
        assert!(roots.contains(&(ws.join("src/a"), PathKind::Dir)));
        assert!(roots.contains(&(ws.join("docs/one.md"), PathKind::File)));
        // A missing scope is no root, and never its parent.
        assert!(!roots.iter().any(|(p, _)| p.ends_with("new")));
        assert!(r.notes.iter().any(|n| n.contains("new")), "{:?}", r.notes);
        // The workspace's table still holds, as without a scope (not
        // expanded again under each scope).
        let prot: Vec<_> = r.protected.iter().map(|e| e.path.clone()).collect();
        assert!(prot.contains(&ws.join(".git/hooks")));
        assert!(!prot.contains(&ws.join("src/a/.git/hooks")));
        assert!(r.deny_read.iter().any(|e| e.path == ws.join(".env")));
        // A scope inside a write-protected path is no root.
        p.write_scope = Some(vec![".git/hooks".into(), "src/a".into()]);
        fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        let r = resolve(&p, &facts(t.path())).unwrap();
        assert!(!r.is_under_writable_root(&ws.join(".git/hooks/pre-commit")));
        assert!(r.is_under_writable_root(&ws.join("src/a/x")));
        assert!(
            r.notes.iter().any(|n| n.contains("write-protected")),
            "{:?}",
            r.notes
        );
        // Read-only ignores the scope: nothing is writable anyway.
        p.mode = SandboxMode::ReadOnly;
        assert!(resolve(&p, &facts(t.path()))
            .unwrap()
            .writable_roots
            .is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_write_scope_that_leads_out_of_the_workspace_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::create_dir_all(t.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(t.path().join("elsewhere"), ws.join("out")).unwrap();
        for bad in ["out", "../ws", "/etc"] {
            let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
            p.write_scope = Some(vec![bad.into()]);
            let e = resolve(&p, &facts(t.path())).unwrap_err();
            assert!(matches!(e, ResolveError::WriteScope { .. }), "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        // The whole workspace, spelled as a scope.
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        p.write_scope = Some(vec![".".into()]);
        let r = resolve(&p, &facts(t.path())).unwrap();
        assert_eq!(r.writable_roots[0].path, fs::canonicalize(&ws).unwrap());
    }

    #[test]
    fn user_entries_extend() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("secret.txt"), "x").unwrap();
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, t.path());
        p.extra_deny_read.push("secret.txt".into());
        p.extra_protect_write.push("Makefile".into());
        let r = resolve(&p, &facts(t.path())).unwrap();
        let ws = fs::canonicalize(t.path()).unwrap();
        assert!(r.deny_read.iter().any(|e| e.path == ws.join("secret.txt")));
        assert!(r.protected.iter().any(|e| e.path == ws.join("Makefile")));
    }

    /// A workspace inside a sub-agent checkout under codewhale's home: the
    /// checkout is neither denied nor under a denied directory; the home's
    /// other entries (sessions, config, another checkout, the lock files)
    /// stay denied. Positive control: any other workspace gets the home
    /// denied whole.
    fn checkout_carve_out(home_of: impl Fn(&Path) -> (HostFacts, Option<PathBuf>, PathBuf)) {
        let t = tempfile::tempdir().unwrap();
        let (facts, state_home, cw) = home_of(t.path());
        fs::create_dir_all(cw.join("sessions")).unwrap();
        fs::write(cw.join("config.toml"), "x").unwrap();
        let ours = cw.join("worktrees/c1");
        fs::create_dir_all(ours.join("sub")).unwrap();
        fs::create_dir_all(cw.join("worktrees/c2")).unwrap();
        fs::write(cw.join("worktrees/c1.lock"), "").unwrap();
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, ours.join("sub"));
        p.state_home = state_home.clone();
        let r = resolve(&p, &facts).unwrap();
        let cw = fs::canonicalize(&cw).unwrap();
        let ours = cw.join("worktrees/c1");
        let deny: Vec<_> = r.deny_read.iter().map(|e| e.path.clone()).collect();
        assert!(
            !deny
                .iter()
                .any(|d| ours.starts_with(d) || d.starts_with(&ours)),
            "{deny:?}"
        );
        for sibling in [
            "sessions",
            "config.toml",
            "worktrees/c2",
            "worktrees/c1.lock",
        ] {
            assert!(deny.contains(&cw.join(sibling)), "{sibling}: {deny:?}");
        }
        // Control: the user's own workspace gets the home denied whole.
        let ws = t.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        p.state_home = state_home;
        let r = resolve(&p, &facts).unwrap();
        assert!(
            r.deny_read.iter().any(|e| e.path == cw),
            "{:?}",
            r.deny_read
        );
    }

    #[test]
    fn a_checkout_under_the_default_home_is_carved_out() {
        checkout_carve_out(|t| {
            let home = t.join("home");
            (facts(&home), None, home.join(".codewhale"))
        });
    }

    #[test]
    fn a_checkout_under_codewhale_home_elsewhere_is_carved_out() {
        checkout_carve_out(|t| {
            let cw = t.join("cwhome");
            (facts(&t.join("home")), Some(cw.clone()), cw)
        });
    }

    #[test]
    fn only_the_checkouts_directory_is_carved_out() {
        // A workspace elsewhere in the home (its sessions) gets no room.
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let ws = home.join(".codewhale/sessions");
        fs::create_dir_all(&ws).unwrap();
        let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
        let r = resolve(&p, &facts(&home)).unwrap();
        let cw = fs::canonicalize(home.join(".codewhale")).unwrap();
        assert!(r.deny_read.iter().any(|e| e.path == cw));
    }
}
