//! Test seams: environment variables that bend codewhale the way a test
//! needs. Each can only weaken what codewhale does (never strengthen a
//! sandbox), and every one is read here, in one leaf module, so that no
//! backend reaches into another for a seam and none is read anywhere else
//! (`tests/it/seams.rs` checks both).
//!
//! They are compiled in only with the `test-seams` cargo feature. The
//! crate's self dev-dependency (`Cargo.toml`) turns it on for every
//! `cargo test` build — the test binaries and the `codewhale` binary they
//! run — and for nothing else: `cargo build`, every release build,
//! `ci/doctor` and the Nix package leave it off, and there each function
//! below answers "no seam" without reading the environment.

use std::sync::OnceLock;

/// Whether this build reads the seams (the `test-seams` feature).
pub const ENABLED: bool = cfg!(feature = "test-seams");

/// `CODEWHALE_LANDLOCK_MAX_ABI=N` makes codewhale behave as if the kernel
/// offered at most Landlock ABI N (`0` = no Landlock).
pub const LANDLOCK_MAX_ABI: &str = "CODEWHALE_LANDLOCK_MAX_ABI";

/// `CODEWHALE_TEST_LANDLOCK_NO_MASK=1` makes the landlock tier use the
/// `carve+opener` fallback even where masking works, so the fallback is
/// tested on every machine.
pub const LANDLOCK_NO_MASK: &str = "CODEWHALE_TEST_LANDLOCK_NO_MASK";

/// `CODEWHALE_TEST_RESOLVE=name=ip[,ip][!loopback];...` answers those
/// names instead of the system resolver (tests build their world on
/// loopback without `/etc/hosts`); an entry marked `!loopback` may reach
/// loopback. Its use is listed in every report.
pub const TEST_RESOLVE: &str = "CODEWHALE_TEST_RESOLVE";

/// `CODEWHALE_TEST_TUI_PANIC=<prompt>` makes the TUI panic when that
/// prompt is sent (the pty test of the terminal's restore after a panic).
pub const TUI_PANIC: &str = "CODEWHALE_TEST_TUI_PANIC";

/// The one read of a seam variable: nothing without the feature.
fn read(name: &str) -> Option<String> {
    if !ENABLED {
        return None;
    }
    std::env::var(name).ok()
}

/// The value of [`LANDLOCK_MAX_ABI`] (read once per process; unparsable
/// values are ignored). Both Landlock tiers (the landlock backend and the
/// bwrap helper stage) cap their ABI with it.
pub fn landlock_max_abi() -> Option<u32> {
    static SEAM: OnceLock<Option<u32>> = OnceLock::new();
    *SEAM.get_or_init(|| read(LANDLOCK_MAX_ABI).and_then(|v| v.trim().parse().ok()))
}

/// Whether [`LANDLOCK_NO_MASK`] asks for the fallback (read once per
/// process).
pub fn landlock_no_mask() -> bool {
    static SEAM: OnceLock<bool> = OnceLock::new();
    *SEAM.get_or_init(|| read(LANDLOCK_NO_MASK).is_some_and(|v| v.trim() == "1"))
}

/// The fixed resolver table of [`TEST_RESOLVE`], if set.
pub fn test_resolve() -> Option<String> {
    read(TEST_RESOLVE)
}

/// Whether the TUI should panic on sending `prompt` ([`TUI_PANIC`]).
pub fn tui_panic(prompt: &str) -> bool {
    read(TUI_PANIC).is_some_and(|v| !v.is_empty() && v == prompt)
}

/// `CODEWHALE_TEST_SCHEDULER_CRASH=after_run_record` makes the scheduler
/// end the process (abort, as a crash would) right after it wrote an
/// automation run's record and before it created the run's task: the test
/// of "a crash never runs a slot twice".
pub const SCHEDULER_CRASH: &str = "CODEWHALE_TEST_SCHEDULER_CRASH";

/// Whether [`SCHEDULER_CRASH`] asks for the crash after a run record.
pub fn scheduler_crash_after_run_record() -> bool {
    read(SCHEDULER_CRASH).is_some_and(|v| v.trim() == "after_run_record")
}
