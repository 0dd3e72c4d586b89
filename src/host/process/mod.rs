//! Process supervision shared by every local backend: one supervisor
//! (session, timeout, output caps, kill of the whole tree, fd hygiene,
//! cancellation), the subreaper's reaping helpers and the capability drop.

#[cfg(target_os = "linux")]
pub mod caps;
#[cfg(target_os = "linux")]
pub mod reaper;
#[cfg(target_os = "linux")]
pub mod supervise;
