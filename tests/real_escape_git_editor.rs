#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Catalogue items 39 and 40: every file git takes code or configuration
//! from, wherever the repository's own configuration points, and the files
//! the common editors run on opening the project, are held like
//! `.git/hooks` in both tiers (a read-only mount where the path exists in
//! the bwrap tier, the after-run revert otherwise), and the run says so.
//! Each attack has its positive control: the same write outside the
//! sandbox lands.

mod common;

use common::sandbox::*;
use std::fs;

const EVIL: &str = "EVIL-CODE";

fn ww(tier: &'static Tier) -> Case {
    Case {
        tier,
        mode: Mode::Ww,
    }
}

/// Write `rel` inside the sandbox (creating its directory), then check the
/// host still has `before` there (or nothing), and the report names it.
fn held(fx: &Fx, case: &Case, rel: &str, before: Option<&str>) {
    let script = format!(
        "mkdir -p \"$(dirname '{rel}')\" 2>/dev/null; printf '{EVIL}' > '{rel}' 2>/dev/null; echo done"
    );
    let r = fx.sh(case, &script);
    assert!(r.stdout.contains("done"), "[{case}] {rel}: {r:?}");
    let p = fx.ws.join(rel);
    assert_eq!(
        fs::read_to_string(&p).ok().as_deref(),
        before,
        "[{case}] {rel} on the host after the run"
    );
    let e = r.enforcement().to_string();
    let top = rel.split('/').next().unwrap();
    assert!(
        e.contains(top),
        "[{case}] the report does not name {top}: {e}"
    );
}

/// Positive control: the same write with no sandbox lands; then undone.
fn control(fx: &Fx, rel: &str) {
    let p = fx.ws.join(rel);
    let existed = fs::read_to_string(&p).ok();
    let c = fx.unsandboxed(&format!(
        "mkdir -p \"$(dirname '{rel}')\" && printf '{EVIL}' > '{rel}'"
    ));
    assert!(c.ok(), "{c:?}");
    assert_eq!(fs::read_to_string(&p).unwrap(), EVIL, "control {rel}");
    match existed {
        Some(t) => fs::write(&p, t).unwrap(),
        None => fs::remove_file(&p).unwrap(),
    }
}

#[test]
fn c40_editor_files_that_run_code_are_held() {
    for tier in tiers() {
        let case = ww(tier);
        let fx = Fx::new();
        // An existing JetBrains project (a mount in the bwrap tier).
        fs::create_dir_all(fx.ws.join(".idea")).unwrap();
        fs::write(fx.ws.join(".idea/workspace.xml"), "ORIG").unwrap();
        held(&fx, &case, ".idea/workspace.xml", Some("ORIG"));
        for rel in [
            ".idea/runConfigurations/evil.xml",
            ".devcontainer/devcontainer.json",
            ".devcontainer.json",
            ".zed/tasks.json",
            ".helix/languages.toml",
            ".fleet/run.json",
            ".nvim.lua",
            ".exrc",
            ".lazy.lua",
            ".dir-locals.el",
            ".vscode/tasks.json",
        ] {
            held(&fx, &case, rel, None);
            control(&fx, rel);
        }
    }
}

#[test]
fn c39_hooks_wherever_core_hooks_path_points_are_held() {
    for tier in tiers() {
        let case = ww(tier);
        let fx = Fx::new();
        // husky: core.hooksPath = .husky/_, whose wrappers run .husky/<hook>.
        fs::create_dir_all(fx.ws.join(".husky/_")).unwrap();
        fs::write(fx.ws.join(".husky/pre-commit"), "ORIG").unwrap();
        fs::write(fx.ws.join(".husky/_/h"), "ORIG").unwrap();
        fx.git(&fx.ws, &["config", "core.hooksPath", ".husky/_"]);
        held(&fx, &case, ".husky/pre-commit", Some("ORIG"));
        held(&fx, &case, ".husky/_/h", Some("ORIG"));
        held(&fx, &case, ".husky/_/post-checkout", None);
        control(&fx, ".husky/pre-commit");
        // A plain folder named by core.hooksPath (not in any table).
        fx.git(&fx.ws, &["config", "core.hooksPath", "githooks"]);
        fs::create_dir_all(fx.ws.join("githooks")).unwrap();
        fs::write(fx.ws.join("githooks/pre-push"), "ORIG").unwrap();
        held(&fx, &case, "githooks/pre-push", Some("ORIG"));
        held(&fx, &case, "githooks/post-merge", None);
        control(&fx, "githooks/post-merge");
        // Positive control for the table: without core.hooksPath the same
        // folder is ordinary workspace content.
        fx.git(&fx.ws, &["config", "--unset", "core.hooksPath"]);
        let r = fx.sh(&case, "printf x > githooks/post-merge");
        assert!(r.ok(), "[{case}] {r:?}");
        assert_eq!(
            fs::read_to_string(fx.ws.join("githooks/post-merge")).unwrap(),
            "x"
        );
    }
}

#[test]
fn c39_included_config_files_and_config_worktree_are_held() {
    for tier in tiers() {
        let case = ww(tier);
        let fx = Fx::new();
        // A committed team config the user included from .git/config.
        fs::write(fx.ws.join("team.gitconfig"), "[alias]\n\tst = status\n").unwrap();
        fx.git(&fx.ws, &["config", "include.path", "../team.gitconfig"]);
        held(
            &fx,
            &case,
            "team.gitconfig",
            Some("[alias]\n\tst = status\n"),
        );
        control(&fx, "team.gitconfig");
        // The per-worktree config git reads with extensions.worktreeConfig.
        held(&fx, &case, ".git/config.worktree", None);
        control(&fx, ".git/config.worktree");
        // Hook managers' own files, which the installed hooks run from.
        for rel in [".pre-commit-config.yaml", "lefthook.yml", ".lfsconfig"] {
            held(&fx, &case, rel, None);
            control(&fx, rel);
        }
    }
}
