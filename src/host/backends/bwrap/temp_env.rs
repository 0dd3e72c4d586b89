//! Which temp directory a command under bwrap is told to use.
//!
//! With the private `/tmp` (a fresh tmpfs) the host's `TMPDIR` is wrong
//! inside the sandbox: a value under the host's `/tmp` names a directory
//! the tmpfs hides, and any other value names a host directory that the
//! read-only root makes unwritable unless it lies in a writable root. So
//! `TMPDIR`, `TMP` and `TEMP` are pointed at the private `/tmp` — except a
//! value inside a writable root (the command may write there anyway, and
//! the user chose it, e.g. for space a tmpfs lacks) and a value the user
//! set in `[sandbox.env] set` (explicit configuration wins). Without the
//! private `/tmp` the environment is left as it is.

use crate::policy::resolve::ResolvedPolicy;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// The temp-directory variables programs read (POSIX `TMPDIR`; `TMP` and
/// `TEMP` by Python's `tempfile`, Java and others).
pub const TEMP_VARS: &[&str] = &["TMPDIR", "TMP", "TEMP"];

/// The private temp directory inside the sandbox.
pub const PRIVATE_TMP: &str = "/tmp";

/// The values to set over `vars` (the scrubbed environment) for the
/// command. `TMPDIR` is always set (so tools agree on one place); `TMP`
/// and `TEMP` only when the environment has them.
pub fn overrides(
    policy: &ResolvedPolicy,
    vars: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if !policy.private_tmp {
        return out;
    }
    for name in TEMP_VARS {
        if policy.env.set.contains_key(*name) {
            continue;
        }
        match vars.get(*name) {
            Some(v) if kept(policy, v) => {}
            None if *name != "TMPDIR" => {}
            _ => {
                out.insert((*name).to_string(), PRIVATE_TMP.to_string());
            }
        }
    }
    out
}

/// Whether the host's value stays: an absolute path without `..` inside
/// a writable root (bound read-write at the same path).
fn kept(policy: &ResolvedPolicy, value: &str) -> bool {
    let p = Path::new(value);
    p.is_absolute()
        && !p.components().any(|c| c == Component::ParentDir)
        && policy.is_under_writable_root(p)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
    use std::path::PathBuf;

    /// A resolved workspace-write policy whose writable roots are `roots`
    /// (the paths need not exist: the planner only compares them).
    fn policy(private_tmp: bool, roots: &[&str]) -> ResolvedPolicy {
        let dir = tempfile::tempdir().unwrap();
        let facts = HostFacts {
            homes: vec![dir.path().join("home")],
            cargo_home: None,
            xdg_cache_home: None,
        };
        let mut p = resolve(
            &SandboxPolicy::new(SandboxMode::WorkspaceWrite, dir.path()),
            &facts,
        )
        .unwrap();
        let entry = p.writable_roots[0].clone();
        p.writable_roots = roots
            .iter()
            .map(|r| {
                let mut e = entry.clone();
                e.path = PathBuf::from(r);
                e
            })
            .collect();
        p.private_tmp = private_tmp;
        p
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn get<'a>(m: &'a BTreeMap<String, String>, k: &str) -> Option<&'a str> {
        m.get(k).map(String::as_str)
    }

    #[test]
    fn a_host_tmpdir_outside_the_writable_roots_becomes_the_private_tmp() {
        let p = policy(true, &["/work/ws"]);
        for host in ["/tmp/user-1000", "/work/x/tmp", "/var/tmp", "relative/tmp"] {
            let o = overrides(&p, &env(&[("TMPDIR", host), ("TMP", host)]));
            assert_eq!(get(&o, "TMPDIR"), Some("/tmp"), "{host}");
            assert_eq!(get(&o, "TMP"), Some("/tmp"), "{host}");
            assert_eq!(get(&o, "TEMP"), None, "TEMP was not set");
        }
        // Unset: TMPDIR is named anyway.
        assert_eq!(get(&overrides(&p, &env(&[])), "TMPDIR"), Some("/tmp"));
    }

    #[test]
    fn a_host_tmpdir_inside_a_writable_root_is_kept() {
        let p = policy(true, &["/work/ws", "/home/u/.cache"]);
        let o = overrides(
            &p,
            &env(&[("TMPDIR", "/work/ws/.tmp"), ("TEMP", "/home/u/.cache/t")]),
        );
        assert!(o.is_empty(), "{o:?}");
        // `..` could climb out of the root: not kept.
        let o = overrides(&p, &env(&[("TMPDIR", "/work/ws/../x")]));
        assert_eq!(get(&o, "TMPDIR"), Some("/tmp"));
    }

    #[test]
    fn configured_values_and_a_shared_tmp_are_left_alone() {
        let mut p = policy(true, &["/work/ws"]);
        p.env.set.insert("TMPDIR".into(), "/custom".into());
        let o = overrides(&p, &env(&[("TMPDIR", "/custom"), ("TMP", "/x")]));
        assert_eq!(get(&o, "TMPDIR"), None, "[sandbox.env] set wins");
        assert_eq!(get(&o, "TMP"), Some("/tmp"));
        let shared = policy(false, &["/work/ws"]);
        assert!(overrides(&shared, &env(&[("TMPDIR", "/work/x/tmp")])).is_empty());
    }
}
