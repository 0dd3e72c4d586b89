//! The Landlock layer: a ruleset derived from the resolved policy, planned
//! as data, then applied to the calling process (or a child between fork and
//! exec).
//!
//! Two tiers use it (see `docs/LANDLOCK.md`):
//! - [`Tier::InsideBwrap`]: defence in depth inside bubblewrap. The mount
//!   namespace already masks deny-read paths and re-binds protected paths
//!   read-only, so Landlock only bounds the envelope: read everywhere, write
//!   the writable roots, the private `/tmp` and a few devices; TCP off when
//!   the network is off; signal and abstract-socket scoping.
//! - [`Tier::NoNamespaces`]: the whole filesystem policy is Landlock's. Holes
//!   (deny-read paths, write-protected paths) are carved out of the allow-list
//!   with the complement walk ([`complement`]). What an allow-list cannot
//!   express is listed in [`LandlockPlan::partial`], never silently dropped.
//!
//! The flow is `plan` (pure apart from directory listings) →
//! [`prepare`] (opens `O_PATH` fds, builds the kernel ruleset; allocates) →
//! [`PreparedRuleset::restrict_self`] (two syscalls; safe between fork and
//! exec) → [`PreparedRuleset::report`].
//!
//! Invariants:
//! - The ABI is pinned ([`rights::TARGET_ABI`]); newer kernels never change
//!   what is requested. Older kernels get best-effort compatibility per
//!   feature and every dropped right is named in the report.
//! - Device nodes can never be created (`make-char`/`make-block` are handled
//!   and granted nowhere).
//! - Rules are attached to `O_PATH|O_NOFOLLOW` fds of real paths; a rule
//!   path that became a symlink or vanished is skipped (fewer grants, never
//!   more) and reported.

pub mod apply;
pub mod cache;
pub mod complement;
pub mod mask;
pub mod opener;
pub mod plan;
pub mod renamed;
pub mod rights;
pub mod stage;
pub mod tier;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod plan_tests;

pub use apply::{apply, kernel_abi, prepare, PreparedRuleset};
pub use plan::{plan, FsRule, LandlockPlan, PartialItem, PartialKind, RuleWhy};

use crate::policy::SandboxMode;
use serde::Serialize;
use std::path::PathBuf;

/// Where the ruleset is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Inside bubblewrap's namespaces: mounts already hide and protect paths.
    InsideBwrap,
    /// No namespaces at all: Landlock carries the whole filesystem policy.
    NoNamespaces,
}

/// What to do with a hole whose carving would cost the writable root
/// something (see `docs/LANDLOCK.md`, "holes inside writable roots").
pub use crate::policy::HoleStrategy;

/// Inputs of [`plan`] besides the resolved policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LandlockOptions {
    pub tier: Tier,
    /// The kernel's Landlock ABI (0 = none); [`LandlockOptions::detect`]
    /// asks the kernel. Used to list what the kernel lacks in the plan.
    pub kernel_abi: u32,
    /// Test seam: behave as if the kernel supported at most this ABI
    /// (`Some(0)` simulates "Landlock missing").
    pub max_abi: Option<u32>,
    /// [`Tier::NoNamespaces`]: a fresh per-run directory (created by the
    /// caller) made writable and exported as `TMPDIR`, since there is no
    /// private `/tmp` without a mount namespace.
    pub tmp_dir: Option<PathBuf>,
    /// Deny-read paths inside writable roots. Default: carve (a leaked
    /// secret cannot be taken back).
    pub deny_read_in_writable: HoleStrategy,
    /// Write-protected paths inside writable roots. Default: yield (carving
    /// would forbid creating files in the workspace root and break `git
    /// commit`); reported as not enforced.
    pub protect_in_writable: HoleStrategy,
    /// With the network off (TCP handled): TCP ports `connect` may still
    /// reach — the egress bridge's loopback port under
    /// `network = "allowlist"`. Landlock rules are per port, not per
    /// address; the callers say what else makes the port safe.
    pub connect_ports: Vec<u16>,
    /// [`Tier::NoNamespaces`] with `deny_read_in_writable = "carve"`: mask
    /// deny-read items inside writable roots by mounts made this way
    /// (see [`mask`]) instead of carving them; `None` = carve + opener.
    pub mask: Option<mask::MaskVia>,
    /// Why masking is not used (the probe's or the seam's reason), for
    /// the fallback's report item.
    pub mask_fallback: Option<String>,
    /// The command runs in a network namespace of its own whose only
    /// interface is its own loopback (bwrap's, or the one the no-namespace
    /// tier makes with the mask's step, `Some(via)`): Landlock's TCP rules
    /// are not needed to keep it off the network, and would only keep a
    /// test server from listening on that loopback.
    pub private_net: Option<PrivateNet>,
    /// With the network off and no private namespace: why not (the
    /// `over-restricted: loopback` item).
    pub private_net_fallback: Option<String>,
}

/// Who made the command's private network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrivateNet {
    /// bwrap's `--unshare-net` (the inside-bwrap tier).
    Bwrap,
    /// The no-namespace tier's own step, entered this way.
    Stage(mask::MaskVia),
}

impl LandlockOptions {
    /// Options for `tier` with the kernel's ABI and the default strategies.
    pub fn detect(tier: Tier) -> Self {
        LandlockOptions {
            tier,
            kernel_abi: kernel_abi(),
            max_abi: None,
            tmp_dir: None,
            deny_read_in_writable: HoleStrategy::Carve,
            protect_in_writable: HoleStrategy::Yield,
            connect_ports: Vec::new(),
            mask: None,
            mask_fallback: None,
            private_net: None,
            private_net_fallback: None,
        }
    }
}

/// Landlock errors. Each is a reason the sandbox could not be set up (exit 125).
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("landlock does not apply to {0} mode (it asks for no local sandbox)")]
    NotSandboxed(SandboxMode),
    #[error("landlock: building the ruleset: {0}")]
    Ruleset(#[from] ::landlock::RulesetError),
    #[error("landlock: adding the rule for {path}: {source}")]
    AddRule {
        path: PathBuf,
        source: ::landlock::RulesetError,
    },
    #[error("landlock: {kind} bits {bits:#x} are unknown to the landlock crate")]
    UnknownBits { kind: &'static str, bits: u64 },
    #[error("landlock: the kernel enforced less than prepared (expected {expected}, got {got})")]
    Weaker {
        expected: &'static str,
        got: &'static str,
    },
    #[error("landlock: duplicating the ruleset fd: {0}")]
    Clone(std::io::Error),
    #[error("landlock: this prepared ruleset was already applied")]
    AlreadyApplied,
}
