//! The thin spawn step of the bwrap backend: find bwrap, prepare the
//! status pipe, record the integrity baseline of the protected paths the
//! mounts cannot hold, run the plan under supervision, read the helper's
//! report, and run the after-run check.

use super::helper::{HelperSpec, HelperStatus, SUBCOMMAND};
use crate::host::backends::bwrap::{plan, BwrapOptions, BwrapPlan};
use crate::host::child_env::ChildEnv;
use crate::host::enforcement::{
    Enforcement, EnforcementLevel, LandlockStatus, NetworkEnforcer, PartialItem, Shortfall,
};
use crate::host::process::supervise;
use crate::host::request::{ExecOutcome, ExecRequest};
use crate::host::seccomp::SeccompOptions;
use crate::host::{BackendKind, HostError};
use crate::policy::ResolvedPolicy;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How long a run waits, after bwrap has gone, for its sandbox's pid
/// namespace to empty (the kernel takes milliseconds; only a process stuck
/// in the kernel, e.g. on a hung network filesystem, gets near this).
const SANDBOX_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The go-ahead handshake with the helper, on a Unix socket pair: the
/// helper says it is ready (one byte; the kernel attaches its pid, as this
/// process sees it, because we set `SO_PASSCRED`), we record its parent —
/// the sandbox's pid-namespace init — for the crash recovery, and answer
/// with one byte. On any failure nothing is sent and the helper, seeing
/// the hang-up, never starts the command. (bwrap's own `--info-fd` would
/// give the init's pid too, but its write lands in bwrap's start-up window
/// where a failing write — we died — kills bwrap and orphans its child.)
fn record_and_go(
    go: OwnedFd,
    guard: &crate::host::integrity::RunGuard,
) -> Result<crate::host::integrity::sandboxes::Recorded, String> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixCredentials};
    let mut byte = [0u8; 1];
    let mut space = nix::cmsg_space!(UnixCredentials);
    let helper = loop {
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        let msg = match recvmsg::<()>(
            go.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("waiting for the helper: {e}")),
        };
        if msg.bytes == 0 {
            // bwrap failed before the helper ran (its own error says why).
            return Err("the helper never reported ready".into());
        }
        let pid = msg
            .cmsgs()
            .map_err(|e| format!("reading the helper's credentials: {e}"))?
            .find_map(|c| match c {
                ControlMessageOwned::ScmCredentials(cr) => Some(cr.pid()),
                _ => None,
            })
            .ok_or("the helper's ready message carried no credentials")?;
        break pid;
    };
    let init = crate::host::integrity::sandboxes::parent_of(helper)
        .ok_or_else(|| format!("the helper (pid {helper}) has no parent to record"))?;
    let rec = guard.record_sandbox(init).map_err(|e| e.to_string())?;
    let sent = nix::sys::socket::send(go.as_raw_fd(), &[1], MsgFlags::MSG_NOSIGNAL)
        .map_err(|e| format!("giving the helper the go-ahead: {e}"))?;
    if sent != 1 {
        return Err("giving the helper the go-ahead: short write".into());
    }
    Ok(rec)
}

/// Directories no trusted bwrap is taken from when searching `PATH`:
/// anyone (or a sandboxed command in an earlier run) can plant files there.
const UNTRUSTED_DIRS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Why `candidate` must not be used as bwrap, if it must not.
fn untrusted(candidate: &Path, writable: &[&Path], from_path: bool) -> Option<String> {
    if let Some(root) = writable.iter().find(|r| candidate.starts_with(r)) {
        return Some(format!("inside the writable root {}", root.display()));
    }
    if !from_path {
        return None;
    }
    if let Some(d) = UNTRUSTED_DIRS.iter().find(|d| candidate.starts_with(d)) {
        return Some(format!("inside the shared directory {d}"));
    }
    let world_writable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.mode() & 0o002 != 0)
            .unwrap_or(true)
    };
    if world_writable(candidate) || candidate.parent().is_some_and(world_writable) {
        return Some("world-writable (or in a world-writable directory)".into());
    }
    None
}

/// Find the bwrap binary: `configured` if given, else the first `bwrap` on
/// `PATH` that is trustworthy — never one inside the workspace or another
/// writable root, a shared temp directory, or a world-writable place (a
/// planted fake would run with our privileges and report a sandbox that
/// does not exist). The result is canonical (symlinks resolved).
pub fn find_bwrap(configured: Option<&Path>, writable: &[&Path]) -> Result<PathBuf, HostError> {
    let unavailable = |reason: String, remedy: &str| HostError::Unavailable {
        backend: crate::host::BackendKind::Bwrap,
        reason,
        remedy: Some(remedy.into()),
    };
    let from_path = configured.is_none();
    let candidates: Vec<PathBuf> = match configured {
        Some(p) if !p.is_absolute() => {
            return Err(unavailable(
                format!("bwrap_path {} is not absolute", p.display()),
                "give an absolute path",
            ))
        }
        Some(p) => vec![p.to_path_buf()],
        None => which::which_all("bwrap")
            .map(|i| i.collect())
            .unwrap_or_default(),
    };
    let mut rejected = Vec::new();
    for c in candidates {
        let Ok(abs) = std::fs::canonicalize(&c) else {
            rejected.push(format!("{} (does not exist)", c.display()));
            continue;
        };
        match untrusted(&abs, writable, from_path).or_else(|| untrusted(&c, writable, from_path)) {
            Some(why) => rejected.push(format!("{} ({why})", c.display())),
            None => return Ok(abs),
        }
    }
    if rejected.is_empty() {
        Err(unavailable(
            "bwrap (bubblewrap) was not found on PATH".into(),
            "install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) \
             or set [sandbox] bwrap_path",
        ))
    } else {
        Err(unavailable(
            format!("no trustworthy bwrap: refused {}", rejected.join(", ")),
            "install bubblewrap system-wide (e.g. /usr/bin/bwrap)",
        ))
    }
}

/// The bwrap options for running `command` through the helper stage.
pub fn options(
    bwrap: &Path,
    cwd: &Path,
    spec: Option<&HelperSpec>,
    helper_exe: Option<&Path>,
    command: Vec<OsString>,
) -> Result<BwrapOptions, HostError> {
    let helper = match spec {
        Some(spec) => Some(helper_argv(spec, helper_exe)?),
        None => None,
    };
    Ok(BwrapOptions {
        bwrap: bwrap.to_path_buf(),
        cwd: cwd.to_path_buf(),
        helper,
        command,
        egress_dir: None,
    })
}

/// The helper stage's executable and argv for `spec` (what bwrap execs in
/// the sandbox; `sandbox explain` shows the same).
pub fn helper_argv(
    spec: &HelperSpec,
    helper_exe: Option<&Path>,
) -> Result<(PathBuf, Vec<OsString>), HostError> {
    let exe = match helper_exe {
        Some(p) => p.to_path_buf(),
        None => default_helper_exe()?,
    };
    let json = serde_json::to_string(spec)
        .map_err(|e| HostError::io("encoding the helper spec", e.into()))?;
    Ok((exe, vec![SUBCOMMAND.into(), "--spec".into(), json.into()]))
}

pub use crate::host::process::helper_exe as default_helper_exe;

/// Turn bwrap's stderr into an actionable error.
pub fn classify_failure(stderr: &str) -> HostError {
    let text = stderr.trim();
    let userns_restricted =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .map(|s| s.trim() == "1")
            .unwrap_or(false);
    let (reason, remedy) = if text.contains("setting up uid map")
        || text.contains("No permissions to create")
        || text.contains("Creating new namespace failed")
    {
        if userns_restricted {
            (
                "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)",
                "add an AppArmor profile allowing userns for bwrap (Ubuntu 24.04: /etc/apparmor.d/bwrap-userns-restrict), or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or use --backend landlock",
            )
        } else {
            (
                "unprivileged user namespaces are not available",
                "sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or user.max_user_namespaces>0; in a container, allow unshare (e.g. docker --security-opt seccomp=unconfined); or use --backend landlock",
            )
        }
    } else if text.contains("proc") && text.contains("mount") {
        (
            "/proc cannot be mounted in this container (the runtime masks it)",
            "run the container with an unmasked /proc (docker --security-opt systempaths=unconfined) or use --backend landlock",
        )
    } else {
        (
            "bwrap could not set up the sandbox",
            "run the command with --report-json and check bwrap's message above",
        )
    };
    HostError::Unavailable {
        backend: crate::host::BackendKind::Bwrap,
        reason: if text.is_empty() {
            reason.to_string()
        } else {
            format!("{reason}: {text}")
        },
        remedy: Some(remedy.into()),
    }
}

fn enforcement(
    policy: &ResolvedPolicy,
    plan: &BwrapPlan,
    status: &HelperStatus,
    env_removed: Vec<String>,
) -> Enforcement {
    let (nnp, caps, seccomp, landlock) = match status {
        HelperStatus::Applied {
            no_new_privs,
            capabilities_dropped,
            seccomp,
            landlock,
            ..
        } => (
            *no_new_privs,
            *capabilities_dropped,
            Some(seccomp.clone()),
            landlock.clone(),
        ),
        HelperStatus::SetupFailed { .. } => (false, false, None, None),
    };
    let mut label = String::from("sandboxed: bwrap");
    if seccomp.is_some() {
        label.push_str("+seccomp");
    }
    // Landlock inside bwrap is defence in depth: the mounts already enforce
    // the policy, so a kernel without it changes the label, not the level.
    let landlock_on = landlock
        .as_ref()
        .is_some_and(|l| l.status != LandlockStatus::Not);
    if landlock_on {
        label.push_str("+landlock");
    }
    let mut network_enforced_by = if policy.network {
        Vec::new()
    } else {
        vec![NetworkEnforcer::Netns, NetworkEnforcer::Seccomp]
    };
    let bridge = matches!(
        status,
        HelperStatus::Applied {
            egress_bridge: Some(_),
            ..
        }
    );
    if policy.egress.is_some() && bridge {
        network_enforced_by.push(crate::host::enforcement::NetworkEnforcer::EgressProxy);
    }
    // Landlock's TCP rules are not planned inside bwrap: the network
    // namespace holds only the command's own loopback (and the bridge),
    // so they would only keep a test server from listening there.
    Enforcement {
        level: if plan.skipped.is_empty() {
            EnforcementLevel::Full
        } else {
            EnforcementLevel::Partial
        },
        namespaces: plan.namespaces.clone(),
        network_allowed: policy.network,
        network_enforced_by,
        no_new_privs: nnp,
        capabilities_dropped: caps,
        seccomp,
        landlock,
        masked_paths: plan.masked.clone(),
        protected_paths: plan.protected.clone(),
        env_removed,
        partial: plan.skipped.clone(),
        ..Enforcement::base(BackendKind::Bwrap, policy.mode, label)
    }
}

/// The helper's status line, read after the run without blocking: the
/// helper writes it in one `write` (< PIPE_BUF, so atomic) before the
/// command starts, so it is in the pipe buffer if the helper got that far.
/// Reading afterwards needs no thread, and never waits for a straggling
/// bwrap process that still holds the write end.
pub(crate) fn read_status(read_end: OwnedFd) -> Option<HelperStatus> {
    // SAFETY: fcntl on the fd we own.
    unsafe {
        let flags = libc::fcntl(read_end.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(
            read_end.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        );
    }
    let mut buf = Vec::new();
    let mut f = std::fs::File::from(read_end);
    let mut chunk = [0u8; 4096];
    while let Ok(n) = f.read(&mut chunk) {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    let line = text.lines().next()?;
    serde_json::from_str(line.trim()).ok()
}

/// One in-memory file per `--ro-bind-data` mount of `plan`, its number
/// written over the plan's placeholder (bwrap reads each to its end and
/// closes it while it sets up the mounts).
fn data_fds(plan: &mut super::BwrapPlan) -> Result<Vec<OwnedFd>, HostError> {
    let mut fds = Vec::with_capacity(plan.data.len());
    for d in &plan.data {
        let fd = nix::sys::memfd::memfd_create(
            c"codewhale-mask",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )
        .map_err(|e| HostError::io("creating a mask's content", e.into()))?;
        let mut f = std::fs::File::from(fd);
        {
            use std::io::{Seek, Write};
            f.write_all(&d.content)
                .and_then(|()| f.rewind())
                .map_err(|e| HostError::io("writing a mask's content", e))?;
        }
        let fd = OwnedFd::from(f);
        if let Some(arg) = plan.argv.get_mut(d.arg) {
            *arg = fd.as_raw_fd().to_string().into();
        }
        fds.push(fd);
    }
    Ok(fds)
}

/// Run `req` under bwrap with the helper stage.
pub fn run(
    policy: &ResolvedPolicy,
    bwrap: &Path,
    helper_exe: Option<&Path>,
    req: &ExecRequest,
    mut env: ChildEnv,
) -> Result<ExecOutcome, HostError> {
    let (read_end, write_end): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| HostError::io("creating the status pipe", e.into()))?;
    // The lifeline: the helper watches the read end; only we hold the
    // write end (close-on-exec), so it hangs up exactly when we die.
    let (life_read, life_write): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| HostError::io("creating the lifeline pipe", e.into()))?;
    // The go-ahead: the helper starts the command only once the sandbox's
    // pid-namespace init is recorded for the crash recovery
    // (`integrity::sandboxes`, [`record_and_go`]).
    let (go_ours, go_theirs): (OwnedFd, OwnedFd) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::Stream,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| HostError::io("creating the go-ahead socket", e.into()))?;
    nix::sys::socket::setsockopt(&go_ours, nix::sys::socket::sockopt::PassCred, &true)
        .map_err(|e| HostError::io("asking for the helper's credentials", e.into()))?;
    // network = "allowlist": the proxy outside, the bridge inside.
    let egress = match &policy.egress {
        Some(spec) if !policy.network => Some(crate::host::egress::EgressRun::start_unix(spec)?),
        _ => None,
    };
    let bridge = egress.as_ref().and_then(|e| {
        e.socket().map(|socket| super::helper::EgressBridge {
            socket,
            port: crate::host::egress::BRIDGE_PORT,
        })
    });
    let seccomp = match &bridge {
        // TCP sockets reach only the namespace's own loopback (the bridge);
        // unix sockets would reach host daemons, so they stay denied.
        Some(_) => SeccompOptions::for_allowlist(),
        None => SeccompOptions::for_bwrap(policy.network),
    };
    let spec = HelperSpec {
        lifeline_fd: Some(life_read.as_raw_fd()),
        go_fd: Some(go_theirs.as_raw_fd()),
        status_fd: write_end.as_raw_fd(),
        egress: bridge,
        seccomp,
        landlock: Some(super::helper::InsideBwrapLandlock::new(
            policy,
            crate::seams::landlock_max_abi(),
        )),
    };
    let cwd = req.cwd.clone().unwrap_or_else(|| policy.workspace.clone());
    let command = req.argv.iter().map(OsString::from).collect();
    let mut opts = options(bwrap, &cwd, Some(&spec), helper_exe, command)?;
    opts.egress_dir = egress.as_ref().and_then(|e| e.socket_dir());
    let mut plan = plan(policy, &opts).map_err(|e| HostError::Unavailable {
        backend: crate::host::BackendKind::Bwrap,
        reason: e.to_string(),
        remedy: None,
    })?;
    let data_fds = data_fds(&mut plan)?;
    // Missing protected paths are not mounted (that would create them on
    // the host): their baseline is recorded now and checked after the run.
    let targets = crate::host::integrity::targets(policy, &plan.guarded_after);
    let guard = crate::host::integrity::RunGuard::enter(&policy.workspace, &targets)?;

    // The host's TMPDIR names a directory the private /tmp hides or the
    // read-only root makes unwritable: point it at the private /tmp.
    let temp = super::temp_env::overrides(policy, env.vars());
    env.extend(temp);
    if egress.is_some() {
        env.extend(crate::net::proxy_env(crate::host::egress::BRIDGE_PORT));
        env.extend(crate::host::egress::ssh_env(helper_exe));
    }
    let mut cmd = std::process::Command::new(&plan.argv[0]);
    cmd.args(&plan.argv[1..]);
    cmd.env_clear().envs(env.vars());

    let (sup, recorded) = std::thread::scope(|sc| {
        let recorder = sc.spawn(|| record_and_go(go_ours, &guard));
        let mut keep = vec![write_end, life_read, go_theirs];
        keep.extend(data_fds);
        let sup = supervise::run_with(cmd, keep, req, false);
        (sup, recorder.join())
    });
    drop(life_write);
    let status = read_status(read_end);
    // bwrap is gone (supervision waited for it). Its pid namespace's init
    // exits only after every process of the namespace has: once it has,
    // nothing of the command writes any more (a timeout or Esc killed
    // bwrap, and the namespace dies a moment later).
    let (unsettled, record_error) = match recorded {
        Ok(Ok(r)) => (!r.finish(SANDBOX_EXIT_WAIT), None),
        Ok(Err(why)) => (false, Some(why)),
        Err(_) => (false, Some("the recorder thread panicked".to_string())),
    };
    let unguarded = guard.unguarded.clone();
    let mut reverts = guard.recovered.clone();
    reverts.extend(guard.leave());
    let sup = sup?;
    let status = match status {
        Some(HelperStatus::SetupFailed { error }) => {
            return Err(HostError::Unavailable {
                backend: crate::host::BackendKind::Bwrap,
                reason: format!("the in-sandbox helper failed: {error}"),
                remedy: None,
            })
        }
        Some(s) => s,
        None if sup.timed_out => {
            return Err(HostError::Unavailable {
                backend: crate::host::BackendKind::Bwrap,
                reason: "timed out before the sandbox was set up".into(),
                remedy: None,
            })
        }
        None => {
            return Err(classify_failure(&String::from_utf8_lossy(
                &sup.stderr.bytes,
            )))
        }
    };
    // The helper set up, but the command was never cleared to start.
    if let Some(why) = record_error {
        return Err(HostError::Unavailable {
            backend: crate::host::BackendKind::Bwrap,
            reason: format!("could not record the sandbox before starting the command: {why}"),
            remedy: None,
        });
    }
    let mut enforcement = enforcement(policy, &plan, &status, env.removed().to_vec());
    if unsettled {
        enforcement.partial.push(PartialItem::new(
            Shortfall::Supervision,
            format!(
                "the sandbox's processes had not all exited {} s after bwrap did; the after-run \
                 check of protected paths ran anyway, so a write landing later is not reverted",
                SANDBOX_EXIT_WAIT.as_secs()
            ),
        ));
    }
    enforcement
        .partial
        .extend(crate::host::integrity::report_items(
            &targets,
            &unguarded,
            &reverts,
            "these protected paths do not exist, and a read-only mount over them would create \
             them in the workspace for the whole run, so the command can create them",
        ));
    enforcement.reverted = reverts;
    if let Some(e) = egress {
        let report = e.finish();
        enforcement
            .partial
            .extend(crate::host::egress::partial_lines(&report));
        enforcement.egress = Some(report);
    }
    Ok(sup.into_outcome(enforcement))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn reason(e: HostError) -> String {
        match e {
            HostError::Unavailable { reason, remedy, .. } => {
                format!("{reason} | {}", remedy.unwrap_or_default())
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn known_failures_get_actionable_messages() {
        let r = reason(classify_failure(
            "bwrap: setting up uid map: Permission denied",
        ));
        assert!(r.contains("user namespaces"), "{r}");
        let r = reason(classify_failure(
            "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
        ));
        assert!(r.contains("/proc cannot be mounted"), "{r}");
        let r = reason(classify_failure("bwrap: something else"));
        assert!(r.contains("something else"), "{r}");
    }

    #[test]
    fn bwrap_inside_a_writable_root_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let fake = root.join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = reason(find_bwrap(Some(&fake), &[root.as_path()]).unwrap_err());
        assert!(err.contains("writable root"), "{err}");
        let err = reason(find_bwrap(Some(Path::new("bwrap")), &[]).unwrap_err());
        assert!(err.contains("not absolute"), "{err}");
        // Control: outside every writable root the configured path is used.
        assert_eq!(find_bwrap(Some(&fake), &[]).unwrap(), fake);
    }
}
