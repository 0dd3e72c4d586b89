//! The security tables: write-protected paths and deny-read paths.
//!
//! Data, not code: every entry carries a one-line reason that shows up in
//! `sandbox explain`, `doctor` and the docs. The user config may add entries
//! (`[sandbox] deny_read`, `protect_write`); nothing can remove one.

use serde::Serialize;

/// Where a table entry is anchored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Anchor {
    /// Relative to every home directory candidate (`$HOME` and the passwd entry).
    Home,
    /// Relative to every writable root (the workspace, extra roots, caches).
    WritableRoot,
    /// An absolute path.
    Absolute,
}

/// One row of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub anchor: Anchor,
    /// Path relative to the anchor (or absolute for [`Anchor::Absolute`]).
    /// A `*` component matches any single name (used for `.git/modules/*`).
    pub path: &'static str,
    /// Whether a missing entry should be treated as a directory when a
    /// backend has to pre-create a placeholder.
    pub dir: bool,
    pub reason: &'static str,
    /// Whether an agent's write to it is refused outright by the
    /// repository-rules gate (gate 4) instead of asked about: git runs or
    /// applies it at the very next git command, with no human in between
    /// (git's hooks and config, a submodule's too). A column here, not a
    /// list of names elsewhere, so renaming an entry cannot turn a block
    /// into a question. Not part of the serialised table.
    #[serde(skip)]
    pub block: bool,
}

const fn e(anchor: Anchor, path: &'static str, dir: bool, reason: &'static str) -> Entry {
    Entry {
        anchor,
        path,
        dir,
        reason,
        block: false,
    }
}

/// An entry whose agent write gate 4 blocks (see [`Entry::block`]).
const fn blocking(anchor: Anchor, path: &'static str, dir: bool, reason: &'static str) -> Entry {
    Entry {
        block: true,
        ..e(anchor, path, dir, reason)
    }
}

/// Paths that stay read-only even inside writable roots: writing them would
/// let a sandboxed command run code on the host later, outside the sandbox.
/// `.git/objects`, refs and the index are deliberately absent so `git commit`
/// works inside the sandbox.
pub const PROTECT_WRITE: &[Entry] = &[
    blocking(
        Anchor::WritableRoot,
        ".git/hooks",
        true,
        "git runs hooks on the host at the next commit/checkout",
    ),
    blocking(
        Anchor::WritableRoot,
        ".git/config",
        false,
        "core.hooksPath, core.fsmonitor, aliases and filters run host code",
    ),
    e(
        Anchor::WritableRoot,
        ".git/commondir",
        false,
        "names the repository whose config (core.fsmonitor …) git applies",
    ),
    blocking(
        Anchor::WritableRoot,
        ".git/modules/*/hooks",
        true,
        "submodule hooks run on the host",
    ),
    blocking(
        Anchor::WritableRoot,
        ".git/modules/*/config",
        false,
        "submodule config can name host commands",
    ),
    e(
        Anchor::WritableRoot,
        ".git/config.worktree",
        false,
        "per-worktree config (extensions.worktreeConfig): the same keys as .git/config",
    ),
    e(
        Anchor::WritableRoot,
        ".husky",
        true,
        "husky's hook scripts, which git's hooks run on the host",
    ),
    e(
        Anchor::WritableRoot,
        ".pre-commit-config.yaml",
        false,
        "pre-commit's hooks run its `entry` commands on the host",
    ),
    e(
        Anchor::WritableRoot,
        "lefthook.yml",
        false,
        "lefthook's hooks run its commands on the host",
    ),
    e(
        Anchor::WritableRoot,
        ".lefthook.yml",
        false,
        "lefthook's hooks run its commands on the host",
    ),
    e(
        Anchor::WritableRoot,
        "lefthook-local.yml",
        false,
        "lefthook's hooks run its commands on the host",
    ),
    e(
        Anchor::WritableRoot,
        ".lfsconfig",
        false,
        "git-lfs reads its endpoints and settings from it",
    ),
    e(
        Anchor::WritableRoot,
        ".codewhale",
        true,
        "project override and agent state: would loosen codewhale's own posture",
    ),
    e(
        Anchor::WritableRoot,
        ".deepseek",
        true,
        "legacy project override directory",
    ),
    e(
        Anchor::WritableRoot,
        ".envrc",
        false,
        "direnv executes it when the user enters the directory",
    ),
    e(
        Anchor::WritableRoot,
        ".mcp.json",
        false,
        "MCP server definitions are started as host processes",
    ),
    e(
        Anchor::WritableRoot,
        ".vscode",
        true,
        "tasks.json and settings run commands in the editor",
    ),
    e(
        Anchor::WritableRoot,
        ".idea",
        true,
        "JetBrains IDEs: run configurations, startup tasks and external tools run commands",
    ),
    e(
        Anchor::WritableRoot,
        ".devcontainer",
        true,
        "Dev Containers: initializeCommand runs on the host, lifecycle commands in the container",
    ),
    e(
        Anchor::WritableRoot,
        ".devcontainer.json",
        false,
        "Dev Containers: initializeCommand runs on the host",
    ),
    e(
        Anchor::WritableRoot,
        ".zed",
        true,
        "Zed: tasks and language-server settings run commands",
    ),
    e(
        Anchor::WritableRoot,
        ".helix",
        true,
        "Helix: language-server commands",
    ),
    e(
        Anchor::WritableRoot,
        ".fleet",
        true,
        "JetBrains Fleet: run configurations",
    ),
    e(
        Anchor::WritableRoot,
        ".nvim.lua",
        false,
        "Neovim's exrc runs it on opening the project",
    ),
    e(
        Anchor::WritableRoot,
        ".nvimrc",
        false,
        "Neovim's exrc runs it on opening the project",
    ),
    e(
        Anchor::WritableRoot,
        ".exrc",
        false,
        "Vim's and Neovim's exrc runs it on opening the project",
    ),
    e(
        Anchor::WritableRoot,
        ".lazy.lua",
        false,
        "lazy.nvim runs a project's local spec",
    ),
    e(
        Anchor::WritableRoot,
        ".dir-locals.el",
        false,
        "Emacs evaluates `eval` forms in directory-local variables",
    ),
    e(
        Anchor::WritableRoot,
        ".gitmodules",
        false,
        "submodule URLs and update commands",
    ),
    e(
        Anchor::WritableRoot,
        ".gitconfig",
        false,
        "git configuration runs host code (when the root is a home)",
    ),
    e(
        Anchor::WritableRoot,
        ".bashrc",
        false,
        "shell start-up file",
    ),
    e(
        Anchor::WritableRoot,
        ".bash_profile",
        false,
        "shell start-up file",
    ),
    e(
        Anchor::WritableRoot,
        ".bash_login",
        false,
        "shell start-up file",
    ),
    e(
        Anchor::WritableRoot,
        ".profile",
        false,
        "shell start-up file",
    ),
    e(Anchor::WritableRoot, ".zshrc", false, "shell start-up file"),
    e(
        Anchor::WritableRoot,
        ".zprofile",
        false,
        "shell start-up file",
    ),
    e(
        Anchor::WritableRoot,
        ".zshenv",
        false,
        "shell start-up file",
    ),
    e(
        Anchor::WritableRoot,
        ".zlogin",
        false,
        "shell start-up file",
    ),
];

/// codewhale's own home under each home directory (`~/.codewhale`): its
/// deny-read entry makes room for a sub-agent's checkout (see
/// `resolve::CHECKOUTS_DIR`).
pub const CODEWHALE_HOME: &str = ".codewhale";

/// Paths unreadable in every mode but `danger-full-access`: credential
/// stores. Workspace `.env` files are found separately (see
/// [`is_env_file_name`]).
pub const DENY_READ: &[Entry] = &[
    e(
        Anchor::Home,
        ".ssh",
        true,
        "SSH private keys and known hosts",
    ),
    e(Anchor::Home, ".gnupg", true, "GPG private keys"),
    e(Anchor::Home, ".aws", true, "AWS credentials"),
    e(Anchor::Home, ".azure", true, "Azure CLI tokens"),
    e(
        Anchor::Home,
        ".config/gcloud",
        true,
        "Google Cloud credentials",
    ),
    e(
        Anchor::Home,
        ".kube",
        true,
        "Kubernetes cluster credentials",
    ),
    e(
        Anchor::Home,
        ".docker/config.json",
        false,
        "container registry credentials",
    ),
    e(
        Anchor::Home,
        ".netrc",
        false,
        "plain-text login credentials",
    ),
    e(
        Anchor::Home,
        ".git-credentials",
        false,
        "git's stored HTTP credentials",
    ),
    e(Anchor::Home, ".npmrc", false, "npm registry tokens"),
    e(Anchor::Home, ".pypirc", false, "PyPI upload tokens"),
    e(
        Anchor::Home,
        ".cargo/credentials",
        false,
        "crates.io token (legacy name)",
    ),
    e(
        Anchor::Home,
        ".cargo/credentials.toml",
        false,
        "crates.io token",
    ),
    e(
        Anchor::Home,
        ".config/gh/hosts.yml",
        false,
        "GitHub CLI OAuth tokens",
    ),
    e(
        Anchor::Home,
        CODEWHALE_HOME,
        true,
        "codewhale's own config, keys, sessions and snapshots",
    ),
    e(
        Anchor::Home,
        ".deepseek",
        true,
        "legacy codewhale config and keys",
    ),
    e(Anchor::Absolute, "/etc/shadow", false, "password hashes"),
    e(
        Anchor::Absolute,
        "/etc/gshadow",
        false,
        "group password hashes",
    ),
];

/// Reason shown for workspace `.env` files.
pub const ENV_FILE_REASON: &str = "workspace .env files hold application secrets";

/// Whether a file name is a `.env` secret file: `.env` or `.env.*`, except
/// the conventional non-secret templates.
pub fn is_env_file_name(name: &str) -> bool {
    if name == ".env" {
        return true;
    }
    match name.strip_prefix(".env.") {
        Some(rest) => !matches!(
            rest,
            "example" | "sample" | "template" | "dist" | "defaults"
        ),
        None => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn env_file_names() {
        assert!(is_env_file_name(".env"));
        assert!(is_env_file_name(".env.local"));
        assert!(is_env_file_name(".env.production"));
        assert!(!is_env_file_name(".env.example"));
        assert!(!is_env_file_name(".env.sample"));
        assert!(!is_env_file_name(".env.template"));
        assert!(!is_env_file_name(".envrc"));
        assert!(!is_env_file_name("env"));
    }

    #[test]
    fn every_entry_has_a_reason() {
        for t in PROTECT_WRITE.iter().chain(DENY_READ) {
            assert!(!t.reason.is_empty(), "{}", t.path);
            if t.anchor == Anchor::Absolute {
                assert!(t.path.starts_with('/'));
            } else {
                assert!(!t.path.starts_with('/'));
            }
        }
    }

    #[test]
    fn objects_refs_index_stay_writable() {
        for t in PROTECT_WRITE {
            assert!(!t.path.starts_with(".git/objects"));
            assert!(!t.path.starts_with(".git/refs"));
            assert_ne!(t.path, ".git/index");
            assert_ne!(t.path, ".git");
        }
    }
}
