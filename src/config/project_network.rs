//! The project override's `[sandbox] network`: it may only shrink what the
//! user (config + command line) allowed. Applied after the command line,
//! like the override's `sandbox_mode`, with [`NetworkPolicy::restrict`]:
//! the mode only goes down (on → allowlist → off), deny entries are added,
//! an allow entry is kept only where a user entry covers it, and limits
//! only go down. Everything refused is reported as an [`IgnoredKey`].

use std::path::Path;

use super::network::NetworkSetting;
use super::project::IgnoredKey;
use crate::net::{EgressSpec, NetworkMode, NetworkPolicy};
use crate::policy::SandboxPolicy;

/// What the project asked for, in `restrict`'s terms.
struct Ask<'a> {
    mode: Option<NetworkMode>,
    allow: Option<&'a [String]>,
    deny: &'a [String],
    max_bytes: Option<u64>,
    per_second: Option<u32>,
    burst: Option<u32>,
}

fn ask(setting: &NetworkSetting) -> Ask<'_> {
    match setting {
        NetworkSetting::Mode(m) => Ask {
            mode: Some(*m),
            allow: None,
            deny: &[],
            max_bytes: None,
            per_second: None,
            burst: None,
        },
        NetworkSetting::Table(t) => {
            // A table without `mode` and with an allow list asks for an
            // allow-list; one with only `deny` or limits keeps the mode.
            let mode = t
                .mode
                .or((!t.allow.is_empty()).then_some(NetworkMode::Allowlist));
            let allow = (mode == Some(NetworkMode::Allowlist)).then_some(t.allow.as_slice());
            Ask {
                mode,
                allow,
                deny: &t.deny,
                max_bytes: t.max_bytes,
                per_second: t.connections_per_second,
                burst: t.connection_burst,
            }
        }
    }
}

/// The user's network as a policy (allowlist: its spec's lists).
fn user_policy(policy: &SandboxPolicy) -> Result<NetworkPolicy, crate::net::PolicyError> {
    match (policy.network_mode(), &policy.egress) {
        (NetworkMode::Allowlist, Some(spec)) => spec.policy(),
        (mode, _) => NetworkPolicy::new(mode, &[], &[]),
    }
}

/// Shrink `policy`'s network by the project's `setting` (from `file`).
pub fn apply(file: &Path, setting: &NetworkSetting, policy: &mut SandboxPolicy) -> Vec<IgnoredKey> {
    let note = |key: &str, reason: String| IgnoredKey {
        file: file.to_path_buf(),
        key: key.to_string(),
        reason,
    };
    let a = ask(setting);
    let before = policy.network_mode();
    let restricted = user_policy(policy).and_then(|u| u.restrict(a.mode, a.allow, a.deny));
    let (shrunk, refused) = match restricted {
        Ok(x) => x,
        Err(e) => {
            // Cannot happen for validated settings; fail closed if it does.
            policy.network = false;
            policy.egress = None;
            return vec![note(
                "sandbox.network",
                format!("could not be combined with the user's network setting ({e}); the network is off"),
            )];
        }
    };
    let mut ignored = Vec::new();
    for r in refused {
        if r.starts_with("network = ") {
            ignored.push(note(
                "sandbox.network.mode",
                format!("{r} would loosen `{before}` (a project may only shrink the network)"),
            ));
        } else {
            ignored.push(note(
                "sandbox.network.allow",
                format!(
                    "`{r}` is not covered by the user's allow list (a project may only shrink it)"
                ),
            ));
        }
    }
    match shrunk.mode {
        NetworkMode::On => {}
        NetworkMode::Off => {
            policy.network = false;
            policy.egress = None;
        }
        NetworkMode::Allowlist => {
            let old = policy.egress.take();
            let entries = |v: &[crate::net::HostPattern]| -> Vec<String> {
                v.iter().map(|p| p.entry().to_string()).collect()
            };
            let mut spec = EgressSpec::new(entries(shrunk.allow()), entries(shrunk.deny()));
            if let Some(o) = old {
                spec.max_bytes = o.max_bytes;
                spec.per_second = o.per_second;
                spec.burst = o.burst;
            }
            let mut lower = |key: &str, cur: &mut u64, theirs: Option<u64>| match theirs {
                Some(t) if t <= *cur => *cur = t,
                Some(t) => ignored.push(note(
                    key,
                    format!("{t} would raise the limit of {cur} (a project may only lower it)"),
                )),
                None => {}
            };
            lower(
                "sandbox.network.max_bytes",
                &mut spec.max_bytes,
                a.max_bytes,
            );
            let (mut ps, mut b) = (u64::from(spec.per_second), u64::from(spec.burst));
            lower(
                "sandbox.network.connections_per_second",
                &mut ps,
                a.per_second.map(u64::from),
            );
            lower(
                "sandbox.network.connection_burst",
                &mut b,
                a.burst.map(u64::from),
            );
            spec.per_second = u32::try_from(ps).unwrap_or(u32::MAX);
            spec.burst = u32::try_from(b).unwrap_or(u32::MAX);
            policy.network = false;
            policy.egress = Some(spec);
        }
    }
    ignored
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::policy::SandboxMode;

    fn setting(toml_text: &str) -> NetworkSetting {
        #[derive(serde::Deserialize)]
        struct S {
            network: NetworkSetting,
        }
        toml::from_str::<S>(toml_text).unwrap().network
    }

    fn allowlist(allow: &[&str]) -> SandboxPolicy {
        let mut p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        p.egress = Some(EgressSpec::new(
            allow.iter().map(|s| s.to_string()).collect(),
            Vec::new(),
        ));
        p
    }

    #[test]
    fn a_project_cannot_add_a_host_or_loosen_the_mode() {
        let f = Path::new("/repo/.codewhale/config.toml");
        let mut p = allowlist(&["@registries", "github.com"]);
        let notes = apply(
            f,
            &setting("[network]\nallow = [\"crates.io\", \"evil.example\"]\ndeny = [\"static.crates.io\"]"),
            &mut p,
        );
        let spec = p.egress.as_ref().unwrap();
        assert_eq!(spec.allow, vec!["crates.io"]);
        assert_eq!(spec.deny, vec!["static.crates.io"]);
        assert!(!p.network);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].key, "sandbox.network.allow");
        assert!(
            notes[0].to_string().contains("evil.example"),
            "{}",
            notes[0]
        );

        let mut p = allowlist(&["crates.io"]);
        let notes = apply(f, &setting("network = \"on\""), &mut p);
        assert_eq!(p.network_mode(), NetworkMode::Allowlist);
        assert_eq!(p.egress.as_ref().unwrap().allow, vec!["crates.io"]);
        assert_eq!(notes[0].key, "sandbox.network.mode");

        let mut off = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        let notes = apply(f, &setting("[network]\nallow = [\"crates.io\"]"), &mut off);
        assert_eq!(off.network_mode(), NetworkMode::Off);
        assert_eq!(notes[0].key, "sandbox.network.mode");
    }

    #[test]
    fn a_project_may_shrink_on_to_a_list_or_off_and_lower_limits() {
        let f = Path::new("/repo/.codewhale/config.toml");
        let mut on = SandboxPolicy::new(SandboxMode::DangerFullAccess, "/ws");
        assert!(on.network);
        let notes = apply(
            f,
            &setting("[network]\nallow = [\"pypi.org\"]\nmax_bytes = 5"),
            &mut on,
        );
        assert!(notes.is_empty(), "{notes:?}");
        let spec = on.egress.as_ref().unwrap();
        assert_eq!(
            (on.network, spec.allow.clone(), spec.max_bytes),
            (false, vec!["pypi.org".to_string()], 5)
        );

        let mut p = allowlist(&["crates.io"]);
        let notes = apply(
            f,
            &setting("[network]\ndeny = [\"evil.example\"]\nmax_bytes = 99999999999"),
            &mut p,
        );
        assert_eq!(p.egress.as_ref().unwrap().deny, vec!["evil.example"]);
        assert_eq!(p.egress.as_ref().unwrap().allow, vec!["crates.io"]);
        assert_eq!(notes[0].key, "sandbox.network.max_bytes");

        let mut p = allowlist(&["crates.io"]);
        apply(f, &setting("network = false"), &mut p);
        assert_eq!(p.network_mode(), NetworkMode::Off);
    }
}
