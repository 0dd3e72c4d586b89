//! Planner and complement-walk tests on temp trees (no kernel needed).

use super::rights::{FsAccess, READ_FILE, WRITE_FILE};
use super::*;
use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

struct Tree {
    _t: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

/// A home with a secret and a sibling, and a git workspace inside it.
fn tree() -> Tree {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let ws = home.join("proj");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_rsa"), "secret").unwrap();
    fs::write(home.join("notes.txt"), "hi").unwrap();
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::create_dir_all(ws.join(".git/objects")).unwrap();
    fs::write(ws.join(".git/config"), "[core]").unwrap();
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::write(ws.join("src/main.rs"), "fn main(){}").unwrap();
    Tree { _t: t, home, ws }
}

fn resolved(t: &Tree, mode: SandboxMode) -> crate::policy::ResolvedPolicy {
    let facts = HostFacts {
        homes: vec![t.home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    resolve(&SandboxPolicy::new(mode, &t.ws), &facts).unwrap()
}

fn opts(tier: Tier) -> LandlockOptions {
    LandlockOptions {
        tier,
        kernel_abi: 7,
        max_abi: None,
        tmp_dir: None,
        deny_read_in_writable: HoleStrategy::Carve,
        protect_in_writable: HoleStrategy::Yield,
        connect_ports: Vec::new(),
        mask: None,
        mask_fallback: None,
        private_net: None,
        private_net_fallback: None,
    }
}

/// Whether some rule grants `right` on `p` (a rule covers its path and,
/// for directories, everything beneath) — the kernel's union semantics.
fn granted(plan: &LandlockPlan, p: &Path, right: FsAccess) -> bool {
    plan.rules
        .iter()
        .any(|r| r.access.contains(right) && (r.path == p || (r.is_dir && p.starts_with(&r.path))))
}

#[test]
fn deny_read_inside_a_readable_tree_is_carved() {
    let t = tree();
    let p = plan(
        &resolved(&t, SandboxMode::ReadOnly),
        &opts(Tier::NoNamespaces),
    )
    .unwrap();
    assert!(!granted(&p, &t.home.join(".ssh/id_rsa"), READ_FILE));
    assert!(!granted(&p, &t.home.join(".ssh"), READ_FILE));
    // Positive controls: the sibling file, the workspace, the system.
    assert!(granted(&p, &t.home.join("notes.txt"), READ_FILE));
    assert!(granted(&p, &t.ws.join("src/main.rs"), READ_FILE));
    assert!(granted(&p, Path::new("/usr/bin/env"), READ_FILE));
    // Listing stays possible everywhere; nothing is writable in read-only.
    assert!(granted(&p, &t.home.join(".ssh"), super::rights::READ_DIR));
    assert!(!granted(&p, &t.ws.join("src/main.rs"), WRITE_FILE));
    // Only the directories on the path to the holes were listed.
    assert!(p.stats.dirs_listed < 20, "{:?}", p.stats);
}

#[test]
fn protected_inside_writable_yields_by_default_and_says_so() {
    let t = tree();
    let p = plan(
        &resolved(&t, SandboxMode::WorkspaceWrite),
        &opts(Tier::NoNamespaces),
    )
    .unwrap();
    assert!(granted(&p, &t.ws.join("new.txt"), WRITE_FILE));
    assert!(granted(&p, &t.ws.join(".git/hooks/pre-commit"), WRITE_FILE));
    let hooks = t.ws.join(".git/hooks");
    assert!(p
        .partial
        .iter()
        .any(|i| i.kind == PartialKind::NotEnforced && i.path.as_deref() == Some(&hooks)));
}

#[test]
fn protected_inside_writable_can_be_carved() {
    let t = tree();
    let mut o = opts(Tier::NoNamespaces);
    o.protect_in_writable = HoleStrategy::Carve;
    let p = plan(&resolved(&t, SandboxMode::WorkspaceWrite), &o).unwrap();
    assert!(!granted(
        &p,
        &t.ws.join(".git/hooks/pre-commit"),
        WRITE_FILE
    ));
    assert!(!granted(&p, &t.ws.join(".git/config"), WRITE_FILE));
    // A missing protected path (.envrc) cannot be created either...
    assert!(!granted(&p, &t.ws.join(".envrc"), WRITE_FILE));
    // ...at the price of the root itself, which the plan reports.
    assert!(!granted(&p, &t.ws.join("new.txt"), WRITE_FILE));
    assert!(p
        .partial
        .iter()
        .any(|i| i.kind == PartialKind::OverRestricted && i.path.as_deref() == Some(&t.ws)));
    // Positive controls: siblings along the path stay writable.
    assert!(granted(&p, &t.ws.join("src/main.rs"), WRITE_FILE));
    assert!(granted(&p, &t.ws.join(".git/objects/ab/cd"), WRITE_FILE));
    // Writes never escape the roots.
    assert!(!granted(&p, &t.home.join("notes.txt"), WRITE_FILE));
}

#[test]
fn workspace_env_file_carve_or_yield() {
    let t = tree();
    fs::write(t.ws.join(".env"), "TOKEN=1").unwrap();
    let r = resolved(&t, SandboxMode::WorkspaceWrite);
    let carve = plan(&r, &opts(Tier::NoNamespaces)).unwrap();
    assert!(!granted(&carve, &t.ws.join(".env"), READ_FILE));
    assert!(granted(&carve, &t.ws.join("src/main.rs"), READ_FILE));
    assert!(!granted(&carve, &t.ws.join("created-later.txt"), READ_FILE));
    assert!(carve
        .partial
        .iter()
        .any(|i| i.kind == PartialKind::OverRestricted
            && i.detail.contains("cannot be executed")
            && i.detail.contains("opener")));
    let mut o = opts(Tier::NoNamespaces);
    o.deny_read_in_writable = HoleStrategy::Yield;
    let yielded = plan(&r, &o).unwrap();
    assert!(granted(&yielded, &t.ws.join(".env"), READ_FILE));
    assert!(yielded.partial.iter().any(
        |i| i.kind == PartialKind::NotEnforced && i.path.as_deref() == Some(&t.ws.join(".env"))
    ));
}

#[test]
fn symlinks_are_never_granted_or_followed() {
    let t = tree();
    symlink(t.home.join(".ssh"), t.home.join("innocent")).unwrap();
    symlink(t.home.join("loop-b"), t.home.join("loop-a")).unwrap();
    symlink(t.home.join("loop-a"), t.home.join("loop-b")).unwrap();
    let p = plan(
        &resolved(&t, SandboxMode::ReadOnly),
        &opts(Tier::NoNamespaces),
    )
    .unwrap();
    for name in ["innocent", "loop-a", "loop-b"] {
        assert!(
            !p.rules.iter().any(|r| r.path == t.home.join(name)),
            "{name} got a rule"
        );
    }
    assert!(p.stats.symlinks_skipped >= 3);
    assert!(!granted(&p, &t.home.join(".ssh/id_rsa"), READ_FILE));
}

#[test]
fn symlinked_home_is_walked_at_its_real_location() {
    let t = tree();
    let alias = t.home.parent().unwrap().join("alias-home");
    symlink(&t.home, &alias).unwrap();
    let facts = HostFacts {
        homes: vec![alias.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let r = resolve(&SandboxPolicy::new(SandboxMode::ReadOnly, &t.ws), &facts).unwrap();
    let p = plan(&r, &opts(Tier::NoNamespaces)).unwrap();
    assert!(!granted(&p, &t.home.join(".ssh/id_rsa"), READ_FILE));
    assert!(granted(&p, &t.home.join("notes.txt"), READ_FILE));
}

#[test]
fn missing_deny_read_paths_carve_their_nearest_ancestor() {
    let t = tree();
    // ~/.aws does not exist: if it appears during the run it gets no read.
    let p = plan(
        &resolved(&t, SandboxMode::ReadOnly),
        &opts(Tier::NoNamespaces),
    )
    .unwrap();
    assert!(!granted(&p, &t.home.join(".aws/credentials"), READ_FILE));
    assert!(!granted(&p, &t.home.join("brand-new"), READ_FILE));
}

#[test]
fn wide_directories_cost_one_listing() {
    let t = tree();
    for i in 0..3000 {
        let d = t.home.join(format!("dir{i:04}"));
        fs::create_dir(&d).unwrap();
        fs::write(d.join("f"), "x").unwrap();
    }
    let p = plan(
        &resolved(&t, SandboxMode::ReadOnly),
        &opts(Tier::NoNamespaces),
    )
    .unwrap();
    assert!(granted(&p, &t.home.join("dir2999/f"), READ_FILE));
    assert!(p.stats.dirs_listed < 20, "{:?}", p.stats);
    assert!(p.rules.len() > 3000);
}

#[test]
fn inside_bwrap_needs_no_walk() {
    let t = tree();
    let p = plan(
        &resolved(&t, SandboxMode::WorkspaceWrite),
        &opts(Tier::InsideBwrap),
    )
    .unwrap();
    assert_eq!(p.stats.dirs_listed, 0);
    assert!(granted(&p, &t.ws.join("x"), WRITE_FILE));
    // (The temp tree lives under /tmp, which is bwrap's private tmpfs.)
    assert!(!granted(&p, Path::new("/etc/x"), WRITE_FILE));
    assert!(!granted(&p, Path::new("/usr/x"), WRITE_FILE));
    assert!(granted(&p, Path::new("/tmp/x"), WRITE_FILE));
    assert!(p.partial.is_empty(), "{:?}", p.partial);
}

#[test]
fn abi_seam_drops_features_and_reports_them() {
    let t = tree();
    let r = resolved(&t, SandboxMode::WorkspaceWrite);
    let full = plan(&r, &opts(Tier::NoNamespaces)).unwrap();
    assert_eq!(full.handled_net.names(), ["bind-tcp", "connect-tcp"]);
    assert_eq!(full.scopes.names(), ["abstract-unix-socket", "signal"]);
    assert!(full.dropped.is_empty());
    let mut o = opts(Tier::NoNamespaces);
    o.max_abi = Some(3);
    let old = plan(&r, &o).unwrap();
    assert_eq!(old.abi, 3);
    assert!(old.handled_net.is_empty() && old.scopes.is_empty());
    assert!(old.dropped.iter().any(|d| d.contains("connect-tcp")));
    assert!(old.dropped.iter().any(|d| d.contains("signal")));
    assert!(old.dropped.iter().any(|d| d.contains("ioctl-dev")));
    o.max_abi = Some(0);
    let none = plan(&r, &o).unwrap();
    assert_eq!(none.abi, 0);
    assert!(none.rules.is_empty() && none.handled_fs.is_empty());
    assert!(none.partial.iter().any(|i| i.detail.contains("seam")));
}

#[test]
fn network_on_leaves_tcp_and_abstract_sockets_alone() {
    let t = tree();
    let mut pol = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &t.ws);
    pol.network = true;
    let facts = HostFacts {
        homes: vec![t.home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let p = plan(&resolve(&pol, &facts).unwrap(), &opts(Tier::NoNamespaces)).unwrap();
    assert!(p.handled_net.is_empty());
    assert_eq!(p.scopes.names(), ["signal"]);
}

#[test]
fn full_access_is_not_a_landlock_mode() {
    let t = tree();
    let r = resolved(&t, SandboxMode::DangerFullAccess);
    assert!(matches!(
        plan(&r, &opts(Tier::NoNamespaces)),
        Err(LandlockError::NotSandboxed(_))
    ));
}

#[test]
fn plan_serialises_with_right_names() {
    let t = tree();
    let mut o = opts(Tier::NoNamespaces);
    o.tmp_dir = Some(t.home.parent().unwrap().to_path_buf());
    let p = plan(&resolved(&t, SandboxMode::WorkspaceWrite), &o).unwrap();
    let v = serde_json::to_value(&p).unwrap();
    let text = v.to_string();
    assert!(text.contains("\"read-file\""), "{text}");
    assert!(text.contains("\"make-reg\""));
    assert!(
        !text.contains("\"make-char\",\"make-dir\"") || p.handled_fs.names().contains(&"make-char")
    );
    assert_eq!(
        v["tmpdir"],
        serde_json::json!(o.tmp_dir.unwrap().to_string_lossy())
    );
    // Device nodes are handled (so denied) but granted nowhere.
    assert!(p.handled_fs.names().contains(&"make-char"));
    assert!(!p
        .rules
        .iter()
        .any(|r| r.access.names().contains(&"make-char")));
}

#[test]
fn complement_of_a_root_inside_a_hole_is_empty() {
    let t = tree();
    let w = complement::complement(&t.home.join(".ssh"), std::slice::from_ref(&t.home));
    assert!(w.grants.is_empty());
    let w = complement::complement(&t.ws, &[]);
    assert_eq!(w.grants.len(), 1);
}

#[test]
fn real_location_resolves_ancestors_but_not_the_last_component() {
    let t = tree();
    let alias = t.home.parent().unwrap().join("alias");
    symlink(&t.home, &alias).unwrap();
    symlink(t.home.join("notes.txt"), t.home.join("link")).unwrap();
    assert_eq!(
        complement::real_location(&alias.join("link")),
        t.home.join("link")
    );
    assert_eq!(
        complement::real_location(&alias.join("missing/deeper")),
        t.home.join("missing/deeper")
    );
}

#[test]
fn one_rule_per_path_with_the_union_of_rights() {
    let t = tree();
    let p = plan(
        &resolved(&t, SandboxMode::WorkspaceWrite),
        &opts(Tier::NoNamespaces),
    )
    .unwrap();
    let mut paths: Vec<_> = p.rules.iter().map(|r| r.path.clone()).collect();
    let n = paths.len();
    paths.dedup();
    assert_eq!(paths.len(), n);
    // The workspace is a sibling on the read walk and a writable root.
    let ws = p.rules.iter().find(|r| r.path == t.ws).unwrap();
    assert!(ws.access.contains(READ_FILE) && ws.access.contains(WRITE_FILE));
    assert_eq!(ws.why, [RuleWhy::ReadSibling, RuleWhy::WriteRoot]);
    // File rules never carry directory-only rights.
    for r in p.rules.iter().filter(|r| !r.is_dir) {
        assert!(super::rights::FILE_RIGHTS.contains(r.access), "{r:?}");
    }
}

#[test]
fn workspace_env_file_is_masked_when_a_mount_namespace_is_available() {
    let t = tree();
    fs::write(t.ws.join(".env"), "TOKEN=1").unwrap();
    fs::create_dir_all(t.ws.join("sub")).unwrap();
    fs::write(t.ws.join("sub/.env.local"), "TOKEN=2").unwrap();
    let r = resolved(&t, SandboxMode::WorkspaceWrite);
    let mut o = opts(Tier::NoNamespaces);
    o.mask = Some(super::mask::MaskVia::UserNs);
    let p = plan(&r, &o).unwrap();
    assert_eq!(p.deny_read_strategy, super::mask::DenyReadStrategy::Mask);
    assert_eq!(p.mask_via, Some(super::mask::MaskVia::UserNs));
    let masked: Vec<&Path> = p.masks.iter().map(|m| m.path.as_path()).collect();
    assert!(masked.contains(&t.ws.join(".env").as_path()), "{masked:?}");
    assert!(masked.contains(&t.ws.join("sub/.env.local").as_path()));
    assert!(p.masks.iter().all(|m| !m.is_dir));
    // The root is granted whole (so new entries can be read and executed):
    // no carve, no opener, no over-restricted item for the .env.
    assert!(granted(&p, &t.ws.join("target/debug/app"), READ_FILE));
    assert!(granted(
        &p,
        &t.ws.join("target/debug/app"),
        super::rights::EXECUTE
    ));
    assert!(p.opener_dirs.is_empty(), "{:?}", p.opener_dirs);
    assert!(!p
        .partial
        .iter()
        .any(|i| i.path.as_deref() == Some(&t.ws.join(".env"))));
    // Control: deny-read items outside writable roots stay carved by
    // Landlock, mask or not.
    assert!(!granted(&p, &t.home.join(".ssh/id_rsa"), READ_FILE));
    assert!(granted(&p, &t.home.join("notes.txt"), READ_FILE));

    // Without a mask (the probe failed): carve + opener, with its reason.
    let mut o = opts(Tier::NoNamespaces);
    o.mask_fallback = Some("unshare: Operation not permitted".into());
    let p = plan(&r, &o).unwrap();
    assert_eq!(
        p.deny_read_strategy,
        super::mask::DenyReadStrategy::CarveOpener
    );
    assert!(p.masks.is_empty() && p.mask_via.is_none());
    assert!(!granted(&p, &t.ws.join(".env"), READ_FILE));
    assert!(!granted(&p, &t.ws.join("target/debug/app"), READ_FILE));
    assert!(p.opener_dirs.contains(&t.ws));
    let item = p
        .partial
        .iter()
        .find(|i| i.path.as_deref() == Some(&t.ws.join(".env")))
        .unwrap();
    assert!(item.detail.contains("carve+opener"), "{}", item.detail);
    assert!(item.detail.contains("unshare: Operation not permitted"));
    assert!(item.detail.contains("cannot be executed"));
}

#[test]
fn a_mask_leaves_read_only_mode_and_empty_workspaces_alone() {
    let t = tree();
    let mut o = opts(Tier::NoNamespaces);
    o.mask = Some(super::mask::MaskVia::MountNs);
    // No deny-read item inside a writable root: nothing to mask.
    let p = plan(&resolved(&t, SandboxMode::WorkspaceWrite), &o).unwrap();
    assert_eq!(p.deny_read_strategy, super::mask::DenyReadStrategy::None);
    assert!(p.masks.is_empty() && p.mask_via.is_none());
    // Read-only mode has no writable root: the .env is carved by Landlock.
    fs::write(t.ws.join(".env"), "TOKEN=1").unwrap();
    let p = plan(&resolved(&t, SandboxMode::ReadOnly), &o).unwrap();
    assert!(p.masks.is_empty());
    assert!(!granted(&p, &t.ws.join(".env"), READ_FILE));
}
