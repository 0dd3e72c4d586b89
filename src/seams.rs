//! Test seams: environment variables that bend codewhale the way a test
//! needs. Each can only weaken what codewhale does (never strengthen a
//! sandbox), and every one is read here, in one leaf module, so that no
//! backend reaches into another for a seam.

use std::sync::OnceLock;

/// `CODEWHALE_LANDLOCK_MAX_ABI=N` makes codewhale behave as if the kernel
/// offered at most Landlock ABI N (`0` = no Landlock). Documented in
/// `docs/SANDBOX.md` as a test seam only.
pub const LANDLOCK_MAX_ABI: &str = "CODEWHALE_LANDLOCK_MAX_ABI";

/// The value of [`LANDLOCK_MAX_ABI`] (read once per process; unparsable
/// values are ignored). Both Landlock tiers (the landlock backend and the
/// bwrap helper stage) cap their ABI with it.
pub fn landlock_max_abi() -> Option<u32> {
    static SEAM: OnceLock<Option<u32>> = OnceLock::new();
    *SEAM.get_or_init(|| {
        std::env::var(LANDLOCK_MAX_ABI)
            .ok()
            .and_then(|v| v.trim().parse().ok())
    })
}
