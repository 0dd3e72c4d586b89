//! The stage's status pipe: one byte when every protection is in force,
//! a record naming the failed step and its errno otherwise. The records
//! are written with single `write`s (below `PIPE_BUF`, so atomic) by
//! processes that cannot allocate, and decoded by codewhale afterwards.

use std::io;
use std::os::fd::AsRawFd;

/// The status byte the command writes when every protection is in force.
pub const APPLIED: u8 = b'A';
/// The first byte of a failure record: `[FAILED, step, errno (4 bytes LE)]`.
pub const FAILED: u8 = b'F';
/// After [`APPLIED`]: `[EXEC_FAILED, errno (4 bytes LE)]` when `execve` failed.
pub const EXEC_FAILED: u8 = b'E';

/// The step of the command's set-up, as reported in a failure record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    Setsid = 1,
    NoNewPrivs = 2,
    Capabilities = 3,
    Landlock = 4,
    Seccomp = 5,
    Subreaper = 6,
    Fork = 7,
    Stdio = 8,
    Opener = 9,
    /// The mask (see `mask`); the errno record carries the mask's own step.
    Mask = 10,
}

impl Step {
    fn from_u8(b: u8) -> Option<Step> {
        Some(match b {
            1 => Step::Setsid,
            2 => Step::NoNewPrivs,
            3 => Step::Capabilities,
            4 => Step::Landlock,
            5 => Step::Seccomp,
            6 => Step::Subreaper,
            7 => Step::Fork,
            8 => Step::Stdio,
            9 => Step::Opener,
            10 => Step::Mask,
            _ => return None,
        })
    }

    pub fn what(self) -> &'static str {
        match self {
            Step::Setsid => "starting a new session (setsid)",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Capabilities => "dropping every capability",
            Step::Landlock => "applying the Landlock ruleset",
            Step::Seccomp => "installing the seccomp filter",
            Step::Subreaper => "becoming the child subreaper",
            Step::Fork => "forking the command",
            Step::Stdio => "setting up the stage's stdio and working directory",
            Step::Opener => "handing the opener's seccomp listener to codewhale",
            Step::Mask => "masking deny-read items by mounts in a private mount namespace",
        }
    }
}

/// What the status pipe said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageStatus {
    /// Every protection was in force before the command was exec'd.
    Applied,
    /// Every protection was in force, then `execve` failed with this errno.
    ExecFailed(i32),
    /// A step failed; the command never ran.
    Failed { step: String, error: String },
    /// Nothing (or garbage) arrived: the stage died before reporting.
    Silent,
}

/// Decode what the status pipe carried.
pub fn decode_status(bytes: &[u8]) -> StageStatus {
    match bytes {
        [APPLIED, EXEC_FAILED, e0, e1, e2, e3, ..] => {
            StageStatus::ExecFailed(i32::from_le_bytes([*e0, *e1, *e2, *e3]))
        }
        [APPLIED, ..] => StageStatus::Applied,
        [FAILED, step, e0, e1, e2, e3, ..] => {
            let errno = i32::from_le_bytes([*e0, *e1, *e2, *e3]);
            if Step::from_u8(*step) == Some(Step::Mask) {
                // The top byte is the mask's own step (see `child`).
                return StageStatus::Failed {
                    step: Step::Mask.what().to_string(),
                    error: crate::host::backends::landlock::mask::describe(
                        (errno >> 24) as u8,
                        errno & 0xff_ffff,
                    ),
                };
            }
            StageStatus::Failed {
                step: Step::from_u8(*step)
                    .map(Step::what)
                    .unwrap_or("an unknown step")
                    .to_string(),
                error: io::Error::from_raw_os_error(errno).to_string(),
            }
        }
        _ => StageStatus::Silent,
    }
}

/// Read what the status pipe holds, without blocking: both halves have
/// written (or died) by the time supervision returns, and a command that
/// exec'd no longer holds the write end.
pub fn read_stage_status(read_end: std::os::fd::OwnedFd) -> StageStatus {
    let fd = read_end.as_raw_fd();
    let mut buf = [0u8; 16];
    // SAFETY: fcntl on the fd we own, then a read into a live buffer.
    let n = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
    };
    decode_status(&buf[..n.max(0) as usize])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn status_records_decode() {
        assert_eq!(decode_status(&[APPLIED]), StageStatus::Applied);
        assert_eq!(decode_status(&[]), StageStatus::Silent);
        let e = libc::EPERM.to_le_bytes();
        match decode_status(&[FAILED, Step::Seccomp as u8, e[0], e[1], e[2], e[3]]) {
            StageStatus::Failed { step, error } => {
                assert!(step.contains("seccomp"), "{step}");
                assert!(error.contains("not permitted"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(decode_status(&[FAILED, 1]), StageStatus::Silent);
    }
}
