#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The library path (as the agent loop uses it) on a machine where no
//! codewhale command ran before: the first `host::run` must create the
//! per-user directory itself (issue #14, part 1).
//!
//! The host reads `TMPDIR` and `XDG_RUNTIME_DIR` from this process's
//! environment, so this file holds exactly one test: it is the only
//! thread that touches the environment.

use codewhale::host::{BackendChoice, ExecRequest, ExitKind, HostSettings};
use codewhale::policy::{SandboxMode, SandboxPolicy};

fn no_bwrap() -> bool {
    std::env::var_os("CODEWHALE_TEST_NO_BWRAP").is_some_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn the_first_library_run_on_a_fresh_machine_works() {
    let backends: &[BackendChoice] = if no_bwrap() {
        &[BackendChoice::Landlock]
    } else {
        &[BackendChoice::Bwrap, BackendChoice::Landlock]
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Made before TMPDIR is changed below (tempdir() reads it).
    let top = tempfile::tempdir().unwrap();
    for &backend in backends {
        for runtime_dir_exists in [false, true] {
            let dir = tempfile::tempdir_in(top.path()).unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            let ws = root.join("ws");
            std::fs::create_dir(&ws).unwrap();
            let (tmp, xdg) = (root.join("tmp"), root.join("xdg"));
            if runtime_dir_exists {
                std::fs::create_dir(&xdg).unwrap();
            }
            // Single-threaded test binary: nothing else reads the environment.
            std::env::set_var("TMPDIR", &tmp);
            std::env::set_var("XDG_RUNTIME_DIR", &xdg);
            std::env::set_var("HOME", root.join("home"));
            let settings = HostSettings {
                backend,
                helper_exe: Some(env!("CARGO_BIN_EXE_codewhale").into()),
                ..HostSettings::default()
            };
            let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
            let req = ExecRequest::new(vec!["sh".into(), "-c".into(), "echo hi > f".into()]);
            let what = format!("[{backend:?}, runtime dir exists: {runtime_dir_exists}]");
            let out = rt
                .block_on(codewhale::host::run(&policy, &settings, req))
                .unwrap_or_else(|e| panic!("{what} the first run failed: {e}"));
            assert_eq!(out.exit, ExitKind::Code(0), "{what} {out:?}");
            assert_eq!(std::fs::read_to_string(ws.join("f")).unwrap(), "hi\n");
        }
    }
}
