//! Applying a [`LandlockPlan`]: build the kernel ruleset before fork, then
//! only `restrict_self` in the child.
//!
//! [`prepare`] does everything that allocates or can take long (open one
//! `O_PATH|O_NOFOLLOW` fd per rule, `landlock_create_ruleset`,
//! `landlock_add_rule`, compute the report). [`PreparedRuleset::restrict_self`]
//! is `prctl(PR_SET_NO_NEW_PRIVS)` + `landlock_restrict_self` and a
//! comparison of plain enums, so it is fit for `CommandExt::pre_exec`. It
//! restricts the calling thread only, which is the whole process right
//! before `exec`.

use super::plan::LandlockPlan;
use super::rights::{FsAccess, NetAccess, ScopeSet, FILE_RIGHTS, TARGET_ABI};
use super::LandlockError;
use crate::host::enforcement::{LandlockReport, LandlockStatus};
use landlock::{
    AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, RestrictionStatus,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::os::unix::fs::OpenOptionsExt;

/// The kernel's Landlock ABI version (0 when Landlock is missing or disabled).
pub fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a NULL attr, size 0 and the
    // VERSION flag only returns the ABI number (or -1 with errno); it reads
    // no memory and creates no fd.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// How much of the prepared ruleset the kernel will enforce (the report's
/// own type: `Not < Partially < Fully`).
type Level = LandlockStatus;

fn level_of(s: &RulesetStatus) -> Level {
    match s {
        RulesetStatus::FullyEnforced => Level::Fully,
        RulesetStatus::PartiallyEnforced => Level::Partially,
        RulesetStatus::NotEnforced => Level::Not,
    }
}

/// A ruleset built in the kernel and not yet applied.
#[derive(Debug)]
pub struct PreparedRuleset {
    created: Option<RulesetCreated>,
    /// What the crate will report on success (requested ⊆ kernel support).
    crate_level: Level,
    report: LandlockReport,
}

fn fs_flags(a: FsAccess) -> Result<BitFlags<AccessFs>, LandlockError> {
    BitFlags::from_bits(a.bits()).map_err(|_| LandlockError::UnknownBits {
        kind: "filesystem",
        bits: a.bits(),
    })
}

fn net_flags(a: NetAccess) -> Result<BitFlags<AccessNet>, LandlockError> {
    BitFlags::from_bits(a.bits()).map_err(|_| LandlockError::UnknownBits {
        kind: "network",
        bits: a.bits(),
    })
}

fn scope_flags(a: ScopeSet) -> Result<BitFlags<Scope>, LandlockError> {
    BitFlags::from_bits(a.bits()).map_err(|_| LandlockError::UnknownBits {
        kind: "scope",
        bits: a.bits(),
    })
}

/// Build the kernel ruleset for `plan` (call before fork).
pub fn prepare(plan: &LandlockPlan) -> Result<PreparedRuleset, LandlockError> {
    let kernel = kernel_abi();
    let effective = plan.abi.min(kernel);
    let requested_nothing =
        plan.handled_fs.is_empty() && plan.handled_net.is_empty() && plan.scopes.is_empty();

    // The plan already lists what the ABI it was planned for lacks; add
    // what this kernel lacks on top (best effort drops it).
    let mut dropped: Vec<String> = plan.dropped.clone();
    let fs_lost = plan.handled_fs.minus(FsAccess::supported(kernel));
    let net_lost = plan.handled_net.minus(NetAccess::supported(kernel));
    let scope_lost = plan.scopes.minus(ScopeSet::supported(kernel));
    for d in fs_lost
        .describe()
        .into_iter()
        .chain(net_lost.describe())
        .chain(scope_lost.describe())
    {
        if !dropped.contains(&d) {
            dropped.push(d);
        }
    }

    let requested_supported = fs_lost.is_empty() && net_lost.is_empty() && scope_lost.is_empty();
    let crate_level = if requested_nothing || kernel == 0 {
        Level::Not
    } else if requested_supported {
        Level::Fully
    } else {
        Level::Partially
    };

    // Grants that could not be added (the path vanished or became a symlink
    // since planning) make the sandbox stricter, never weaker: they are
    // listed, but do not lower the level.
    let mut not_granted: Vec<String> = Vec::new();
    let mut created = None;
    if !requested_nothing {
        let mut rs = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
        if !plan.handled_fs.is_empty() {
            rs = rs.handle_access(fs_flags(plan.handled_fs)?)?;
        }
        if !plan.handled_net.is_empty() {
            rs = rs.handle_access(net_flags(plan.handled_net)?)?;
        }
        if !plan.scopes.is_empty() {
            rs = rs.scope(scope_flags(plan.scopes)?)?;
        }
        let mut c = rs.create()?;
        for rule in &plan.rules {
            // O_PATH|O_NOFOLLOW: the rule lands on this very inode, never on
            // what a symlink planted since planning points at.
            let f = match std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
                .open(&rule.path)
            {
                Ok(f) => f,
                Err(e) => {
                    not_granted.push(format!(
                        "not granted (stricter): {}: cannot open ({e})",
                        rule.path.display()
                    ));
                    continue;
                }
            };
            let ft = match f.metadata() {
                Ok(m) => m.file_type(),
                Err(e) => {
                    not_granted.push(format!(
                        "not granted (stricter): {}: cannot stat ({e})",
                        rule.path.display()
                    ));
                    continue;
                }
            };
            if ft.is_symlink() {
                not_granted.push(format!(
                    "not granted (stricter): {}: became a symlink after planning",
                    rule.path.display()
                ));
                continue;
            }
            let mut access = rule.access;
            if !ft.is_dir() {
                access = access.intersect(FILE_RIGHTS);
            }
            if access.is_empty() {
                continue;
            }
            c = c
                .add_rule(PathBeneath::new(f, fs_flags(access)?))
                .map_err(|source| LandlockError::AddRule {
                    path: rule.path.clone(),
                    source,
                })?;
        }
        created = Some(c);
    }

    let final_level = if effective == 0 || crate_level == Level::Not {
        Level::Not
    } else if dropped.is_empty() {
        Level::Fully
    } else {
        Level::Partially
    };
    dropped.extend(not_granted);
    Ok(PreparedRuleset {
        created,
        crate_level,
        report: LandlockReport {
            status: final_level,
            abi: effective,
            target_abi: TARGET_ABI,
            dropped,
        },
    })
}

impl PreparedRuleset {
    /// The report that holds once [`restrict_self`](Self::restrict_self)
    /// succeeded (computed before fork so the child need not send it back).
    pub fn report(&self) -> &LandlockReport {
        &self.report
    }

    /// A second handle on the same kernel ruleset (the fd is duplicated),
    /// so one `prepare` can serve many spawns of the same policy.
    pub fn try_clone(&self) -> Result<Self, LandlockError> {
        Ok(PreparedRuleset {
            created: self
                .created
                .as_ref()
                .map(RulesetCreated::try_clone)
                .transpose()
                .map_err(LandlockError::Clone)?,
            crate_level: self.crate_level,
            report: self.report.clone(),
        })
    }

    /// Whether the kernel will enforce anything at all.
    pub fn enforces_anything(&self) -> bool {
        self.crate_level != Level::Not
    }

    /// Restrict the calling thread (and everything it execs). Sets
    /// `no_new_privs`. Fails if the kernel enforces less than [`report`]
    /// says, so the report can be trusted without asking the child.
    ///
    /// Allocation-free on success: fit for `pre_exec`.
    pub fn restrict_self(&mut self) -> Result<(), LandlockError> {
        let Some(created) = self.created.take() else {
            return if self.crate_level == Level::Not && self.report.status == Level::Not {
                Ok(())
            } else {
                Err(LandlockError::AlreadyApplied)
            };
        };
        let status: RestrictionStatus = created.restrict_self()?;
        let got = level_of(&status.ruleset);
        if got < self.crate_level {
            return Err(LandlockError::Weaker {
                expected: self.crate_level.as_str(),
                got: got.as_str(),
            });
        }
        Ok(())
    }

    /// The kernel ruleset's fd, for applying it with the raw
    /// `landlock_restrict_self(fd, 0)` system call where the crate cannot
    /// run (a `clone(CLONE_VM)` child, see `stage`). `None` when the
    /// kernel enforces nothing (there is no ruleset then). The caller must
    /// set no_new_privs first; [`report`](Self::report) holds on success,
    /// as with [`restrict_self`](Self::restrict_self).
    pub fn into_fd(mut self) -> Result<Option<std::os::fd::OwnedFd>, LandlockError> {
        match self.created.take() {
            Some(created) => Ok(created.into()),
            None if self.crate_level == Level::Not && self.report.status == Level::Not => Ok(None),
            None => Err(LandlockError::AlreadyApplied),
        }
    }

    /// [`restrict_self`](Self::restrict_self) for `CommandExt::pre_exec`:
    /// errors become a raw errno (no allocation after fork).
    pub fn pre_exec_hook(&mut self) -> std::io::Result<()> {
        match self.restrict_self() {
            Ok(()) => Ok(()),
            Err(LandlockError::Ruleset(e)) => Err(std::io::Error::from_raw_os_error(
                ruleset_errno(&e).unwrap_or(libc::EPERM),
            )),
            Err(_) => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
        }
    }
}

fn ruleset_errno(e: &landlock::RulesetError) -> Option<i32> {
    use std::error::Error;
    let mut cur: Option<&dyn Error> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        cur = err.source();
    }
    None
}

/// Prepare and apply `plan` to the calling thread in one step (the in-sandbox
/// helper stage, which execs right after).
pub fn apply(plan: &LandlockPlan) -> Result<LandlockReport, LandlockError> {
    let mut p = prepare(plan)?;
    p.restrict_self()?;
    Ok(p.report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use landlock::{Access, ABI};

    /// Our rights tables must agree bit for bit with the crate's, per ABI.
    #[test]
    fn rights_tables_match_the_crate() {
        let abis = [
            ABI::V1,
            ABI::V2,
            ABI::V3,
            ABI::V4,
            ABI::V5,
            ABI::V6,
            ABI::V7,
        ];
        for (i, abi) in abis.into_iter().enumerate() {
            let n = i as u32 + 1;
            assert_eq!(
                FsAccess::supported(n).bits(),
                AccessFs::from_all(abi).bits(),
                "fs ABI {n}"
            );
            assert_eq!(
                NetAccess::supported(n).bits(),
                AccessNet::from_all(abi).bits(),
                "net ABI {n}"
            );
            assert_eq!(
                ScopeSet::supported(n).bits(),
                Scope::from_all(abi).bits(),
                "scope ABI {n}"
            );
        }
        assert_eq!(TARGET_ABI, ABI::V7 as u32);
        let file = AccessFs::from_file(ABI::V7).bits();
        assert_eq!(FILE_RIGHTS.bits(), file);
        assert!(!super::super::rights::write_tree().is_empty());
    }

    #[test]
    fn kernel_abi_is_a_known_version() {
        let k = kernel_abi();
        assert!(k <= 64, "implausible ABI {k}");
    }
}
