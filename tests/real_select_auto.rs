#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The host's pure selection fed with real facts (bwrap running `true`;
//! the kernel's Landlock ABI) — the answer `codewhale doctor` shows — and
//! the one dispatcher's fallback on a typed bwrap set-up failure.

use codewhale::host::dispatch::probed_selection;
use codewhale::host::select::BwrapState;
use codewhale::host::{run_blocking, BackendKind, ExecRequest, ExitKind, HostSettings};
use codewhale::policy::{SandboxMode, SandboxPolicy};

#[test]
fn auto_prefers_bwrap_and_falls_back_to_landlock_when_bwrap_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("HOME", dir.path());
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, dir.path());
    let settings = HostSettings {
        helper_exe: Some(env!("CARGO_BIN_EXE_codewhale").into()),
        ..HostSettings::default()
    };
    // This machine has working bwrap and Landlock: bwrap is chosen.
    let (s, f) = probed_selection(&policy, &settings);
    let s = s.unwrap();
    assert_eq!(s.backend, BackendKind::Bwrap, "{s:?}");
    assert_eq!(s.fallback, Some(BackendKind::Landlock), "{s:?}");
    assert_eq!(f.bwrap, BwrapState::Works);
    assert_eq!(f.landlock, Ok(()));
    // bwrap pointing nowhere: the landlock tier, with bwrap's reason.
    let nowhere = HostSettings {
        bwrap_path: Some("/nonexistent/bwrap".into()),
        ..settings.clone()
    };
    let (s, f) = probed_selection(&policy, &nowhere);
    let s = s.unwrap();
    assert_eq!(s.backend, BackendKind::Landlock, "{s:?}");
    match &f.bwrap {
        BwrapState::Broken(e) => assert!(e.contains("does not exist"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_dispatcher_runs_the_fallback_after_a_typed_bwrap_setup_failure() {
    let dir = tempfile::tempdir().unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, dir.path());
    let settings = HostSettings {
        bwrap_path: Some("/nonexistent/bwrap-for-dispatch".into()),
        helper_exe: Some(env!("CARGO_BIN_EXE_codewhale").into()),
        ..HostSettings::default()
    };
    let req = ExecRequest::new(vec!["sh".into(), "-c".into(), "echo ran > out".into()]);
    let out = run_blocking(&policy, &settings, &req).unwrap();
    assert_eq!(out.exit, ExitKind::Code(0), "{}", out.stderr.text());
    assert_eq!(out.enforcement.backend, BackendKind::Landlock);
    let said = format!("{:?}", out.enforcement.partial);
    assert!(said.contains("fell back to the landlock tier"), "{said}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out")).unwrap(),
        "ran\n"
    );
    // An explicit --backend bwrap never falls back: the typed error stands.
    let explicit = HostSettings {
        backend: codewhale::host::BackendChoice::Bwrap,
        ..settings
    };
    let e = run_blocking(&policy, &explicit, &req).unwrap_err();
    assert!(e.is_setup_failure_of(BackendKind::Bwrap), "{e}");
}
