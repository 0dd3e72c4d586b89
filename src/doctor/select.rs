//! Which backend the host would use here — the single place doctor asks.
//!
//! It renders the host's own pure [`crate::host::select`] (the same value a
//! run dispatches on), with bwrap's state taken from its functional probe
//! (cached per process): bwrap if the probe passes, else the landlock tier
//! if the kernel enforces Landlock, else nothing (runs fail with 125).

use crate::host::select::{BwrapState, Facts, Os};
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

/// The fix for a missing bubblewrap.
const BWRAP_FIX: &str = "install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap) and make sure user namespaces are allowed (see the userns row)";

/// One line per backend the facts speak of.
fn considered(f: &Facts) -> Vec<String> {
    let bwrap = match &f.bwrap {
        BwrapState::Works => "bwrap: ok".to_string(),
        BwrapState::Untried => "bwrap: not probed".to_string(),
        BwrapState::Broken(r) => format!("bwrap: {r}"),
    };
    let landlock = match &f.landlock {
        Ok(()) => "landlock: ok".to_string(),
        Err(e) => format!("landlock: {e}"),
    };
    vec![bwrap, landlock]
}

/// The backend `--backend auto` selects on this host.
pub fn auto_backend(policy: &SandboxPolicy, settings: &HostSettings) -> Selection {
    let settings = HostSettings {
        backend: BackendChoice::Auto,
        ..settings.clone()
    };
    configured_backend(policy, &settings)
}

/// The backend for the configured choice (`[sandbox] backend`): the host's
/// own [`crate::host::select`], with bwrap's state from a functional probe
/// (running `true` under it, cached per process) instead of a run's.
pub fn configured_backend(policy: &SandboxPolicy, settings: &HostSettings) -> Selection {
    match settings.backend {
        BackendChoice::Opensandbox => {
            return Selection::none(
                "configured backend opensandbox is remote: doctor does not probe it yet",
                None,
                vec![],
            )
        }
        BackendChoice::None => {
            return Selection::none(
                "configured backend none: commands run without a sandbox",
                Some("set [sandbox] backend = \"auto\"".into()),
                vec![],
            )
        }
        BackendChoice::Auto | BackendChoice::Seatbelt if cfg!(target_os = "macos") => {
            return Selection::none(
                "doctor does not probe Seatbelt runs yet",
                Some("see the seatbelt row: sandbox-exec itself is checked".into()),
                vec!["seatbelt: not probed".into()],
            )
        }
        _ => {}
    }
    let auto = settings.backend == BackendChoice::Auto;
    let (sel, facts) = crate::host::dispatch::probed_selection(policy, settings);
    let considered = considered(&facts);
    let bwrap_why = match &facts.bwrap {
        BwrapState::Broken(r) => r.clone(),
        _ => String::new(),
    };
    match sel {
        Ok(s) if s.backend == BackendKind::Bwrap => Selection {
            chosen: Some(BackendKind::Bwrap),
            reason: if auto {
                "bwrap started and ran the probe command".into()
            } else {
                "configured backend bwrap started".into()
            },
            remedy: None,
            considered,
        },
        Ok(s) if s.backend == BackendKind::Landlock => Selection {
            chosen: Some(BackendKind::Landlock),
            reason: if auto {
                format!(
                    "bwrap unavailable ({bwrap_why}); the landlock tier (no namespaces) enforces what the kernel allows"
                )
            } else {
                "configured backend landlock: the kernel enforces Landlock".into()
            },
            remedy: auto.then(|| BWRAP_FIX.into()),
            considered,
        },
        Ok(s) => Selection::none(s.why, Some(BWRAP_FIX.into()), considered),
        Err(HostError::Unavailable {
            backend,
            reason,
            remedy,
        }) => Selection::none(
            format!("configured backend {backend}: {reason}"),
            remedy.or_else(|| Some("set [sandbox] backend = \"auto\"".into())),
            considered,
        ),
        Err(HostError::NoBackend { reason, remedy }) if facts.os == Os::Linux => Selection::none(
            format!("no sandbox: {reason}"),
            Some(format!(
                "{BWRAP_FIX}; or {}",
                remedy.unwrap_or_else(|| facts.landlock_remedy.clone())
            )),
            considered,
        ),
        Err(HostError::NoBackend { reason, remedy }) => {
            Selection::none(reason, remedy, vec!["none: no OS sandbox here".into()])
        }
        Err(e) => Selection::none(e.to_string(), None, considered),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
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
        match crate::host::dispatch::landlock_available() {
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
