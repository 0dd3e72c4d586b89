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

/// The small `codewhale-sandbox-helper` next to this executable when it is
/// there (cheaper to start: no TLS libraries, no CLI), else this executable
/// itself (`codewhale __sandbox-helper` takes the same argv).
pub fn helper_exe() -> Result<std::path::PathBuf, crate::host::HostError> {
    let exe = std::env::current_exe()
        .map_err(|e| crate::host::HostError::io("locating the codewhale binary", e))?;
    let small = exe.with_file_name("codewhale-sandbox-helper");
    Ok(if small.is_file() { small } else { exe })
}
