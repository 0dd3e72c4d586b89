//! The sandbox policy: the one serialisable value every backend plans from.
//!
//! Invariants (see `docs/SANDBOX.md`):
//! - A backend never reads configuration itself; it receives a
//!   [`SandboxPolicy`], resolves it once with [`resolve::resolve`] into
//!   concrete paths, and plans from the [`resolve::ResolvedPolicy`].
//! - The write-protected and deny-read tables ([`tables`]) can be extended
//!   from the user config but never shrunk; a repository cannot touch them.
//! - `danger-full-access` and `external-sandbox` mean "no local OS sandbox";
//!   the label says so everywhere.

pub mod env;
pub mod env_scan;
mod env_scan_disk;
pub mod facts;
pub mod git_code;
pub mod git_view;
pub mod paths;
pub mod resolve;
pub mod tables;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use env::EnvPolicy;
pub use resolve::{resolve, HostFacts, ResolvedPolicy};

/// How much a sandboxed command may do.
///
/// The derive order is the *strictness* order used by tighten-only config
/// merges: `DangerFullAccess` and `ExternalSandbox` are equally loose (see
/// [`SandboxMode::strictness`]), then `WorkspaceWrite`, then `ReadOnly`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum, Default,
)]
#[serde(rename_all = "kebab-case")]
#[clap(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read everything except deny-read paths; write nothing but a private /tmp.
    ReadOnly,
    /// Also write the workspace, extra writable roots and toolchain caches,
    /// minus the write-protected paths.
    #[default]
    WorkspaceWrite,
    /// No sandbox at all. Only by explicit request.
    DangerFullAccess,
    /// The caller is already inside a sandbox it trusts (a container, a VM);
    /// codewhale adds no OS sandbox of its own and labels runs that way.
    ExternalSandbox,
}

impl SandboxMode {
    /// Rank for "strictest wins" merges: higher is stricter.
    pub fn strictness(self) -> u8 {
        match self {
            SandboxMode::DangerFullAccess | SandboxMode::ExternalSandbox => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::ReadOnly => 2,
        }
    }

    /// The stricter of two modes (ties keep `self`).
    pub fn tighten(self, other: SandboxMode) -> SandboxMode {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }

    /// Whether this mode asks for a local OS sandbox at all.
    pub fn is_sandboxed(self) -> bool {
        matches!(self, SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite)
    }

    /// Network default for the mode: off wherever a sandbox applies.
    pub fn default_network(self) -> bool {
        !self.is_sandboxed()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
            SandboxMode::ExternalSandbox => "external-sandbox",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Toolchain caches that stay writable under `workspace-write` so ordinary
/// tools (cargo, npm, go, pip) work. Each can be switched off.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CachePolicy {
    /// `~/.cargo/registry` and `~/.cargo/git`.
    pub cargo: bool,
    /// `~/.npm`.
    pub npm: bool,
    /// `~/.cache` (XDG cache: pip, go-build, many others live here on Linux).
    pub xdg_cache: bool,
    /// The Go build and module caches (`~/go/pkg/mod`, `$GOCACHE` defaults).
    pub go: bool,
    /// pip's cache (`~/.cache/pip`, covered by `xdg_cache` on Linux; kept
    /// separate so it can be allowed alone).
    pub pip: bool,
}

impl Default for CachePolicy {
    fn default() -> Self {
        CachePolicy {
            cargo: true,
            npm: true,
            xdg_cache: true,
            go: true,
            pip: true,
        }
    }
}

impl CachePolicy {
    /// All caches off: nothing outside the workspace and extra roots is writable.
    pub fn none() -> Self {
        CachePolicy {
            cargo: false,
            npm: false,
            xdg_cache: false,
            go: false,
            pip: false,
        }
    }
}

/// What the landlock tier does with a hole (a deny-read or write-protected
/// path) inside a writable root. Landlock rights on a directory cover new
/// entries created in it, so enforcing such a hole has a price; see
/// `docs/LANDLOCK.md`. The bwrap tier enforces both with mounts at no price
/// and ignores this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoleStrategy {
    /// Enforce the hole; the directories on its path lose the right on
    /// themselves, so entries created there during the run do not get it
    /// (reported as `over-restricted`).
    Carve,
    /// Keep the writable root whole; the hole is not enforced (reported as
    /// `not-enforced`).
    Yield,
}

/// `[sandbox.landlock]`: the landlock tier's two hole strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LandlockHoles {
    /// Deny-read paths (a workspace `.env`) inside writable roots. Default
    /// carve: a leaked secret cannot be taken back.
    pub deny_read_in_writable: HoleStrategy,
    /// Write-protected paths (`.git/hooks`, `.envrc`, …) inside writable
    /// roots. Default yield: carving forbids creating files in the
    /// workspace root and breaks `git commit`.
    pub protect_in_writable: HoleStrategy,
}

impl Default for LandlockHoles {
    fn default() -> Self {
        LandlockHoles {
            deny_read_in_writable: HoleStrategy::Carve,
            protect_in_writable: HoleStrategy::Yield,
        }
    }
}

/// The complete, serialisable sandbox policy.
///
/// Round-trips through TOML and JSON; the in-sandbox helper stage receives it
/// (resolved) as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// The workspace: the cwd or `-C DIR`.
    pub workspace: PathBuf,
    /// Extra writable roots (only meaningful under `workspace-write`).
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// Network access. Off by default in `read-only` and `workspace-write`.
    pub network: bool,
    /// A private, empty `/tmp` for the command (writable in both sandboxed modes).
    #[serde(default = "yes")]
    pub private_tmp: bool,
    #[serde(default)]
    pub caches: CachePolicy,
    /// Extra deny-read entries from the user config (`[sandbox] deny_read`).
    /// `~/` prefixes are home-relative; others are absolute or
    /// workspace-relative.
    #[serde(default)]
    pub extra_deny_read: Vec<String>,
    /// Extra write-protected entries from the user config (`[sandbox] protect_write`).
    #[serde(default)]
    pub extra_protect_write: Vec<String>,
    #[serde(default)]
    pub env: EnvPolicy,
    /// The landlock tier's hole strategies (`[sandbox.landlock]`).
    #[serde(default)]
    pub landlock: LandlockHoles,
    /// `network = "allowlist"`: the command reaches only the egress
    /// proxy, which lets through the names listed here (`src/net/`).
    /// Only meaningful with `network == false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::net::EgressSpec>,
    /// codewhale's own home when `$CODEWHALE_HOME` puts it somewhere other
    /// than `~/.codewhale` (which the deny-read table already holds): its
    /// keys, sessions and snapshots are denied like `~/.codewhale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_home: Option<PathBuf>,
    /// A scoped writer's `write_scope` (a sub-agent's; workspace-relative
    /// paths, lexically normal, no `..`): under `workspace-write` these
    /// paths are the writable roots *instead of* the workspace (the rest
    /// of the workspace stays readable). `None`: the whole workspace.
    /// Resolution makes each one a root only if it exists and stays inside
    /// the workspace (see [`resolve::resolve`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_scope: Option<Vec<PathBuf>>,
}

fn yes() -> bool {
    true
}

impl SandboxPolicy {
    /// The default policy for `mode` rooted at `workspace`.
    pub fn new(mode: SandboxMode, workspace: impl Into<PathBuf>) -> Self {
        SandboxPolicy {
            mode,
            workspace: workspace.into(),
            writable_roots: Vec::new(),
            network: mode.default_network(),
            private_tmp: true,
            caches: CachePolicy::default(),
            extra_deny_read: Vec::new(),
            extra_protect_write: Vec::new(),
            env: EnvPolicy::default(),
            landlock: LandlockHoles::default(),
            egress: None,
            state_home: None,
            write_scope: None,
        }
    }

    /// The network mode this policy asks for.
    pub fn network_mode(&self) -> crate::net::NetworkMode {
        use crate::net::NetworkMode;
        match (self.network, &self.egress) {
            (true, _) => NetworkMode::On,
            (false, Some(_)) => NetworkMode::Allowlist,
            (false, None) => NetworkMode::Off,
        }
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    pub fn from_json(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }

    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    pub fn from_toml(s: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sample() -> SandboxPolicy {
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/work/repo");
        p.writable_roots.push("/data/out".into());
        p.extra_deny_read.push("~/.secret".into());
        p.env.keep.push("GITHUB_TOKEN".into());
        p.env.set.insert("LANG".into(), "C.UTF-8".into());
        p.landlock.protect_in_writable = HoleStrategy::Carve;
        p
    }

    #[test]
    fn round_trips_json_and_toml() {
        let p = sample();
        assert_eq!(SandboxPolicy::from_json(&p.to_json().unwrap()).unwrap(), p);
        assert_eq!(SandboxPolicy::from_toml(&p.to_toml().unwrap()).unwrap(), p);
    }

    #[test]
    fn network_defaults_follow_mode() {
        assert!(!SandboxPolicy::new(SandboxMode::ReadOnly, "/").network);
        assert!(!SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/").network);
        assert!(SandboxPolicy::new(SandboxMode::DangerFullAccess, "/").network);
    }

    #[test]
    fn tighten_never_loosens() {
        use SandboxMode::*;
        let all = [ReadOnly, WorkspaceWrite, DangerFullAccess, ExternalSandbox];
        for a in all {
            for b in all {
                let t = a.tighten(b);
                assert!(t.strictness() >= a.strictness());
                assert!(t.strictness() >= b.strictness());
            }
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = SandboxPolicy::from_toml(
            "mode = \"read-only\"\nworkspace = \"/x\"\nnetwork = false\nbogus = 1\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }
}
