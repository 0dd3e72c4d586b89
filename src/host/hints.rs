//! What to tell a person (or the model) after a sandboxed run, beyond the
//! command's own output: what the after-run check reverted, and why a
//! failure that reads like an outage or a permissions problem was the
//! sandbox's doing. Pure: the outcome and the policy in, lines out.
//!
//! Every front end shows the same lines: `sandbox run` on stderr, the
//! shell tool's result (which `exec`, stream-json, the TUI cell and the
//! model see).

use super::request::ExecOutcome;
use crate::policy::resolve::normalize;
use crate::policy::{HostFacts, SandboxPolicy};
use std::path::{Path, PathBuf};

/// One thing to say about a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// The after-run integrity check undid what the command did to
    /// protected paths (one line for the run).
    Reverted(String),
    /// The command failed as a program without a network does, and the
    /// network was off.
    NetworkOff,
    /// The command failed to write a path outside the writable roots.
    OutsideWritableRoots(PathBuf),
    /// A scoped writer's command failed to write a workspace path outside
    /// its `write_scope` (more roots would not be the fix).
    OutsideWriteScope(PathBuf),
}

impl Hint {
    /// The line, without a `codewhale: ` prefix.
    pub fn text(&self) -> String {
        match self {
            Hint::Reverted(what) => format!("reverted after the run: {what}"),
            Hint::NetworkOff => "the sandbox's network was off, and the command failed the way a program without a network does (name resolution or connection errors): allow the names it needs with --allow-domain NAME (once per name), or the whole network with --network ([sandbox] network in the config)".into(),
            Hint::OutsideWritableRoots(p) => format!(
                "{} is outside the sandbox's writable roots: the write was refused by the sandbox; add a root with --writable-root DIR ([sandbox] writable_roots in the config)",
                p.display()
            ),
            Hint::OutsideWriteScope(p) => format!(
                "{} is outside this sub-agent's write scope: the write was refused by the sandbox; only the scope's paths are writable in the workspace",
                p.display()
            ),
        }
    }
}

/// What programs print when they cannot resolve a name or reach a host.
const NETWORK_MARKERS: &[&str] = &[
    "Name or service not known",
    "Temporary failure in name resolution",
    "EAI_AGAIN",
    "ENOTFOUND",
    "getaddrinfo",
    "Could not resolve host",
    "could not resolve host",
    "Failed to resolve",
    "failed to lookup address",
    "Network is unreachable",
    "ENETUNREACH",
    "No address associated with hostname",
    "nodename nor servname",
];

/// What a refused write says.
const WRITE_MARKERS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
];

/// The hints for `out`, a run of `policy` started in `cwd`.
pub fn after_run(out: &ExecOutcome, policy: &SandboxPolicy, cwd: &Path) -> Vec<Hint> {
    let mut hints = Vec::new();
    let reverted: Vec<String> = out.enforcement.reverted.iter().map(|r| r.line()).collect();
    if !reverted.is_empty() {
        hints.push(Hint::Reverted(reverted.join("; ")));
    }
    if out.shell_code() == 0 || !out.enforcement.is_sandboxed() {
        return hints;
    }
    let stderr = String::from_utf8_lossy(&out.stderr.bytes);
    let stdout = String::from_utf8_lossy(&out.stdout.bytes);
    let network_off = !policy.network && policy.egress.is_none();
    if network_off
        && NETWORK_MARKERS
            .iter()
            .any(|m| stderr.contains(m) || stdout.contains(m))
    {
        hints.push(Hint::NetworkOff);
    }
    if let Some(p) = refused_outside(&stderr, policy, cwd) {
        let in_workspace = crate::policy::paths::inside_workspace(&p, &policy.workspace)
            || std::fs::canonicalize(&policy.workspace).is_ok_and(|w| p.starts_with(w));
        hints.push(if policy.write_scope.is_some() && in_workspace {
            Hint::OutsideWriteScope(p)
        } else {
            Hint::OutsideWritableRoots(p)
        });
    }
    hints
}

/// The first path named on a refused-write line of `stderr` that lies
/// outside every writable root (resolved only when such a line exists:
/// the roots include the toolchain caches resolution adds).
fn refused_outside(stderr: &str, policy: &SandboxPolicy, cwd: &Path) -> Option<PathBuf> {
    if !stderr
        .lines()
        .any(|l| WRITE_MARKERS.iter().any(|m| l.contains(m)))
    {
        return None;
    }
    let resolved = crate::policy::resolve(policy, &HostFacts::detect()).ok()?;
    if resolved.writable_roots.is_empty() {
        return None;
    }
    let policy = &resolved;
    for line in stderr.lines() {
        let Some(marker) = WRITE_MARKERS.iter().find(|m| line.contains(*m)) else {
            continue;
        };
        for cand in candidates(line, marker) {
            let abs = if Path::new(&cand).is_absolute() {
                normalize(Path::new(&cand))
            } else {
                normalize(&cwd.join(&cand))
            };
            // /dev, /proc and /sys are not the user's files.
            if ["/dev", "/proc", "/sys"].iter().any(|d| abs.starts_with(d)) {
                continue;
            }
            if !policy.is_under_writable_root(&abs) {
                return Some(abs);
            }
        }
    }
    None
}

/// Path-like pieces of one error line: quoted strings, and the piece
/// right before `: <marker>`.
fn candidates(line: &str, marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            out.push(after[..j].to_string());
            rest = &after[j + close.len_utf8()..];
        }
    }
    if let Some(before) = line.find(&format!(": {marker}")).map(|i| &line[..i]) {
        if let Some(last) = before.rsplit(": ").next() {
            let last = last
                .rsplit(' ')
                .next()
                .unwrap_or(last)
                .trim_matches(|c| "'\"‘’`".contains(c));
            out.push(last.to_string());
        }
    }
    out.retain(|c| !c.is_empty() && (c.contains('/') || c.starts_with('.')) && !c.contains(' '));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_found_in_the_usual_error_shapes() {
        let c = |l: &str, m: &str| candidates(l, m);
        assert_eq!(
            c(
                "fatal: could not create leading directories of '../sibling/.git': Permission denied",
                "Permission denied"
            ),
            vec!["../sibling/.git", "../sibling/.git"]
        );
        assert_eq!(
            c(
                "sh: 1: cannot create /etc/x: Read-only file system",
                "Read-only file system"
            ),
            vec!["/etc/x"]
        );
        assert_eq!(
            c(
                "mkdir: cannot create directory ‘/opt/y’: Read-only file system",
                "Read-only file system"
            ),
            vec!["/opt/y", "/opt/y"]
        );
        assert!(c("error: Permission denied", "Permission denied").is_empty());
    }
}
