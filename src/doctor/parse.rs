//! Pure parsers for the facts doctor reads from the host: `/proc/self/status`,
//! sysctl files, os-release, container markers, `bwrap --version`.
//!
//! Kept free of I/O so every OS can unit-test them on fixture text; the
//! Linux checks only read the files and hand the text over.

/// The fields of `/proc/<pid>/status` doctor cares about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStatus {
    pub no_new_privs: Option<u8>,
    /// Effective capabilities (hex bitmask in the file).
    pub cap_eff: Option<u64>,
    /// Permitted capabilities.
    pub cap_prm: Option<u64>,
    /// 0 = off, 1 = strict, 2 = filter.
    pub seccomp: Option<u8>,
    pub seccomp_filters: Option<u32>,
}

impl ProcStatus {
    /// Parse the text of `/proc/<pid>/status`; unknown lines are ignored,
    /// malformed values leave the field `None`.
    pub fn parse(text: &str) -> Self {
        let mut s = ProcStatus::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let v = value.trim();
            match key.trim() {
                "NoNewPrivs" => s.no_new_privs = v.parse().ok(),
                "CapEff" => s.cap_eff = u64::from_str_radix(v, 16).ok(),
                "CapPrm" => s.cap_prm = u64::from_str_radix(v, 16).ok(),
                "Seccomp" => s.seccomp = v.parse().ok(),
                "Seccomp_filters" => s.seccomp_filters = v.parse().ok(),
                _ => {}
            }
        }
        s
    }
}

/// A sysctl file's value (`/proc/sys/...`): one integer, whitespace around.
pub fn sysctl_int(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

/// `PRETTY_NAME` (else `NAME` + `VERSION_ID`) from os-release text.
pub fn os_release_name(text: &str) -> Option<String> {
    let mut pretty = None;
    let mut name = None;
    let mut version = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = unquote(v.trim());
        match k.trim() {
            "PRETTY_NAME" => pretty = Some(v),
            "NAME" => name = Some(v),
            "VERSION_ID" => version = Some(v),
            _ => {}
        }
    }
    pretty
        .filter(|p| !p.is_empty())
        .or_else(|| match (name, version) {
            (Some(n), Some(v)) => Some(format!("{n} {v}")),
            (Some(n), None) => Some(n),
            _ => None,
        })
}

fn unquote(v: &str) -> String {
    let v = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v);
    v.replace("\\\"", "\"")
}

/// The raw markers a container or WSL leaves behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerMarkers {
    /// `/.dockerenv` exists.
    pub dockerenv: bool,
    /// `/run/.containerenv` exists (podman, buildah).
    pub containerenv: bool,
    /// The `container` environment variable (systemd-nspawn, lxc, podman set it).
    pub container_env: Option<String>,
    /// Text of `/proc/1/cgroup`.
    pub pid1_cgroup: String,
    /// Text of `/proc/sys/kernel/osrelease`.
    pub osrelease: String,
}

/// What we are running inside: `wsl`, `docker`, `podman`, `kubernetes`,
/// `lxc`, another `container=` value, or `None` for bare metal / a VM.
pub fn container_kind(m: &ContainerMarkers) -> Option<String> {
    let rel = m.osrelease.to_ascii_lowercase();
    if rel.contains("microsoft") || rel.contains("wsl") {
        return Some("wsl".into());
    }
    if m.containerenv {
        return Some("podman".into());
    }
    if m.dockerenv {
        return Some("docker".into());
    }
    let cg = m.pid1_cgroup.to_ascii_lowercase();
    if cg.contains("kubepods") {
        return Some("kubernetes".into());
    }
    if cg.contains("docker") || cg.contains("containerd") {
        return Some("docker".into());
    }
    if cg.contains("/lxc") || cg.contains("lxc.payload") {
        return Some("lxc".into());
    }
    m.container_env.clone().filter(|c| !c.trim().is_empty())
}

/// What running inside `kind` means for the sandbox (one sentence).
pub fn container_meaning(kind: &str) -> &'static str {
    match kind {
        "wsl" => "WSL2 runs a real Linux kernel: bwrap and Landlock work as on Linux if the WSL kernel enables them; WSL1 has no namespaces and no Landlock",
        "docker" | "podman" | "kubernetes" | "containerd" => "a nested sandbox needs the container to allow user namespaces and the mount syscalls (Docker's default seccomp profile and AppArmor block them); without that, only the landlock tier can work",
        _ => "a nested sandbox needs the container to allow unprivileged user namespaces; the probes below show whether it does",
    }
}

/// The version from `bwrap --version` output (`bubblewrap 0.9.0`).
pub fn bwrap_version(text: &str) -> Option<String> {
    let line = text.lines().next()?.trim();
    let v = line.strip_prefix("bubblewrap").unwrap_or(line).trim();
    (!v.is_empty()).then(|| v.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\n\
        CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n\
        CapBnd:\t000001ffffffffff\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";

    #[test]
    fn proc_status_in_a_sandbox() {
        let s = ProcStatus::parse(STATUS);
        assert_eq!(s.no_new_privs, Some(1));
        assert_eq!(s.cap_eff, Some(0));
        assert_eq!(s.cap_prm, Some(0));
        assert_eq!(s.seccomp, Some(2));
        assert_eq!(s.seccomp_filters, Some(1));
    }

    #[test]
    fn proc_status_as_root_and_malformed() {
        let s = ProcStatus::parse("CapEff:\t000001ffffffffff\nNoNewPrivs:\t0\nCapPrm:\tzz\n");
        assert_eq!(s.cap_eff, Some(0x1ff_ffff_ffff));
        assert_eq!(s.no_new_privs, Some(0));
        assert_eq!(s.cap_prm, None);
        assert_eq!(s.seccomp, None, "a kernel without seccomp has no line");
        assert_eq!(ProcStatus::parse(""), ProcStatus::default());
    }

    #[test]
    fn sysctl_values() {
        assert_eq!(sysctl_int("1\n"), Some(1));
        assert_eq!(sysctl_int(" 63229 \n"), Some(63229));
        assert_eq!(sysctl_int(""), None);
        assert_eq!(sysctl_int("yes"), None);
    }

    #[test]
    fn os_release_names() {
        let ubuntu = "NAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n";
        assert_eq!(
            os_release_name(ubuntu).as_deref(),
            Some("Ubuntu 24.04.1 LTS")
        );
        let bare = "NAME=NixOS\nVERSION_ID='24.11'\n";
        assert_eq!(os_release_name(bare).as_deref(), Some("NixOS 24.11"));
        assert_eq!(os_release_name("# nothing\n"), None);
    }

    #[test]
    fn container_markers() {
        let none = ContainerMarkers {
            pid1_cgroup: "0::/init.scope\n".into(),
            osrelease: "6.8.0-45-generic".into(),
            ..Default::default()
        };
        assert_eq!(container_kind(&none), None);
        let wsl = ContainerMarkers {
            osrelease: "5.15.153.1-microsoft-standard-WSL2".into(),
            ..Default::default()
        };
        assert_eq!(container_kind(&wsl).as_deref(), Some("wsl"));
        let docker = ContainerMarkers {
            dockerenv: true,
            ..Default::default()
        };
        assert_eq!(container_kind(&docker).as_deref(), Some("docker"));
        let k8s = ContainerMarkers {
            pid1_cgroup: "12:memory:/kubepods/burstable/pod1/abc\n".into(),
            ..Default::default()
        };
        assert_eq!(container_kind(&k8s).as_deref(), Some("kubernetes"));
        let podman = ContainerMarkers {
            containerenv: true,
            container_env: Some("podman".into()),
            ..Default::default()
        };
        assert_eq!(container_kind(&podman).as_deref(), Some("podman"));
        let nspawn = ContainerMarkers {
            container_env: Some("systemd-nspawn".into()),
            ..Default::default()
        };
        assert_eq!(container_kind(&nspawn).as_deref(), Some("systemd-nspawn"));
        assert!(container_meaning("docker").contains("user namespaces"));
    }

    #[test]
    fn bwrap_versions() {
        assert_eq!(
            bwrap_version("bubblewrap 0.9.0\n").as_deref(),
            Some("0.9.0")
        );
        assert_eq!(bwrap_version(""), None);
    }
}
