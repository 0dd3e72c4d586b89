#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The landlock tier's `mask` strategy (src/host/backends/landlock/mask.rs):
//! a `.env` at the workspace root is covered by a read-only mount in the
//! command's private mount namespace and the root is granted whole, so a
//! crate built at the root next to `.env` can be built, tested and run in
//! the same run, while `.env` can be neither read, moved, linked, removed,
//! written nor unmounted. Every denial has a positive control on a file of
//! the command's own; the host's `.env` is checked afterwards.
//!
//! Runs in the landlock tier only (the bwrap tier masks by mounts anyway),
//! as whoever runs the suite (root: `CLONE_NEWNS`; `cwtest`: a user
//! namespace). With `CODEWHALE_TEST_LANDLOCK_NO_MASK=1` in the environment
//! (the test seam, inherited by codewhale) the same tests expect the
//! `carve+opener` fallback and its honest `over-restricted` item instead.

mod common;

use common::sandbox::*;
use std::fs;
use std::path::Path;

const SEAM: &str = "CODEWHALE_TEST_LANDLOCK_NO_MASK";

fn landlock_ww() -> Vec<Case> {
    cases()
        .into_iter()
        .filter(|c| c.ww() && !c.tier.namespaces)
        .collect()
}

/// Whether this run expects the mask (the seam not set).
fn expect_mask() -> bool {
    std::env::var(SEAM).map_or(true, |v| v.trim() != "1")
}

/// The report's strategy; the label (what stream-json, the session log
/// and receipts carry) names the same one.
fn strategy(r: &Run) -> String {
    let e = r.enforcement();
    let s = e["deny_read_strategy"].as_str().unwrap_or("").to_string();
    let label = e["label"].as_str().unwrap_or("");
    if s == "none" || s.is_empty() {
        assert_eq!(label, "sandboxed: landlock+seccomp", "{e}");
    } else {
        assert_eq!(
            label,
            format!("sandboxed: landlock+seccomp, deny-read by {s}"),
            "{e}"
        );
    }
    s
}

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn host_env_intact(fx: &Fx, case: &Case) {
    assert_eq!(
        fx.read(&fx.ws.join(".env")).as_deref(),
        Some(DOTENV_MARK),
        "[{case}] .env on the host changed"
    );
}

fn no_secret(case: &Case, r: &Run) {
    assert!(
        !r.stdout.contains(DOTENV_MARK) && !r.stderr.contains(DOTENV_MARK),
        "[{case}] .env leaked: {r:?}"
    );
}

fn ns(p: &str) -> String {
    fs::read_link(format!("/proc/self/ns/{p}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_crate_at_the_root_next_to_env_builds_tests_and_runs() {
    for case in landlock_ww() {
        let fx = Fx::new();
        write(
            &fx.ws.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        write(
            &fx.ws.join("src/main.rs"),
            "fn answer() -> u32 { 6 * 7 }\n\
             fn main() { println!(\"answer={}\", answer()); }\n\
             #[test] fn it_answers() { assert_eq!(answer(), 42); }\n",
        );
        let script = format!(
            "export PATH='{}:/usr/local/bin:/usr/bin:/bin' CARGO_HOME=$PWD/.cargo-home \
             CARGO_TARGET_DIR=$PWD/target; unset CARGO_BUILD_TARGET_DIR RUSTC_WRAPPER; \
             cargo build --offline -q && echo built; \
             cargo test --offline -q 2>&1 | grep -o 'test result: ok. 1 passed' ; \
             ./target/debug/app",
            cargo_bin_dir().display()
        );
        let r = fx.sh(&case, &script);
        assert!(r.stdout.contains("built"), "[{case}] {r:?}");
        no_secret(&case, &r);
        host_env_intact(&fx, &case);
        if expect_mask() {
            assert_eq!(strategy(&r), "mask", "[{case}] {}", r.enforcement());
            assert!(r.ok(), "[{case}] {r:?}");
            assert!(
                r.stdout.contains("test result: ok. 1 passed"),
                "[{case}] {r:?}"
            );
            assert!(r.stdout.contains("answer=42"), "[{case}] {r:?}");
            // The exec limit belongs to the fallback only.
            assert!(
                !reported_partial(&r, &["over-restricted", "cannot be executed"]),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
            assert!(
                r.enforcement()["namespaces"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == "mount"),
                "[{case}] {}",
                r.enforcement()
            );
        } else {
            // The fallback: built (reads through the opener), not run.
            assert_eq!(strategy(&r), "carve+opener", "[{case}] {}", r.enforcement());
            assert!(!r.stdout.contains("answer=42"), "[{case}] {r:?}");
            assert!(
                reported_partial(
                    &r,
                    &["over-restricted", "carve+opener", "cannot be executed"]
                ),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
        }
    }
}

#[test]
fn a_masked_env_cannot_be_read_moved_linked_removed_written_or_unmounted() {
    for case in landlock_ww() {
        let fx = Fx::new();
        // Each attack prints a tag only if it worked; each is followed by
        // the same action on a file of our own (the positive control).
        let script = "echo OWN > own.txt; \
             cat .env; cat README >/dev/null && echo control-readme; \
             mv .env x && echo MV-ENV; mv own.txt own2.txt && mv own2.txt own.txt && echo control-mv; \
             ln .env h && { cat h; echo LN-ENV; }; ln own.txt h2 && cat h2; \
             ln -s .env s; cat s; ln -s own.txt s2 && cat s2; \
             cat \"/proc/self/root$PWD/.env\"; cat \"/proc/self/root$PWD/own.txt\"; \
             cat \"/proc/1/root$PWD/.env\" && echo PROC1-ROOT; \
             rm .env && echo RM-ENV; \
             { echo pwn > .env; } 2>/dev/null && echo WRITE-ENV; echo more >> own.txt && echo control-write; \
             grep -q \" $PWD/.env \" /proc/self/mountinfo && echo control-env-is-a-mount; \
             umount .env 2>/dev/null && echo UMOUNT; umount -l .env 2>/dev/null && echo UMOUNT-LAZY; \
             python3 -c 'import ctypes; l=ctypes.CDLL(None); print(\"UMOUNT2\" if l.umount2(b\".env\", 2) == 0 else \"umount2 failed\")'; \
             echo \"uid=$(id -u)\"; grep -E 'CapEff|CapBnd' /proc/self/status; \
             readlink /proc/self/ns/net /proc/self/ns/pid /proc/self/ns/mnt; true";
        let r = fx.sh(&case, script);
        no_secret(&case, &r);
        if !expect_mask() {
            // The fallback keeps the content unreadable, but lets `.env` be
            // renamed (and a new one written in its place): the limit its
            // report names; real_landlock_opener.rs tests that path.
            assert_eq!(strategy(&r), "carve+opener", "[{case}] {}", r.enforcement());
            continue;
        }
        host_env_intact(&fx, &case);
        assert_eq!(strategy(&r), "mask", "[{case}] {}", r.enforcement());
        for bad in [
            "MV-ENV",
            "LN-ENV",
            "PROC1-ROOT",
            "RM-ENV",
            "WRITE-ENV",
            "UMOUNT\n",
            "UMOUNT-LAZY",
            "UMOUNT2\n",
        ] {
            assert!(!r.stdout.contains(bad), "[{case}] {bad:?}: {r:?}");
        }
        for good in [
            "control-readme",
            "control-mv",
            "control-write",
            "control-env-is-a-mount",
            "umount2 failed",
        ] {
            assert!(r.stdout.contains(good), "[{case}] {good}: {r:?}");
        }
        // h2, s2, /proc/self/root/…/own.txt read our own file.
        assert_eq!(r.stdout.matches("OWN").count(), 3, "[{case}] {r:?}");
        // The uid is kept, no capability is left, and only the mount (and
        // user) namespace differ from the host's.
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        assert!(r.stdout.contains(&format!("uid={uid}\n")), "[{case}] {r:?}");
        assert!(
            r.stdout.contains("CapEff:\t0000000000000000"),
            "[{case}] {r:?}"
        );
        // The bounding set is empty too, unless the report says it is not
        // (no CAP_SETPCAP and no user namespace).
        let bounding_partial = reported_partial(&r, &["capability-bounding-set"]);
        assert_eq!(
            r.stdout.contains("CapBnd:\t0000000000000000"),
            !bounding_partial,
            "[{case}] {r:?}"
        );
        // The network namespace is the command's own when the network is
        // off and namespaces are allowed (a private loopback), reported so.
        let own_net = r.enforcement()["namespaces"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "net"));
        assert_eq!(!r.stdout.contains(&ns("net")), own_net, "[{case}] {r:?}");
        assert!(r.stdout.contains(&ns("pid")), "[{case}] {r:?}");
        assert!(!r.stdout.contains(&ns("mnt")), "[{case}] {r:?}");
        // Host afterwards: nothing was moved, linked or left behind.
        for p in ["x", "h"] {
            assert!(!fx.ws.join(p).exists(), "[{case}] {p} on the host");
        }
        assert_eq!(
            fx.read(&fx.ws.join("own.txt")).as_deref(),
            Some("OWN\nmore\n")
        );
    }
}

/// The seam forces the fallback in every environment, so CI tests the
/// carve and the opener on machines where the mask works.
#[test]
fn the_seam_forces_the_carve_and_the_opener() {
    for case in landlock_ww() {
        let fx = Fx::new();
        let report = fx.root.join("seam-report.json");
        let out = fx
            .command(
                &case,
                &["--report-json", report.to_str().unwrap()],
                &[
                    "sh",
                    "-c",
                    "echo x > new.txt; cat new.txt; mv .env e2; true",
                ],
            )
            .env(SEAM, "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "[{case}] {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "x\n", "[{case}]");
        let rep: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
        let e = rep.get("enforcement").unwrap_or(&rep);
        assert_eq!(e["deny_read_strategy"], "carve+opener", "[{case}] {e}");
        assert!(
            e["partial"].as_array().unwrap().iter().any(|i| i["reason"]
                .as_str()
                .is_some_and(|s| s.contains(SEAM) && s.contains("cannot be executed"))),
            "[{case}] {}",
            e["partial"]
        );
        // The fallback let the command rename .env; the after-run step put
        // it back and says so by path.
        host_env_intact(&fx, &case);
        assert!(!fx.ws.join("e2").exists(), "[{case}] e2 left on the host");
        let env = fx.ws.join(".env");
        assert!(
            e["reverted"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["action"] == "moved-back"
                    && v["path"] == env.to_str().unwrap()
                    && v["why"].as_str().is_some_and(|w| w.contains("e2"))),
            "[{case}] {}",
            e["reverted"]
        );
        assert!(
            e["partial"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["item"] == "deny-read"
                    && i["reason"].as_str().is_some_and(|s| s.contains("put back"))),
            "[{case}] {}",
            e["partial"]
        );
    }
}

/// The fallback's rename is put back after a crash too: codewhale is
/// SIGKILLed after the command renamed `.env`, so the run never reaches
/// its own after-run step; the next codewhale command (`--version`)
/// renames it back from the list the run kept in its integrity directory.
/// Positive control: until then the rename is there on the host.
#[test]
fn a_rename_by_a_sigkilled_fallback_run_is_put_back_by_the_next_command() {
    use std::time::{Duration, Instant};
    for case in landlock_ww() {
        let fx = Fx::new();
        let mark = fx.ws.join("started.mark");
        let dur = format!("27.{}", std::process::id());
        let script = format!("mv .env e2 && echo > started.mark; exec sleep {dur}");
        let mut child = fx
            .command(&case, &[], &["sh", "-c", &script])
            .env(SEAM, "1")
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !mark.exists() {
            assert!(t.elapsed() < Duration::from_secs(30), "[{case}] no marker");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // The stage holds the run's lock until it has reaped the tree.
        fx.wait_run_unlocked(&case.to_string());
        let run = fx.integrity_run_dir();
        // Positive control: the crash left the rename in place.
        assert!(
            fx.ws.join("e2").exists() && !fx.ws.join(".env").exists(),
            "[{case}] the command's rename did not happen"
        );
        let next = fx.next_command();
        let err = String::from_utf8_lossy(&next.stderr);
        assert!(
            err.contains(".env"),
            "[{case}] says what it put back: {err}"
        );
        host_env_intact(&fx, &case);
        assert!(!fx.ws.join("e2").exists(), "[{case}] e2 left on the host");
        let left: Vec<_> = fs::read_dir(&run)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("renamed-"))
            .collect();
        assert!(left.is_empty(), "[{case}] the list stays: {left:?}");
    }
}
