//! The in-sandbox helper stage: `codewhale __sandbox-helper --spec JSON -- CMD…`.
//!
//! bwrap starts this stage as the sandbox's command. It applies, in order,
//! no_new_privs, the capability drop, (Landlock — slot reserved for the
//! landlock tier, see [`apply_landlock`]), and the seccomp filter, reports
//! what it applied as one JSON line on the status fd the parent passed in,
//! and then replaces itself with the command. The status fd is
//! close-on-exec, so the command never sees it.
//!
//! Exit codes when the command cannot start: 127 not found, 126 not
//! executable (shell semantics); 125 when a protection could not be applied
//! (the command never runs unprotected).

use super::caps;
use super::seccomp::{denied_names, SeccompOptions};
use super::seccomp_apply;
use crate::host::enforcement::{LandlockReport, SeccompReport};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;

/// What the parent asks the helper to apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperSpec {
    /// Write end of the status pipe (inherited through bwrap).
    pub status_fd: RawFd,
    pub seccomp: SeccompOptions,
}

/// The one line the helper writes on the status fd.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case")]
pub enum HelperStatus {
    /// Everything below was in force when the command was exec'd.
    Applied {
        no_new_privs: bool,
        capabilities_dropped: bool,
        seccomp: SeccompReport,
        landlock: Option<LandlockReport>,
    },
    /// A protection failed; the command did not run.
    SetupFailed { error: String },
}

/// The hidden subcommand's name.
pub const SUBCOMMAND: &str = "__sandbox-helper";

/// Landlock slot: the landlock tier (another module) plugs in here, right
/// before seccomp. Until then nothing is applied and the report says so
/// (`None`), never a fabricated status.
fn apply_landlock() -> Result<Option<LandlockReport>, String> {
    Ok(None)
}

fn apply(spec: &HelperSpec) -> Result<HelperStatus, String> {
    caps::set_no_new_privs().map_err(|e| e.to_string())?;
    caps::drop_all().map_err(|e| e.to_string())?;
    let capabilities_dropped = caps::all_dropped();
    if !capabilities_dropped {
        return Err("capabilities are still present after dropping them".into());
    }
    let landlock = apply_landlock()?;
    seccomp_apply::install(&spec.seccomp).map_err(|e| e.to_string())?;
    Ok(HelperStatus::Applied {
        no_new_privs: true,
        capabilities_dropped,
        seccomp: SeccompReport {
            installed: true,
            denied: denied_names(&spec.seccomp),
        },
        landlock,
    })
}

/// Run the helper stage. Returns only on failure, with the exit code.
pub fn main(spec_json: &str, command: &[OsString]) -> i32 {
    let spec: HelperSpec = match serde_json::from_str(spec_json) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("codewhale: sandbox helper: bad --spec: {e}");
            return crate::exit::SANDBOX_SETUP;
        }
    };
    // SAFETY: the parent passed this fd number for us alone; we own it from
    // here on. It is marked close-on-exec so the command never inherits it.
    let mut status = unsafe { std::fs::File::from_raw_fd(spec.status_fd) };
    // SAFETY: fcntl on the fd we just took ownership of.
    unsafe { libc::fcntl(spec.status_fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    let Some((program, args)) = command.split_first() else {
        eprintln!("codewhale: sandbox helper: no command");
        return crate::exit::SANDBOX_SETUP;
    };
    let report = apply(&spec).unwrap_or_else(|error| HelperStatus::SetupFailed { error });
    let failed = matches!(report, HelperStatus::SetupFailed { .. });
    let line = serde_json::to_string(&report).unwrap_or_default();
    let _ = writeln!(status, "{line}");
    if let HelperStatus::SetupFailed { error } = &report {
        eprintln!("codewhale: sandbox setup failed: {error}");
    }
    if failed {
        return crate::exit::SANDBOX_SETUP;
    }
    let err = std::process::Command::new(program).args(args).exec();
    let name = program.to_string_lossy();
    if err.kind() == std::io::ErrorKind::NotFound {
        eprintln!("codewhale: {name}: command not found");
        crate::exit::NOT_FOUND
    } else {
        eprintln!("codewhale: {name}: {err}");
        crate::exit::NOT_EXECUTABLE
    }
}
