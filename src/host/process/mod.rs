//! Process supervision shared by every local backend: one supervisor for
//! every Unix (session, timeout, output caps, kill of the whole tree, fd
//! hygiene, cancellation) with its few OS-specific steps in [`os`], a
//! minimal Windows path, the subreaper's reaping helpers and the
//! capability drop (Linux).

#[cfg(target_os = "linux")]
pub mod caps;
#[cfg(unix)]
pub mod os;
#[cfg(target_os = "linux")]
pub mod reaper;
#[cfg(unix)]
pub mod supervise;
#[cfg(windows)]
pub mod windows;
