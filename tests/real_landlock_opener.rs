#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The landlock tier's opener (src/host/backends/landlock/opener/): with a
//! masked `.env` at the workspace root, what the command creates next to
//! it is readable in the same run, and none of the ways of reaching
//! `.env`'s content through a new entry works. Every denial has a positive
//! control in the same run (the same construction on a file of the
//! command's own). Runs in the landlock tier only (the bwrap tier masks by
//! mounts and needs no opener), as whoever runs the suite (root, `cwtest`,
//! and with bwrap hidden).

mod common;

use common::sandbox::*;

/// `sh -c SCRIPT` in the sandbox with the `carve+opener` fallback forced by
/// the test seam `CODEWHALE_TEST_LANDLOCK_NO_MASK=1`: this file tests the
/// opener, which the default `mask` strategy does not need (see
/// real_landlock_mask.rs).
fn sh(fx: &Fx, case: &Case, script: &str) -> Run {
    let report = fx.root.join(format!(
        "opener-report-{}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let out = fx
        .command(
            case,
            &["--report-json", report.to_str().unwrap()],
            &["sh", "-c", script],
        )
        .env("CODEWHALE_TEST_LANDLOCK_NO_MASK", "1")
        .output()
        .unwrap();
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        report: std::fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(serde_json::Value::Null),
    };
    assert!(
        r.code != 125,
        "[{case}] the sandbox could not be set up: {r:?}"
    );
    assert_eq!(
        r.enforcement()["deny_read_strategy"],
        "carve+opener",
        "[{case}] the seam did not force the fallback"
    );
    r
}

fn landlock_ww() -> Vec<Case> {
    cases()
        .into_iter()
        .filter(|c| c.ww() && !c.tier.namespaces)
        .collect()
}

fn no_secret(case: &Case, r: &Run) {
    assert!(
        !r.stdout.contains(DOTENV_MARK) && !r.stderr.contains(DOTENV_MARK),
        "[{case}] .env leaked: {r:?}"
    );
}

fn opener_active(case: &Case, r: &Run) {
    assert!(
        reported_partial(
            r,
            &["over-restricted", "opener active in", "cannot be executed"]
        ),
        "[{case}] the report does not say the opener is active: {}",
        r.enforcement()["partial"]
    );
}

fn host_env_intact(fx: &Fx, case: &Case) {
    assert_eq!(
        fx.read(&fx.ws.join(".env")).as_deref(),
        Some(DOTENV_MARK),
        "[{case}] .env on the host changed"
    );
}

#[test]
fn new_files_and_directories_next_to_env_are_usable() {
    for case in landlock_ww() {
        let fx = Fx::new();
        let r = sh(
            &fx,
            &case,
            "set -e; echo x > new.txt && cat new.txt; \
             mkdir build && cd build && ls && echo y > f && ls && cat f && cd ..; \
             mkdir -p deep/a/b && echo z > deep/a/b/c && cat deep/a/b/c; \
             printf 'rw' > rw.txt; exec 3<>rw.txt; cat <&3; exec 3<&-; echo; \
             cat README",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(
            lines,
            ["x", "f", "y", "z", "rw", "readme"],
            "[{case}] {r:?}"
        );
        opener_active(&case, &r);
        no_secret(&case, &r);
        host_env_intact(&fx, &case);
        // What the command made is on the host, with the command's modes.
        assert_eq!(fx.read(&fx.ws.join("build/f")).as_deref(), Some("y\n"));
    }
}

#[test]
fn the_opener_keeps_env_unreadable_through_links_and_renames() {
    for case in landlock_ww() {
        let fx = Fx::new();
        // Each line: the attack on .env, then the same construction on a
        // file of our own (the positive control), each printing a tag.
        let script = "echo OWN > own.txt; \
             cat .env && echo DIRECT-READ; cat README >/dev/null && echo control-readme; \
             ln .env h && { cat h && echo HARDLINK-READ; }; ln own.txt h2 && cat h2; \
             ln -s .env s && { cat s && echo SYMLINK-READ; }; ln -s own.txt s2 && cat s2; \
             mkdir d && ln -s ../.env d/x && { cat d/x && echo DIR-SYMLINK-READ; }; \
               ln -s ../own.txt d/y && cat d/y; \
             ln -s \"$PWD/.env\" abs && { cat abs && echo ABS-SYMLINK-READ; }; \
             if mv .env e2; then echo renamed; cat e2 && echo RENAMED-READ; mv e2 .env; fi; \
             mv own.txt own2.txt && cat own2.txt; \
             cp README .env.local; cat .env.local && echo ENVNAME-READ; \
             true";
        let r = sh(&fx, &case, script);
        no_secret(&case, &r);
        for bad in [
            "DIRECT-READ",
            "HARDLINK-READ",
            "SYMLINK-READ",
            "DIR-SYMLINK-READ",
            "ABS-SYMLINK-READ",
            "RENAMED-READ",
            "ENVNAME-READ",
        ] {
            assert!(!r.stdout.contains(bad), "[{case}] {bad}: {r:?}");
        }
        // Positive controls: the same constructions on our own file work
        // (hard link, symlink, symlink in a new directory, rename).
        assert!(r.stdout.contains("control-readme"), "[{case}] {r:?}");
        assert_eq!(
            r.stdout.matches("OWN").count(),
            4,
            "[{case}] h2, s2, d/y and own2.txt must read: {r:?}"
        );
        // Landlock lets the rename of .env happen (same directory, no
        // right gained); whether it did is printed, and .env is back.
        opener_active(&case, &r);
        host_env_intact(&fx, &case);
        assert!(
            r.enforcement()["partial"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["reason"]
                    .as_str()
                    .is_some_and(|s| s.contains("refused") && !s.contains(" 0 refused"))),
            "[{case}] the opener refused nothing: {}",
            r.enforcement()["partial"]
        );
    }
}

#[test]
fn a_symlink_flipped_during_opens_never_yields_env() {
    for case in landlock_ww() {
        let fx = Fx::new();
        // One process flips `lnk` between .env and our own file as fast as
        // it can (ln -sfn + mv -T: an atomic rename over the link) while
        // another opens it 400 times.
        let r = sh(&fx,
            &case,
            "echo MINE > mine.txt; ln -s mine.txt lnk; \
             ( while :; do ln -sfn .env t1 && mv -T t1 lnk; ln -sfn mine.txt t2 && mv -T t2 lnk; done ) & \
             flipper=$!; \
             i=0; while [ $i -lt 400 ]; do cat lnk 2>/dev/null; i=$((i+1)); done; \
             kill $flipper; wait $flipper 2>/dev/null; true",
        );
        no_secret(&case, &r);
        assert!(
            r.stdout.contains("MINE"),
            "[{case}] positive control: our own target was never read: {r:?}"
        );
        host_env_intact(&fx, &case);
    }
}

#[test]
fn a_path_rewritten_during_open_never_yields_env() {
    for case in landlock_ww() {
        let fx = Fx::new();
        // A thread rewrites the path buffer between "mine" and ".env"
        // while another thread opens it: whatever the opener read, the
        // kernel's own re-read or our open never hands out .env.
        let py = r#"import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
open('mine.txt', 'w').write('MINE')
buf = ctypes.create_string_buffer(16)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, b'mine.txt\0', 9)
        ctypes.memmove(buf, b'.env\0', 5)
t = threading.Thread(target=flip); t.start()
seen = set()
for _ in range(3000):
    fd = libc.open(buf, os.O_RDONLY)
    if fd >= 0:
        seen.add(os.read(fd, 64).decode(errors='replace')); os.close(fd)
stop = True; t.join()
print(sorted(seen))
"#;
        std::fs::write(fx.ws.join("race.py"), py).unwrap();
        let r = sh(&fx, &case, "python3 race.py");
        assert!(r.ok(), "[{case}] {r:?}");
        no_secret(&case, &r);
        assert!(
            r.stdout.contains("MINE"),
            "[{case}] positive control: {r:?}"
        );
        host_env_intact(&fx, &case);
    }
}

#[test]
fn binaries_built_next_to_env_cannot_run_and_the_report_says_so() {
    for case in landlock_ww() {
        let fx = Fx::new();
        // A copy of a system binary made in the run: readable (the opener),
        // not executable (Landlock's execute right is checked on the file
        // at execve, which is not an open the opener sees).
        let r = sh(
            &fx,
            &case,
            "mkdir bin && cp /bin/true bin/mytrue && cmp /bin/true bin/mytrue && echo same; \
             ./bin/mytrue && echo RAN; true",
        );
        assert!(r.stdout.contains("same"), "[{case}] {r:?}");
        assert!(!r.stdout.contains("RAN"), "[{case}] {r:?}");
        assert!(r.stderr.contains("Permission denied"), "[{case}] {r:?}");
        opener_active(&case, &r);
    }
}
