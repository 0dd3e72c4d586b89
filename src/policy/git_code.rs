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

/// The config files git would read for the worktree at `top`: the
/// repository's (its gitdir's and common dir's `config` and
/// `config.worktree`), the global ones and the system one, as git(1) and
/// git-config(1) name them.
fn config_files(top: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dotgit = top.join(".git");
    let mut gitdirs = vec![dotgit.clone()];
    if let Ok(text) = std::fs::read_to_string(&dotgit) {
        if let Some(rel) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) {
            gitdirs = vec![normalize(&top.join(rel.trim()))];
        }
    }
    if let Some(g) = gitdirs.first().cloned() {
        if let Ok(c) = std::fs::read_to_string(g.join("commondir")) {
            gitdirs.push(normalize(&g.join(c.trim())));
        }
    }
    for g in gitdirs {
        out.push(g.join("config"));
        out.push(g.join("config.worktree"));
    }
    match std::env::var_os("GIT_CONFIG_GLOBAL") {
        Some(g) => out.push(PathBuf::from(g)),
        None => {
            let home = std::env::var_os("HOME");
            if let Some(h) = &home {
                out.push(Path::new(h).join(".gitconfig"));
            }
            let xdg = std::env::var_os("XDG_CONFIG_HOME");
            if let Some(dir) = xdg_git_dir(home.as_deref(), xdg.as_deref()) {
                out.push(dir.join("config"));
            }
        }
    }
    if std::env::var_os("GIT_CONFIG_NOSYSTEM").is_none() {
        out.push(
            std::env::var_os("GIT_CONFIG_SYSTEM")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/etc/gitconfig")),
        );
    }
    out
}

/// git's per-user configuration directory for `$HOME` and
/// `$XDG_CONFIG_HOME`: `$XDG_CONFIG_HOME/git` when that is set and not
/// empty, else `$HOME/.config/git` (git's `xdg_config_home_for`, path.c:
/// an empty `XDG_CONFIG_HOME` counts as unset, and it needs no `HOME`).
/// Its `config`, `attributes` and `ignore` are the per-user files git
/// reads without being told.
pub fn xdg_git_dir(
    home: Option<&std::ffi::OsStr>,
    xdg_config_home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    match xdg_config_home.filter(|x| !x.is_empty()) {
        Some(x) => Some(Path::new(x).join("git")),
        None => home
            .filter(|h| !h.is_empty())
            .map(|h| Path::new(h).join(".config/git")),
    }
}

/// Whether any config file git reads could set `core.hooksPath` or include
/// another file: key names are case-insensitive but always spelled out
/// (git-config(1) has no escapes in names), so a file that contains
/// neither `hookspath` nor `include` in any case sets neither. Saves the
/// git process on every resolution of the common repository.
fn may_point_elsewhere(top: &Path) -> bool {
    config_files(top).iter().any(|f| {
        std::fs::read(f).is_ok_and(|b| {
            let lower = b.to_ascii_lowercase();
            [&b"hookspath"[..], &b"include"[..]]
                .iter()
                .any(|n| lower.windows(n.len()).any(|w| w == *n))
        })
    })
}

/// Ask git for the worktree at `top` (empty when git is missing or
/// cannot read it, or when no config file could point anywhere: the
/// static table still holds).
pub fn observe(top: &Path) -> Vec<GitCodePath> {
    if !may_point_elsewhere(top) {
        return Vec::new();
    }
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

    /// git's rule (path.c, `xdg_config_home_for`): a set, non-empty
    /// `XDG_CONFIG_HOME` wins and needs no `HOME`; an empty one is unset.
    #[test]
    fn the_per_user_git_directory_follows_gits_rule() {
        use std::ffi::OsStr;
        let d =
            |h: Option<&str>, x: Option<&str>| xdg_git_dir(h.map(OsStr::new), x.map(OsStr::new));
        assert_eq!(d(Some("/h"), None), Some(PathBuf::from("/h/.config/git")));
        assert_eq!(
            d(Some("/h"), Some("")),
            Some(PathBuf::from("/h/.config/git"))
        );
        assert_eq!(d(Some("/h"), Some("/x")), Some(PathBuf::from("/x/git")));
        assert_eq!(d(None, Some("/x")), Some(PathBuf::from("/x/git")));
        assert_eq!(d(None, None), None);
    }

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
    fn a_repository_whose_config_names_neither_key_needs_no_git() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join(".git")).unwrap();
        std::fs::write(t.path().join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        // The global and system files of this process may say anything;
        // only the repository's own file is asserted on.
        let repo_only = |top: &Path| {
            config_files(top)
                .into_iter()
                .filter(|f| f.starts_with(top))
                .any(|f| {
                    std::fs::read_to_string(f)
                        .is_ok_and(|s| s.to_ascii_lowercase().contains("hookspath"))
                })
        };
        assert!(!repo_only(t.path()));
        std::fs::write(t.path().join(".git/config"), "[core]\n\tHooksPath = h\n").unwrap();
        assert!(repo_only(t.path()));
        assert!(may_point_elsewhere(t.path()));
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
