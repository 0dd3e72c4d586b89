//! The backends, one folder each. Every backend's planner is pure and
//! compiles on every OS (so `sandbox explain` and the snapshot tests work
//! anywhere); the apply and spawn steps are gated on their `mod` lines.
//!
//! - [`bwrap`]: bubblewrap namespaces + the in-sandbox helper stage
//!   (no_new_privs, capabilities dropped, seccomp, Landlock inside).
//! - [`landlock`]: the Landlock-only tier (no namespaces), and the ruleset
//!   planner the bwrap helper uses inside its namespaces too.
//! - [`seatbelt`]: macOS `sandbox-exec` with a generated profile.
//! - [`opensandbox`]: a remote OpenSandbox deployment over HTTP.
//! - [`windows`]: no OS sandbox; flagged, never silent.

pub mod bwrap;
#[cfg(target_os = "linux")]
pub mod landlock;
pub mod opensandbox;
pub mod seatbelt;
pub mod windows;
