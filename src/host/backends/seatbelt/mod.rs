//! macOS Seatbelt: the pure planner, compiled and tested on every OS.
//!
//! [`profile`] turns a [`ResolvedPolicy`] into a [`SeatbeltProfile`]: the
//! SBPL text handed to `/usr/bin/sandbox-exec -p` plus the `-D NAME=VALUE`
//! parameters it references. Only the spawn step (`host::seatbelt::spawn`) needs a Mac.
//!
//! Invariants (checked by `tests/seatbelt_*.rs`):
//! - The profile starts with `(deny default)`; there is no unconditional
//!   `(allow file-write*)`: every write rule is scoped to a parameter
//!   (a writable root, the private temp dir) or a fixed device node.
//! - **No path of the user ever appears in the profile text.** Writable
//!   roots, their write-protected children, deny-read paths and caches go in
//!   as parameters referenced with `(param "NAME")`, so a path containing
//!   `"` or `)` cannot change the profile's meaning. Only fixed table names
//!   (`.git/hooks`, `.codewhale`, …) appear, inside case-insensitive regexes
//!   anchored to a root by its *depth*, because regexes cannot use params.
//! - Deny-read rules come last, so they win over the read-all rule (in SBPL
//!   the last matching rule decides), in both the spelled and the canonical
//!   `/private/var`, `/private/tmp`, `/private/etc` form.
//! - Network rules appear only when the policy allows network.
//! - Every `(param "X")` used has a parameter `X` and vice versa.

mod denial;
mod explain;
mod plan;
pub mod sexp;
#[cfg(target_os = "macos")]
pub mod spawn;

pub use denial::{classify, DenyRecord, SeatbeltSignal};
pub use explain::{explain, explain_policy, explain_with, SeatbeltExplain};

use crate::host::HostError;
use crate::policy::{ResolvedPolicy, SandboxMode};
use serde::Serialize;
use std::path::PathBuf;

/// The only `sandbox-exec` codewhale runs: an absolute path, never looked up
/// on `PATH`, so a planted `sandbox-exec` in the workspace is never used.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Deny-default base: process, signals, sysctls, mach services.
pub const BASE_SBPL: &str = include_str!("../../../../sandbox-profiles/base.sbpl");
/// `/dev/null`, `/dev/tty` and ptys.
pub const DEVICES_SBPL: &str = include_str!("../../../../sandbox-profiles/devices.sbpl");
/// Open reads (deny-read rules at the end take paths back out).
pub const READ_ALL_SBPL: &str = include_str!("../../../../sandbox-profiles/read-all.sbpl");
/// Network access, included only when the policy allows network.
pub const NETWORK_SBPL: &str = include_str!("../../../../sandbox-profiles/network.sbpl");

/// One `-D NAME=VALUE` parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Param {
    pub name: String,
    pub value: String,
    /// Why the parameter exists (shown by `sandbox explain`).
    pub why: String,
}

/// A complete plan for one `sandbox-exec` run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SeatbeltProfile {
    pub mode: SandboxMode,
    pub network: bool,
    /// The SBPL text (`-p`). Contains no user path.
    pub text: String,
    /// The parameters (`-D`), in the order they are passed.
    pub params: Vec<Param>,
    /// What the plan could not express or left out, for the report.
    pub notes: Vec<String>,
}

impl SeatbeltProfile {
    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.value.as_str())
    }

    /// Arguments after [`SANDBOX_EXEC`]: `-p TEXT -DK=V … -- ARGV…`.
    pub fn sandbox_exec_args(&self, argv: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(3 + self.params.len() + argv.len());
        out.push("-p".to_string());
        out.push(self.text.clone());
        for p in &self.params {
            out.push(format!("-D{}={}", p.name, p.value));
        }
        out.push("--".to_string());
        out.extend(argv.iter().cloned());
        out
    }
}

/// Host directories the plan depends on beyond the resolved policy.
///
/// Injectable so the planner stays pure and snapshot-testable on Linux;
/// [`DarwinHost::detect`] fills it in on a Mac.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DarwinHost {
    /// `confstr(_CS_DARWIN_USER_CACHE_DIR)` (`/private/var/folders/…/C/`):
    /// clang module caches and Apple tools write here; writable under
    /// `workspace-write`.
    pub user_cache_dir: Option<PathBuf>,
    /// The per-run private temp directory the spawn step created (and sets
    /// `TMPDIR` to). `None` when only planning (`explain`): the rule is then
    /// left out and a note says so.
    pub private_tmp: Option<PathBuf>,
    /// `network = "allowlist"`: the egress proxy's port on this host's
    /// loopback (started per run by the spawn step), the only destination
    /// the profile then allows. `None` when only planning.
    pub egress_port: Option<u16>,
}

impl DarwinHost {
    /// The Darwin directories of this host (empty on other OSes).
    pub fn detect() -> Self {
        DarwinHost {
            user_cache_dir: darwin_user_cache_dir(),
            private_tmp: None,
            egress_port: None,
        }
    }
}

#[cfg(target_os = "macos")]
fn darwin_user_cache_dir() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0u8; 1024];
    // SAFETY: `buf` is a writable buffer of the length passed; confstr writes
    // at most that many bytes including the NUL and returns the needed size.
    let n = unsafe {
        libc::confstr(
            libc::_CS_DARWIN_USER_CACHE_DIR,
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n == 0 || n > buf.len() {
        return None;
    }
    buf.truncate(n - 1);
    let p = PathBuf::from(std::ffi::OsStr::from_bytes(&buf));
    std::fs::canonicalize(&p).ok().or(Some(p))
}

#[cfg(not(target_os = "macos"))]
fn darwin_user_cache_dir() -> Option<PathBuf> {
    None
}

/// Why a profile could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SeatbeltError {
    /// The mode asks for no OS sandbox at all.
    #[error("{mode} runs without an OS sandbox, so there is no Seatbelt profile to build")]
    NotSandboxed { mode: SandboxMode },
    /// A path cannot be passed as a `-D` string; refusing beats leaving it
    /// unenforced.
    #[error("{what} {path:?} is not valid UTF-8: Seatbelt parameters are strings, so it cannot be enforced")]
    NonUtf8 { what: &'static str, path: PathBuf },
}

impl From<SeatbeltError> for HostError {
    fn from(e: SeatbeltError) -> Self {
        HostError::Unavailable {
            backend: crate::host::BackendKind::Seatbelt,
            reason: e.to_string(),
            remedy: None,
        }
    }
}

/// Plan the profile for `resolved` with this host's Darwin directories.
pub fn profile(resolved: &ResolvedPolicy) -> Result<SeatbeltProfile, SeatbeltError> {
    profile_with(resolved, &DarwinHost::detect())
}

/// Plan the profile for `resolved` with injected host directories.
pub fn profile_with(
    resolved: &ResolvedPolicy,
    host: &DarwinHost,
) -> Result<SeatbeltProfile, SeatbeltError> {
    plan::build(resolved, host)
}

/// The error `sandbox run --backend seatbelt` returns on any OS but macOS
/// (exit 125): the CLI wiring is `return Err(seatbelt::unavailable_here())`.
pub fn unavailable_here() -> HostError {
    unavailable_on(std::env::consts::OS)
}

/// [`unavailable_here`] for a named OS (testable everywhere).
pub fn unavailable_on(os: &str) -> HostError {
    HostError::Unavailable {
        backend: crate::host::BackendKind::Seatbelt,
        reason: format!("Seatbelt exists only on macOS (this host runs {os})"),
        remedy: Some(
            "use --backend auto (bwrap or landlock on Linux); `codewhale sandbox explain --backend seatbelt` shows the profile on any OS"
                .into(),
        ),
    }
}
