//! Compile the seccomp table ([`super::seccomp`]) to BPF and install it.
//!
//! One filter per errno (seccompiler gives a filter a single match action);
//! the kernel runs every installed filter and the errno of the matching one
//! wins over the others' `Allow`.

use super::seccomp::{rules, ArgCondition, Errno, Rule, SeccompOptions};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp: unknown syscall {0} on this architecture")]
    UnknownSyscall(String),
    #[error("seccomp: {0}")]
    Backend(#[from] seccompiler::BackendError),
    #[error("seccomp: install: {0}")]
    Install(#[from] seccompiler::Error),
}

/// The syscall number for a table name on this architecture, or `None` for
/// a syscall the architecture does not have (nothing to deny then).
fn number(name: &str) -> Option<i64> {
    let n = match name {
        "ptrace" => libc::SYS_ptrace,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "io_uring_setup" => libc::SYS_io_uring_setup,
        "io_uring_enter" => libc::SYS_io_uring_enter,
        "io_uring_register" => libc::SYS_io_uring_register,
        "mount" => libc::SYS_mount,
        "umount2" => libc::SYS_umount2,
        "pivot_root" => libc::SYS_pivot_root,
        "move_mount" => libc::SYS_move_mount,
        "open_tree" => libc::SYS_open_tree,
        "fsopen" => libc::SYS_fsopen,
        "fsconfig" => libc::SYS_fsconfig,
        "fsmount" => libc::SYS_fsmount,
        "fspick" => libc::SYS_fspick,
        "mount_setattr" => libc::SYS_mount_setattr,
        "unshare" => libc::SYS_unshare,
        "clone" => libc::SYS_clone,
        "clone3" => libc::SYS_clone3,
        "setns" => libc::SYS_setns,
        "keyctl" => libc::SYS_keyctl,
        "add_key" => libc::SYS_add_key,
        "request_key" => libc::SYS_request_key,
        "bpf" => libc::SYS_bpf,
        "perf_event_open" => libc::SYS_perf_event_open,
        "userfaultfd" => libc::SYS_userfaultfd,
        "kexec_load" => libc::SYS_kexec_load,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "init_module" => libc::SYS_init_module,
        "finit_module" => libc::SYS_finit_module,
        "delete_module" => libc::SYS_delete_module,
        "ioctl" => libc::SYS_ioctl,
        "socket" => libc::SYS_socket,
        _ => return None,
    };
    Some(n)
}

fn condition(c: ArgCondition) -> Result<Vec<SeccompCondition>, SeccompError> {
    let one = |arg, len, op, value| SeccompCondition::new(arg, len, op, value).map(|c| vec![c]);
    Ok(match c {
        ArgCondition::Always => Vec::new(),
        ArgCondition::Eq32 { arg, value } => {
            one(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)?
        }
        ArgCondition::Ne32 { arg, value } => {
            one(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value)?
        }
        ArgCondition::FlagSet { arg, mask } => one(
            arg,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(mask),
            mask,
        )?,
    })
}

fn arch() -> Result<TargetArch, SeccompError> {
    Ok(TargetArch::try_from(std::env::consts::ARCH)?)
}

/// Build one BPF program per errno for `table`.
pub fn compile(table: &[Rule]) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = arch()?;
    let mut progs = Vec::new();
    for errno in [Errno::Eperm, Errno::Enosys] {
        let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let mut unconditional: Vec<i64> = Vec::new();
        for r in table.iter().filter(|r| r.errno == errno) {
            let Some(nr) = number(r.syscall) else {
                continue;
            };
            let conds = condition(r.cond)?;
            if conds.is_empty() {
                unconditional.push(nr);
            } else {
                map.entry(nr).or_default().push(SeccompRule::new(conds)?);
            }
        }
        // An empty rule list means "always matches"; it must win over any
        // conditional rule for the same syscall.
        for nr in unconditional {
            map.insert(nr, Vec::new());
        }
        if map.is_empty() {
            continue;
        }
        let filter = SeccompFilter::new(
            map,
            SeccompAction::Allow,
            SeccompAction::Errno(errno.raw()),
            arch,
        )?;
        progs.push(filter.try_into()?);
    }
    Ok(progs)
}

/// Install the filter for `opts` on the calling thread (needs
/// no_new_privs or CAP_SYS_ADMIN). Irreversible for this process and its
/// descendants.
pub fn install(opts: &SeccompOptions) -> Result<(), SeccompError> {
    for prog in compile(&rules(opts))? {
        seccompiler::apply_filter(&prog)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_name_has_a_number_here() {
        for opts in [
            SeccompOptions::default(),
            SeccompOptions {
                network: true,
                deny_unix_socket: true,
            },
        ] {
            for r in rules(&opts) {
                assert!(number(r.syscall).is_some(), "{}", r.syscall);
            }
            assert_eq!(compile(&rules(&opts)).unwrap().len(), 2);
        }
    }
}
