//! `--backend auto` and `--backend landlock` on Linux.
//!
//! Order: bwrap (with Landlock and seccomp inside) → the landlock tier →
//! unavailable. Unavailable fails closed (exit 125) with the missing kernel
//! feature and the fix, unless `allow_unsandboxed` was given (then the run
//! is labelled `unsandboxed` everywhere).
//!
//! The common case stays fast: `auto` runs the command under bwrap
//! directly, with no separate probe. Only when bwrap's *setup* failed —
//! bwrap missing, or it exited before the helper reported (which means the
//! command never ran), or the helper could not apply a protection — does it
//! fall back; that failure is remembered for the rest of the process so
//! later runs go straight to the landlock tier.
//!
//! [`select_auto`] answers the same question without running anything the
//! user asked for (a functional probe of bwrap running `true`, cached per
//! process), for `codewhale doctor`.

use super::request::{ExecOutcome, ExecRequest};
use super::select::{probe_bwrap, run_bwrap, run_unsandboxed};
use super::{BackendKind, HostError, HostSettings};
use crate::policy::SandboxPolicy;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// What `--backend auto` would choose here, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoSelection {
    /// The backend `auto` runs with: `Some(Bwrap)`, `Some(Landlock)`,
    /// `Some(None)` (nothing available and `allow_unsandboxed` given) or
    /// `None` (nothing available: runs fail with exit 125).
    pub chosen: Option<BackendKind>,
    /// Every backend considered, in order, with why it is unusable.
    pub considered: Vec<(BackendKind, Result<(), String>)>,
}

/// Decide what `auto` picks (functional bwrap probe, cached per process;
/// Landlock availability from the kernel ABI and the test seam).
pub fn select_auto(policy: &SandboxPolicy, settings: &HostSettings) -> AutoSelection {
    let bwrap = probe_bwrap(policy, settings).map_err(|e| reason_of(&e));
    let landlock = landlock_available();
    let chosen = if bwrap.is_ok() {
        Some(BackendKind::Bwrap)
    } else if landlock.is_ok() {
        Some(BackendKind::Landlock)
    } else if settings.allow_unsandboxed {
        Some(BackendKind::None)
    } else {
        None
    };
    AutoSelection {
        chosen,
        considered: vec![
            (BackendKind::Bwrap, bwrap),
            (BackendKind::Landlock, landlock),
        ],
    }
}

fn reason_of(e: &HostError) -> String {
    match e {
        HostError::Unavailable { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

#[cfg(target_os = "linux")]
pub fn landlock_available() -> Result<(), String> {
    super::backends::landlock::tier::available()
}

#[cfg(not(target_os = "linux"))]
pub fn landlock_available() -> Result<(), String> {
    Err("Landlock exists only on Linux".into())
}

/// bwrap setup failures seen in this process, by configured bwrap path.
fn broken_bwrap() -> &'static Mutex<HashMap<Option<PathBuf>, String>> {
    static BROKEN: OnceLock<Mutex<HashMap<Option<PathBuf>, String>>> = OnceLock::new();
    BROKEN.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `--backend auto` (see the module docs).
pub fn run_auto(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    let known = broken_bwrap()
        .lock()
        .ok()
        .and_then(|m| m.get(&settings.bwrap_path).cloned());
    let (bwrap_reason, bwrap_remedy) = match known {
        Some(reason) => (reason, None),
        None => match run_bwrap(policy, settings, req) {
            // Unavailable from the bwrap backend means the command did not
            // run (not found, refused, or setup failed before the helper
            // exec'd it): safe to run it elsewhere.
            Err(HostError::Unavailable {
                backend,
                reason,
                remedy,
            }) if backend == "bwrap" => {
                if let Ok(mut m) = broken_bwrap().lock() {
                    m.insert(settings.bwrap_path.clone(), reason.clone());
                }
                (reason, remedy)
            }
            other => return other,
        },
    };
    match landlock_available() {
        Ok(()) => {
            let note = format!(
                "auto: bubblewrap unavailable ({bwrap_reason}); fell back to the landlock tier"
            );
            run_landlock(policy, settings, req, Some(note))
        }
        Err(ll) if settings.allow_unsandboxed => run_unsandboxed(
            policy,
            req,
            &format!(
                "no sandbox available (bwrap: {bwrap_reason}; landlock: {ll}); --allow-unsandboxed given"
            ),
        ),
        Err(ll) => Err(HostError::Unavailable {
            backend: "auto".into(),
            reason: format!("no sandbox available: bwrap: {bwrap_reason}; landlock: {ll}"),
            remedy: Some(format!(
                "{}either make bubblewrap work, or {}",
                bwrap_remedy
                    .map(|r| format!("bwrap: {r}\n  "))
                    .unwrap_or_default(),
                landlock_remedy()
            )),
        }),
    }
}

#[cfg(target_os = "linux")]
fn landlock_remedy() -> &'static str {
    super::backends::landlock::tier::REMEDY
}

#[cfg(not(target_os = "linux"))]
fn landlock_remedy() -> &'static str {
    "pass --allow-unsandboxed to run without a sandbox (labelled unsandboxed)"
}

/// `--backend landlock` (and `auto`'s fallback, with `note` saying why).
#[cfg(target_os = "linux")]
pub fn run_landlock(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
    note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    use crate::policy::{resolve, HostFacts};
    if let Err(reason) = landlock_available() {
        if settings.allow_unsandboxed {
            let why = format!("landlock tier unavailable ({reason}); --allow-unsandboxed given");
            return run_unsandboxed(policy, req, &why);
        }
    }
    let resolved = resolve(policy, &HostFacts::detect())?;
    super::backends::landlock::tier::run(&resolved, req, note)
}

#[cfg(not(target_os = "linux"))]
pub fn run_landlock(
    _policy: &SandboxPolicy,
    _settings: &HostSettings,
    _req: &ExecRequest,
    _note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    Err(super::select::not_built(
        "landlock",
        "Landlock exists only on Linux",
    ))
}
