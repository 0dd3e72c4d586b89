//! Killing a whole process tree without a pid namespace or a cgroup.
//!
//! The landlock tier's helper stage is a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`): whenever a process of the command's tree
//! dies, its children are re-parented to the helper instead of init, even
//! if they left the process group or the session (`setsid`, double fork).
//! So "every descendant" is reachable as "every child of the helper,
//! repeatedly": kill the children, reap them (their own children have been
//! re-parented to us by then), and repeat until none is left.
//!
//! The children are listed from `/proc/self/task/<tid>/children`
//! (`CONFIG_PROC_CHILDREN`) or, when that file is missing, by scanning
//! `/proc/*/stat` for our pid as the parent.

use std::collections::BTreeSet;

/// Upper bound on kill rounds; each round only sees processes that existed
/// before it started, and a SIGKILLed process cannot fork again, so a tree
/// of depth N needs about N rounds.
const MAX_ROUNDS: usize = 10_000;

/// SIGKILL and reap every descendant of the calling process (see the
/// module docs; the caller must be a child subreaper for orphans to come
/// back to it).
pub fn kill_descendants() {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    for _ in 0..MAX_ROUNDS {
        let kids = children(me);
        if kids.is_empty() {
            break;
        }
        for &k in &kids {
            // SAFETY: signalling our own child (not yet reaped, so its pid
            // cannot have been reused).
            unsafe { libc::kill(k, libc::SIGKILL) };
        }
        for &k in &kids {
            let mut status = 0;
            // SAFETY: waitpid on our own child; blocks only until the
            // SIGKILL we just sent has taken effect.
            unsafe { libc::waitpid(k, &mut status, 0) };
        }
    }
    // Reap whatever else is left as a zombie.
    // SAFETY: waitpid(-1, WNOHANG) with a valid status pointer.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

/// The pids whose parent is `me`.
fn children(me: libc::pid_t) -> BTreeSet<libc::pid_t> {
    // The helper is single-threaded: its only task is itself.
    let path = format!("/proc/self/task/{me}/children");
    if let Ok(text) = std::fs::read_to_string(path) {
        return text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    }
    scan_proc(me)
}

/// Fallback for kernels without `/proc/…/children`.
fn scan_proc(me: libc::pid_t) -> BTreeSet<libc::pid_t> {
    let mut out = BTreeSet::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may contain spaces and ')').
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<libc::pid_t>().ok());
        if ppid == Some(me) {
            out.insert(pid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_and_children_file_agree_on_a_real_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let pid = child.id() as libc::pid_t;
        assert!(scan_proc(me).contains(&pid));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!scan_proc(me).contains(&pid));
    }
}
