//! The clamp: a child's posture is the meet of its parent's live posture
//! and its role's cap ([`super::Role::cap`]), never wider than either.
//!
//! [`EffectivePosture`] is the typed value the clamp works on: everything
//! that decides what a call may do — mode, approval, who answers, the
//! sandbox mode and writable roots, the network, the deny lists and the
//! tools. [`EffectivePosture::of`] reads it from the output of the one
//! posture function (`config::SandboxContext::load_for_turn` /
//! `for_turn`: the turn's [`Posture`] and its sandbox policy) and
//! [`EffectivePosture::apply`] turns a clamped value back into a posture
//! and a policy for the child's loop. Nothing else derives a child's
//! permissions.
//!
//! Each part is met on its own order (the narrower wins):
//! - mode: Plan < Work < Operate; approval: the stricter (a child never
//!   asks less than its parent); headless if either; `--auto` only if both;
//! - sandbox: read-only < workspace-write < external-sandbox <
//!   danger-full-access; writable roots: the intersection, none at all
//!   under read-only;
//! - write scope (a scoped writer's paths in the workspace): the paths
//!   both scopes cover (for each pair where one lies inside the other, the
//!   deeper one), none when they are disjoint; no scope is the whole
//!   workspace;
//! - network: off < allow-list (the intersection of the names) < on;
//! - deny-read and write-protect lists: the union;
//! - tools: the intersection (no shell when the shell is disabled).
//!
//! Because every part is a meet, the clamp is idempotent and clamping
//! along a chain of roles equals clamping once to their narrowest common
//! cap; the property tests below check both, and that the result is never
//! wider than either input.

use crate::authz::{Approval, Mode, Posture};
use crate::policy::{SandboxMode, SandboxPolicy};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Where commands may connect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", content = "allow", rename_all = "snake_case")]
pub enum Network {
    Off,
    /// Only these names, through the egress proxy.
    #[serde(rename = "allowlist")]
    AllowList(BTreeSet<String>),
    On,
}

impl Network {
    fn meet(&self, other: &Network) -> Network {
        match (self, other) {
            (Network::Off, _) | (_, Network::Off) => Network::Off,
            (Network::On, x) | (x, Network::On) => x.clone(),
            (Network::AllowList(a), Network::AllowList(b)) => {
                Network::AllowList(a.intersection(b).cloned().collect())
            }
        }
    }

    fn within(&self, other: &Network) -> bool {
        match (self, other) {
            (Network::Off, _) | (_, Network::On) => true,
            (Network::AllowList(a), Network::AllowList(b)) => a.is_subset(b),
            _ => false,
        }
    }
}

/// The tools a posture admits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Tools {
    /// No limit (a role cap that does not restrict).
    Any,
    Only(BTreeSet<String>),
}

impl Tools {
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Tools::Any => true,
            Tools::Only(s) => s.contains(name),
        }
    }

    fn meet(&self, other: &Tools) -> Tools {
        match (self, other) {
            (Tools::Any, x) | (x, Tools::Any) => x.clone(),
            (Tools::Only(a), Tools::Only(b)) => Tools::Only(a.intersection(b).cloned().collect()),
        }
    }

    fn within(&self, other: &Tools) -> bool {
        match (self, other) {
            (_, Tools::Any) => true,
            (Tools::Any, Tools::Only(_)) => false,
            (Tools::Only(a), Tools::Only(b)) => a.is_subset(b),
        }
    }

    fn remove(&mut self, name: &str) {
        if let Tools::Only(s) = self {
            s.remove(name);
        }
    }
}

/// Everything that bounds what an agent's calls may do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EffectivePosture {
    pub mode: Mode,
    pub approval: Approval,
    /// Nobody can answer a question.
    pub headless: bool,
    /// Headless `--auto`: gate 8 approves ordinary questions itself.
    pub auto_approve: bool,
    pub background: bool,
    pub shell_disabled: bool,
    /// The OS sandbox's mode.
    pub sandbox: SandboxMode,
    /// Writable roots besides the workspace (`None`: no limit, a role
    /// cap's value; a parent's is always a set).
    pub writable_roots: Option<BTreeSet<PathBuf>>,
    /// Where in the workspace it may write (workspace-relative, lexically
    /// normal; `None`: the whole workspace). Applied to the OS sandbox
    /// ([`SandboxPolicy::write_scope`]) and the file tools' guard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_scope: Option<BTreeSet<PathBuf>>,
    pub network: Network,
    /// Extra deny-read entries (`[sandbox] deny_read`).
    pub deny_read: BTreeSet<String>,
    /// Extra write-protected entries (`[sandbox] protect_write`).
    pub protect_write: BTreeSet<String>,
    pub tools: Tools,
}

/// Loosest first: Operate and Work have the same permissions, Operate
/// adds ways of working (children, a reviewer), so it ranks looser.
fn mode_rank(m: Mode) -> u8 {
    match m {
        Mode::Plan => 0,
        Mode::Work => 1,
        Mode::Operate => 2,
    }
}

/// Narrowest first. `external-sandbox` (a container the user trusts)
/// ranks below `danger-full-access` (nothing at all), so the order is
/// total and the meet commutative.
fn sandbox_rank(m: SandboxMode) -> u8 {
    match m {
        SandboxMode::ReadOnly => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::ExternalSandbox => 2,
        SandboxMode::DangerFullAccess => 3,
    }
}

fn narrower<T: Copy>(a: T, b: T, rank: fn(T) -> u8) -> T {
    if rank(b) < rank(a) {
        b
    } else {
        a
    }
}

fn roots_meet(
    a: &Option<BTreeSet<PathBuf>>,
    b: &Option<BTreeSet<PathBuf>>,
) -> Option<BTreeSet<PathBuf>> {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some(a), Some(b)) => Some(a.intersection(b).cloned().collect()),
    }
}

fn roots_within(a: &Option<BTreeSet<PathBuf>>, b: &Option<BTreeSet<PathBuf>>) -> bool {
    match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a.is_subset(b),
    }
}

/// A write scope's paths, lexically normal (`.` dropped; the empty path
/// is the whole workspace). `None` for a path that climbs out (`..`) or is
/// absolute: such a path is in no scope.
pub fn scope_path(p: &std::path::Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            _ => return None,
        }
    }
    Some(out)
}

/// A scope in canonical form: normal paths, none inside another one of
/// the set (it adds nothing), so equal coverage is an equal value.
fn scope_normal(paths: impl IntoIterator<Item = PathBuf>) -> BTreeSet<PathBuf> {
    let all: BTreeSet<PathBuf> = paths.into_iter().filter_map(|p| scope_path(&p)).collect();
    all.iter()
        .filter(|p| !all.iter().any(|q| q != *p && p.starts_with(q)))
        .cloned()
        .collect()
}

/// What both scopes cover: the deeper path of every pair where one
/// contains the other.
fn scope_meet(
    a: &Option<BTreeSet<PathBuf>>,
    b: &Option<BTreeSet<PathBuf>>,
) -> Option<BTreeSet<PathBuf>> {
    match (a, b) {
        (None, x) | (x, None) => x.as_ref().map(|s| scope_normal(s.iter().cloned())),
        (Some(a), Some(b)) => Some(scope_normal(
            a.iter()
                .filter(|x| b.iter().any(|y| x.starts_with(y)))
                .chain(b.iter().filter(|y| a.iter().any(|x| y.starts_with(x))))
                .cloned(),
        )),
    }
}

/// Every path of `a` lies inside some path of `b`.
fn scope_within(a: &Option<BTreeSet<PathBuf>>, b: &Option<BTreeSet<PathBuf>>) -> bool {
    match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a.iter().all(|x| b.iter().any(|y| x.starts_with(y))),
    }
}

impl EffectivePosture {
    /// The posture of a turn as the one posture function decided it: its
    /// [`Posture`], the policy of its sandbox context, and the tools the
    /// loop offers.
    pub fn of(posture: &Posture, policy: &SandboxPolicy, tools: &[&str]) -> Self {
        let network = match policy.network_mode() {
            crate::net::NetworkMode::On => Network::On,
            crate::net::NetworkMode::Off => Network::Off,
            crate::net::NetworkMode::Allowlist => Network::AllowList(
                policy
                    .egress
                    .iter()
                    .flat_map(|e| e.allow.iter().cloned())
                    .collect(),
            ),
        };
        EffectivePosture {
            mode: posture.mode,
            approval: posture.approval,
            headless: posture.headless,
            auto_approve: posture.auto_approve,
            background: posture.background,
            shell_disabled: posture.shell_disabled,
            sandbox: policy.mode,
            writable_roots: Some(policy.writable_roots.iter().cloned().collect()),
            write_scope: policy
                .write_scope
                .as_ref()
                .map(|s| scope_normal(s.iter().cloned())),
            network,
            deny_read: policy.extra_deny_read.iter().cloned().collect(),
            protect_write: policy.extra_protect_write.iter().cloned().collect(),
            tools: Tools::Only(tools.iter().map(|t| t.to_string()).collect()),
        }
        .normalized()
    }

    /// The consequences every posture keeps: Plan runs read-only, a
    /// read-only sandbox has no writable root, a disabled shell is not a
    /// tool.
    pub(crate) fn normalized(mut self) -> Self {
        if self.mode == Mode::Plan {
            self.sandbox = SandboxMode::ReadOnly;
        }
        if self.sandbox == SandboxMode::ReadOnly {
            self.writable_roots = Some(BTreeSet::new());
        }
        if self.shell_disabled {
            self.tools.remove(crate::catalogue::SHELL);
        }
        if let Some(s) = self.write_scope.take() {
            self.write_scope = Some(scope_normal(s));
        }
        self
    }

    /// The part-by-part meet (see the module docs).
    pub fn meet(&self, other: &EffectivePosture) -> EffectivePosture {
        EffectivePosture {
            mode: narrower(self.mode, other.mode, mode_rank),
            approval: self.approval.max(other.approval),
            headless: self.headless || other.headless,
            auto_approve: self.auto_approve && other.auto_approve,
            background: self.background || other.background,
            shell_disabled: self.shell_disabled || other.shell_disabled,
            sandbox: narrower(self.sandbox, other.sandbox, sandbox_rank),
            writable_roots: roots_meet(&self.writable_roots, &other.writable_roots),
            write_scope: scope_meet(&self.write_scope, &other.write_scope),
            network: self.network.meet(&other.network),
            deny_read: self.deny_read.union(&other.deny_read).cloned().collect(),
            protect_write: self
                .protect_write
                .union(&other.protect_write)
                .cloned()
                .collect(),
            tools: self.tools.meet(&other.tools),
        }
        .normalized()
    }

    /// Whether `self` allows nothing `other` does not.
    pub fn within(&self, other: &EffectivePosture) -> bool {
        mode_rank(self.mode) <= mode_rank(other.mode)
            && self.approval >= other.approval
            && (self.headless || !other.headless)
            && (!self.auto_approve || other.auto_approve)
            && (self.background || !other.background)
            && (self.shell_disabled || !other.shell_disabled)
            && sandbox_rank(self.sandbox) <= sandbox_rank(other.sandbox)
            && roots_within(&self.writable_roots, &other.writable_roots)
            && scope_within(&self.write_scope, &other.write_scope)
            && self.network.within(&other.network)
            && self.deny_read.is_superset(&other.deny_read)
            && self.protect_write.is_superset(&other.protect_write)
            && self.tools.within(&other.tools)
    }

    /// The child's [`Posture`] and sandbox policy: the parent's policy
    /// (its workspace, caches, environment, backend settings) narrowed to
    /// this value. Whether the host may run unsandboxed follows the mode.
    pub fn apply(&self, parent: &SandboxPolicy) -> (Posture, SandboxPolicy) {
        let posture = Posture {
            mode: self.mode,
            approval: self.approval,
            headless: self.headless,
            auto_approve: self.auto_approve,
            background: self.background,
            shell_disabled: self.shell_disabled,
        };
        let mut policy = parent.clone();
        policy.mode = self.sandbox;
        policy
            .writable_roots
            .retain(|r| self.writable_roots.as_ref().is_none_or(|s| s.contains(r)));
        policy.write_scope = self
            .write_scope
            .as_ref()
            .map(|s| s.iter().cloned().collect());
        match &self.network {
            Network::On => {
                policy.network = true;
                policy.egress = None;
            }
            Network::Off => {
                policy.network = false;
                policy.egress = None;
            }
            Network::AllowList(names) => {
                policy.network = false;
                let spec = policy.egress.get_or_insert_with(Default::default);
                spec.allow.retain(|n| names.contains(n));
            }
        }
        policy.extra_deny_read = self.deny_read.iter().cloned().collect();
        policy.extra_protect_write = self.protect_write.iter().cloned().collect();
        (posture, policy)
    }

    /// The tools of `offered` this posture admits, in their order.
    pub fn admit<'t>(&self, offered: &[&'t str]) -> Vec<&'t str> {
        offered
            .iter()
            .copied()
            .filter(|t| self.tools.contains(t))
            .collect()
    }
}

/// The child's posture: its parent's live posture met with its role's cap.
pub fn clamp(parent: &EffectivePosture, role: super::Role) -> EffectivePosture {
    parent.meet(&role.cap())
}

/// A scoped writer's posture: [`clamp`] met with the cap of its
/// `write_scope` (those paths and nothing else of the workspace, and no
/// extra writable root outside it: two scoped writers share nothing
/// writable but the toolchain caches and their private `/tmp`). The
/// result is never wider than the parent's scope either.
pub fn clamp_scoped(
    parent: &EffectivePosture,
    role: super::Role,
    scope: &[PathBuf],
) -> EffectivePosture {
    let mut cap = role.cap();
    cap.write_scope = Some(scope_normal(scope.iter().cloned()));
    cap.writable_roots = Some(BTreeSet::new());
    parent.meet(&cap)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "clamp_tests.rs"]
mod tests;
