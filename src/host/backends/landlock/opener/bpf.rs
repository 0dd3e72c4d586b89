//! The opener's seccomp program: `SECCOMP_RET_USER_NOTIF` for the open
//! family (`open`, `creat`, `openat`, `openat2` where the architecture has
//! them), `SECCOMP_RET_ALLOW` for everything else.
//!
//! seccompiler has no user-notification action, so the few instructions
//! are built here. The program only ever *adds* a round trip to the
//! supervisor: a syscall it lets through (another architecture, x32
//! numbers, a syscall not listed) still meets the Landlock domain and the
//! other filters, whose `ERRNO` results take precedence over `USER_NOTIF`
//! (the kernel returns the most restrictive action of all filters).

use seccompiler::sock_filter;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// `offsetof(struct seccomp_data, nr)`.
const NR_OFFSET: u32 = 0;
/// `offsetof(struct seccomp_data, arch)`.
const ARCH_OFFSET: u32 = 4;

/// The `AUDIT_ARCH_*` value of this build, or `None` where the opener is
/// not offered.
pub fn audit_arch() -> Option<u32> {
    const ARCH64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    match std::env::consts::ARCH {
        "x86_64" => Some(62 | ARCH64_LE),
        "aarch64" => Some(183 | ARCH64_LE),
        _ => None,
    }
}

/// The open-family syscall numbers of this architecture.
pub fn open_syscalls() -> Vec<u32> {
    let mut nrs: Vec<libc::c_long> = vec![libc::SYS_openat, libc::SYS_openat2];
    #[cfg(target_arch = "x86_64")]
    nrs.extend([libc::SYS_open, libc::SYS_creat]);
    nrs.into_iter()
        .filter_map(|n| u32::try_from(n).ok())
        .collect()
}

/// The program for `arch` and `nrs`: load the arch, let a foreign one
/// through, load the number, notify on a match, allow otherwise.
pub fn program(arch: u32, nrs: &[u32]) -> Option<Vec<sock_filter>> {
    let n = nrs.len();
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    // Layout: [0] ld arch; [1] jeq arch; [2] ld nr; [3..3+n) jeq nr_i;
    // [3+n] ret ALLOW; [4+n] ret USER_NOTIF. Jumps count from the next
    // instruction.
    let mut p = vec![
        ins(LD_W_ABS, 0, 0, ARCH_OFFSET),
        ins(JEQ_K, 0, u8::try_from(n + 1).ok()?, arch),
        ins(LD_W_ABS, 0, 0, NR_OFFSET),
    ];
    for (i, nr) in nrs.iter().enumerate() {
        p.push(ins(JEQ_K, u8::try_from(n - i).ok()?, 0, *nr));
    }
    p.push(ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
    p.push(ins(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF));
    Some(p)
}

/// The program for this build, or `None` where the opener is not offered.
pub fn this_arch() -> Option<Vec<sock_filter>> {
    program(audit_arch()?, &open_syscalls())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A tiny interpreter for the instructions [`program`] emits, so the
    /// jump arithmetic is checked on every number, not only by eye.
    fn run(p: &[sock_filter], arch: u32, nr: u32) -> u32 {
        let mut pc = 0usize;
        let mut acc = 0u32;
        loop {
            let i = &p[pc];
            match i.code {
                LD_W_ABS => {
                    acc = match i.k {
                        ARCH_OFFSET => arch,
                        NR_OFFSET => nr,
                        k => panic!("load of offset {k}"),
                    };
                    pc += 1;
                }
                JEQ_K => pc += 1 + usize::from(if acc == i.k { i.jt } else { i.jf }),
                RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn notifies_exactly_the_open_family_of_this_arch() {
        let arch = audit_arch().unwrap();
        let nrs = open_syscalls();
        let p = this_arch().unwrap();
        for nr in 0..600u32 {
            let want = if nrs.contains(&nr) {
                libc::SECCOMP_RET_USER_NOTIF
            } else {
                libc::SECCOMP_RET_ALLOW
            };
            assert_eq!(run(&p, arch, nr), want, "nr {nr}");
        }
        // Another architecture's numbers are never notified (they meet
        // Landlock and the other filters unchanged).
        for nr in &nrs {
            assert_eq!(run(&p, 0x4000_0003, *nr), libc::SECCOMP_RET_ALLOW);
        }
        // x32 numbers carry bit 30 and match nothing.
        for nr in &nrs {
            assert_eq!(run(&p, arch, nr | 0x4000_0000), libc::SECCOMP_RET_ALLOW);
        }
    }

    #[test]
    fn the_open_family_is_complete_for_the_arch() {
        let nrs = open_syscalls();
        assert!(nrs.contains(&(libc::SYS_openat as u32)));
        assert!(nrs.contains(&(libc::SYS_openat2 as u32)));
        #[cfg(target_arch = "x86_64")]
        {
            assert!(nrs.contains(&(libc::SYS_open as u32)));
            assert!(nrs.contains(&(libc::SYS_creat as u32)));
        }
    }
}
