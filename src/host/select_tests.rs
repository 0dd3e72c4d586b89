//! `select` on every OS's facts, run everywhere.

use super::*;

fn facts(os: Os) -> Facts {
    Facts {
        os,
        bwrap: BwrapState::Untried,
        landlock: Ok(()),
        landlock_remedy: "enable Landlock".into(),
        opensandbox_configured: false,
    }
}

const WW: SandboxMode = SandboxMode::WorkspaceWrite;

fn pick(f: &Facts, choice: BackendChoice, allow: bool) -> Result<Selection, HostError> {
    select(WW, choice, allow, f)
}

#[test]
fn no_sandbox_modes_select_none_on_every_os() {
    for os in [Os::Linux, Os::Macos, Os::Windows, Os::Other] {
        let f = facts(os);
        let s = select(
            SandboxMode::DangerFullAccess,
            BackendChoice::Auto,
            false,
            &f,
        )
        .unwrap();
        assert_eq!(s.backend, BackendKind::None);
        assert_eq!(s.unsandboxed, Some(Unsandboxed::FullAccess));
        let s = select(
            SandboxMode::ExternalSandbox,
            BackendChoice::Bwrap,
            false,
            &f,
        )
        .unwrap();
        assert_eq!(s.unsandboxed, Some(Unsandboxed::External));
    }
}

#[test]
fn linux_auto_is_bwrap_with_the_landlock_tier_behind_it() {
    let f = facts(Os::Linux);
    let s = pick(&f, BackendChoice::Auto, false).unwrap();
    assert_eq!(s.backend, BackendKind::Bwrap);
    assert_eq!(s.fallback, Some(BackendKind::Landlock));
    // bwrap known broken: straight to the landlock tier, saying why.
    let broken = f.clone().with_failure(BackendKind::Bwrap, "no userns");
    let s = pick(&broken, BackendChoice::Auto, false).unwrap();
    assert_eq!(s.backend, BackendKind::Landlock);
    assert!(s.why.contains("no userns"), "{}", s.why);
}

#[test]
fn linux_auto_without_anything_fails_closed_unless_allowed() {
    let mut f = facts(Os::Linux).with_failure(BackendKind::Bwrap, "no userns");
    f.landlock = Err("kernel without Landlock".into());
    match pick(&f, BackendChoice::Auto, false) {
        Err(HostError::NoBackend { reason, remedy }) => {
            assert!(reason.contains("no userns") && reason.contains("without Landlock"));
            assert!(remedy.unwrap().contains("enable Landlock"));
        }
        other => panic!("{other:?}"),
    }
    let s = pick(&f, BackendChoice::Auto, true).unwrap();
    assert_eq!(s.backend, BackendKind::None);
    assert_eq!(s.unsandboxed, Some(Unsandboxed::Allowed));
    assert!(s.why.contains("--allow-unsandboxed"), "{}", s.why);
    // Untried bwrap and no Landlock: bwrap, no fallback (or `none` if allowed).
    let mut g = facts(Os::Linux);
    g.landlock = Err("no".into());
    assert_eq!(pick(&g, BackendChoice::Auto, false).unwrap().fallback, None);
    assert_eq!(
        pick(&g, BackendChoice::Auto, true).unwrap().fallback,
        Some(BackendKind::None)
    );
}

#[test]
fn explicit_backends_never_fall_back() {
    let f = facts(Os::Linux);
    let s = pick(&f, BackendChoice::Bwrap, true).unwrap();
    assert_eq!((s.backend, s.fallback), (BackendKind::Bwrap, None));
    let s = pick(&f, BackendChoice::Landlock, false).unwrap();
    assert_eq!((s.backend, s.fallback), (BackendKind::Landlock, None));
    let mut g = f.clone();
    g.landlock = Err("old kernel".into());
    assert!(matches!(
        pick(&g, BackendChoice::Landlock, false),
        Err(HostError::Unavailable {
            backend: BackendKind::Landlock,
            ..
        })
    ));
    assert_eq!(
        pick(&g, BackendChoice::Landlock, true).unwrap().backend,
        BackendKind::None
    );
    let s = pick(&f, BackendChoice::None, false).unwrap();
    assert_eq!(s.unsandboxed, Some(Unsandboxed::Allowed));
}

#[test]
fn backends_of_other_oses_are_typed_errors() {
    let cases = [
        (Os::Macos, BackendChoice::Bwrap, BackendKind::Bwrap),
        (Os::Macos, BackendChoice::Landlock, BackendKind::Landlock),
        (Os::Linux, BackendChoice::Seatbelt, BackendKind::Seatbelt),
        (Os::Windows, BackendChoice::Seatbelt, BackendKind::Seatbelt),
    ];
    for (os, choice, kind) in cases {
        match pick(&facts(os), choice, true) {
            Err(e) => assert!(e.is_setup_failure_of(kind), "{os:?} {choice:?}: {e}"),
            Ok(s) => panic!("{os:?} {choice:?}: {s:?}"),
        }
    }
}

#[test]
fn macos_auto_is_seatbelt_and_windows_needs_the_flag() {
    assert_eq!(
        pick(&facts(Os::Macos), BackendChoice::Auto, false)
            .unwrap()
            .backend,
        BackendKind::Seatbelt
    );
    for os in [Os::Windows, Os::Other] {
        assert!(matches!(
            pick(&facts(os), BackendChoice::Auto, false),
            Err(HostError::NoBackend { .. })
        ));
        let s = pick(&facts(os), BackendChoice::Auto, true).unwrap();
        assert_eq!(s.backend, BackendKind::None);
    }
}

#[test]
fn opensandbox_needs_its_configuration_on_any_os() {
    for os in [Os::Linux, Os::Macos, Os::Windows] {
        let mut f = facts(os);
        assert!(pick(&f, BackendChoice::Opensandbox, false)
            .unwrap_err()
            .is_setup_failure_of(BackendKind::Opensandbox));
        f.opensandbox_configured = true;
        assert_eq!(
            pick(&f, BackendChoice::Opensandbox, false).unwrap().backend,
            BackendKind::Opensandbox
        );
    }
}
