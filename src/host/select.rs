//! Pure backend selection: [`select`] turns the mode, the backend asked
//! for and what is known about this machine ([`Facts`]) into a
//! [`Selection`] — the backend a run uses, what it falls back to when that
//! backend's set-up fails before the command starts, and why. No I/O: it
//! compiles and is tested for every OS; `doctor`, `sandbox explain` and the
//! dispatcher ([`super::dispatch`]) all render or run the same value.
//!
//! Rules:
//! - `danger-full-access` / `external-sandbox` ask for no local sandbox:
//!   backend `none`, labelled so (never silently).
//! - An explicit `--backend` is used as asked (no probing, no fallback);
//!   `--backend none` is an explicit request to run unsandboxed.
//! - `--backend auto`: Linux bwrap → landlock tier → unavailable; macOS
//!   Seatbelt; Windows and other OSes have no backend. bwrap is not probed
//!   first (the hot path): it runs the command, and only its *set-up*
//!   failure (typed: [`super::HostError::Unavailable`] naming bwrap, the
//!   command never started) moves on to the fallback, which the dispatcher
//!   gets by selecting again with that failure in the facts.
//! - Nothing falls back to unsandboxed silently: that needs
//!   `allow_unsandboxed`, and the label says so.

use super::{BackendChoice, BackendKind, HostError};
use crate::policy::SandboxMode;
use serde::Serialize;

/// The operating system selection is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Os {
    Linux,
    Macos,
    Windows,
    Other,
}

impl Os {
    /// The OS this binary was built for.
    pub fn current() -> Self {
        if cfg!(target_os = "linux") {
            Os::Linux
        } else if cfg!(target_os = "macos") {
            Os::Macos
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Other
        }
    }
}

/// What is known about bubblewrap in this process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "reason")]
pub enum BwrapState {
    /// Not tried yet: `auto` runs the command under it directly.
    Untried,
    /// A run or probe worked.
    Works,
    /// Its set-up failed (the command never started): why.
    Broken(String),
}

/// The facts selection depends on (gathered by the dispatcher or doctor).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Facts {
    pub os: Os,
    pub bwrap: BwrapState,
    /// The landlock tier's availability (kernel ABI, the test seam).
    pub landlock: Result<(), String>,
    /// The fix to suggest when Landlock is missing.
    pub landlock_remedy: String,
    /// Whether an `[opensandbox]` section is configured.
    pub opensandbox_configured: bool,
}

impl Facts {
    /// The same facts, after `backend`'s set-up failed with `reason`.
    pub fn with_failure(mut self, backend: BackendKind, reason: &str) -> Self {
        match backend {
            BackendKind::Bwrap => self.bwrap = BwrapState::Broken(reason.to_string()),
            BackendKind::Landlock => self.landlock = Err(reason.to_string()),
            _ => {}
        }
        self
    }
}

/// Why the run has no sandbox, when it has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unsandboxed {
    /// `danger-full-access`: no sandbox by request.
    FullAccess,
    /// `external-sandbox`: isolation is provided outside codewhale.
    External,
    /// `--backend none`, or nothing available and `allow_unsandboxed`.
    Allowed,
}

/// What a run will use, what it falls back to, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Selection {
    pub backend: BackendKind,
    /// The backend a set-up failure of `backend` moves to (`auto` only).
    pub fallback: Option<BackendKind>,
    /// Set when `backend` is `none`.
    pub unsandboxed: Option<Unsandboxed>,
    /// One line: why this backend.
    pub why: String,
}

impl Selection {
    fn new(backend: BackendKind, why: impl Into<String>) -> Self {
        Selection {
            backend,
            fallback: None,
            unsandboxed: None,
            why: why.into(),
        }
    }

    fn none(kind: Unsandboxed, why: impl Into<String>) -> Self {
        Selection {
            unsandboxed: Some(kind),
            ..Selection::new(BackendKind::None, why)
        }
    }
}

fn only_on(backend: BackendKind, os: &str) -> HostError {
    HostError::Unavailable {
        backend,
        reason: format!("the {backend} backend exists only on {os}"),
        remedy: Some(
            "use --backend auto (bwrap or the landlock tier on Linux, Seatbelt on macOS)".into(),
        ),
    }
}

/// Select the backend for a run (see the module docs).
pub fn select(
    mode: SandboxMode,
    choice: BackendChoice,
    allow_unsandboxed: bool,
    facts: &Facts,
) -> Result<Selection, HostError> {
    match mode {
        SandboxMode::DangerFullAccess => {
            return Ok(Selection::none(
                Unsandboxed::FullAccess,
                "danger-full-access: no sandbox by request",
            ))
        }
        SandboxMode::ExternalSandbox => {
            return Ok(Selection::none(
                Unsandboxed::External,
                "external-sandbox: isolation is provided outside codewhale",
            ))
        }
        SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite => {}
    }
    match choice {
        BackendChoice::None => Ok(Selection::none(
            Unsandboxed::Allowed,
            "--backend none requested",
        )),
        BackendChoice::Opensandbox if facts.opensandbox_configured => Ok(Selection::new(
            BackendKind::Opensandbox,
            "--backend opensandbox: the configured deployment",
        )),
        BackendChoice::Opensandbox => Err(HostError::Unavailable {
            backend: BackendKind::Opensandbox,
            reason: "no [opensandbox] configuration".into(),
            remedy: Some(
                "add an [opensandbox] section with url (and api_key or OPEN_SANDBOX_API_KEY) to the config".into(),
            ),
        }),
        BackendChoice::Bwrap if facts.os == Os::Linux => {
            Ok(Selection::new(BackendKind::Bwrap, "--backend bwrap"))
        }
        BackendChoice::Bwrap => Err(only_on(BackendKind::Bwrap, "Linux")),
        BackendChoice::Landlock if facts.os == Os::Linux => landlock_or(
            facts,
            allow_unsandboxed,
            "--backend landlock".into(),
            || {
                Err(HostError::Unavailable {
                    backend: BackendKind::Landlock,
                    reason: facts.landlock.clone().err().unwrap_or_default(),
                    remedy: Some(facts.landlock_remedy.clone()),
                })
            },
        ),
        BackendChoice::Landlock => Err(only_on(BackendKind::Landlock, "Linux")),
        BackendChoice::Seatbelt if facts.os == Os::Macos => {
            Ok(Selection::new(BackendKind::Seatbelt, "--backend seatbelt"))
        }
        BackendChoice::Seatbelt => Err(only_on(BackendKind::Seatbelt, "macOS")),
        BackendChoice::Auto => auto(facts, allow_unsandboxed),
    }
}

/// The landlock tier if available, else unsandboxed when allowed, else `none`.
fn landlock_or(
    facts: &Facts,
    allow_unsandboxed: bool,
    why: String,
    none: impl FnOnce() -> Result<Selection, HostError>,
) -> Result<Selection, HostError> {
    match &facts.landlock {
        Ok(()) => Ok(Selection::new(BackendKind::Landlock, why)),
        Err(ll) if allow_unsandboxed => Ok(Selection::none(
            Unsandboxed::Allowed,
            format!("landlock tier unavailable ({ll}); --allow-unsandboxed given"),
        )),
        Err(_) => none(),
    }
}

fn auto(facts: &Facts, allow_unsandboxed: bool) -> Result<Selection, HostError> {
    match facts.os {
        Os::Linux => match &facts.bwrap {
            BwrapState::Untried | BwrapState::Works => {
                let mut s = Selection::new(BackendKind::Bwrap, "auto: bubblewrap");
                // What a set-up failure of bwrap would move to.
                let after = facts.clone().with_failure(BackendKind::Bwrap, "set-up failed");
                s.fallback = auto(&after, allow_unsandboxed).ok().map(|f| f.backend);
                Ok(s)
            }
            BwrapState::Broken(bw) => landlock_or(
                facts,
                allow_unsandboxed,
                format!("auto: bubblewrap unavailable ({bw}); fell back to the landlock tier"),
                || {
                    let ll = facts.landlock.clone().err().unwrap_or_default();
                    Err(HostError::NoBackend {
                        reason: format!("bwrap: {bw}; landlock: {ll}"),
                        remedy: Some(format!(
                            "either make bubblewrap work, or {}",
                            facts.landlock_remedy
                        )),
                    })
                },
            )
            .map(|mut s| {
                if s.backend == BackendKind::None {
                    s.why = format!(
                        "no sandbox available (bwrap: {bw}; landlock: {}); --allow-unsandboxed given",
                        facts.landlock.clone().err().unwrap_or_default()
                    );
                }
                s
            }),
        },
        Os::Macos => Ok(Selection::new(BackendKind::Seatbelt, "auto: Seatbelt")),
        Os::Windows | Os::Other if allow_unsandboxed => Ok(Selection::none(
            Unsandboxed::Allowed,
            "no OS sandbox backend on this OS; --allow-unsandboxed given",
        )),
        Os::Windows | Os::Other => Err(HostError::NoBackend {
            reason: if facts.os == Os::Windows {
                super::windows::NO_SANDBOX_NOTICE.to_string()
            } else {
                "codewhale has no OS sandbox backend on this OS".to_string()
            },
            remedy: Some(
                "pass --allow-unsandboxed to run anyway (labelled `unsandboxed`), or use --sandbox danger-full-access knowingly".into(),
            ),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "select_tests.rs"]
mod tests;
