//! Compile the seccomp table ([`super`]) to BPF and install it.
//!
//! One filter per errno (seccompiler gives a filter a single match action);
//! the kernel runs every installed filter and the errno of the matching one
//! wins over the others' `Allow`.

use super::{rules, ArgCondition, Errno, Rule, SeccompOptions};
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
        ArgCondition::MaskedEq32 { arg, mask, value } => one(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(mask),
            value,
        )?,
        ArgCondition::NotIn32 { arg, values } => values
            .iter()
            .map(|v| SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *v))
            .collect::<Result<Vec<_>, _>>()?,
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

/// The seccompiler program for the rules of `table` with `errno` (`None`
/// when there are none).
fn program_for(table: &[Rule], errno: Errno) -> Result<Option<BpfProgram>, SeccompError> {
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
        return Ok(None);
    }
    let filter = SeccompFilter::new(
        map,
        SeccompAction::Allow,
        SeccompAction::Errno(errno.raw()),
        arch()?,
    )?;
    Ok(Some(filter.try_into()?))
}

/// `AUDIT_ARCH_*` of this build (the value seccomp reports in
/// `seccomp_data.arch`), where the ENOSYS prefix below is supported.
fn audit_arch() -> Option<u32> {
    const ARCH64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    match std::env::consts::ARCH {
        "x86_64" => Some(62 | ARCH64_LE),
        "aarch64" => Some(183 | ARCH64_LE),
        "riscv64" => Some(243 | ARCH64_LE),
        _ => None,
    }
}

/// Instructions that return ENOSYS for `nrs` (on this arch) and fall
/// through to whatever follows for everything else. Only forward jumps
/// inside the prefix, so a complete program appended after it (which
/// validates the arch and loads the syscall number itself) runs unchanged.
fn enosys_prefix(arch: u32, nrs: &[i64]) -> Option<BpfProgram> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const NR_OFFSET: u32 = 0; // seccomp_data.nr
    const ARCH_OFFSET: u32 = 4; // seccomp_data.arch
    let k = nrs.len();
    // Layout: ld arch; jeq arch; ld nr; k × jeq nr; ja main; ret ENOSYS; main…
    let to_main_from_arch = u8::try_from(k + 3).ok()?;
    let ins = |code, jt, jf, k| seccompiler::sock_filter { code, jt, jf, k };
    let mut p = vec![
        ins(LD_W_ABS, 0, 0, ARCH_OFFSET),
        ins(JEQ_K, 0, to_main_from_arch, arch),
        ins(LD_W_ABS, 0, 0, NR_OFFSET),
    ];
    for (i, nr) in nrs.iter().enumerate() {
        let to_ret = u8::try_from(k - i).ok()?;
        p.push(ins(JEQ_K, to_ret, 0, u32::try_from(*nr).ok()?));
    }
    p.push(ins(JA, 0, 0, 1));
    p.push(ins(
        RET_K,
        0,
        0,
        libc::SECCOMP_RET_ERRNO | Errno::Enosys.raw(),
    ));
    Some(p)
}

/// Build the BPF for `table`: one program when the ENOSYS rules are all
/// unconditional (a short prefix in front of seccompiler's EPERM program —
/// every installed filter costs the kernel a JIT and a pass over every
/// syscall number for its cache, measured at ~45 µs for the small one),
/// else one program per errno.
pub fn compile(table: &[Rule]) -> Result<Vec<BpfProgram>, SeccompError> {
    let eperm = program_for(table, Errno::Eperm)?;
    let enosys: Vec<&Rule> = table.iter().filter(|r| r.errno == Errno::Enosys).collect();
    let unconditional = enosys.iter().all(|r| r.cond == ArgCondition::Always);
    if let (Some(main), true, Some(arch)) = (&eperm, unconditional, audit_arch()) {
        let nrs: Vec<i64> = enosys.iter().filter_map(|r| number(r.syscall)).collect();
        if nrs.is_empty() {
            return Ok(vec![main.clone()]);
        }
        if let Some(mut prefix) = enosys_prefix(arch, &nrs) {
            prefix.extend_from_slice(main);
            return Ok(vec![prefix]);
        }
    }
    let mut progs = Vec::new();
    progs.extend(eperm);
    progs.extend(program_for(table, Errno::Enosys)?);
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The prefix's jumps land where they must: an arch mismatch and every
    /// other syscall fall through to the main program (which does its own
    /// arch check and kills on a mismatch); the listed syscalls reach the
    /// ENOSYS return. (The kernel-side behaviour is probed by
    /// `tests/real_escape_proc.rs`: clone3 → ENOSYS, the EPERM rules.)
    #[test]
    fn enosys_prefix_jumps_land_on_the_return_and_the_main_program() {
        let nrs = [435, 999];
        let p = enosys_prefix(0xC000_003E, &nrs).unwrap();
        let main = p.len();
        let target = |i: usize, off: u32| i + 1 + off as usize;
        assert_eq!(p[0].k, 4, "loads seccomp_data.arch");
        assert_eq!(p[1].k, 0xC000_003E);
        assert_eq!(
            target(1, p[1].jf.into()),
            main,
            "arch mismatch → main program"
        );
        assert_eq!(p[2].k, 0, "loads seccomp_data.nr");
        let ret = main - 1;
        assert_eq!(p[ret].k, libc::SECCOMP_RET_ERRNO | 38);
        for (i, nr) in nrs.iter().enumerate() {
            let at = 3 + i;
            assert_eq!(i64::from(p[at].k), *nr);
            assert_eq!(target(at, p[at].jt.into()), ret, "nr {nr} → ENOSYS");
            assert_eq!(p[at].jf, 0, "else the next check");
        }
        let ja = ret - 1;
        assert_eq!(target(ja, p[ja].k), main, "no match → main program");
        // Control: the table's clone3 rule yields one merged program that
        // starts with this prefix.
        let progs = compile(&rules(&SeccompOptions::default())).unwrap();
        assert_eq!(progs.len(), 1);
        assert_eq!(progs[0][0].k, 4);
    }

    #[test]
    fn every_table_name_has_a_number_here() {
        for opts in [
            SeccompOptions::default(),
            SeccompOptions {
                network: true,
                deny_unix_socket: true,
                stream_only: false,
                private_net: false,
            },
        ] {
            for r in rules(&opts) {
                assert!(number(r.syscall).is_some(), "{}", r.syscall);
            }
            // clone3's ENOSYS rides in front of the EPERM program.
            assert_eq!(compile(&rules(&opts)).unwrap().len(), 1);
        }
    }
}
