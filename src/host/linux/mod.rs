//! Linux backends. The planners (`bwrap`, `seccomp`) are pure and compile
//! on every OS so `explain` and the snapshot tests work anywhere; the apply
//! steps are Linux-only, gated on their `mod` lines.

pub mod bwrap;
pub mod seccomp;

#[cfg(target_os = "linux")]
pub mod bwrap_spawn;
#[cfg(target_os = "linux")]
pub mod caps;
#[cfg(target_os = "linux")]
pub mod forked_stage;
#[cfg(target_os = "linux")]
pub mod helper;
#[cfg(target_os = "linux")]
pub mod landlock;
#[cfg(target_os = "linux")]
pub mod landlock_cache;
#[cfg(target_os = "linux")]
pub mod landlock_tier;
#[cfg(target_os = "linux")]
pub mod placeholders;
#[cfg(target_os = "linux")]
pub mod reaper;
#[cfg(target_os = "linux")]
pub mod seccomp_apply;
