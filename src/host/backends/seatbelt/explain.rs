//! `sandbox explain --backend seatbelt`: the exact profile and parameters,
//! on any OS, so users and tests can read what would be enforced.

use super::{profile_with, DarwinHost, Param, SeatbeltError, SANDBOX_EXEC};
use crate::host::HostError;
use crate::policy::{HostFacts, ResolvedPolicy, SandboxMode, SandboxPolicy};
use serde::Serialize;
use std::fmt::Write as _;

/// What `sandbox explain --backend seatbelt` prints (text or `--json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SeatbeltExplain {
    pub backend: &'static str,
    pub mode: SandboxMode,
    pub network: bool,
    /// The executable that would run (absolute, never from `PATH`).
    pub sandbox_exec: &'static str,
    /// Whether this host can run the profile at all.
    pub runnable_here: bool,
    /// The profile text, or `None` when the mode has no sandbox.
    pub profile: Option<String>,
    pub params: Vec<Param>,
    pub notes: Vec<String>,
}

/// Resolve `policy` on this host and explain it: the one call
/// `sandbox explain --backend seatbelt` needs (print [`SeatbeltExplain::render_text`]
/// or serialise it for `--json`).
pub fn explain_policy(policy: &SandboxPolicy) -> Result<SeatbeltExplain, HostError> {
    let resolved = crate::policy::resolve(policy, &HostFacts::detect())?;
    Ok(explain(&resolved))
}

/// Explain the plan for `resolved` with this host's Darwin directories.
pub fn explain(resolved: &ResolvedPolicy) -> SeatbeltExplain {
    explain_with(resolved, &DarwinHost::detect())
}

/// [`explain`] with injected host directories.
pub fn explain_with(resolved: &ResolvedPolicy, host: &DarwinHost) -> SeatbeltExplain {
    let runnable_here = cfg!(target_os = "macos");
    let mut base = SeatbeltExplain {
        backend: "seatbelt",
        mode: resolved.mode,
        network: resolved.network,
        sandbox_exec: SANDBOX_EXEC,
        runnable_here,
        profile: None,
        params: Vec::new(),
        notes: Vec::new(),
    };
    if !runnable_here {
        base.notes.push(format!(
            "Seatbelt exists only on macOS; this host runs {}: shown for reading, cannot run here",
            std::env::consts::OS
        ));
    }
    match profile_with(resolved, host) {
        Ok(p) => {
            base.profile = Some(p.text);
            base.params = p.params;
            base.notes.extend(p.notes);
        }
        Err(e @ SeatbeltError::NotSandboxed { .. }) | Err(e @ SeatbeltError::NonUtf8 { .. }) => {
            base.notes.push(e.to_string())
        }
    }
    base.notes.extend(resolved.notes.iter().cloned());
    base
}

impl SeatbeltExplain {
    /// The text rendering: a header, the `-D` parameters with reasons, the
    /// profile, then the notes.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "backend: seatbelt ({})\nmode: {}\nnetwork: {}",
            self.sandbox_exec,
            self.mode,
            if self.network { "on" } else { "off" }
        );
        let _ = writeln!(s, "\nparameters ({}):", self.params.len());
        for p in &self.params {
            let _ = writeln!(s, "  -D{}={}    ; {}", p.name, p.value, p.why);
        }
        match &self.profile {
            Some(text) => {
                let _ = writeln!(s, "\nprofile (-p):\n{text}");
            }
            None => s.push_str("\nprofile: none\n"),
        }
        if !self.notes.is_empty() {
            s.push_str("notes:\n");
            for n in &self.notes {
                let _ = writeln!(s, "  - {n}");
            }
        }
        s
    }
}

impl std::fmt::Display for SeatbeltExplain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render_text())
    }
}
