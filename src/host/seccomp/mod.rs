//! The seccomp rule table, as data, and the options that select its rows.
//!
//! This module is pure (it compiles and is tested on every OS) so `sandbox
//! explain` can print the table anywhere; the Linux-only compile-and-install
//! step lives in [`apply`].
//!
//! Every denial returns an errno rather than killing the process, so tools
//! fail the way they would on a kernel without the feature (and print a
//! useful message) instead of dying with SIGSYS.

#[cfg(target_os = "linux")]
pub mod apply;

use serde::Serialize;

/// Address families referred to by the table (Linux values; the table is
/// data, so they are spelled here rather than taken from a per-OS libc).
pub const AF_UNIX: u64 = 1;
pub const AF_VSOCK: u64 = 40;
pub const AF_INET: u64 = 2;
pub const AF_INET6: u64 = 10;
/// `CLONE_NEWUSER` (Linux).
pub const CLONE_NEWUSER: u64 = 0x1000_0000;
/// `TIOCSTI`: push a byte into the terminal's input queue.
pub const TIOCSTI: u64 = 0x5412;
/// `TIOCLINUX`: virtual-console control, including selection paste.
pub const TIOCLINUX: u64 = 0x541C;

/// The errno a rule returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Errno {
    /// "Operation not permitted": the normal answer.
    Eperm,
    /// "Function not implemented": for `clone3`, so libc falls back to
    /// `clone`, whose flags (unlike clone3's struct) the filter can inspect.
    Enosys,
}

impl Errno {
    pub fn raw(self) -> u32 {
        match self {
            Errno::Eperm => 1,
            Errno::Enosys => 38,
        }
    }
}

/// When a rule matches the syscall's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "when")]
pub enum ArgCondition {
    /// Every call.
    Always,
    /// Argument `arg` (low 32 bits only) equals `value`. Used for `ioctl`
    /// requests, whose kernel type is `unsigned int`: comparing 32 bits means
    /// setting high bits in the 64-bit register cannot slip past the rule.
    Eq32 { arg: u8, value: u64 },
    /// Argument `arg` (low 32 bits) differs from `value`.
    Ne32 { arg: u8, value: u64 },
    /// `arg & mask == mask` on the full 64 bits (a flag is set).
    FlagSet { arg: u8, mask: u64 },
    /// `(arg & mask) == value` on the low 32 bits (`socket`'s type with
    /// the `SOCK_NONBLOCK`/`SOCK_CLOEXEC` flags masked off).
    MaskedEq32 { arg: u8, mask: u64, value: u64 },
    /// `arg` (low 32 bits) is none of `values`.
    NotIn32 { arg: u8, values: &'static [u64] },
}

/// One row: deny `syscall` with `errno` when `cond` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub syscall: &'static str,
    #[serde(flatten)]
    pub cond: ArgCondition,
    pub errno: Errno,
    pub reason: &'static str,
}

/// What the caller wants the filter to cover beyond the fixed rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SeccompOptions {
    /// Network allowed: when false, `socket()` of every family but AF_UNIX is denied.
    pub network: bool,
    /// Also deny `socket(AF_UNIX)` (the landlock tier has no network
    /// namespace, so a host unix socket would otherwise be reachable;
    /// `socketpair` stays allowed either way).
    pub deny_unix_socket: bool,
    /// `network = "allowlist"`: only stream sockets (TCP), so nothing but
    /// the proxy's TCP port can carry data out — no UDP (DNS), no raw or
    /// packet sockets. Landlock governs TCP only.
    #[serde(default)]
    pub stream_only: bool,
    /// The command has a network namespace of its own whose only interface
    /// is its own loopback: with the network off, IP sockets stay allowed
    /// (a test server the command starts and talks to reaches nothing
    /// else; the host's loopback is another namespace's).
    #[serde(default)]
    pub private_net: bool,
}

impl SeccompOptions {
    /// The options the bwrap tier uses: a network namespace does not isolate
    /// path-named unix sockets (a host `docker.sock`, an ssh-agent), so with
    /// the network off `socket(AF_UNIX)` is denied too; `socketpair` stays.
    pub fn for_bwrap(network: bool) -> Self {
        SeccompOptions {
            network,
            deny_unix_socket: !network,
            stream_only: false,
            // bwrap unshares the network whenever it is off.
            private_net: !network,
        }
    }

    /// `network = "allowlist"` (both Linux tiers): TCP only, no unix sockets.
    pub fn for_allowlist() -> Self {
        SeccompOptions {
            network: true,
            deny_unix_socket: true,
            stream_only: true,
            private_net: false,
        }
    }
}

const fn always(syscall: &'static str, reason: &'static str) -> Rule {
    Rule {
        syscall,
        cond: ArgCondition::Always,
        errno: Errno::Eperm,
        reason,
    }
}

/// Rows that apply to every sandboxed run.
pub const FIXED_RULES: &[Rule] = &[
    always("ptrace", "debug or inject into other processes"),
    always("process_vm_readv", "read another process's memory"),
    always("process_vm_writev", "write another process's memory"),
    always(
        "io_uring_setup",
        "io_uring performs I/O (even sockets) past seccomp",
    ),
    always("io_uring_enter", "io_uring performs I/O past seccomp"),
    always("io_uring_register", "io_uring performs I/O past seccomp"),
    always("mount", "remount read-only binds writable or hide masks"),
    always("umount2", "detach read-only binds and masks"),
    always("pivot_root", "swap the root filesystem"),
    always("move_mount", "new mount API: rearrange the mount tree"),
    always("open_tree", "new mount API: clone a mount"),
    always("fsopen", "new mount API: create a filesystem context"),
    always("fsconfig", "new mount API: configure a filesystem context"),
    always("fsmount", "new mount API: mount a filesystem context"),
    always("fspick", "new mount API: reconfigure an existing mount"),
    always("mount_setattr", "flip mount attributes such as read-only"),
    Rule {
        syscall: "unshare",
        cond: ArgCondition::FlagSet {
            arg: 0,
            mask: CLONE_NEWUSER,
        },
        errno: Errno::Eperm,
        reason: "a new user namespace regains capabilities to undo the sandbox",
    },
    Rule {
        syscall: "clone",
        cond: ArgCondition::FlagSet {
            arg: 0,
            mask: CLONE_NEWUSER,
        },
        errno: Errno::Eperm,
        reason: "a new user namespace regains capabilities to undo the sandbox",
    },
    Rule {
        syscall: "clone3",
        cond: ArgCondition::Always,
        errno: Errno::Enosys,
        reason: "flags live in memory the filter cannot read; ENOSYS makes libc fall back to clone",
    },
    always("setns", "join another namespace (the host's)"),
    always("keyctl", "the kernel keyring is shared outside the sandbox"),
    always(
        "add_key",
        "the kernel keyring is shared outside the sandbox",
    ),
    always(
        "request_key",
        "the kernel keyring is shared outside the sandbox",
    ),
    always("bpf", "load kernel programs"),
    always(
        "perf_event_open",
        "kernel profiling: side channels and a large attack surface",
    ),
    always("userfaultfd", "a classic kernel-exploit primitive"),
    always("kexec_load", "replace the running kernel"),
    always("kexec_file_load", "replace the running kernel"),
    always("init_module", "load kernel modules"),
    always("finit_module", "load kernel modules"),
    always("delete_module", "unload kernel modules"),
    Rule {
        syscall: "ioctl",
        cond: ArgCondition::Eq32 {
            arg: 1,
            value: TIOCSTI,
        },
        errno: Errno::Eperm,
        reason: "TIOCSTI injects keystrokes into the caller's terminal",
    },
    Rule {
        syscall: "ioctl",
        cond: ArgCondition::Eq32 {
            arg: 1,
            value: TIOCLINUX,
        },
        errno: Errno::Eperm,
        reason: "TIOCLINUX can paste the console selection as input",
    },
    Rule {
        syscall: "socket",
        cond: ArgCondition::Eq32 {
            arg: 0,
            value: AF_VSOCK,
        },
        errno: Errno::Eperm,
        reason: "vsock reaches the hypervisor and sibling VMs past any network namespace",
    },
];

/// The complete table for `opts`: the fixed rows plus the socket rows.
pub fn rules(opts: &SeccompOptions) -> Vec<Rule> {
    let mut out = FIXED_RULES.to_vec();
    if !opts.network && opts.private_net {
        out.push(Rule {
            syscall: "socket",
            cond: ArgCondition::NotIn32 {
                arg: 0,
                values: &[AF_UNIX, AF_INET, AF_INET6],
            },
            errno: Errno::Eperm,
            reason: "network is off: only AF_UNIX sockets and IP sockets on the command's own loopback (a private network namespace) are allowed",
        });
    } else if !opts.network {
        out.push(Rule {
            syscall: "socket",
            cond: ArgCondition::Ne32 {
                arg: 0,
                value: AF_UNIX,
            },
            errno: Errno::Eperm,
            reason: "network is off: only AF_UNIX sockets (and socketpair) are allowed",
        });
    }
    if opts.deny_unix_socket {
        out.push(Rule {
            syscall: "socket",
            cond: ArgCondition::Eq32 {
                arg: 0,
                value: AF_UNIX,
            },
            errno: Errno::Eperm,
            reason: "no network namespace: a unix socket could reach host daemons",
        });
    }
    if opts.stream_only {
        // SOCK_DGRAM, SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET.
        for value in [2u64, 3, 4, 5, 6, 10] {
            out.push(Rule {
                syscall: "socket",
                cond: ArgCondition::MaskedEq32 {
                    arg: 1,
                    mask: 0xf,
                    value,
                },
                errno: Errno::Eperm,
                reason:
                    "network is allowlist: only TCP streams to the egress proxy (no UDP, no DNS)",
            });
        }
    }
    out
}

/// The distinct syscall names `rules(opts)` touches (for the `Enforcement` report).
pub fn denied_names(opts: &SeccompOptions) -> Vec<String> {
    let mut names: Vec<String> = rules(opts).iter().map(|r| r.syscall.to_string()).collect();
    names.sort();
    names.dedup();
    names
}

/// One line per rule, for `sandbox explain`.
pub fn describe(rule: &Rule) -> String {
    let cond = match rule.cond {
        ArgCondition::Always => String::new(),
        ArgCondition::Eq32 { arg, value } => format!(" if (u32)arg{arg} == {value:#x}"),
        ArgCondition::Ne32 { arg, value } => format!(" if (u32)arg{arg} != {value:#x}"),
        ArgCondition::FlagSet { arg, mask } => format!(" if arg{arg} & {mask:#x}"),
        ArgCondition::MaskedEq32 { arg, mask, value } => {
            format!(" if ((u32)arg{arg} & {mask:#x}) == {value:#x}")
        }
        ArgCondition::NotIn32 { arg, values } => format!(
            " if (u32)arg{arg} not in {{{}}}",
            values
                .iter()
                .map(|v| format!("{v:#x}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let errno = match rule.errno {
        Errno::Eperm => "EPERM",
        Errno::Enosys => "ENOSYS",
    };
    format!("{}{} -> {}: {}", rule.syscall, cond, errno, rule.reason)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_private_namespace_keeps_ip_sockets_and_nothing_else() {
        let r = rules(&SeccompOptions {
            network: false,
            deny_unix_socket: true,
            stream_only: false,
            private_net: true,
        });
        let fam: Vec<_> = r
            .iter()
            .filter(|r| r.syscall == "socket" && r.reason.starts_with("network is off"))
            .collect();
        assert_eq!(fam.len(), 1);
        assert_eq!(
            fam[0].cond,
            ArgCondition::NotIn32 {
                arg: 0,
                values: &[AF_UNIX, AF_INET, AF_INET6]
            }
        );
        assert!(describe(fam[0]).contains("not in {0x1, 0x2, 0xa}"));
        // The bwrap tier asks for it exactly when the network is off.
        assert!(SeccompOptions::for_bwrap(false).private_net);
        assert!(!SeccompOptions::for_bwrap(true).private_net);
        assert!(!SeccompOptions::for_allowlist().private_net);
    }

    #[test]
    fn network_off_adds_the_family_rule() {
        let off = rules(&SeccompOptions::default());
        let on = rules(&SeccompOptions {
            network: true,
            ..Default::default()
        });
        assert_eq!(off.len(), on.len() + 1);
        assert!(off.iter().any(|r| r.cond
            == ArgCondition::Ne32 {
                arg: 0,
                value: AF_UNIX
            }));
        // vsock is denied even with network on.
        assert!(on.iter().any(|r| r.syscall == "socket"
            && r.cond
                == ArgCondition::Eq32 {
                    arg: 0,
                    value: AF_VSOCK
                }));
    }

    #[test]
    fn landlock_tier_can_deny_unix_sockets() {
        let r = rules(&SeccompOptions {
            network: false,
            deny_unix_socket: true,
            stream_only: false,
            private_net: false,
        });
        assert!(r.iter().any(|r| r.cond
            == ArgCondition::Eq32 {
                arg: 0,
                value: AF_UNIX
            }));
        assert!(!r.iter().any(|r| r.syscall == "socketpair"));
    }

    #[test]
    fn every_rule_has_a_reason_and_catalogue_items_are_covered() {
        let names = denied_names(&SeccompOptions::default());
        for must in [
            "ptrace",
            "process_vm_writev",
            "io_uring_setup",
            "mount",
            "umount2",
            "pivot_root",
            "unshare",
            "setns",
            "keyctl",
            "add_key",
            "request_key",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "ioctl",
            "socket",
            "clone3",
        ] {
            assert!(names.iter().any(|n| n == must), "{must} missing");
        }
        assert!(rules(&SeccompOptions::default())
            .iter()
            .all(|r| !r.reason.is_empty()));
    }
}
