//! The in-sandbox helper stage: `codewhale __sandbox-helper --spec JSON -- CMD…`.
//!
//! bwrap starts this stage as the sandbox's command. It applies, in order,
//! no_new_privs, the capability drop, Landlock (the inside-bwrap ruleset,
//! see [`apply_landlock`]), and the seccomp filter, reports
//! what it applied as one JSON line on the status fd the parent passed in,
//! and then replaces itself with the command. The status fd is
//! close-on-exec, so the command never sees it.
//!
//! With a lifeline fd the helper stays as a small watcher: it starts the
//! command (`posix_spawn`), and waits for either the command
//! to exit (it then exits the same way) or codewhale to die (the lifeline
//! hangs up; it then SIGKILLs everything in the sandbox's pid namespace).
//! bwrap's own `--die-with-parent` has a start-up race: if codewhale dies
//! while bwrap's pid 1 is still being set up, pid 1 arms its parent-death
//! signal too late and the sandbox would outlive codewhale.
//!
//! Exit codes when the command cannot start: 127 not found, 126 not
//! executable (shell semantics); 125 when a protection could not be applied
//! (the command never runs unprotected).

use crate::host::backends::landlock::{self, LandlockOptions, Tier};
use crate::host::enforcement::{LandlockReport, SeccompReport};
use crate::host::process::caps;
use crate::host::seccomp::apply as seccomp_apply;
use crate::host::seccomp::{denied_names, SeccompOptions};
use crate::policy::ResolvedPolicy;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;

/// What the parent asks the helper to apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperSpec {
    /// Write end of the status pipe (inherited through bwrap).
    pub status_fd: RawFd,
    /// Read end of the lifeline pipe; codewhale holds the only write end,
    /// so it hangs up exactly when codewhale dies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifeline_fd: Option<RawFd>,
    /// The helper's end of the go-ahead socket: it says ready, and the
    /// command starts only after codewhale has recorded the sandbox's
    /// pid-namespace init and answered with one byte (see
    /// `host::integrity::sandboxes`); a hang-up instead means codewhale is
    /// gone, and the command never starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_fd: Option<RawFd>,
    pub seccomp: SeccompOptions,
    /// Inside bwrap: plan and apply Landlock ([`Tier::InsideBwrap`]) from
    /// this trimmed policy before seccomp. Planned here, not in the parent,
    /// because the private `/tmp` and `/dev` exist only in the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<InsideBwrapLandlock>,
    /// `network = "allowlist"`: start the bridge from this loopback port
    /// to the egress proxy's socket before Landlock and seccomp, and let
    /// Landlock allow TCP connect to that port only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressBridge>,
}

/// Where the bridge listens and what it connects to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressBridge {
    /// The proxy's Unix socket (visible at the same path inside).
    pub socket: std::path::PathBuf,
    /// The port on the sandbox's own 127.0.0.1.
    pub port: u16,
}

/// What the helper needs to plan Landlock inside bwrap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InsideBwrapLandlock {
    /// The resolved policy, trimmed to what the inside-bwrap plan reads
    /// (mode, network, private /tmp, writable roots).
    pub policy: ResolvedPolicy,
    /// The `CODEWHALE_LANDLOCK_MAX_ABI` test seam, as read by the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abi: Option<u32>,
}

impl InsideBwrapLandlock {
    /// Trim `resolved` (the deny-read and protected tables are the mount
    /// namespace's job inside bwrap, and would only lengthen the argv).
    pub fn new(resolved: &ResolvedPolicy, max_abi: Option<u32>) -> Self {
        let mut policy = resolved.clone();
        policy.protected.clear();
        policy.deny_read.clear();
        policy.homes.clear();
        policy.notes.clear();
        policy.unmasked.clear();
        policy.git = Default::default();
        policy.env = Default::default();
        InsideBwrapLandlock { policy, max_abi }
    }
}

/// The one line the helper writes on the status fd.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case")]
pub enum HelperStatus {
    /// Everything below was in force when the command was exec'd.
    Applied {
        no_new_privs: bool,
        capabilities_dropped: bool,
        seccomp: SeccompReport,
        landlock: Option<LandlockReport>,
        /// The egress bridge's port, when one was started and listening.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        egress_bridge: Option<u16>,
    },
    /// A protection failed; the command did not run.
    SetupFailed { error: String },
}

/// The hidden subcommand's name.
pub const SUBCOMMAND: &str = "__sandbox-helper";

/// Landlock inside bwrap, right before seccomp. `None` when the parent
/// asked for none (the landlock tier does not use this helper: its forked
/// stage applies everything itself).
fn apply_landlock(
    spec: &Option<InsideBwrapLandlock>,
    connect_ports: Vec<u16>,
) -> Result<Option<LandlockReport>, String> {
    let Some(l) = spec else { return Ok(None) };
    let mut opts = LandlockOptions::detect(Tier::InsideBwrap);
    opts.max_abi = l.max_abi;
    opts.connect_ports = connect_ports;
    // bwrap unshares the network whenever it is off (allowlist included):
    // the namespace holds only the command's own loopback (and the egress
    // bridge), so TCP there is the command's own business.
    if !l.policy.network {
        opts.private_net = Some(landlock::PrivateNet::Bwrap);
    }
    let plan = landlock::plan(&l.policy, &opts).map_err(|e| e.to_string())?;
    landlock::apply(&plan).map(Some).map_err(|e| e.to_string())
}

fn apply(spec: &HelperSpec) -> Result<HelperStatus, String> {
    caps::set_no_new_privs().map_err(|e| e.to_string())?;
    caps::drop_all().map_err(|e| e.to_string())?;
    let capabilities_dropped = caps::all_dropped();
    if !capabilities_dropped {
        return Err("capabilities are still present after dropping them".into());
    }
    // The bridge is forked here: after the capability drop, before the
    // filters (it needs `socket(AF_UNIX)`, which the command's filter
    // denies). It is listening before the command starts.
    let mut ports = Vec::new();
    let mut egress_bridge = None;
    if let Some(b) = &spec.egress {
        let listener = crate::net::bridge::bind(b.port)
            .map_err(|e| format!("egress bridge: binding 127.0.0.1:{}: {e}", b.port))?;
        crate::net::bridge::spawn(listener, &b.socket)
            .map_err(|e| format!("egress bridge: fork: {e}"))?;
        ports.push(b.port);
        egress_bridge = Some(b.port);
    }
    let landlock = apply_landlock(&spec.landlock, ports)?;
    seccomp_apply::install(&spec.seccomp).map_err(|e| e.to_string())?;
    Ok(HelperStatus::Applied {
        no_new_privs: true,
        capabilities_dropped,
        seccomp: SeccompReport {
            installed: true,
            denied: denied_names(&spec.seccomp),
        },
        landlock,
        egress_bridge,
    })
}

/// Run the helper stage. Returns only on failure, with the exit code.
pub fn main(spec_json: &str, command: &[OsString]) -> i32 {
    let spec: HelperSpec = match serde_json::from_str(spec_json) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("codewhale: sandbox helper: bad --spec: {e}");
            return crate::exit::SANDBOX_SETUP;
        }
    };
    // SAFETY: the parent passed this fd number for us alone; we own it from
    // here on. It is marked close-on-exec so the command never inherits it.
    let mut status = unsafe { std::fs::File::from_raw_fd(spec.status_fd) };
    // SAFETY: fcntl on the fd we just took ownership of.
    unsafe { libc::fcntl(spec.status_fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    let Some((program, args)) = command.split_first() else {
        eprintln!("codewhale: sandbox helper: no command");
        return crate::exit::SANDBOX_SETUP;
    };
    let report = apply(&spec).unwrap_or_else(|error| HelperStatus::SetupFailed { error });
    let failed = matches!(report, HelperStatus::SetupFailed { .. });
    let line = serde_json::to_string(&report).unwrap_or_default();
    let _ = writeln!(status, "{line}");
    if let HelperStatus::SetupFailed { error } = &report {
        eprintln!("codewhale: sandbox setup failed: {error}");
    }
    if failed {
        return crate::exit::SANDBOX_SETUP;
    }
    if let Some(go) = spec.go_fd {
        if !go_ahead(go) {
            eprintln!(
                "codewhale: the sandbox was not cleared to start the command (codewhale went away)"
            );
            return crate::exit::SANDBOX_SETUP;
        }
    }
    // Nothing codewhale or bwrap handed down reaches the command (the
    // status and lifeline fds, anything else inherited): every fd above
    // stdio is marked close-on-exec; this stage keeps its own.
    crate::host::process::os::cloexec_from_3();
    if let Some(lifeline) = spec.lifeline_fd {
        return watch(lifeline, program, args);
    }
    exec_command(program, args)
}

/// The go-ahead handshake on the socket `fd` (then closed): say ready
/// (codewhale learns this process's pid from the kernel and records the
/// sandbox's init), then wait for one byte. `false` when codewhale hung up.
fn go_ahead(fd: RawFd) -> bool {
    // SAFETY: the go fd was handed to us for this purpose alone.
    let f = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let ready = nix::sys::socket::send(
        std::os::fd::AsRawFd::as_raw_fd(&f),
        b"R",
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    );
    if ready != Ok(1) {
        return false;
    }
    let f = std::fs::File::from(f);
    let mut b = [0u8; 1];
    loop {
        match std::io::Read::read(&mut &f, &mut b) {
            Ok(1) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            _ => return false,
        }
    }
}

/// Replace this process with the command; returns the exit code on failure.
fn exec_command(program: &OsString, args: &[OsString]) -> i32 {
    let err = std::process::Command::new(program).args(args).exec();
    start_failed(program, &err)
}

/// Report that the command could not be started; the shell-style exit code.
fn start_failed(program: &OsString, err: &std::io::Error) -> i32 {
    let name = program.to_string_lossy();
    if err.kind() == std::io::ErrorKind::NotFound {
        eprintln!("codewhale: {name}: command not found");
        crate::exit::NOT_FOUND
    } else {
        eprintln!("codewhale: {name}: {err}");
        crate::exit::NOT_EXECUTABLE
    }
}

/// Start the command and watch it and the lifeline (see the module docs).
fn watch(lifeline: RawFd, program: &OsString, args: &[OsString]) -> i32 {
    // SAFETY: the lifeline fd was handed to us for this purpose; the command
    // must not inherit it.
    unsafe { libc::fcntl(lifeline, libc::F_SETFD, libc::FD_CLOEXEC) };
    // Inside bwrap (no new session needed: bwrap made one) std spawns with
    // posix_spawn: no copy of our page tables, measurably cheaper than
    // fork + exec on every sandboxed command. The status and lifeline fds
    // are close-on-exec, so the command inherits neither; SIGPIPE and the
    // signal mask are reset as `Command::exec` does.
    let pid = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child.id() as libc::pid_t,
        Err(err) => return start_failed(program, &err),
    };
    watch_pid(lifeline, pid)
}

/// Wait for the command `pid` or the lifeline, whichever comes first.
fn watch_pid(lifeline: RawFd, pid: libc::pid_t) -> i32 {
    let pidfd = crate::host::process::reaper::pidfd(pid);
    // With no pidfd (old kernel) poll the lifeline with a timeout and
    // check the child in between.
    while let Some(lifeline_fired) =
        crate::host::process::reaper::wait_child_or_lifeline(lifeline, pidfd, -1, 100)
    {
        if let Some(code) = reap(pid) {
            return code;
        }
        if lifeline_fired {
            // codewhale is gone: take the whole sandbox down.
            // SAFETY: kill(-1) reaches every process of the sandbox's pid
            // namespace that we may signal (all of them: same uid, no privileges).
            unsafe { libc::kill(-1, libc::SIGKILL) };
            return crate::exit::SANDBOX_SETUP;
        }
    }
    // poll failed: fall back to a plain wait.
    loop {
        if let Some(code) = reap(pid) {
            return code;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The shell-style exit code of `pid` if it has exited (reaping it).
fn reap(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid status pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r != pid {
        return None;
    }
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}
