#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The landlock tier's own "done when" checks, against the real binary:
//! `auto` selection with bubblewrap removed from `PATH` (and with a
//! configured bwrap path pointing nowhere), the refusal when Landlock is
//! also unavailable, the inside-bwrap Landlock report, and `sandbox
//! explain --backend landlock --json`.

mod common;

use common::sandbox::*;
use std::process::{Command, Output, Stdio};

/// `sandbox run --backend auto` in the fixture, with `PATH` and extra env.
fn auto(fx: &Fx, path: Option<&std::path::Path>, env: &[(&str, &str)], flags: &[&str]) -> Output {
    let report = fx.root.join("auto.json");
    std::fs::create_dir_all(fx.ws.join("sub")).unwrap();
    let _ = std::fs::remove_file(&report);
    let mut c = Command::new(BIN);
    c.args(["sandbox", "run", "--backend", "auto", "-C"])
        .arg(&fx.ws)
        .arg("--report-json")
        .arg(&report)
        .args(flags)
        // An existing subdirectory: entries created directly in the
        // workspace root are unreadable in the landlock tier while the
        // fixture's `.env` there is carved (reported as over-restricted).
        .args(["--", "sh", "-c", "echo ran > sub/out.txt; cat sub/out.txt"])
        .current_dir(&fx.ws)
        .env("HOME", &fx.home)
        .env_remove("CARGO_HOME")
        .env_remove("XDG_CACHE_HOME")
        .stdin(Stdio::null());
    if let Some(p) = path {
        c.env("PATH", p);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn report(fx: &Fx) -> serde_json::Value {
    std::fs::read_to_string(fx.root.join("auto.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
}

#[test]
fn auto_without_bwrap_on_path_picks_the_landlock_tier_and_says_so() {
    let fx = Fx::new();
    let out = auto(&fx, Some(path_without_bwrap()), &[], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert!(
        stderr.contains("note: using the landlock tier") && stderr.contains("not found on PATH"),
        "{stderr}"
    );
    let e = &report(&fx)["enforcement"];
    assert_eq!(e["backend"], "landlock", "{e}");
    assert_eq!(e["level"], "partial", "{e}");
    // The fixture has a `.env` in the workspace root: the label names how
    // it is held (the strategy the report gives).
    assert_eq!(
        e["label"],
        format!(
            "sandboxed: landlock+seccomp, deny-read by {}",
            e["deny_read_strategy"].as_str().unwrap_or("?")
        ),
        "{e}"
    );
    assert_eq!(e["partial"][0]["item"], "fallback", "{e}");
    assert!(e["partial"][0]["reason"]
        .as_str()
        .is_some_and(|s| s.starts_with("auto: bubblewrap unavailable")));
    // Positive control: with bwrap on PATH the same invocation uses bwrap,
    // with Landlock inside.
    let out = auto(&fx, None, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let e = &report(&fx)["enforcement"];
    assert_eq!(e["backend"], "bwrap", "{e}");
    assert_eq!(e["label"], "sandboxed: bwrap+seccomp+landlock", "{e}");
    assert!(e["landlock"]["abi"].as_u64().is_some_and(|a| a > 0), "{e}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("landlock tier"));
}

#[test]
fn auto_with_a_bwrap_path_pointing_nowhere_falls_back_too() {
    let fx = Fx::new();
    let out = auto(&fx, None, &[], &["--bwrap-path", "/nonexistent/bwrap"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(report(&fx)["enforcement"]["backend"], "landlock");
    // Explicit --backend bwrap never falls back.
    let r = Command::new(BIN)
        .args(["sandbox", "run", "--backend", "bwrap", "--bwrap-path"])
        .args(["/nonexistent/bwrap", "-C"])
        .arg(&fx.ws)
        .args(["--", "touch", "bwrap-ran"])
        .env("HOME", &fx.home)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(125), "{r:?}");
    assert!(!fx.ws.join("bwrap-ran").exists());
}

#[test]
fn auto_without_bwrap_and_without_landlock_refuses_with_125() {
    let fx = Fx::new();
    let out = auto(
        &fx,
        Some(path_without_bwrap()),
        &[("CODEWHALE_LANDLOCK_MAX_ABI", "0")],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!fx.ws.join("sub/out.txt").exists(), "the command ran");
    for needle in [
        "bwrap",
        "not found on PATH",
        "Landlock",
        "fix:",
        "--allow-unsandboxed",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?}: {stderr}");
    }
    // With --allow-unsandboxed it runs, labelled unsandboxed everywhere.
    let out = auto(
        &fx,
        Some(path_without_bwrap()),
        &[("CODEWHALE_LANDLOCK_MAX_ABI", "0")],
        &["--allow-unsandboxed"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let e = &report(&fx)["enforcement"];
    assert_eq!(e["level"], "unsandboxed", "{e}");
    assert_eq!(e["label"], "unsandboxed", "{e}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("UNSANDBOXED"));
}

#[test]
fn the_seam_also_reaches_landlock_inside_bwrap() {
    let fx = Fx::new();
    let out = auto(&fx, None, &[("CODEWHALE_LANDLOCK_MAX_ABI", "3")], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let e = &report(&fx)["enforcement"];
    assert_eq!(e["backend"], "bwrap", "{e}");
    assert_eq!(e["landlock"]["abi"], 3, "{e}");
    assert_eq!(e["landlock"]["status"], "partially", "{e}");
    // No Landlock-net at ABI 3: the network is still denied by netns+seccomp.
    let by = e["network_enforced_by"].to_string();
    assert!(by.contains("netns") && !by.contains("landlock-net"), "{by}");
}

fn explain(fx: &Fx, backend: &str) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["sandbox", "explain", "--json", "--backend", backend, "-C"])
        .arg(&fx.ws)
        .env("HOME", &fx.home)
        .env_remove("CARGO_HOME")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn explain_prints_the_exact_landlock_ruleset_and_seccomp_table() {
    let fx = Fx::new();
    let v = explain(&fx, "landlock");
    let ll = &v["landlock"];
    assert_eq!(ll["tier"], "no-namespaces");
    let rules = ll["rules"].as_array().unwrap();
    let ws = fx.ws.to_string_lossy();
    let ws_rule = rules.iter().find(|r| r["path"] == *ws).unwrap();
    assert!(
        ws_rule["access"].to_string().contains("write-file"),
        "{ws_rule}"
    );
    // The deny-read hole: ~/.ssh gets no rule, its siblings do.
    let ssh = fx.home.join(".ssh").to_string_lossy().into_owned();
    assert!(rules.iter().all(|r| r["path"] != *ssh.as_str()));
    let aws_sib = fx.home.join(".bashrc").to_string_lossy().into_owned();
    assert!(rules.iter().any(|r| r["path"] == *aws_sib.as_str()));
    // The network is off: a private network namespace where namespaces
    // are allowed (then TCP is not restricted by Landlock: only the
    // command's own loopback exists), else Landlock's TCP rules.
    let expected_net = if ll["private_net"].is_null() {
        r#"["bind-tcp","connect-tcp"]"#
    } else {
        "[]"
    };
    assert_eq!(ll["handled_net"].to_string(), expected_net);
    assert!(ll["partial"].as_array().is_some_and(|p| !p.is_empty()));
    assert_eq!(v["seccomp_options"]["deny_unix_socket"], true);
    assert!(v["seccomp"].as_array().is_some_and(|s| s.len() > 10));
    // bwrap shows its inside-bwrap plan too.
    let v = explain(&fx, "bwrap");
    assert_eq!(v["landlock"]["tier"], "inside-bwrap", "{}", v["landlock"]);
}

/// `[sandbox.landlock] protect_in_writable = "carve"` reaches the tier: the
/// default (yield) lets a `.git/hooks` write through during the run (the
/// after-run integrity check then takes it back off the host); with carve
/// configured the same write is denied during the run.
#[test]
fn config_makes_the_landlock_tier_carve_protected_paths() {
    let fx = Fx::new();
    let hook = fx.ws.join(".git/hooks/pre-commit");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    let run = |fx: &Fx| {
        Command::new(BIN)
            .args(["sandbox", "run", "--backend", "landlock", "-C"])
            .arg(&fx.ws)
            .args([
                "--",
                "sh",
                "-c",
                "echo evil > .git/hooks/pre-commit && cat .git/hooks/pre-commit",
            ])
            .env("HOME", &fx.home)
            .env_remove("CODEWHALE_HOME")
            .env_remove("CARGO_HOME")
            .env_remove("XDG_CACHE_HOME")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // Default: yield — the write goes through during the run (the
    // positive control here), and is reverted once the run ended.
    let out = run(&fx);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "evil");
    assert!(!hook.exists(), "the after-run check removes the hook");

    let cfg = fx.home.join(".codewhale");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[sandbox.landlock]\nprotect_in_writable = \"carve\"\n",
    )
    .unwrap();
    let out = run(&fx);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!hook.exists(), "carve: the hook must not reach the host");
}
