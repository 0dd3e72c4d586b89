//! Files git takes code or configuration from wherever the repository's
//! own configuration points (catalogue item 39): the hooks directory that
//! `core.hooksPath` names (husky's `.husky/_`, a `githooks/` folder) and
//! every file git reads configuration from through `include.path` /
//! `includeIf.*.path` (a committed `.gitconfig` the user included). Read
//! with git's own rules (`git config --show-origin --list --includes`,
//! the user's global and system files included, as git itself reads
//! them); reading config runs nothing. The static cases (`.git/hooks`,
//! `.git/config`, `.git/config.worktree`, the hook managers' files) are in
//! [`super::tables::PROTECT_WRITE`].

use super::paths::normalize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One path to protect and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitCodePath {
    pub path: PathBuf,
    pub dir: bool,
    pub reason: &'static str,
}

const HOOKS_REASON: &str = "core.hooksPath names it: git runs hooks from it on the host";
const HOOKS_PARENT_REASON: &str =
    "the hook scripts husky's core.hooksPath wrappers (`.husky/_`) run on the host";
const INCLUDE_REASON: &str =
    "git reads configuration from it (include.path / includeIf): aliases, filters and core.fsmonitor run host code";

/// What `git config --show-origin --list -z` printed, as the paths to
/// protect for the worktree at `top` (pure).
pub fn plan(top: &Path, listing: &[u8]) -> Vec<GitCodePath> {
    let mut out = Vec::new();
    let mut hooks: Option<String> = None;
    let mut fields = listing.split(|b| *b == 0);
    while let (Some(origin), Some(kv)) = (fields.next(), fields.next()) {
        let origin = String::from_utf8_lossy(origin);
        let kv = String::from_utf8_lossy(kv);
        let (key, value) = kv.split_once('\n').unwrap_or((&kv, ""));
        if let Some(file) = origin.strip_prefix("file:") {
            let p = absolute(top, file);
            if !out.iter().any(|g: &GitCodePath| g.path == p) {
                out.push(GitCodePath {
                    path: p,
                    dir: false,
                    reason: INCLUDE_REASON,
                });
            }
        }
        if key.eq_ignore_ascii_case("core.hookspath") {
            hooks = Some(value.to_string());
        }
    }
    if let Some(h) = hooks.filter(|h| !h.is_empty()) {
        let p = absolute(top, &h);
        if p.file_name().is_some_and(|n| n == "_") {
            if let Some(parent) = p.parent() {
                out.push(GitCodePath {
                    path: parent.to_path_buf(),
                    dir: true,
                    reason: HOOKS_PARENT_REASON,
                });
            }
        }
        out.push(GitCodePath {
            path: p,
            dir: true,
            reason: HOOKS_REASON,
        });
    }
    out
}

/// `p` as git means it: `~/` is the home, a relative path is relative to
/// the worktree's top (where git runs hooks and resolves the local file).
fn absolute(top: &Path, p: &str) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return normalize(&Path::new(&home).join(rest));
        }
    }
    if Path::new(p).is_absolute() {
        normalize(Path::new(p))
    } else {
        normalize(&top.join(p))
    }
}

/// Ask git for the worktree at `top` (empty when git is missing or
/// cannot read it: the static table still holds).
pub fn observe(top: &Path) -> Vec<GitCodePath> {
    let Ok(exe) = which::which("git") else {
        return Vec::new();
    };
    let out = Command::new(exe)
        .current_dir(top)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env(
            "GIT_CEILING_DIRECTORIES",
            top.parent().unwrap_or(Path::new("/")),
        )
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_CONFIG_COUNT")
        .args(["-c", "safe.directory=*"])
        .args(["config", "--show-origin", "--includes", "--list", "-z"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => plan(top, &o.stdout),
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn hooks_path_and_included_files_are_found() {
        let listing = b"file:.git/config\0core.bare\nfalse\0file:.git/config\0core.hookspath\n.husky/_\0file:/w/team.gitconfig\0alias.x\n!sh\0command line:\0safe.directory\n*\0";
        let got = plan(Path::new("/w"), listing);
        let paths: Vec<_> = got.iter().map(|g| g.path.clone()).collect();
        assert_eq!(
            paths,
            vec![
                PathBuf::from("/w/.git/config"),
                PathBuf::from("/w/team.gitconfig"),
                PathBuf::from("/w/.husky"),
                PathBuf::from("/w/.husky/_"),
            ]
        );
        assert!(got[3].dir && got[3].reason.contains("hooksPath"));
    }

    #[test]
    fn an_absolute_hooks_path_outside_stays_as_named() {
        let got = plan(
            Path::new("/w"),
            b"file:/etc/gitconfig\0core.hooksPath\n/opt/hooks\0",
        );
        assert!(got.iter().any(|g| g.path == Path::new("/opt/hooks")));
    }
}
