//! Which backend the host would use here — the single place doctor asks.
//!
//! `auto` on Linux is the host's own decision (`host::select_auto`): bwrap
//! if its functional probe passes (cached per process), else the landlock
//! tier if the kernel enforces Landlock, else nothing (runs fail with 125).

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

/// The fix for a missing bubblewrap.
const BWRAP_FIX: &str = "install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap) and make sure user namespaces are allowed (see the userns row)";

/// The backend `--backend auto` selects on this host.
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
            "doctor does not probe Seatbelt runs yet",
            Some("see the seatbelt row: sandbox-exec itself is checked".into()),
            vec!["seatbelt: not probed".into()],
        );
    }
    let sel = crate::host::select_auto::select_auto(policy, settings);
    let considered: Vec<String> = sel
        .considered
        .iter()
        .map(|(k, r)| match r {
            Ok(()) => format!("{k}: ok"),
            Err(e) => format!("{k}: {e}"),
        })
        .collect();
    let why_not = |kind: BackendKind| {
        sel.considered
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, r)| r.clone().err())
            .unwrap_or_default()
    };
    match sel.chosen {
        Some(BackendKind::Bwrap) => Selection {
            chosen: Some(BackendKind::Bwrap),
            reason: "bwrap started and ran the probe command".into(),
            remedy: None,
            considered,
        },
        Some(BackendKind::Landlock) => Selection {
            chosen: Some(BackendKind::Landlock),
            reason: format!(
                "bwrap unavailable ({}); the landlock tier (no namespaces) enforces what the kernel allows",
                why_not(BackendKind::Bwrap)
            ),
            remedy: Some(BWRAP_FIX.into()),
            considered,
        },
        _ => Selection::none(
            format!(
                "no sandbox: bwrap unavailable ({}); landlock unavailable ({})",
                why_not(BackendKind::Bwrap),
                why_not(BackendKind::Landlock)
            ),
            Some(format!(
                "{BWRAP_FIX}; or run on a kernel with Landlock enabled (Linux 5.13+, `lsm=landlock,…` on the kernel command line)"
            )),
            considered,
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
        BackendChoice::Landlock => match crate::host::select_auto::landlock_available() {
            Ok(()) => Selection {
                chosen: Some(BackendKind::Landlock),
                reason: "configured backend landlock: the kernel enforces Landlock".into(),
                remedy: None,
                considered: vec!["landlock (configured): ok".into()],
            },
            Err(why) => Selection::none(
                format!("configured backend landlock: {why}"),
                Some("set [sandbox] backend = \"auto\"".into()),
                vec![],
            ),
        },
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
        // Landlock: chosen exactly when the kernel (and the test seam) allow it.
        let l = with(BackendChoice::Landlock);
        match crate::host::select_auto::landlock_available() {
            Ok(()) => assert_eq!(l.chosen, Some(BackendKind::Landlock)),
            Err(why) => {
                assert_eq!(l.chosen, None);
                assert!(l.reason.contains(&why), "{}", l.reason);
                assert!(l.remedy.is_some());
            }
        }

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
