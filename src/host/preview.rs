//! The backend a run would use and the level it is built to give, worked
//! out without running anything: the TUI footer and the MCP client's
//! status both render this one preview (doctor measures the real level).

use super::{dispatch, BackendKind, HostError, HostSettings};
use crate::policy::{SandboxMode, SandboxPolicy};

/// What a run of a policy is expected to get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The backend the host would select.
    pub backend: BackendKind,
    /// The mode of the policy (the level depends on it).
    pub mode: SandboxMode,
}

impl Expected {
    /// The tier the backend is built to give. bwrap in a writable mode is
    /// `partial`: protected paths that do not exist yet are held only
    /// after the run (the integrity check), and a run reports so; only a
    /// read-only bwrap run is `full`.
    pub fn level(&self) -> &'static str {
        match self.backend {
            BackendKind::Bwrap if self.mode == SandboxMode::ReadOnly => "full",
            BackendKind::Bwrap => "partial",
            BackendKind::Landlock | BackendKind::Seatbelt => "partial",
            BackendKind::Opensandbox => "remote",
            BackendKind::None => "off",
        }
    }
}

/// The backend a run of `policy` under `settings` would use. `auto`'s
/// first choice is bwrap without trying it; when no usable bwrap binary
/// is found, the host falls back (landlock on Linux), and so does this
/// answer, so nothing is labelled `bwrap` while it runs on the landlock
/// tier.
pub fn expected(policy: &SandboxPolicy, settings: &HostSettings) -> Result<Expected, HostError> {
    let sel = dispatch::selection(policy, settings)?;
    #[cfg(target_os = "linux")]
    if sel.backend == BackendKind::Bwrap && settings.backend == super::BackendChoice::Auto {
        use super::backends::bwrap::spawn::find_bwrap;
        if let Err(e) = find_bwrap(settings.bwrap_path.as_deref(), &[]) {
            let facts = dispatch::facts(settings).with_failure(BackendKind::Bwrap, &e.to_string());
            let next = super::select(
                policy.mode,
                settings.backend,
                settings.allow_unsandboxed,
                &facts,
            )?;
            return Ok(Expected {
                backend: next.backend,
                mode: policy.mode,
            });
        }
    }
    Ok(Expected {
        backend: sel.backend,
        mode: policy.mode,
    })
}
