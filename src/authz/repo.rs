//! Repository rules (gate 7): protected-path invariants for writes.
//!
//! The write-protected table of the sandbox policy
//! ([`crate::policy::tables::PROTECT_WRITE`]) is checked *before* anything
//! runs, for file tools and for the files a shell command visibly writes
//! (redirections, `tee`, `cp`/`mv`/`ln`/`install` targets, `touch`, `rm`,
//! `sed -i`, `git config` writes). Paths whose modification makes the host
//! run code at the next git command (`.git/hooks`, `.git/config`, and their
//! submodule twins) are a *block*; every other protected path is a
//! *question*. In Full Access the pipeline turns a question into a block.
//! The sandbox enforces the same table again at gate 9.

use super::floor::FloorContext;
use super::readonly::git_subcommand;
use super::shell::Analysis;
use crate::policy::tables::{self, Anchor};
use std::path::{Component, Path, PathBuf};

/// What gate 7 found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepoFinding {
    Question(String),
    Block(String),
}

fn lexical(p: &Path) -> PathBuf {
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

fn entry_matches(entry: &str, rel: &str) -> bool {
    let e: Vec<&str> = entry.split('/').collect();
    let r: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    r.len() >= e.len() && e.iter().zip(&r).all(|(a, b)| *a == "*" || a == b)
}

/// The protected-table finding for one written path, if any.
pub fn check_path(
    path: &str,
    cwd: &Path,
    workspace: &Path,
    ctx: &FloorContext,
) -> Option<RepoFinding> {
    let rel: String = if let Some(rest) = path.strip_prefix("~/") {
        rest.to_string()
    } else {
        let abs = lexical(&cwd.join(path));
        let ws = lexical(workspace);
        match abs.strip_prefix(&ws) {
            Ok(r) => r.to_string_lossy().into_owned(),
            Err(_) => {
                let home = ctx.homes.iter().find_map(|h| {
                    abs.strip_prefix(h)
                        .ok()
                        .map(|r| r.to_string_lossy().into_owned())
                });
                home?
            }
        }
    };
    for e in tables::PROTECT_WRITE
        .iter()
        .filter(|e| e.anchor == Anchor::WritableRoot)
    {
        if entry_matches(e.path, &rel) {
            let msg = format!("`{path}` is write-protected: {}", e.reason);
            // The table's `block` column decides (git hooks and config).
            return Some(if e.block {
                RepoFinding::Block(msg)
            } else {
                RepoFinding::Question(msg)
            });
        }
    }
    None
}

/// Files a shell command visibly writes. A relative target after a static
/// `cd DIR` is reported both as written and joined to `DIR`, so
/// `cd .git/hooks && echo x > pre-commit` is seen.
pub fn shell_write_targets(a: &Analysis) -> Vec<String> {
    let mut v = shell_write_targets_raw(a);
    let mut dirs: Vec<String> = Vec::new();
    for p in &a.pieces {
        if matches!(p.program(), "cd" | "pushd") {
            if let Some(d) = p.args().iter().find(|a| !a.starts_with('-')) {
                let joined = match dirs.last() {
                    Some(prev) if !d.starts_with('/') && !d.starts_with('~') => {
                        format!("{prev}/{d}")
                    }
                    _ => d.clone(),
                };
                dirs.push(joined);
            }
        }
    }
    let relative: Vec<String> = v
        .iter()
        .filter(|t| !t.starts_with('/') && !t.starts_with('~'))
        .cloned()
        .collect();
    for d in &dirs {
        v.extend(relative.iter().map(|t| format!("{d}/{t}")));
    }
    v
}

fn shell_write_targets_raw(a: &Analysis) -> Vec<String> {
    let mut v = Vec::new();
    for p in &a.pieces {
        for r in &p.redirects {
            if r.writes_file() {
                v.push(r.target.text.clone());
            }
        }
        let args = p.args();
        let positional = || args.iter().filter(|a| !a.starts_with('-')).cloned();
        match p.program() {
            "tee" | "touch" | "rm" | "truncate" | "chmod" | "mkdir" | "rmdir" | "unlink" => {
                v.extend(positional())
            }
            "cp" | "mv" | "install" | "ln" | "rsync" => {
                v.extend(positional().next_back());
                if let Some(t) = args
                    .iter()
                    .position(|a| a == "-t" || a == "--target-directory")
                {
                    v.extend(args.get(t + 1).cloned());
                }
            }
            "sed"
                if args
                    .iter()
                    .any(|a| a.starts_with("-i") || a.starts_with("--in-place")) =>
            {
                v.extend(positional().skip(1))
            }
            "git" => {
                if let (Some((i, "config")), _) = git_subcommand(args) {
                    let rest = &args[i + 1..];
                    let reading = rest.iter().any(|a| {
                        matches!(
                            a.as_str(),
                            "--get" | "--get-all" | "--list" | "-l" | "--get-regexp"
                        )
                    });
                    let positional = rest.iter().filter(|a| !a.starts_with('-')).count();
                    let unset = rest
                        .iter()
                        .any(|a| a.starts_with("--unset") || a == "--add");
                    if !reading && (positional >= 2 || unset) {
                        if rest.iter().any(|a| a == "--global") {
                            v.push("~/.gitconfig".into());
                        } else {
                            v.push(".git/config".into());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    v
}

/// Gate 7 for a call: the strictest finding over every written path.
pub fn check(
    paths: &[String],
    cwd: &Path,
    workspace: &Path,
    ctx: &FloorContext,
) -> Option<RepoFinding> {
    let mut question = None;
    for p in paths {
        match check_path(p, cwd, workspace, ctx) {
            Some(b @ RepoFinding::Block(_)) => return Some(b),
            Some(q) => {
                question.get_or_insert(q);
            }
            None => {}
        }
    }
    question
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::authz::shell::analyze;

    fn ctx() -> FloorContext {
        FloorContext {
            homes: vec!["/home/a".into()],
            extra_deny_read: vec![],
        }
    }

    #[test]
    fn protected_paths() {
        let ws = Path::new("/w");
        let c = ctx();
        assert!(matches!(
            check_path(".git/hooks/pre-commit", ws, ws, &c),
            Some(RepoFinding::Block(_))
        ));
        assert!(matches!(
            check_path("/w/.git/config", ws, ws, &c),
            Some(RepoFinding::Block(_))
        ));
        assert!(matches!(
            check_path(".git/modules/sub/hooks/x", ws, ws, &c),
            Some(RepoFinding::Block(_))
        ));
        assert!(matches!(
            check_path(".envrc", ws, ws, &c),
            Some(RepoFinding::Question(_))
        ));
        assert!(matches!(
            check_path("sub/../.codewhale/config.toml", ws, ws, &c),
            Some(RepoFinding::Question(_))
        ));
        assert!(matches!(
            check_path("~/.bashrc", ws, ws, &c),
            Some(RepoFinding::Question(_))
        ));
        assert!(check_path("src/main.rs", ws, ws, &c).is_none());
        assert!(check_path(".git/objects/ab", ws, ws, &c).is_none());
        assert!(check_path(".gitignore", ws, ws, &c).is_none());
    }

    /// The block list is the protected table's `block` column: exactly
    /// git's hooks and config (a submodule's too) block, every other
    /// writable-root entry asks, whatever the entries are named.
    #[test]
    fn the_block_list_is_the_tables_column() {
        let blocking: Vec<&str> = tables::PROTECT_WRITE
            .iter()
            .filter(|e| e.block)
            .map(|e| e.path)
            .collect();
        assert_eq!(
            blocking,
            [
                ".git/hooks",
                ".git/config",
                ".git/modules/*/hooks",
                ".git/modules/*/config"
            ]
        );
        assert!(tables::DENY_READ.iter().all(|e| !e.block));
        let ws = Path::new("/w");
        let c = ctx();
        for e in tables::PROTECT_WRITE
            .iter()
            .filter(|e| e.anchor == Anchor::WritableRoot)
        {
            let inside = format!("{}/x", e.path.replace('*', "sub"));
            for path in [e.path.replace('*', "sub"), inside] {
                let found = check_path(&path, ws, ws, &c);
                match found {
                    Some(RepoFinding::Block(_)) => assert!(e.block, "{path} blocks"),
                    Some(RepoFinding::Question(_)) => assert!(!e.block, "{path} asks"),
                    None => panic!("{path}: the table protects it"),
                }
            }
        }
    }

    #[test]
    fn shell_targets() {
        let t = shell_write_targets(&analyze(
            "echo x > .git/hooks/pre-commit; cp a .envrc; git config core.hooksPath h; git config --get x",
        ));
        assert_eq!(t, vec![".git/hooks/pre-commit", ".envrc", ".git/config"]);
        let t = shell_write_targets(&analyze("cd .git && cd hooks && echo x > pre-commit"));
        assert!(t.contains(&".git/hooks/pre-commit".to_string()), "{t:?}");
    }
}
