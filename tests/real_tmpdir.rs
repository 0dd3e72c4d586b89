#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `$TMPDIR` inside the real sandbox (docs/SANDBOX.md, "Temp directory"):
//! whatever the host's `TMPDIR` is, a command can write `"$TMPDIR/x"` and
//! `mktemp` works. Under bwrap `TMPDIR` is the private `/tmp` (discarded
//! after the run: nothing reaches the host's directory) unless the host
//! value lies inside a writable root, where it is kept and the file is on
//! the host afterwards. The landlock tier always gives a fresh per-run
//! directory of its own. Run in every tier this machine has (bwrap and
//! landlock; landlock alone with `CODEWHALE_TEST_NO_BWRAP=1`).

mod common;

use common::sandbox::*;
use std::fs;
use std::path::Path;

/// What the command printed, and whether it succeeded.
#[derive(Debug)]
struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// `sh -c SCRIPT` in the sandbox with the host's `TMPDIR` = `tmpdir` (and
/// `TMP` the same), as `sandbox run` is started by a user who has it set.
fn run_with_tmpdir(fx: &Fx, case: &Case, tmpdir: &Path, script: &str) -> Out {
    let o = fx
        .command(case, &[], &["sh", "-c", script])
        .env("TMPDIR", tmpdir)
        .env("TMP", tmpdir)
        .output()
        .unwrap();
    let out = Out {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert_ne!(
        o.status.code(),
        Some(125),
        "[{case}] the sandbox could not be set up: {out:?}"
    );
    out
}

/// Writes `"$TMPDIR/x"`, reads it back, makes a `mktemp` file, and prints
/// `TMPDIR` and `TMP` as the command saw them.
const SCRIPT: &str = "printf tmp-ok > \"$TMPDIR/x\" && cat \"$TMPDIR/x\" && echo \
    && f=$(mktemp) && printf m > \"$f\" && echo \"mktemp=$f\" \
    && echo \"TMPDIR=$TMPDIR\" && echo \"TMP=$TMP\"";

fn line<'a>(r: &'a Out, key: &str) -> &'a str {
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {r:?}"))
}

/// A host `TMPDIR` outside every writable root — under the host's `/tmp`
/// (hidden by the private one) and elsewhere (read-only in the sandbox):
/// the command still gets a usable temp dir, and nothing it wrote there is
/// in the host's directory afterwards.
#[test]
fn a_host_tmpdir_outside_the_writable_roots_is_replaced_by_a_usable_one() {
    let fx = Fx::new();
    // Positive control for "hidden": the fixture lives under the host's
    // temp dir, which the bwrap tier's private /tmp covers.
    let under_tmp = fx.root.join("host-tmpdir");
    let elsewhere = fx.sibling.join("tmpdir");
    for host in [&under_tmp, &elsewhere] {
        fs::create_dir_all(host).unwrap();
        for case in cases() {
            let r = run_with_tmpdir(&fx, &case, host, SCRIPT);
            assert!(r.ok, "[{case}] {}: {}", host.display(), r.stderr);
            assert!(r.stdout.starts_with("tmp-ok\n"), "[{case}] {r:?}");
            let seen = line(&r, "TMPDIR=");
            assert_ne!(seen, host.to_str().unwrap(), "[{case}] {r:?}");
            assert_eq!(line(&r, "TMP="), seen, "[{case}] TMP follows TMPDIR");
            if case.tier.namespaces {
                assert_eq!(seen, "/tmp", "[{case}] the private /tmp");
            }
            let mk = line(&r, "mktemp=");
            assert!(mk.starts_with(seen), "[{case}] mktemp used TMPDIR: {mk}");
            // Host state: the host's TMPDIR is untouched, and neither the
            // file nor the mktemp file is on the host (the private /tmp,
            // or the landlock tier's per-run directory, is gone).
            let left: Vec<_> = fs::read_dir(host).unwrap().flatten().collect();
            assert!(left.is_empty(), "[{case}] {left:?}");
            assert!(!Path::new(mk).exists(), "[{case}] {mk} left on the host");
        }
    }
}

/// A host `TMPDIR` inside the workspace: under bwrap in `workspace-write`
/// it is kept (the command may write there anyway) and the file is on the
/// host afterwards; in `read-only` the workspace is not writable, so the
/// private `/tmp` is used and the host directory stays empty.
#[test]
fn a_host_tmpdir_inside_a_writable_root_is_kept_under_bwrap() {
    for case in cases() {
        let fx = Fx::new();
        let inside = fx.ws.join(".scratch-tmp");
        fs::create_dir_all(&inside).unwrap();
        let r = run_with_tmpdir(&fx, &case, &inside, SCRIPT);
        assert!(r.ok, "[{case}] {}", r.stderr);
        assert!(r.stdout.starts_with("tmp-ok\n"), "[{case}] {r:?}");
        let seen = line(&r, "TMPDIR=").to_string();
        let on_host = fx.read(&inside.join("x"));
        match (case.tier.namespaces, case.ww()) {
            (true, true) => {
                assert_eq!(seen, inside.to_str().unwrap(), "[{case}] kept");
                assert_eq!(on_host.as_deref(), Some("tmp-ok"), "[{case}]");
            }
            (true, false) => {
                assert_eq!(seen, "/tmp", "[{case}]");
                assert_eq!(on_host, None, "[{case}]");
            }
            // The landlock tier: its own per-run directory, always.
            (false, _) => {
                assert_ne!(seen, inside.to_str().unwrap(), "[{case}]");
                assert_eq!(on_host, None, "[{case}]");
            }
        }
    }
}
