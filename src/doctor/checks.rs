//! Pure evaluators: facts in, a [`Row`] with its remediation out.
//!
//! The OS-specific modules only gather the facts (read `/proc`, run
//! `bwrap --version`); the judgement lives here so it is unit-tested on
//! every OS with fixture values.

use super::report::{Row, Status};
use crate::policy::SandboxMode;
use std::path::Path;

/// The sysctls that decide whether an unprivileged process may create a
/// user namespace (the heart of the bwrap backend). `None` = file absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsernsFacts {
    /// `/proc/sys/user/max_user_namespaces`.
    pub max_user_namespaces: Option<i64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian/Ubuntu patch).
    pub unprivileged_userns_clone: Option<i64>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu ≥ 23.10).
    pub apparmor_restrict: Option<i64>,
    /// Running as root: root creates namespaces regardless of the last two.
    pub is_root: bool,
}

/// The exact fix for Ubuntu's AppArmor restriction.
pub const APPARMOR_FIX: &str = "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 \
(persist it in /etc/sysctl.d/60-userns.conf), or keep the restriction and give bwrap an AppArmor \
profile that allows `userns,` (Ubuntu 24.04 ships one for /usr/bin/bwrap: sudo apt install bubblewrap \
apparmor-profiles, then sudo systemctl reload apparmor)";

/// Judge the user-namespace sysctls. Restrictions are `warn`, not `fail`:
/// whether bwrap still works (as root, setuid, or with an AppArmor
/// profile) is what the probes prove; this row explains a failing probe.
pub fn userns(f: &UsernsFacts) -> Row {
    let mut details = vec![
        format!("user.max_user_namespaces = {}", show(f.max_user_namespaces)),
        format!(
            "kernel.unprivileged_userns_clone = {}",
            show(f.unprivileged_userns_clone)
        ),
        format!(
            "kernel.apparmor_restrict_unprivileged_userns = {}",
            show(f.apparmor_restrict)
        ),
    ];
    if f.is_root {
        details.push("running as root: the two unprivileged_* switches do not apply".into());
    }
    let row = |status, summary: &str, details: Vec<String>| {
        let mut r = Row::new("userns", "sandbox", status, summary);
        r.details = details;
        r
    };
    if f.max_user_namespaces == Some(0) {
        return row(Status::Warn, "user namespaces are disabled (user.max_user_namespaces = 0)", details)
            .fix("sudo sysctl -w user.max_user_namespaces=15000 (persist it in /etc/sysctl.d/); without it only the landlock tier can sandbox");
    }
    if f.is_root {
        return row(Status::Ok, "user namespaces are available (root)", details);
    }
    if f.unprivileged_userns_clone == Some(0) {
        return row(
            Status::Warn,
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)",
            details,
        )
        .fix("sudo sysctl -w kernel.unprivileged_userns_clone=1 (persist it in /etc/sysctl.d/), or install bwrap setuid root");
    }
    if f.apparmor_restrict == Some(1) {
        return row(
            Status::Warn,
            "AppArmor restricts unprivileged user namespaces to profiled programs",
            details,
        )
        .fix(APPARMOR_FIX);
    }
    row(
        Status::Ok,
        "unprivileged user namespaces are available",
        details,
    )
}

fn show(v: Option<i64>) -> String {
    v.map(|v| v.to_string())
        .unwrap_or_else(|| "(absent)".into())
}

/// Why this bwrap: configured, the bundled Nix one, or the system one the
/// flake's `system-first` order prefers (see docs/INSTALL.md).
pub fn bwrap_origin(
    found: &Path,
    configured: bool,
    nix_bwrap: Option<&Path>,
    order: Option<&str>,
) -> String {
    if configured {
        return "configured by [sandbox] bwrap_path".into();
    }
    match nix_bwrap {
        Some(nix) if nix == found => {
            "the bundled Nix bwrap (CODEWHALE_NIX_BWRAP): no other bwrap on PATH".into()
        }
        Some(nix) => format!(
            "your system bwrap, preferred over the bundled {} (CODEWHALE_BWRAP_ORDER={})",
            nix.display(),
            order.unwrap_or("unset")
        ),
        None => {
            "the first trustworthy bwrap on PATH (codewhale was not installed by its Nix flake)"
                .into()
        }
    }
}

/// The configured sandbox mode. The probes always use `workspace-write`,
/// so a configuration that turns the sandbox off must be said here.
pub fn mode(mode: SandboxMode) -> Row {
    let id = "sandbox.mode";
    match mode {
        SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite => Row::new(
            id,
            "config",
            Status::Ok,
            format!("configured sandbox mode: {mode}"),
        ),
        SandboxMode::DangerFullAccess => Row::new(
            id,
            "config",
            Status::Warn,
            "configured sandbox mode danger-full-access: commands run WITHOUT a sandbox (the probes below show what workspace-write would enforce)",
        )
        .fix("set sandbox_mode = \"workspace-write\" in the config"),
        SandboxMode::ExternalSandbox => Row::new(
            id,
            "config",
            Status::Warn,
            "configured sandbox mode external-sandbox: codewhale enforces nothing itself; isolation must come from outside",
        ),
    }
}

/// The Windows row: no OS sandbox, said plainly.
pub fn windows_row() -> Row {
    Row::new(
        "os-sandbox",
        "sandbox",
        Status::Fail,
        crate::host::windows::NO_SANDBOX_NOTICE,
    )
    .fix("run codewhale inside WSL2 (Linux sandbox), or accept running unsandboxed with --allow-unsandboxed (labelled `unsandboxed`)")
}

/// The container / WSL row.
pub fn container(kind: Option<&str>) -> Row {
    match kind {
        None => Row::new(
            "container",
            "platform",
            Status::Ok,
            "not inside a container or WSL",
        ),
        Some(k) => Row::new(
            "container",
            "platform",
            Status::Ok,
            format!("running inside {k}"),
        )
        .detail(super::parse::container_meaning(k)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn facts(max: i64, clone: Option<i64>, aa: Option<i64>, root: bool) -> UsernsFacts {
        UsernsFacts {
            max_user_namespaces: Some(max),
            unprivileged_userns_clone: clone,
            apparmor_restrict: aa,
            is_root: root,
        }
    }

    #[test]
    fn userns_verdicts() {
        let ok = userns(&facts(63229, None, None, false));
        assert_eq!(ok.status, Status::Ok);
        assert!(ok.remediation.is_none());

        let off = userns(&facts(0, None, None, true));
        assert_eq!(off.status, Status::Warn);
        assert!(off
            .remediation
            .unwrap()
            .contains("user.max_user_namespaces"));

        let aa = userns(&facts(63229, Some(1), Some(1), false));
        assert_eq!(aa.status, Status::Warn);
        assert!(aa
            .remediation
            .unwrap()
            .contains("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"));

        let aa_root = userns(&facts(63229, Some(1), Some(1), true));
        assert_eq!(aa_root.status, Status::Ok, "root is not restricted");

        let clone = userns(&facts(63229, Some(0), None, false));
        assert_eq!(clone.status, Status::Warn);
        assert!(clone
            .remediation
            .unwrap()
            .contains("kernel.unprivileged_userns_clone=1"));
        assert!(clone.details.iter().any(|d| d.contains("= 0")));
    }

    #[test]
    fn bwrap_origins() {
        let sys = PathBuf::from("/usr/bin/bwrap");
        let nix = PathBuf::from("/nix/store/abc-bubblewrap/bin/bwrap");
        assert!(bwrap_origin(&sys, true, Some(&nix), None).contains("bwrap_path"));
        assert!(bwrap_origin(&nix, false, Some(&nix), Some("system-first")).contains("bundled Nix"));
        let s = bwrap_origin(&sys, false, Some(&nix), Some("system-first"));
        assert!(
            s.contains("system bwrap") && s.contains("system-first"),
            "{s}"
        );
        assert!(bwrap_origin(&sys, false, None, None).contains("not installed by its Nix flake"));
    }

    #[test]
    fn modes() {
        assert_eq!(mode(SandboxMode::WorkspaceWrite).status, Status::Ok);
        let d = mode(SandboxMode::DangerFullAccess);
        assert_eq!(d.status, Status::Warn);
        assert!(d.summary.contains("WITHOUT a sandbox"));
        assert_eq!(mode(SandboxMode::ExternalSandbox).status, Status::Warn);
    }

    #[test]
    fn windows_is_plain() {
        let r = windows_row();
        assert_eq!(r.status, Status::Fail);
        assert!(r.summary.contains("no OS sandbox"));
    }
}
