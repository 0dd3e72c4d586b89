//! Sandboxes that can outlive codewhale by a few milliseconds.
//!
//! In the bwrap tier nothing of codewhale's outside the sandbox outlives a
//! SIGKILL of codewhale: its lock on the run's baseline goes at its death,
//! while the kernel is still killing the sandbox's pid namespace (bwrap
//! dies with its parent, the namespace's init with bwrap, and the init's
//! exit waits until every process of the namespace has exited). A codewhale
//! command started in between would check the dead run's baseline before a
//! write already in flight lands, and that write would stay.
//!
//! So the run records the namespace's init (its pid and start time: the
//! parent of the in-sandbox helper, whose pid the kernel hands codewhale
//! with the helper's ready message) here *before* the command may start —
//! the helper waits for codewhale's go-ahead — and:
//!
//! - the run itself, after bwrap has gone, waits for that init to exit
//!   before it checks (a timeout or Esc kills bwrap, and the namespace dies
//!   a moment later);
//! - the recovery of a dead run ([`wait_dead`]) waits for every init the
//!   run recorded before it checks the baseline.
//!
//! The init's exit is the kernel's signal that the namespace is empty: it
//! is reported only after every other process of the namespace has exited.

use crate::host::HostError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory of a run's records (inside the run's baseline directory).
fn records_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("sandboxes")
}

/// One recorded sandbox init of a live run.
#[derive(Debug)]
pub struct Recorded {
    path: PathBuf,
    pid: libc::pid_t,
    start: u64,
    pidfd: Option<OwnedFd>,
}

/// The fields of `/proc/PID/stat` after the command name (which is in
/// parentheses and may hold spaces or `)`): the state first, so field N of
/// proc(5) is index N - 3. `None`: no such process.
fn stat_fields(pid: libc::pid_t) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The start time of `pid` (field 22, clock ticks since boot) and whether
/// it has exited (a zombie counts as exited: nothing of it runs any more).
fn stat(pid: libc::pid_t) -> Option<(u64, bool)> {
    let f = stat_fields(pid)?;
    let start = f.get(19)?.parse().ok()?;
    Some((start, matches!(f.first()?.as_str(), "Z" | "X" | "x")))
}

/// The parent of `pid` (field 4).
pub fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// A pidfd for `pid` (`None` on kernels without `pidfd_open`, or when the
/// process is gone).
fn pidfd(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh fd that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether the process `pid` that started at `start` has exited.
fn gone(pid: libc::pid_t, start: u64) -> bool {
    match stat(pid) {
        Some((s, exited)) => s != start || exited,
        None => true,
    }
}

/// Wait until `pid` (started at `start`) has exited or `until` passed;
/// whether it exited.
fn wait_gone(pid: libc::pid_t, start: u64, fd: Option<&OwnedFd>, until: Instant) -> bool {
    loop {
        if gone(pid, start) {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        match fd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = left.as_millis().min(i32::MAX as u128) as i32;
                // SAFETY: one valid pollfd; a pidfd is readable once the
                // process has exited.
                let r = unsafe { libc::poll(&mut p, 1, ms.max(1)) };
                if r > 0 {
                    return true;
                }
                if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Record `pid` (a sandbox's pid-namespace init) for the run whose
/// baseline lives in `run_dir`, before the command may start.
pub fn record(run_dir: &Path, pid: libc::pid_t) -> Result<Recorded, HostError> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        HostError::io(format!("integrity check: {what} {}", p.display()), e)
    };
    // The pidfd first: the start time read after it names the process the
    // pidfd refers to (the pid cannot be reused while it is alive, and if
    // it already died the record is simply of a gone process).
    let fd = pidfd(pid);
    let (start, _) = stat(pid).ok_or_else(|| {
        io(
            "reading the sandbox's init",
            Path::new(&format!("/proc/{pid}/stat")),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let dir = records_dir(run_dir);
    super::mkdir_private(&dir)?;
    let path = dir.join(format!("{pid}-{start}"));
    std::fs::write(&path, b"").map_err(|e| io("recording", &path, e))?;
    Ok(Recorded {
        path,
        pid,
        start,
        pidfd: fd,
    })
}

impl Recorded {
    /// After bwrap has gone: wait (at most `limit`) until the namespace's
    /// init has exited, then drop the record. Whether it exited in time.
    pub fn finish(self, limit: Duration) -> bool {
        let ok = wait_gone(
            self.pid,
            self.start,
            self.pidfd.as_ref(),
            Instant::now() + limit,
        );
        if ok {
            let _ = std::fs::remove_file(&self.path);
        }
        ok
    }

    /// The recorded init's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

/// Before a dead run's baseline in `run_dir` is checked: wait (at most
/// `limit` in all) until every sandbox init it recorded has exited, and
/// drop those records. Returns a note for each one still running.
pub fn wait_dead(run_dir: &Path, limit: Duration) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(records_dir(run_dir)) else {
        return Vec::new();
    };
    let until = Instant::now() + limit;
    let mut notes = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let parsed = name
            .split_once('-')
            .and_then(|(p, s)| Some((p.parse::<libc::pid_t>().ok()?, s.parse::<u64>().ok()?)));
        let Some((pid, start)) = parsed else {
            let _ = std::fs::remove_file(e.path());
            continue;
        };
        let fd = if gone(pid, start) { None } else { pidfd(pid) };
        if wait_gone(pid, start, fd.as_ref(), until) {
            let _ = std::fs::remove_file(e.path());
        } else {
            notes.push(format!(
                "the interrupted run's sandbox (pid {pid}) was still running after {} s; \
                 checked anyway",
                limit.as_secs()
            ));
        }
    }
    notes
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn child(script: &str) -> std::process::Child {
        std::process::Command::new("sh")
            .args(["-c", script])
            .spawn()
            .unwrap()
    }

    /// A record names the live process; waiting for a dead run's records
    /// returns only once the process has exited, then drops the record.
    #[test]
    fn the_recovery_waits_for_a_recorded_process_to_exit() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = child("sleep 1");
        let pid = c.id() as libc::pid_t;
        let r = record(dir.path(), pid).unwrap();
        assert_eq!(r.pid(), pid);
        let names: Vec<_> = std::fs::read_dir(records_dir(dir.path()))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1);
        assert!(names[0].starts_with(&format!("{pid}-")), "{names:?}");
        // Reaped on another thread as a parent would; the wait sees the exit
        // either way (zombie or gone).
        let reaper = std::thread::spawn(move || c.wait().unwrap());
        let t = Instant::now();
        assert!(wait_dead(dir.path(), Duration::from_secs(10)).is_empty());
        assert!(
            t.elapsed() >= Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert!(reaper.join().unwrap().success());
        assert_eq!(
            std::fs::read_dir(records_dir(dir.path())).unwrap().count(),
            0
        );
        drop(r);
    }

    /// A process still running past the limit is named; a record whose
    /// pid now belongs to another process (other start time) or to nobody
    /// is dropped at once.
    #[test]
    fn a_stuck_process_is_named_and_stale_records_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = child("sleep 30");
        let pid = c.id() as libc::pid_t;
        let _r = record(dir.path(), pid).unwrap();
        let notes = wait_dead(dir.path(), Duration::from_millis(100));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains(&format!("pid {pid}")), "{notes:?}");
        c.kill().unwrap();
        c.wait().unwrap();
        // The record stayed (not proven gone then); now it goes at once.
        let t = Instant::now();
        assert!(wait_dead(dir.path(), Duration::from_secs(10)).is_empty());
        assert!(t.elapsed() < Duration::from_secs(5));
        let recs = records_dir(dir.path());
        std::fs::write(recs.join(format!("{}-1", std::process::id())), b"").unwrap();
        std::fs::write(recs.join("junk"), b"").unwrap();
        assert!(wait_dead(dir.path(), Duration::from_secs(10)).is_empty());
        assert_eq!(std::fs::read_dir(&recs).unwrap().count(), 0);
    }

    /// The helper's parent is what a bwrap run records.
    #[test]
    fn parent_of_names_the_parent() {
        let mut c = child("sleep 5");
        assert_eq!(
            parent_of(c.id() as libc::pid_t),
            Some(std::process::id() as libc::pid_t)
        );
        c.kill().unwrap();
        c.wait().unwrap();
        assert_eq!(parent_of(c.id() as libc::pid_t), None);
    }

    /// `finish` returns once the process exited and drops the record.
    #[test]
    fn finish_waits_for_the_init_and_drops_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = child("sleep 0.2");
        let r = record(dir.path(), c.id() as libc::pid_t).unwrap();
        let reaper = std::thread::spawn(move || c.wait().unwrap());
        assert!(r.finish(Duration::from_secs(10)));
        reaper.join().unwrap();
        assert_eq!(
            std::fs::read_dir(records_dir(dir.path())).unwrap().count(),
            0
        );
    }
}
