//! The planner: resolved policy → the exact Landlock ruleset, as data.
//!
//! Pure apart from directory listings (the complement walk) and
//! `symlink_metadata` of the few device paths; never changes the
//! filesystem. The result serialises for `sandbox explain --json`.

use super::complement::{complement, real_location, WalkStats};
use super::mask::{DenyReadStrategy, MaskForm, MaskTarget, MaskVia};
use super::rights::{
    self, FsAccess, NetAccess, ScopeSet, BIND_TCP, CONNECT_TCP, DEVICE_WRITE, FILE_RIGHTS,
    READ_CONTENT, READ_DIR, SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL, TARGET_ABI,
};
use super::{HoleStrategy, LandlockError, LandlockOptions, Tier};
use crate::host::enforcement::{PartialItem as ReportItem, Shortfall};
use crate::policy::resolve::{PathKind, ResolvedPolicy};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Device files every sandboxed command may write (`> /dev/null` …).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
/// Inside bwrap `/dev` is bwrap's own minimal tmpfs with a private devpts
/// instance, so pseudo-terminals are safe to open there (not on the host).
const BWRAP_DEVICES: &[&str] = &["/dev/pts"];

/// Why a rule is in the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleWhy {
    /// `read-dir` on `/`: every directory stays listable.
    ListEverywhere,
    /// Read (and execute) a whole tree that contains no hole.
    ReadTree,
    /// Read a sibling on the path to a deny-read hole.
    ReadSibling,
    /// Write a whole writable root.
    WriteRoot,
    /// Write a sibling on the path to a write-protected hole.
    WriteSibling,
    /// The temporary directory of the run.
    Tmp,
    /// A device file commands routinely write.
    Device,
}

fn lossy<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

fn lossy_opt<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_some(&p.to_string_lossy()),
        None => s.serialize_none(),
    }
}

/// One `landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FsRule {
    /// Non-UTF-8 names are shown lossily in JSON; the rule uses the real bytes.
    #[serde(serialize_with = "lossy")]
    pub path: PathBuf,
    pub is_dir: bool,
    pub access: FsAccess,
    pub why: Vec<RuleWhy>,
}

/// Whether a partial item leaves something unprotected or blocks something
/// the policy allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartialKind {
    NotEnforced,
    OverRestricted,
}

/// Something the policy asks for that this ruleset does not express exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartialItem {
    pub kind: PartialKind,
    /// The report's id for it (`over-restricted` for every over-restricted item).
    pub item: Shortfall,
    #[serde(serialize_with = "lossy_opt", skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    pub detail: String,
}

impl PartialItem {
    fn new(
        kind: PartialKind,
        item: Shortfall,
        path: Option<&Path>,
        detail: impl Into<String>,
    ) -> Self {
        PartialItem {
            kind,
            item,
            path: path.map(Path::to_path_buf),
            detail: detail.into(),
        }
    }

    /// One line of text for `sandbox explain`.
    pub fn line(&self) -> String {
        let kind = match self.kind {
            PartialKind::NotEnforced => "landlock: not enforced",
            PartialKind::OverRestricted => "landlock: over-restricted",
        };
        match &self.path {
            Some(p) => format!("{kind}: {}: {}", p.display(), self.detail),
            None => format!("{kind}: {}", self.detail),
        }
    }

    /// The item as the run's report lists it (`Enforcement::partial`).
    pub fn report(&self) -> ReportItem {
        ReportItem {
            item: self.item,
            path: self.path.clone(),
            reason: self.detail.clone(),
        }
    }
}

/// The exact ruleset for one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LandlockPlan {
    pub tier: Tier,
    /// The ABI the code was written against.
    pub target_abi: u32,
    /// The kernel's ABI when planned (0 = no Landlock).
    pub kernel_abi: u32,
    /// The ABI in effect: min(target, kernel, test seam).
    pub abi: u32,
    /// Filesystem rights the ruleset handles (anything handled and not
    /// granted by a rule is denied).
    pub handled_fs: FsAccess,
    /// Network rights handled. No port rules are ever added: with the
    /// network off every TCP bind/connect is denied; with it on TCP is not
    /// handled at all.
    pub handled_net: NetAccess,
    /// Ports TCP connect is granted on despite `handled_net` (the egress
    /// bridge or proxy port); empty unless connect is handled.
    pub connect_ports: Vec<u16>,
    pub scopes: ScopeSet,
    pub rules: Vec<FsRule>,
    /// [`Tier::NoNamespaces`]: the per-run temporary directory to export as
    /// `TMPDIR` (and `TMP`, `TEMP`).
    #[serde(serialize_with = "lossy_opt")]
    pub tmpdir: Option<PathBuf>,
    /// Rights the policy wants that the ABI in effect lacks.
    pub dropped: Vec<String>,
    /// What the ruleset cannot express (see `docs/LANDLOCK.md`).
    pub partial: Vec<PartialItem>,
    pub stats: WalkStats,
    /// [`Tier::NoNamespaces`]: directories the read walk carved (they have
    /// no read rule of their own).
    #[serde(skip)]
    pub carved_dirs: Vec<PathBuf>,
    /// The carved directories inside a writable root or the run's tmp
    /// directory: entries the command creates there get no read right, so
    /// the opener serves reads beneath them (see `opener`).
    #[serde(skip)]
    pub opener_dirs: Vec<PathBuf>,
    /// How deny-read items inside writable roots are held.
    pub deny_read_strategy: DenyReadStrategy,
    /// [`DenyReadStrategy::Mask`]: how the namespace is made.
    pub mask_via: Option<MaskVia>,
    /// [`DenyReadStrategy::Mask`]: the items covered by read-only mounts
    /// (not carved: their roots are granted whole).
    pub masks: Vec<MaskTarget>,
    /// The command's own network namespace (see
    /// [`LandlockOptions::private_net`]).
    pub private_net: Option<super::PrivateNet>,
}

impl LandlockPlan {
    /// The `partial` items as the run's report lists them.
    pub fn partial_report(&self) -> Vec<ReportItem> {
        self.partial.iter().map(PartialItem::report).collect()
    }

    /// The `partial` items as text lines (`sandbox explain`).
    pub fn partial_lines(&self) -> Vec<String> {
        self.partial.iter().map(PartialItem::line).collect()
    }
}

/// Rules keyed by path, so one path gets one rule with the union of rights.
#[derive(Default)]
struct Rules(BTreeMap<PathBuf, FsRule>);

impl Rules {
    fn add(&mut self, path: &Path, is_dir: bool, access: FsAccess, why: RuleWhy) {
        let r = self.0.entry(path.to_path_buf()).or_insert_with(|| FsRule {
            path: path.to_path_buf(),
            is_dir,
            access: FsAccess::empty(),
            why: Vec::new(),
        });
        r.access = r.access.union(access);
        if !r.why.contains(&why) {
            r.why.push(why);
        }
    }

    /// Mask every rule to what is handled and valid for its file type; drop
    /// rules left empty.
    fn finish(self, handled: FsAccess) -> Vec<FsRule> {
        self.0
            .into_values()
            .filter_map(|mut r| {
                r.access = r.access.intersect(handled);
                if !r.is_dir {
                    r.access = r.access.intersect(FILE_RIGHTS);
                }
                r.why.sort();
                (!r.access.is_empty()).then_some(r)
            })
            .collect()
    }
}

fn under_any(p: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    roots.iter().find(|r| p.starts_with(r)).cloned()
}

fn join_paths(ps: &[PathBuf]) -> String {
    ps.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Ancestors of `hole` from its parent up to and including `root`.
fn carved_in_root(hole: &Path, root: &Path) -> Vec<PathBuf> {
    hole.ancestors()
        .skip(1)
        .take_while(|a| a.starts_with(root))
        .map(Path::to_path_buf)
        .collect()
}

/// Plan the ruleset for `resolved` (see the module docs of `landlock`).
pub fn plan(
    resolved: &ResolvedPolicy,
    opts: &LandlockOptions,
) -> Result<LandlockPlan, LandlockError> {
    if !resolved.mode.is_sandboxed() {
        return Err(LandlockError::NotSandboxed(resolved.mode));
    }
    let cap = opts.max_abi.unwrap_or(u32::MAX).min(TARGET_ABI);
    let abi = cap.min(opts.kernel_abi);

    let wanted_fs = FsAccess::supported(TARGET_ABI);
    let wanted_net = if resolved.network || opts.private_net.is_some() {
        NetAccess::empty()
    } else {
        BIND_TCP.union(CONNECT_TCP)
    };
    // Abstract unix sockets are local IPC like loopback TCP: scoped exactly
    // when the network is off. Signals are always scoped.
    let wanted_scopes = if resolved.network {
        SCOPE_SIGNAL
    } else {
        SCOPE_SIGNAL.union(SCOPE_ABSTRACT_UNIX)
    };
    let handled_fs = wanted_fs.intersect(FsAccess::supported(cap));
    let handled_net = wanted_net.intersect(NetAccess::supported(cap));
    let scopes = wanted_scopes.intersect(ScopeSet::supported(cap));

    let mut dropped = Vec::new();
    dropped.extend(wanted_fs.minus(FsAccess::supported(abi)).describe());
    dropped.extend(wanted_net.minus(NetAccess::supported(abi)).describe());
    dropped.extend(wanted_scopes.minus(ScopeSet::supported(abi)).describe());

    let mut partial = Vec::new();
    let mut stats = WalkStats::default();
    let mut carved_dirs = Vec::new();
    let mut opener_dirs = Vec::new();
    let mut masks = Vec::new();
    let mut strategy = DenyReadStrategy::None;
    if abi == 0 {
        partial.push(PartialItem::new(
            PartialKind::NotEnforced,
 Shortfall::Landlock,
            None,
            if opts.kernel_abi == 0 {
                "the kernel has no Landlock (not built in, or not enabled at boot: add `landlock` to the `lsm=` boot parameter)"
            } else {
                "Landlock disabled by the test seam (max_abi = 0)"
            },
        ));
    }
    for d in &dropped {
        partial.push(PartialItem::new(
            PartialKind::NotEnforced,
            Shortfall::LandlockRight,
            None,
            format!("{d}: the kernel offers ABI {}", abi),
        ));
    }
    if !resolved.network && opts.private_net.is_none() && opts.tier == Tier::NoNamespaces {
        partial.push(PartialItem::new(
            PartialKind::OverRestricted,
            Shortfall::OverRestricted,
            None,
            format!(
                "loopback: the command has no network namespace of its own ({}), so it can neither listen on nor connect to 127.0.0.1, not even to reach a server it started itself (test suites that start a local server fail); bwrap's tier has one",
                opts.private_net_fallback.as_deref().unwrap_or("not requested")
            ),
        ));
    }

    let mut rules = Rules::default();
    let writable: Vec<PathBuf> = resolved
        .writable_roots
        .iter()
        .map(|r| r.path.clone())
        .collect();
    let write_tree = rights::write_tree();

    match opts.tier {
        Tier::InsideBwrap => {
            rules.add(
                Path::new("/"),
                true,
                READ_CONTENT.union(READ_DIR),
                RuleWhy::ReadTree,
            );
            for root in &writable {
                rules.add(
                    root,
                    root_is_dir(resolved, root),
                    write_tree,
                    RuleWhy::WriteRoot,
                );
            }
            if resolved.private_tmp {
                for t in ["/tmp", "/dev/shm"] {
                    if is_real_dir(Path::new(t)) {
                        rules.add(Path::new(t), true, write_tree, RuleWhy::Tmp);
                    }
                }
            }
        }
        Tier::NoNamespaces => {
            let mut regions = writable.clone();
            regions.extend(opts.tmp_dir.iter().cloned());
            carved_dirs = plan_reads(
                resolved,
                opts,
                &regions,
                &mut rules,
                &mut partial,
                &mut stats,
                &mut masks,
                &mut strategy,
            );
            opener_dirs = carved_dirs
                .iter()
                .filter(|d| under_any(d, &regions).is_some())
                .cloned()
                .collect();
            plan_writes(
                resolved,
                opts,
                &writable,
                &mut rules,
                &mut partial,
                &mut stats,
            );
            match &opts.tmp_dir {
                Some(t) => {
                    rules.add(t, true, READ_CONTENT.union(READ_DIR).union(write_tree), RuleWhy::Tmp);
                    partial.push(PartialItem::new(
                        PartialKind::OverRestricted,
 Shortfall::OverRestricted,
                        Some(Path::new("/tmp")),
                        format!(
                            "no private /tmp without a mount namespace: the host's /tmp is not writable; TMPDIR points at {}",
                            t.display()
                        ),
                    ));
                }
                None if resolved.private_tmp => partial.push(PartialItem::new(
                    PartialKind::OverRestricted,
 Shortfall::OverRestricted,
                    Some(Path::new("/tmp")),
                    "no private /tmp without a mount namespace and no per-run directory given: nothing temporary is writable",
                )),
                None => {}
            }
            push_tier_limits(resolved, &mut partial);
        }
    }
    let devices = DEVICES.iter().chain(match opts.tier {
        Tier::InsideBwrap => BWRAP_DEVICES.iter(),
        Tier::NoNamespaces => [].iter(),
    });
    for d in devices {
        let p = Path::new(d);
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if !m.file_type().is_symlink() {
                rules.add(p, m.is_dir(), DEVICE_WRITE, RuleWhy::Device);
            }
        }
    }

    let rules = if cap == 0 {
        Vec::new()
    } else {
        rules.finish(handled_fs)
    };
    Ok(LandlockPlan {
        tier: opts.tier,
        target_abi: TARGET_ABI,
        kernel_abi: opts.kernel_abi,
        abi,
        handled_fs,
        connect_ports: if handled_net.contains(CONNECT_TCP) {
            opts.connect_ports.clone()
        } else {
            Vec::new()
        },
        handled_net,
        scopes,
        rules,
        tmpdir: match opts.tier {
            Tier::NoNamespaces => opts.tmp_dir.clone(),
            Tier::InsideBwrap => None,
        },
        dropped,
        partial,
        stats,
        carved_dirs,
        opener_dirs,
        deny_read_strategy: strategy,
        mask_via: if masks.is_empty() { None } else { opts.mask },
        masks,
        private_net: opts.private_net,
    })
}

/// Whether writable root `root` is a directory (a scoped writer's
/// `write_scope` may name a single file: its rule then carries the file
/// rights only, so it is rewritable in place but not replaced or removed).
fn root_is_dir(resolved: &ResolvedPolicy, root: &Path) -> bool {
    resolved
        .writable_roots
        .iter()
        .find(|r| r.path == root)
        .is_none_or(|r| r.kind == PathKind::Dir)
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Read side of the no-namespace tier: `read-dir` everywhere, contents via
/// the complement walk from `/` around the deny-read holes.
#[allow(clippy::too_many_arguments)]
fn plan_reads(
    resolved: &ResolvedPolicy,
    opts: &LandlockOptions,
    regions: &[PathBuf],
    rules: &mut Rules,
    partial: &mut Vec<PartialItem>,
    stats: &mut WalkStats,
    masks: &mut Vec<MaskTarget>,
    strategy: &mut DenyReadStrategy,
) -> Vec<PathBuf> {
    rules.add(Path::new("/"), true, READ_DIR, RuleWhy::ListEverywhere);
    let mut holes = Vec::new();
    for e in &resolved.deny_read {
        if e.kind == PathKind::Symlink {
            // Reads through the link are checked at the target, which
            // resolution lists as its own entry when it resolves.
            if e.target.is_none() {
                partial.push(PartialItem::new(
                    PartialKind::NotEnforced,
                    Shortfall::DenyRead,
                    Some(&e.path),
                    "deny-read symlink does not resolve; whatever it will point at is not carved",
                ));
            }
            continue;
        }
        let real = real_location(&e.path);
        let parent = real.parent().unwrap_or(Path::new("/"));
        if let Some(root) = under_any(parent, regions) {
            match opts.deny_read_in_writable {
                HoleStrategy::Carve if opts.mask.is_some() => {
                    // Covered by a read-only mount in the command's mount
                    // namespace: no hole, the root is granted whole.
                    *strategy = DenyReadStrategy::Mask;
                    if e.kind == PathKind::Missing {
                        // Nothing to cover (one created later: the
                        // tier-limit "resolved once" item).
                        continue;
                    }
                    let form = if resolved.git.is_unreadable(&e.path) {
                        MaskForm::Unreadable
                    } else if let Some(v) = resolved.git.indexed_version(&e.path) {
                        MaskForm::Content(v.to_vec())
                    } else {
                        MaskForm::Empty
                    };
                    masks.push(MaskTarget {
                        is_dir: e.kind == PathKind::Dir,
                        path: real,
                        form,
                    });
                    continue;
                }
                HoleStrategy::Yield => {
                    *strategy = DenyReadStrategy::Yield;
                    partial.push(PartialItem::new(
                        PartialKind::NotEnforced,
 Shortfall::DenyRead,
                        Some(&real),
                        format!(
                            "deny-read inside writable root {}: readable (carving it would make files created in its directory unreadable)",
                            root.display()
                        ),
                    ));
                    continue;
                }
                HoleStrategy::Carve => {
                    *strategy = DenyReadStrategy::CarveOpener;
                    partial.push(PartialItem::new(
                    PartialKind::OverRestricted,
 Shortfall::OverRestricted,
                    Some(&real),
                    format!(
                        "kept unreadable inside writable root {} by the carve+opener fallback (no mask: {}): files created during the run directly in {} cannot be executed, and are readable only through the opener (seccomp user notification; the run's report says whether it was active)",
                        root.display(),
                        opts.mask_fallback.as_deref().unwrap_or("not requested"),
                        join_paths(&carved_in_root(&real, &root))
                    ),
                ))
                }
            }
        }
        holes.push(real);
    }
    // The repositories' `info/exclude`, extended by the masked untracked
    // names (`policy::git_view`): only the mask can lay a file over one.
    let excludes: Vec<_> = resolved.git.excludes().collect();
    if !excludes.is_empty() {
        if *strategy == DenyReadStrategy::Mask {
            for o in excludes {
                masks.push(MaskTarget {
                    path: real_location(&o.path),
                    is_dir: false,
                    form: MaskForm::Content(o.content.clone()),
                });
            }
        } else {
            for o in excludes {
                partial.push(PartialItem::new(
                    PartialKind::NotEnforced,
                    Shortfall::DenyRead,
                    Some(&o.path),
                    "not extended by the masked names (only the mask strategy can lay a file over it): git inside the sandbox may see an untracked masked file, and fail on reading it",
                ));
            }
        }
    }
    let walk = complement(Path::new("/"), &holes);
    for g in &walk.grants {
        let why = if g.path == Path::new("/") {
            RuleWhy::ReadTree
        } else {
            RuleWhy::ReadSibling
        };
        rules.add(&g.path, g.is_dir, READ_CONTENT, why);
    }
    for (dir, err) in &walk.unlistable {
        partial.push(PartialItem::new(
            PartialKind::OverRestricted,
            Shortfall::OverRestricted,
            Some(dir),
            format!(
                "could not be listed for the complement walk ({err}): nothing in it is readable"
            ),
        ));
    }
    add_stats(stats, &walk.stats);
    walk.carved
}

/// Write side of the no-namespace tier: each writable root whole, or
/// carved around its write-protected paths when asked to.
fn plan_writes(
    resolved: &ResolvedPolicy,
    opts: &LandlockOptions,
    writable: &[PathBuf],
    rules: &mut Rules,
    partial: &mut Vec<PartialItem>,
    stats: &mut WalkStats,
) {
    let write_tree = rights::write_tree();
    for root in writable {
        let holes: Vec<PathBuf> = resolved
            .protected
            .iter()
            .map(|e| real_location(&e.path))
            .filter(|p| p.starts_with(root) && p != root)
            .collect();
        if holes.is_empty() || opts.protect_in_writable == HoleStrategy::Yield {
            rules.add(
                root,
                root_is_dir(resolved, root),
                write_tree,
                RuleWhy::WriteRoot,
            );
            for h in &holes {
                partial.push(PartialItem::new(
                    PartialKind::NotEnforced,
 Shortfall::WriteProtect,
                    Some(h),
                    format!(
                        "write-protected inside writable root {}: writable during the run (Landlock cannot protect it without forbidding new files in {}); the after-run integrity check reverts it",
                        root.display(),
                        join_paths(&carved_in_root(h, root))
                    ),
                ));
            }
            continue;
        }
        let walk = complement(root, &holes);
        for g in &walk.grants {
            rules.add(&g.path, g.is_dir, write_tree, RuleWhy::WriteSibling);
        }
        let mut carved = walk.carved.clone();
        carved.sort();
        partial.push(PartialItem::new(
            PartialKind::OverRestricted,
 Shortfall::OverRestricted,
            Some(root),
            format!(
                "write-protected paths are carved out: entries cannot be created, removed or renamed directly in {} (e.g. `git commit` cannot create .git/index.lock)",
                join_paths(&carved)
            ),
        ));
        for (dir, err) in &walk.unlistable {
            partial.push(PartialItem::new(
                PartialKind::OverRestricted,
 Shortfall::OverRestricted,
                Some(dir),
                format!("could not be listed for the complement walk ({err}): nothing in it is writable"),
            ));
        }
        add_stats(stats, &walk.stats);
    }
}

fn add_stats(total: &mut WalkStats, s: &WalkStats) {
    total.dirs_listed += s.dirs_listed;
    total.entries_seen += s.entries_seen;
    total.symlinks_skipped += s.symlinks_skipped;
    total.listed.extend(s.listed.iter().cloned());
}

/// Limits of the no-namespace tier that hold whatever the paths are.
fn push_tier_limits(resolved: &ResolvedPolicy, partial: &mut Vec<PartialItem>) {
    use PartialKind::NotEnforced;
    let mut add =
        |d: &str| partial.push(PartialItem::new(NotEnforced, Shortfall::TierLimit, None, d));
    add("deny-read paths are resolved once: a matching file created later in a readable directory (e.g. a new .env.local) is readable");
    add("names inside deny-read directories can be listed and stat()ed (read-dir stays granted so / and ~ are listable; Landlock never restricts stat)");
    add("a hard link or bind mount elsewhere that reaches a deny-read file is readable (rules follow directories, not a file's other names)");
    add("entries created by host processes during the run in carved directories get no rights (inside writable roots the opener serves reads of them, except deny-read and .env names)");
    if !resolved.network {
        add("connect() to unix sockets by path (docker.sock, ssh-agent) is not restricted by Landlock at ABI 7 (needs ABI 9 resolve-unix); the seccomp socket filter covers it");
        add("UDP, raw and other non-TCP sockets are not restricted by Landlock; the seccomp socket filter covers them");
    }
    add("without a PID namespace host processes are visible in /proc and their cmdline and environ readable (Landlock denies ptrace and /proc/<pid>/mem of processes outside the domain, and signals to them with ABI 6)");
}
