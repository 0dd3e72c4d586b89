//! Which backend the host would use here — the single place doctor asks.
//!
//! Today: `auto` on Linux = bwrap if its functional probe passes
//! (`host::select::probe_bwrap`, cached per process), otherwise nothing,
//! because the landlock tier is not part of this build. When the tier
//! lands, the body of [`auto_backend`] becomes a call to
//! `host::select::select_auto(policy, settings)` and nothing else in
//! doctor changes.

use crate::host::{BackendChoice, BackendKind, HostError, HostSettings};
use crate::policy::SandboxPolicy;

/// The answer: the backend chosen (if any), why, and what was considered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub chosen: Option<BackendKind>,
    pub reason: String,
    pub remedy: Option<String>,
    /// One line per backend looked at, in order.
    pub considered: Vec<String>,
}

impl Selection {
    fn none(reason: impl Into<String>, remedy: Option<String>, considered: Vec<String>) -> Self {
        Selection {
            chosen: None,
            reason: reason.into(),
            remedy,
            considered,
        }
    }
}

fn unavailable_parts(e: HostError) -> (String, Option<String>) {
    match e {
        HostError::Unavailable { reason, remedy, .. } => (reason, remedy),
        other => (other.to_string(), None),
    }
}

/// bwrap, proven by running `true` under it (the host's cached probe).
fn try_bwrap(
    policy: &SandboxPolicy,
    settings: &HostSettings,
) -> Result<(), (String, Option<String>)> {
    if cfg!(not(target_os = "linux")) {
        return Err(("bubblewrap exists only on Linux".into(), None));
    }
    crate::host::select::probe_bwrap(policy, settings).map_err(unavailable_parts)
}

const NO_TIER: &str = "landlock tier not available in this build";

/// The backend `--backend auto` selects on this host (swap point for
/// `host::select::select_auto` at the tier merge).
pub fn auto_backend(policy: &SandboxPolicy, settings: &HostSettings) -> Selection {
    if cfg!(target_os = "windows") {
        return Selection::none(
            crate::host::windows::NO_SANDBOX_NOTICE,
            None,
            vec!["none: Windows has no OS sandbox".into()],
        );
    }
    if cfg!(target_os = "macos") {
        return Selection::none(
            "the Seatbelt backend is not wired into host::run in this build",
            Some("see the seatbelt row: sandbox-exec itself is checked".into()),
            vec!["seatbelt: run path not wired".into()],
        );
    }
    match try_bwrap(policy, settings) {
        Ok(()) => Selection {
            chosen: Some(BackendKind::Bwrap),
            reason: "bwrap started and ran the probe command".into(),
            remedy: None,
            considered: vec!["bwrap: ok".into()],
        },
        Err((why, remedy)) => Selection::none(
            format!("bwrap unavailable ({why}); {NO_TIER}"),
            Some(remedy.unwrap_or_else(|| {
                "install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap) and make sure user namespaces are allowed (see the userns row)".into()
            })),
            vec![format!("bwrap: {why}"), format!("landlock: {NO_TIER}")],
        ),
    }
}

/// The backend for the configured choice (`[sandbox] backend`).
pub fn configured_backend(policy: &SandboxPolicy, settings: &HostSettings) -> Selection {
    match settings.backend {
        BackendChoice::Auto => auto_backend(policy, settings),
        BackendChoice::Bwrap => match try_bwrap(policy, settings) {
            Ok(()) => Selection {
                chosen: Some(BackendKind::Bwrap),
                reason: "configured backend bwrap started".into(),
                remedy: None,
                considered: vec!["bwrap (configured): ok".into()],
            },
            Err((why, remedy)) => {
                Selection::none(format!("configured backend bwrap: {why}"), remedy, vec![])
            }
        },
        BackendChoice::Landlock => Selection::none(
            format!("configured backend landlock: {NO_TIER}"),
            Some("set [sandbox] backend = \"auto\"".into()),
            vec![],
        ),
        BackendChoice::Seatbelt if cfg!(not(target_os = "macos")) => Selection::none(
            "configured backend seatbelt exists only on macOS",
            Some("set [sandbox] backend = \"auto\"".into()),
            vec![],
        ),
        BackendChoice::Seatbelt => auto_backend(policy, settings),
        BackendChoice::Opensandbox => Selection::none(
            "configured backend opensandbox is remote: doctor does not probe it yet",
            None,
            vec![],
        ),
        BackendChoice::None => Selection::none(
            "configured backend none: commands run without a sandbox",
            Some("set [sandbox] backend = \"auto\"".into()),
            vec![],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(backend: BackendChoice) -> Selection {
        let policy = SandboxPolicy::new(crate::policy::SandboxMode::WorkspaceWrite, "/nonexistent");
        let settings = HostSettings {
            backend,
            ..Default::default()
        };
        configured_backend(&policy, &settings)
    }

    #[test]
    fn explicit_choices_that_cannot_sandbox_here_select_nothing_with_a_reason() {
        let l = with(BackendChoice::Landlock);
        assert_eq!(l.chosen, None);
        assert!(l.reason.contains(NO_TIER), "{}", l.reason);
        assert!(l.remedy.is_some());

        let n = with(BackendChoice::None);
        assert_eq!(n.chosen, None);
        assert!(n.reason.contains("without a sandbox"));

        let o = with(BackendChoice::Opensandbox);
        assert_eq!(o.chosen, None);
        assert!(o.reason.contains("remote"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn seatbelt_on_linux_is_refused() {
        let s = with(BackendChoice::Seatbelt);
        assert_eq!(s.chosen, None);
        assert!(s.reason.contains("only on macOS"));
    }
}
