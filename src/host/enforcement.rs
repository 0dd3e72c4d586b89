//! What was really in force for a run. A status, not a bool: every backend
//! fills in what it applied and lists what it could not.

use super::BackendKind;
use crate::policy::SandboxMode;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The overall verdict on a run's isolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnforcementLevel {
    /// Every rule of the policy is enforced by the OS.
    Full,
    /// Enforced, but some items are not (listed in `partial`).
    Partial,
    /// Isolation is provided by something outside codewhale (OpenSandbox,
    /// `external-sandbox` mode); its strength depends on that deployment.
    External,
    /// Nothing is enforced. Only reachable by explicit request.
    Unsandboxed,
}

/// Result of applying Landlock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockReport {
    /// `fully`, `partially` or `not` enforced (the kernel's answer).
    pub status: String,
    /// The ABI version in use (0 = none).
    pub abi: u32,
    /// The ABI the code was written against.
    pub target_abi: u32,
    /// Rules or access rights the kernel could not enforce.
    pub dropped: Vec<String>,
}

/// Result of installing the seccomp filter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompReport {
    pub installed: bool,
    /// Names of the syscalls the filter denies (or restricts by argument).
    pub denied: Vec<String>,
}

/// Where a remote backend ran the command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalReport {
    pub provider: String,
    pub sandbox_id: String,
    pub note: String,
    /// Files uploaded before / brought back after the command.
    pub synced_up: usize,
    pub synced_back: Vec<PathBuf>,
    pub sync_refused: Vec<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    pub backend: BackendKind,
    pub mode: SandboxMode,
    pub level: EnforcementLevel,
    /// One human label used everywhere (doctor, receipts, stream-json):
    /// e.g. `sandboxed: bwrap+seccomp+landlock` or `unsandboxed`.
    pub label: String,
    /// Namespaces created (`user`, `mount`, `pid`, `net`, `ipc`, `uts`, `cgroup`).
    pub namespaces: Vec<String>,
    /// Whether the command could reach the network.
    pub network_allowed: bool,
    /// How network denial was enforced (`netns`, `seccomp`, `landlock-net`).
    pub network_enforced_by: Vec<String>,
    pub no_new_privs: bool,
    pub capabilities_dropped: bool,
    pub seccomp: Option<SeccompReport>,
    pub landlock: Option<LandlockReport>,
    /// Deny-read paths hidden from the command.
    pub masked_paths: Vec<PathBuf>,
    /// Paths kept read-only inside writable roots.
    pub protected_paths: Vec<PathBuf>,
    /// Environment variable *names* removed (never values).
    pub env_removed: Vec<String>,
    /// Everything the policy asked for that this run did not enforce.
    pub partial: Vec<String>,
    pub external: Option<ExternalReport>,
    /// `network = "allowlist"`: what the egress proxy let through and
    /// refused. `network_allowed` stays false (no unfiltered network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressReport>,
}

/// The egress proxy's account of one command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressReport {
    /// The allow and deny entries in force (named sets unexpanded).
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// How the command reached the proxy (`unix socket bridged to
    /// 127.0.0.1:3128 in the sandbox's network namespace`, ...).
    pub via: String,
    /// One event per connection attempt, in order.
    pub events: Vec<crate::net::ConnectionEvent>,
    pub summary: crate::net::EgressSummary,
    /// `network: 3 connections to crates.io; 1 refused: evil.example (...)`.
    pub line: String,
    /// Names answered by the test resolver (`CODEWHALE_TEST_RESOLVE`)
    /// instead of the system's; empty in real use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_resolver: Vec<String>,
}

impl Enforcement {
    /// The report for a run with no sandbox at all.
    pub fn unsandboxed(mode: SandboxMode, why: &str) -> Self {
        Enforcement {
            backend: BackendKind::None,
            mode,
            level: EnforcementLevel::Unsandboxed,
            label: "unsandboxed".to_string(),
            namespaces: Vec::new(),
            network_allowed: true,
            network_enforced_by: Vec::new(),
            no_new_privs: false,
            capabilities_dropped: false,
            seccomp: None,
            landlock: None,
            masked_paths: Vec::new(),
            protected_paths: Vec::new(),
            env_removed: Vec::new(),
            partial: vec![why.to_string()],
            external: None,
            egress: None,
        }
    }

    pub fn is_sandboxed(&self) -> bool {
        !matches!(self.level, EnforcementLevel::Unsandboxed)
    }
}
