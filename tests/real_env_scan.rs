#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Workspace `.env` files are masked at any depth and in any repository
//! size, and whatever the scan cannot reach makes the run `partial`,
//! named in the report and in `exec`'s stream-json (issue #14 part 3).
//!
//! Before the fix the scan stopped at depth 8 and after 50,000 entries,
//! silently: such a `.env` was readable and the report said `full`.

mod common;

use common::sandbox::*;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::json;
use std::fs;
use std::path::Path;
use std::process::Command;

const DEEP_MARK: &str = "DEEP-DOTENV-MARK";
const LATE_MARK: &str = "LATE-DOTENV-MARK";
const LOCKED_MARK: &str = "LOCKED-DOTENV-MARK";

/// `n` empty files in `dir`.
fn many_files(dir: &Path, n: usize) {
    fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        fs::File::create(dir.join(format!("src{i}.rs"))).unwrap();
    }
}

/// `cmd` again, but as root without the capabilities that bypass file
/// permissions (so a mode-000 directory is unreadable to codewhale too, as
/// it is for any user); unchanged for an unprivileged user.
fn without_dac_override(cmd: &Command) -> Command {
    let mut c = if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search",
        ])
        .arg(cmd.get_program());
        c
    } else {
        Command::new(cmd.get_program())
    };
    c.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c.stdin(std::process::Stdio::null());
    c
}

#[test]
fn env_files_deeper_than_8_and_after_50000_entries_are_masked() {
    let fx = Fx::new();
    let deep = fx.ws.join("a/b/c/d/e/f/g/h/i/j");
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join(".env"), DEEP_MARK).unwrap();
    // Two packages of 50,001 files, each with a .env: whichever the walk
    // reaches second, its .env comes after more than 50,000 entries.
    for pkg in ["pkg1", "pkg2"] {
        many_files(&fx.ws.join(pkg), 50_001);
        fs::write(fx.ws.join(pkg).join(".env.local"), LATE_MARK).unwrap();
    }
    let script = "cat a/b/c/d/e/f/g/h/i/j/.env pkg1/.env.local pkg2/.env.local";
    // Positive control: without a sandbox all three are readable.
    let r = fx.unsandboxed(script);
    assert!(
        r.stdout.contains(DEEP_MARK) && r.stdout.matches(LATE_MARK).count() == 2,
        "{r:?}"
    );
    for case in cases() {
        let r = fx.sh(&case, script);
        assert!(
            !r.stdout.contains(DEEP_MARK) && !r.stdout.contains(LATE_MARK),
            "[{case}] a .env was readable: {}",
            r.stdout
        );
        let masked = r.enforcement()["masked_paths"].to_string();
        for p in [
            "a/b/c/d/e/f/g/h/i/j/.env",
            "pkg1/.env.local",
            "pkg2/.env.local",
        ] {
            assert!(masked.contains(p), "[{case}] {p} not in {masked}");
        }
        // Control: an ordinary file next to them is readable.
        let r = fx.sh(&case, "cat pkg2/src7.rs && echo readable");
        assert!(r.stdout.contains("readable"), "[{case}] {r:?}");
    }
}

#[test]
fn a_directory_the_scan_cannot_list_makes_the_run_partial_and_names_it() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    let locked = fx.ws.join("vendor/locked");
    fs::create_dir_all(&locked).unwrap();
    fs::write(locked.join(".env"), LOCKED_MARK).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    for case in cases() {
        let report = fx
            .root
            .join(format!("report-locked-{case}.json").replace('/', "-"));
        let cmd = fx.command(
            &case,
            &["--report-json", report.to_str().unwrap()],
            &["true"],
        );
        let out = without_dac_override(&cmd).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "[{case}] {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
        let e = &v["enforcement"];
        assert_eq!(e["level"], "partial", "[{case}] {e}");
        let named = e["partial"].as_array().unwrap().iter().any(|p| {
            p["reason"]
                .as_str()
                .is_some_and(|s| s.contains("vendor/locked") && s.contains("not masked"))
        });
        assert!(named, "[{case}] the unscanned directory is not named: {e}");
    }
    // Control: with the directory readable the same run names nothing.
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    let case = &cases()[0];
    let r = fx.run(case, &[], &["true"]);
    assert!(
        !r.enforcement()["partial"]
            .to_string()
            .contains("vendor/locked"),
        "{}",
        r.enforcement()
    );
}

#[test]
fn exec_stream_json_says_partial_and_names_what_is_not_masked() {
    use std::os::unix::fs::PermissionsExt;
    let model = ScriptedModel::start(
        Wire::Anthropic,
        vec![
            call("s1", "shell", json!({"command": "echo ran"})),
            reply("done"),
        ],
    );
    let f = common::cli::Fixture::new(&model, "");
    let locked = f.ws.join("locked");
    fs::create_dir_all(&locked).unwrap();
    fs::write(locked.join(".env"), LOCKED_MARK).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = f.cmd(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "go",
    ]);
    if no_bwrap() {
        cmd.env("PATH", path_without_bwrap());
    }
    let o = without_dac_override(&cmd).output().unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::cli::stderr(&o));
    let ev = common::cli::stdout_lines(&o);
    let s1 = ev
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "s1")
        .unwrap_or_else(|| panic!("no tool_result: {ev:?}"));
    assert_eq!(s1["status"], "ok", "{s1}");
    // The tool result's enforcement summary: level partial, and an item
    // naming the directory whose .env is not masked.
    let enforced = &s1["enforced"];
    assert_eq!(enforced["level"], "partial", "{s1}");
    let named = enforced["partial"].as_array().unwrap().iter().any(|p| {
        p["item"] == "deny-read"
            && p["reason"]
                .as_str()
                .is_some_and(|r| r.contains("locked") && r.contains("not masked"))
    });
    assert!(named, "{enforced}");
}

/// Issue 29: the scan's listings are kept between commands (under
/// `~/.codewhale/cache/env-scan`), so a command lists only the directories
/// that changed; a `.env` made ten levels down in a large tree since the
/// last command is still masked by the next one, in every tier.
#[test]
fn a_dotenv_made_since_the_last_command_is_masked_by_the_next() {
    const SINCE_MARK: &str = "DOTENV-MADE-SINCE-MARK";
    let fx = Fx::new();
    for a in 0..10 {
        for b in 0..30 {
            many_files(&fx.ws.join(format!("p{a}/m{b}")), 10);
        }
    }
    let rel = "d1/d2/d3/d4/d5/d6/d7/d8/d9/d10";
    let deep = fx.ws.join(rel);
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("keep.txt"), "keep").unwrap();
    // Past the racy window: listings made now are trusted next time.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let cache_dir = fx.home.join(".codewhale/cache/env-scan");
    let stamp = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(p).unwrap();
        (m.ino(), m.mtime(), m.mtime_nsec())
    };
    let mut first = true;
    for case in cases() {
        let r = fx.run(&case, &[], &["true"]);
        assert!(r.ok(), "[{case}] {r:?}");
        let files: Vec<_> = fs::read_dir(&cache_dir)
            .unwrap_or_else(|e| panic!("[{case}] no scan cache in {cache_dir:?}: {e}"))
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(files.len(), 1, "[{case}] {files:?}");
        // Nothing changed: the next command reuses every listing and
        // leaves the file as it was. (First case only: later ones start
        // right after the last case removed its `.env`, and a directory
        // changed that recently is listed again until the racy window
        // has passed.)
        if first {
            let before = stamp(&files[0]);
            assert!(fx.run(&case, &[], &["true"]).ok());
            assert_eq!(stamp(&files[0]), before, "[{case}] listed again");
            first = false;
        }

        fs::write(deep.join(".env"), SINCE_MARK).unwrap();
        let r = fx.sh(&case, &format!("cat {rel}/.env; echo done"));
        assert!(r.stdout.contains("done"), "[{case}] {r:?}");
        assert!(
            !r.stdout.contains(SINCE_MARK),
            "[{case}] the new .env was readable: {}",
            r.stdout
        );
        let masked = r.enforcement()["masked_paths"].to_string();
        assert!(masked.contains(&format!("{rel}/.env")), "[{case}] {masked}");
        fs::remove_file(deep.join(".env")).unwrap();
    }
    // Control: unsandboxed, the same .env is readable.
    fs::write(deep.join(".env"), SINCE_MARK).unwrap();
    assert!(fx
        .unsandboxed(&format!("cat {rel}/.env"))
        .stdout
        .contains(SINCE_MARK));
}
