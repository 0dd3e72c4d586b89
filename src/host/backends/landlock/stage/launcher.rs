//! The threads that start stages, hardened once.
//!
//! A stage is cloned with `CLONE_VFORK`, so the thread that clones it is
//! suspended for as long as the stage lives (the whole command); the stage
//! and the command inherit that thread's credentials and seccomp filters.
//! So the launcher threads are kept, one pool per seccomp variant, and each
//! thread is hardened once when it starts — no_new_privs, every capability
//! dropped, the seccomp program installed — instead of the command's
//! process doing it on every run (the filter install alone is ≈ 0.1 ms: a
//! JIT and the kernel's per-syscall cache pass). These are per-thread
//! properties: codewhale's other threads are untouched. The command's half
//! checks that all three are in force before it applies the (per-policy)
//! Landlock ruleset.
//!
//! There is always a free thread for a job: a submit either reserves one
//! of the pool's idle threads or starts a new one, so a long-running
//! command never delays another's start. A pool grows to the largest
//! number of concurrent runs seen and does not shrink (each thread is a
//! 64 KiB stack blocked in `recv`). Launcher threads block every signal
//! (the stage starts with them blocked, see `child`).

use super::child::harden_thread;
use super::status::Step;
use crate::host::seccomp::SeccompOptions;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// A job gets the thread's hardening result (the failed step and errno).
pub type Job = Box<dyn FnOnce(Result<(), (Step, i32)>) + Send>;

struct Pool {
    opts: SeccompOptions,
    /// Threads for the `mask` strategy: only no_new_privs. The command's
    /// half makes its namespace first (which needs the capabilities, or a
    /// user namespace, and the mount calls the filter denies), then drops
    /// every capability and installs the filter itself (see `child`).
    mask: bool,
    tx: Mutex<Sender<Job>>,
    rx: Arc<Mutex<Receiver<Job>>>,
    /// Threads waiting for a job that no submit has reserved.
    idle: Arc<AtomicUsize>,
}

static POOLS: Mutex<Vec<Arc<Pool>>> = Mutex::new(Vec::new());

fn pool(opts: &SeccompOptions, mask: bool) -> std::io::Result<Arc<Pool>> {
    let mut pools = POOLS
        .lock()
        .map_err(|_| std::io::Error::other("the launcher pools' lock is poisoned"))?;
    if let Some(p) = pools.iter().find(|p| p.opts == *opts && p.mask == mask) {
        return Ok(Arc::clone(p));
    }
    let (tx, rx) = mpsc::channel();
    let p = Arc::new(Pool {
        opts: *opts,
        mask,
        tx: Mutex::new(tx),
        rx: Arc::new(Mutex::new(rx)),
        idle: Arc::new(AtomicUsize::new(0)),
    });
    pools.push(Arc::clone(&p));
    Ok(p)
}

/// Run `job` on a launcher thread hardened with the seccomp filter for
/// `opts` (a free one, or a new one).
pub fn launch(
    opts: &SeccompOptions,
    mask: bool,
    job: impl FnOnce(Result<(), (Step, i32)>) + Send + 'static,
) -> std::io::Result<()> {
    let p = pool(opts, mask)?;
    let reserved = p
        .idle
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok();
    if !reserved {
        let (rx, idle, opts, mask) = (Arc::clone(&p.rx), Arc::clone(&p.idle), p.opts, p.mask);
        std::thread::Builder::new()
            .name("codewhale-stage".into())
            .stack_size(64 * 1024)
            .spawn(move || worker(opts, mask, rx, idle))?;
    }
    let tx =
        p.tx.lock()
            .map_err(|_| std::io::Error::other("the launcher pool's lock is poisoned"))?;
    tx.send(Box::new(job))
        .map_err(|_| std::io::Error::other("the launcher pool is gone"))
}

fn worker(opts: SeccompOptions, mask: bool, rx: Arc<Mutex<Receiver<Job>>>, idle: Arc<AtomicUsize>) {
    // SAFETY: sigfillset/pthread_sigmask on a live sigset, for this thread
    // only: it does nothing but start stages.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    }
    let hardened = match super::compiled(&opts) {
        Ok(_) if mask => super::child::no_new_privs(),
        Ok(progs) => harden_thread(&progs),
        Err(_) => Err((Step::Seccomp, libc::EINVAL)),
    };
    loop {
        // The lock is held only while waiting: one waiter takes one job.
        let job = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        job(hardened);
        if hardened.is_err() {
            // Never serve another job from a thread that is not hardened:
            // the next submit starts a fresh one.
            return;
        }
        idle.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_busy_thread_never_delays_the_next_job_and_threads_are_hardened() {
        let opts = SeccompOptions {
            network: true,
            deny_unix_socket: false,
            stream_only: false,
            private_net: false,
        };
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        // Job 1 blocks until released, like a stage that lives on.
        let tx = started_tx.clone();
        launch(&opts, false, move |h| {
            // SAFETY: prctl queries with integer arguments only.
            let state = unsafe {
                (
                    libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
                    libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0),
                )
            };
            tx.send((1, h.is_ok(), state)).unwrap();
            let _ = release_rx.recv();
        })
        .unwrap();
        let got = started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(
            got,
            (1, true, (1, 2)),
            "hardened: no_new_privs, seccomp filter"
        );
        // Job 2 must start while job 1 still holds its thread.
        launch(&opts, false, move |h| {
            started_tx.send((2, h.is_ok(), (0, 0))).unwrap()
        })
        .unwrap();
        let got = started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((got.0, got.1), (2, true));
        release_tx.send(()).unwrap();
        // Control: this (test) thread is not hardened.
        // SAFETY: prctl query with integer arguments only.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) }, 0);
    }
}
