//! Linux fact gathering: read `/proc`, find and run bwrap, ask the kernel
//! for its Landlock ABI. Judgement is in [`super::checks`].

use super::checks::{self, UsernsFacts};
use super::parse::{self, ContainerMarkers, ProcStatus};
use super::report::{Row, Status};
use crate::host::backends::landlock::rights::{FsAccess, NetAccess, ScopeSet, TARGET_ABI};
use crate::host::{HostError, HostSettings};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

fn sysctl(p: &str) -> Option<i64> {
    read(p).as_deref().and_then(parse::sysctl_int)
}

/// Kernel release and distribution name.
pub fn kernel_and_distro() -> (Option<String>, Option<String>) {
    let kernel = read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string());
    let distro = read("/etc/os-release")
        .or_else(|| read("/usr/lib/os-release"))
        .as_deref()
        .and_then(parse::os_release_name);
    (kernel, distro)
}

/// Container or WSL, from the markers they leave.
pub fn container_kind() -> Option<String> {
    parse::container_kind(&ContainerMarkers {
        dockerenv: Path::new("/.dockerenv").exists(),
        containerenv: Path::new("/run/.containerenv").exists(),
        container_env: std::env::var("container").ok(),
        pid1_cgroup: read("/proc/1/cgroup").unwrap_or_default(),
        osrelease: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
    })
}

/// The bwrap row: which binary, its version, why that one.
pub fn bwrap_row(settings: &HostSettings, workspace: &Path) -> Row {
    let found = crate::host::backends::bwrap::spawn::find_bwrap(
        settings.bwrap_path.as_deref(),
        &[workspace],
    );
    let path = match found {
        Ok(p) => p,
        Err(HostError::Unavailable { reason, remedy, .. }) => {
            let mut r = Row::new("bwrap", "sandbox", Status::Warn, reason);
            if let Some(p) = &settings.bwrap_path {
                r = r.detail(format!("[sandbox] bwrap_path = {}", p.display()));
            }
            return r.fix(remedy.unwrap_or_else(|| {
                "install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap)".into()
            }));
        }
        Err(e) => return Row::new("bwrap", "sandbox", Status::Warn, e.to_string()),
    };
    let nix = std::env::var_os("CODEWHALE_NIX_BWRAP")
        .filter(|v| !v.is_empty())
        .map(|v| std::fs::canonicalize(&v).unwrap_or_else(|_| PathBuf::from(v)));
    let order = std::env::var("CODEWHALE_BWRAP_ORDER").ok();
    let origin = checks::bwrap_origin(
        &path,
        settings.bwrap_path.is_some(),
        nix.as_deref(),
        order.as_deref(),
    );
    let version = std::process::Command::new(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|o| parse::bwrap_version(&String::from_utf8_lossy(&o.stdout)));
    let setuid = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o4000 != 0)
        .unwrap_or(false);
    let mut r = Row::new(
        "bwrap",
        "sandbox",
        Status::Ok,
        format!(
            "bwrap {} at {}",
            version.as_deref().unwrap_or("(version unknown)"),
            path.display()
        ),
    )
    .detail(format!("why this one: {origin}"))
    .detail("functional: see probe.wrapper-starts");
    if setuid {
        r = r.detail("installed setuid root");
    }
    r
}

/// The user-namespace sysctls.
pub fn userns_row() -> Row {
    checks::userns(&UsernsFacts {
        max_user_namespaces: sysctl("/proc/sys/user/max_user_namespaces"),
        unprivileged_userns_clone: sysctl("/proc/sys/kernel/unprivileged_userns_clone"),
        apparmor_restrict: sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        is_root: nix::unistd::geteuid().is_root(),
    })
}

/// The kernel's Landlock ABI and what it buys.
pub fn landlock_row(abi: u32) -> Row {
    if abi == 0 {
        return Row::new(
            "landlock",
            "sandbox",
            Status::Warn,
            "Landlock is not available (kernel older than 5.13, or landlock missing from the lsm= list)",
        )
        .detail("bwrap still isolates by namespaces and mounts; the landlock tier cannot work here")
        .fix("boot a kernel ≥ 5.13 with landlock in CONFIG_LSM or the lsm= boot parameter");
    }
    let mut r = Row::new(
        "landlock",
        "sandbox",
        Status::Ok,
        format!("Landlock ABI {abi} (codewhale targets ABI {TARGET_ABI})"),
    )
    .detail(format!(
        "filesystem rights: {}",
        FsAccess::supported(abi).names().join(", ")
    ));
    let net = NetAccess::supported(abi).names();
    r = r.detail(if net.is_empty() {
        "network rights: none (ABI ≥ 4 adds bind-tcp/connect-tcp; the landlock tier then relies on seccomp for network)".to_string()
    } else {
        format!("network rights: {}", net.join(", "))
    });
    let scopes = ScopeSet::supported(abi).names();
    r = r.detail(if scopes.is_empty() {
        "scopes: none (ABI ≥ 6 adds abstract-unix-socket and signal scoping)".to_string()
    } else {
        format!("scopes: {}", scopes.join(", "))
    });
    if abi < TARGET_ABI {
        r = r.detail(format!(
            "rights added after ABI {abi} are reported as not enforced in each run's `partial` list"
        ));
    }
    r
}

/// How the landlock tier holds a deny-read item inside a writable root
/// (the usual `.env` in the workspace root): `mask` where this process can
/// make a mount namespace, else the `carve+opener` fallback.
pub fn landlock_mask_row() -> Row {
    use crate::host::backends::landlock::mask::{self, MaskVia};
    let id = "landlock-mask";
    match mask::choose(
        crate::policy::HoleStrategy::Carve,
        &mask::probe(),
        mask::seam_off(),
    ) {
        Ok(via) => Row::new(
            id,
            "sandbox",
            Status::Ok,
            format!(
                "landlock tier: deny-read items inside writable roots are masked by read-only mounts (strategy mask, {})",
                match via {
                    MaskVia::MountNs => "a private mount namespace",
                    MaskVia::UserNs => "a private user and mount namespace",
                }
            ),
        )
        .detail("files the command creates next to a masked .env can be read and executed; the .env cannot be read, renamed, removed or unmounted"),
        Err(why) => Row::new(
            id,
            "sandbox",
            Status::Warn,
            format!("landlock tier: deny-read items inside writable roots use the carve+opener fallback ({why})"),
        )
        .detail("files the command creates next to a .env in a writable root are readable through the opener but cannot be executed (./target/debug/app, cargo test), and .env can be renamed")
        .fix("allow user namespaces (user.max_user_namespaces > 0; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or run codewhale with CAP_SYS_ADMIN"),
    }
}

/// Whether the kernel has seccomp filtering.
pub fn seccomp_row(status_text: &str) -> Row {
    let own = ProcStatus::parse(status_text);
    let actions = read("/proc/sys/kernel/seccomp/actions_avail");
    match (own.seccomp, actions) {
        (Some(mode), actions) => {
            let mut r = Row::new(
                "seccomp",
                "sandbox",
                Status::Ok,
                "seccomp filtering is available",
            )
            .detail(format!("doctor's own Seccomp mode: {mode}"));
            if let Some(a) = actions {
                r = r.detail(format!("actions: {}", a.trim()));
            }
            r
        }
        (None, _) => Row::new(
            "seccomp",
            "sandbox",
            Status::Fail,
            "the kernel has no seccomp (no Seccomp line in /proc/self/status)",
        )
        .fix("use a kernel built with CONFIG_SECCOMP_FILTER=y; every Linux backend needs it"),
    }
}

/// All Linux environment rows.
pub fn checks(settings: &HostSettings, workspace: &Path) -> Vec<Row> {
    let status = read("/proc/self/status").unwrap_or_default();
    vec![
        bwrap_row(settings, workspace),
        userns_row(),
        landlock_row(crate::host::backends::landlock::kernel_abi()),
        landlock_mask_row(),
        seccomp_row(&status),
        checks::container(container_kind().as_deref()),
    ]
}
