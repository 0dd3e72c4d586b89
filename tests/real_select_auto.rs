#![cfg(not(feature = "nix-build-sandbox"))]
//! `host::select_auto::select_auto`, the answer `codewhale doctor` shows:
//! real probes (bwrap running `true`; the kernel's Landlock ABI).

use codewhale::host::select_auto::select_auto;
use codewhale::host::{BackendKind, HostSettings};
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
    let s = select_auto(&policy, &settings);
    assert_eq!(s.chosen, Some(BackendKind::Bwrap), "{s:?}");
    assert_eq!(s.considered[0], (BackendKind::Bwrap, Ok(())));
    assert_eq!(s.considered[1], (BackendKind::Landlock, Ok(())));
    // bwrap pointing nowhere: the landlock tier, with bwrap's reason.
    let nowhere = HostSettings {
        bwrap_path: Some("/nonexistent/bwrap".into()),
        ..settings.clone()
    };
    let s = select_auto(&policy, &nowhere);
    assert_eq!(s.chosen, Some(BackendKind::Landlock), "{s:?}");
    let (kind, bwrap) = &s.considered[0];
    assert_eq!(*kind, BackendKind::Bwrap);
    assert!(
        bwrap.as_ref().is_err_and(|e| e.contains("does not exist")),
        "{bwrap:?}"
    );
}
