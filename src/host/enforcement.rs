//! What was really in force for a run. A status, not a bool: every backend
//! fills in what it applied and lists what it could not.
//!
//! Every field is typed (enums serialised in kebab-case), so a consumer of
//! `--report-json`, stream-json, the session file or a receipt compares
//! stable ids, never the wording of a message.

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

impl EnforcementLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            EnforcementLevel::Full => "full",
            EnforcementLevel::Partial => "partial",
            EnforcementLevel::External => "external",
            EnforcementLevel::Unsandboxed => "unsandboxed",
        }
    }
}

impl std::fmt::Display for EnforcementLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kernel's answer to `landlock_restrict_self`: how much of the
/// requested ruleset it enforces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockStatus {
    /// Nothing (no Landlock, or an empty ruleset).
    #[default]
    Not,
    /// Some requested rights are unknown to the kernel's ABI.
    Partially,
    /// Everything requested.
    Fully,
}

impl LandlockStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LandlockStatus::Not => "not",
            LandlockStatus::Partially => "partially",
            LandlockStatus::Fully => "fully",
        }
    }
}

/// A Linux namespace a backend created for the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Namespace {
    User,
    Mount,
    Pid,
    Net,
    Ipc,
    Uts,
    Cgroup,
}

impl Namespace {
    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::User => "user",
            Namespace::Mount => "mount",
            Namespace::Pid => "pid",
            Namespace::Net => "net",
            Namespace::Ipc => "ipc",
            Namespace::Uts => "uts",
            Namespace::Cgroup => "cgroup",
        }
    }
}

/// What keeps a command off the network when the policy denies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkEnforcer {
    /// An empty network namespace (bwrap without `--share-net`).
    Netns,
    /// The seccomp filter's `socket()` rules.
    Seccomp,
    /// Landlock's TCP bind/connect rights (ABI ≥ 4).
    LandlockNet,
    /// The Seatbelt profile's `(deny network*)`.
    Seatbelt,
    /// The egress policy of the OpenSandbox deployment (outside codewhale).
    OpensandboxEgressPolicy,
    /// `network = "allowlist"`: codewhale's egress proxy is the only way
    /// out, and decides by name (`docs/NETWORK.md`).
    EgressProxy,
}

/// What a [`PartialItem`] is about: a stable id. Everything except
/// [`Shortfall::OverRestricted`] leaves something the policy asked for
/// unprotected; `over-restricted` blocks something the policy allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shortfall {
    /// A deny-read path that stays readable.
    DenyRead,
    /// A write-protected path that stays writable.
    WriteProtect,
    /// Something the policy allows that is blocked (e.g. no private `/tmp`
    /// without a mount namespace, a carved directory).
    OverRestricted,
    /// The kernel has no Landlock, or the test seam disabled it.
    Landlock,
    /// A Landlock access right the kernel's ABI does not have.
    LandlockRight,
    /// A limit of the landlock tier that holds whatever the paths are.
    TierLimit,
    /// The capability bounding set could not be cleared.
    CapabilityBoundingSet,
    /// Something policy resolution could not do (a scan limit, a missing
    /// cache directory).
    Policy,
    /// `auto` fell back to a weaker backend (why).
    Fallback,
    /// Isolation is the external sandbox's, not codewhale's.
    ExternalIsolation,
    /// A note from the remote backend's run (sync, reuse, interruption).
    Remote,
    /// What the Seatbelt profile cannot express.
    SeatbeltProfile,
    /// Process supervision cannot hold every descendant.
    Supervision,
    /// The command ran without any sandbox (why).
    NoSandbox,
    /// What `network = "allowlist"` cannot hold (`docs/NETWORK.md`).
    Network,
}

impl Shortfall {
    /// Every id (the receipt schema lists the same ones).
    pub const ALL: [Shortfall; 15] = [
        Shortfall::DenyRead,
        Shortfall::WriteProtect,
        Shortfall::OverRestricted,
        Shortfall::Landlock,
        Shortfall::LandlockRight,
        Shortfall::TierLimit,
        Shortfall::CapabilityBoundingSet,
        Shortfall::Policy,
        Shortfall::Fallback,
        Shortfall::ExternalIsolation,
        Shortfall::Remote,
        Shortfall::SeatbeltProfile,
        Shortfall::Supervision,
        Shortfall::NoSandbox,
        Shortfall::Network,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Shortfall::DenyRead => "deny-read",
            Shortfall::WriteProtect => "write-protect",
            Shortfall::OverRestricted => "over-restricted",
            Shortfall::Landlock => "landlock",
            Shortfall::LandlockRight => "landlock-right",
            Shortfall::TierLimit => "tier-limit",
            Shortfall::CapabilityBoundingSet => "capability-bounding-set",
            Shortfall::Policy => "policy",
            Shortfall::Fallback => "fallback",
            Shortfall::ExternalIsolation => "external-isolation",
            Shortfall::Remote => "remote",
            Shortfall::SeatbeltProfile => "seatbelt-profile",
            Shortfall::Supervision => "supervision",
            Shortfall::NoSandbox => "no-sandbox",
            Shortfall::Network => "network",
        }
    }
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the landlock tier held deny-read items inside writable roots in one
/// run (see `host::backends::landlock::mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DenyReadStrategy {
    /// There was no deny-read item inside a writable root.
    #[serde(rename = "none")]
    None,
    /// Read-only mounts over them in a private mount namespace.
    #[serde(rename = "mask")]
    Mask,
    /// Landlock carve plus the opener (new entries cannot be executed).
    #[serde(rename = "carve+opener")]
    CarveOpener,
    /// Left readable (`deny_read_in_writable = "yield"`).
    #[serde(rename = "yield")]
    Yield,
}

impl DenyReadStrategy {
    /// The stable id (as serialised).
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReadStrategy::None => "none",
            DenyReadStrategy::Mask => "mask",
            DenyReadStrategy::CarveOpener => "carve+opener",
            DenyReadStrategy::Yield => "yield",
        }
    }
}

/// What the after-run integrity check did to one protected path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RevertAction {
    /// Created during the run: moved into the quarantine.
    Removed,
    /// Changed during the run: the new version moved into the quarantine,
    /// the version from before the run put back.
    Restored,
    /// Deleted during the run: the version from before the run put back.
    Recreated,
    /// Its directory was removed during the run (`rm -rf .git`): not put
    /// back (no skeleton directories are made); anything new quarantined.
    LeftDeleted,
    /// Written during the run and would run code on the host (a nested
    /// repository's config or hook, see `integrity::nested`): moved into
    /// the quarantine; there is no earlier version to put back.
    Quarantined,
    /// A deny-read file the landlock tier's carve+opener fallback let the
    /// command rename inside its directory (`mv .env e2`): renamed back
    /// (`why` says from where).
    MovedBack,
    /// The revert failed (`error` says why): the path may still hold what
    /// the command wrote.
    Failed,
}

/// One write to a protected path that was undone after the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revert {
    pub path: PathBuf,
    pub action: RevertAction,
    /// Where the command's version now is (never deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantined_to: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Undone for an earlier run that died before its own check (found
    /// by this run or the command that started next).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier_run: bool,
    /// Why it was reverted, when the path itself does not say it (the
    /// keys a quarantined config set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Revert {
    /// One line of text (`sandbox run`, doctor).
    pub fn line(&self) -> String {
        let what = match self.action {
            RevertAction::Removed => "created during the run; moved to quarantine",
            RevertAction::Restored => {
                "changed during the run; original restored, new version quarantined"
            }
            RevertAction::Recreated => "deleted during the run; original restored",
            RevertAction::LeftDeleted => "its directory was deleted during the run; not restored",
            RevertAction::Quarantined => {
                "written during the run and would run code on the host; moved to quarantine"
            }
            RevertAction::MovedBack => "renamed during the run; moved back",
            RevertAction::Failed => "could not be reverted",
        };
        let mut s = format!("{}: {what}", self.path.display());
        if let Some(w) = &self.why {
            s.push_str(&format!(" ({w})"));
        }
        if let Some(q) = &self.quarantined_to {
            s.push_str(&format!(" ({})", q.display()));
        }
        if let Some(e) = &self.error {
            s.push_str(&format!(": {e}"));
        }
        if self.earlier_run {
            s.push_str(" [left by an interrupted earlier run]");
        }
        s
    }

    /// The revert as a `partial` item: the write happened, and was only
    /// undone after the run.
    pub fn partial(&self) -> PartialItem {
        PartialItem::at(
            Shortfall::WriteProtect,
            self.path.clone(),
            format!("written during the run, reverted after it: {}", self.line()),
        )
    }
}

/// One thing the policy asked for that this run did not enforce exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialItem {
    pub item: Shortfall,
    /// The path it concerns, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Why, in words (what stays open, or what is blocked).
    pub reason: String,
}

impl PartialItem {
    pub fn new(item: Shortfall, reason: impl Into<String>) -> Self {
        PartialItem {
            item,
            path: None,
            reason: reason.into(),
        }
    }

    pub fn at(item: Shortfall, path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        PartialItem {
            item,
            path: Some(path.into()),
            reason: reason.into(),
        }
    }

    /// One line of text: `item: path: reason` (doctor, `sandbox run`).
    pub fn line(&self) -> String {
        match &self.path {
            Some(p) => format!("{}: {}: {}", self.item, p.display(), self.reason),
            None => format!("{}: {}", self.item, self.reason),
        }
    }
}

/// The policy resolver's notes (what it could not set up, e.g. a scan that
/// stopped at its limit) as report items.
pub fn policy_items(notes: &[String]) -> impl Iterator<Item = PartialItem> + '_ {
    notes
        .iter()
        .map(|n| PartialItem::new(Shortfall::Policy, n.clone()))
}

/// The part of an [`Enforcement`] that travels with every command's result
/// (tool result, session record, stream-json, receipts): which backend, how
/// much it enforced, and each item it did not, with its reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnforcementSummary {
    pub backend: BackendKind,
    pub level: EnforcementLevel,
    pub partial: Vec<PartialItem>,
}

/// Result of applying Landlock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockReport {
    /// How much of the ruleset the kernel enforces.
    pub status: LandlockStatus,
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
    /// Namespaces created.
    pub namespaces: Vec<Namespace>,
    /// Whether the command could reach the network.
    pub network_allowed: bool,
    /// How network denial was enforced.
    pub network_enforced_by: Vec<NetworkEnforcer>,
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
    pub partial: Vec<PartialItem>,
    pub external: Option<ExternalReport>,
    /// `network = "allowlist"`: what the egress proxy let through and
    /// refused. `network_allowed` stays false (no unfiltered network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressReport>,
    /// Writes to protected paths the after-run integrity check undid
    /// (each also listed in `partial`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<Revert>,
    /// The landlock tier: how deny-read items inside writable roots were
    /// held (`mask`, `carve+opener`, `yield`, `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_read_strategy: Option<DenyReadStrategy>,
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
    /// A backend's report before it says what it applied: claims nothing
    /// (no namespace, filter, mask or protection, no network), lists
    /// nothing, and is `full` only until an item is listed (the
    /// dispatcher's [`Enforcement::settle_level`]). Every backend starts
    /// from here with struct-update syntax, so a field added later is
    /// "not claimed" everywhere until a backend sets it.
    pub fn base(backend: BackendKind, mode: SandboxMode, label: impl Into<String>) -> Self {
        Enforcement {
            backend,
            mode,
            level: EnforcementLevel::Full,
            label: label.into(),
            namespaces: Vec::new(),
            network_allowed: false,
            network_enforced_by: Vec::new(),
            no_new_privs: false,
            capabilities_dropped: false,
            seccomp: None,
            landlock: None,
            masked_paths: Vec::new(),
            protected_paths: Vec::new(),
            env_removed: Vec::new(),
            partial: Vec::new(),
            external: None,
            egress: None,
            reverted: Vec::new(),
            deny_read_strategy: None,
        }
    }

    /// The report for a run with no sandbox at all.
    pub fn unsandboxed(mode: SandboxMode, why: &str) -> Self {
        Enforcement {
            level: EnforcementLevel::Unsandboxed,
            network_allowed: true,
            partial: vec![PartialItem::new(Shortfall::NoSandbox, why)],
            ..Enforcement::base(BackendKind::None, mode, "unsandboxed")
        }
    }

    /// What travels with the command's result (see [`EnforcementSummary`]).
    pub fn summary(&self) -> EnforcementSummary {
        EnforcementSummary {
            backend: self.backend,
            level: self.level,
            partial: self.partial.clone(),
        }
    }

    pub fn is_sandboxed(&self) -> bool {
        !matches!(self.level, EnforcementLevel::Unsandboxed)
    }

    /// The one rule between the items and the level: a report that lists
    /// anything not enforced is never `full`. Applied by the dispatcher to
    /// every outcome, whichever backend (or later step, such as the egress
    /// report) added the item.
    pub fn settle_level(&mut self) {
        if self.level == EnforcementLevel::Full && !self.partial.is_empty() {
            self.level = EnforcementLevel::Partial;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialise_as_their_stable_names() {
        for s in Shortfall::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for (st, name) in [
            (LandlockStatus::Not, "not"),
            (LandlockStatus::Partially, "partially"),
            (LandlockStatus::Fully, "fully"),
        ] {
            assert_eq!(serde_json::to_value(st).unwrap(), name);
            assert_eq!(st.as_str(), name);
        }
        assert_eq!(
            serde_json::to_value(NetworkEnforcer::LandlockNet).unwrap(),
            "landlock-net"
        );
        assert_eq!(serde_json::to_value(Namespace::Cgroup).unwrap(), "cgroup");
        let p = PartialItem::at(Shortfall::WriteProtect, "/w/.git", "writable");
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"item":"write-protect","path":"/w/.git","reason":"writable"}"#
        );
        assert_eq!(p.line(), "write-protect: /w/.git: writable");
        let no_path: PartialItem =
            serde_json::from_str(r#"{"item":"tier-limit","reason":"r"}"#).unwrap();
        assert_eq!(no_path, PartialItem::new(Shortfall::TierLimit, "r"));
    }
}
