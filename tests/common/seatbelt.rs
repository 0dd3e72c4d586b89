//! Hand-built resolved policies for the Seatbelt planner tests: fixed macOS
//! paths so snapshots are stable on any OS.
#![allow(dead_code)]

use codewhale::host::seatbelt::DarwinHost;
use codewhale::policy::resolve::{PathEntry, PathKind};
use codewhale::policy::{EnvPolicy, ResolvedPolicy, SandboxMode};
use std::path::PathBuf;

pub const WS: &str = "/Users/dev/proj";
pub const HOME: &str = "/Users/dev";

fn pe(path: &str, kind: PathKind, dir: bool, reason: &str) -> PathEntry {
    PathEntry {
        path: PathBuf::from(path),
        kind,
        target: None,
        dir_hint: dir,
        reason: reason.to_string(),
    }
}

/// One cell of the matrix.
#[derive(Clone, Copy, Debug)]
pub struct Cell {
    pub mode: SandboxMode,
    pub network: bool,
    pub extra_roots: bool,
    /// Whether `~/.ssh` and `~/.netrc` exist (`false`: missing entries).
    pub deny_read_present: bool,
}

impl Cell {
    pub fn name(&self) -> String {
        format!(
            "{}_net-{}_{}_{}",
            self.mode,
            if self.network { "on" } else { "off" },
            if self.extra_roots {
                "extra-roots"
            } else {
                "ws-only"
            },
            if self.deny_read_present {
                "deny-present"
            } else {
                "deny-missing"
            }
        )
    }
}

pub fn matrix() -> Vec<Cell> {
    let mut out = Vec::new();
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        for network in [false, true] {
            for extra_roots in [false, true] {
                for deny_read_present in [true, false] {
                    out.push(Cell {
                        mode,
                        network,
                        extra_roots,
                        deny_read_present,
                    });
                }
            }
        }
    }
    out
}

pub fn host() -> DarwinHost {
    DarwinHost {
        user_cache_dir: Some("/private/var/folders/zz/abc123/C".into()),
        private_tmp: Some("/private/var/folders/zz/abc123/T/codewhale-run-1".into()),
        egress_port: None,
    }
}

pub fn resolved(c: Cell) -> ResolvedPolicy {
    let ww = c.mode == SandboxMode::WorkspaceWrite;
    let mut roots = Vec::new();
    let mut protected = Vec::new();
    if ww {
        roots.push(pe(WS, PathKind::Dir, true, "the workspace"));
        protected.push(pe(
            "/Users/dev/proj/.git/hooks",
            PathKind::Dir,
            true,
            "git runs hooks on the host at the next commit/checkout",
        ));
        protected.push(pe(
            "/Users/dev/proj/.git/config",
            PathKind::File,
            false,
            "core.hooksPath, core.fsmonitor, aliases and filters run host code",
        ));
        protected.push(pe(
            "/Users/dev/proj/.git/modules/sub/hooks",
            PathKind::Dir,
            true,
            "submodule hooks run on the host",
        ));
        protected.push(pe(
            "/Users/dev/proj/.codewhale",
            PathKind::Missing,
            true,
            "project override and agent state: would loosen codewhale's own posture",
        ));
        protected.push(pe(
            "/Users/dev/proj/.envrc",
            PathKind::Missing,
            false,
            "direnv executes it when the user enters the directory",
        ));
        if c.extra_roots {
            roots.push(pe(
                "/Volumes/data/out",
                PathKind::Dir,
                true,
                "extra writable root",
            ));
            roots.push(pe(
                "/Users/dev/.cargo/registry",
                PathKind::Dir,
                true,
                "cargo registry cache",
            ));
            roots.push(pe("/Users/dev/.npm", PathKind::Dir, true, "npm cache"));
            protected.push(pe(
                "/Volumes/data/out/.vscode",
                PathKind::Dir,
                true,
                "tasks.json and settings run commands in the editor",
            ));
        }
    }
    // Missing entries are denied with `subpath` (covering later creation as
    // file or directory); existing files with `literal`.
    let (ssh_kind, netrc_kind) = if c.deny_read_present {
        (PathKind::Dir, PathKind::File)
    } else {
        (PathKind::Missing, PathKind::Missing)
    };
    let deny_read = vec![
        pe(
            "/Users/dev/.ssh",
            ssh_kind,
            true,
            "SSH private keys and known hosts",
        ),
        pe(
            "/Users/dev/.netrc",
            netrc_kind,
            false,
            "plain-text login credentials",
        ),
        pe(
            "/Users/dev/.codewhale",
            PathKind::Missing,
            true,
            "codewhale's own config, keys, sessions and snapshots",
        ),
        pe("/etc/shadow", PathKind::Missing, false, "password hashes"),
        pe(
            "/Users/dev/proj/.env",
            PathKind::File,
            false,
            "workspace .env files hold application secrets",
        ),
        pe(
            "/private/var/folders/zz/abc123/T/leak.env",
            PathKind::File,
            false,
            "user config: [sandbox] deny_read",
        ),
    ];
    ResolvedPolicy {
        mode: c.mode,
        network: c.network,
        private_tmp: true,
        workspace: PathBuf::from(WS),
        writable_roots: roots,
        protected,
        deny_read,
        homes: vec![PathBuf::from(HOME)],
        egress: None,
        env: EnvPolicy::default(),
        landlock: Default::default(),
        notes: Vec::new(),
        unmasked: Vec::new(),
        git: Default::default(),
    }
}
