#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The first sandboxed command on a machine where no codewhale command ran
//! before: the per-user directory (`$XDG_RUNTIME_DIR/codewhale-<uid>` or
//! `$TMPDIR/codewhale-<uid>`) does not exist, and must be made by the run
//! itself (issue #14, part 1: it used to exit 125 until `doctor` made it).
//!
//! Each run gets a `HOME`, a `TMPDIR` and an `XDG_RUNTIME_DIR` that do not
//! exist yet, in both shapes a fresh machine has: no runtime directory at
//! all (the temp dir is used), and an empty runtime directory.

mod common;

use common::sandbox::{no_bwrap, path_without_bwrap, tiers, BIN};
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A machine state where nothing of codewhale's exists yet.
struct Fresh {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
    xdg: PathBuf,
}

impl Fresh {
    /// `runtime_dir_exists`: whether `$XDG_RUNTIME_DIR` exists (empty).
    fn new(runtime_dir_exists: bool) -> Fresh {
        let dir = tempfile::Builder::new()
            .prefix("cw-fresh-")
            .tempdir()
            .unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("README"), "readme").unwrap();
        let xdg = root.join("xdg");
        if runtime_dir_exists {
            std::fs::create_dir(&xdg).unwrap();
        }
        Fresh {
            _dir: dir,
            ws,
            home: root.join("home"),
            tmp: root.join("tmp"),
            xdg,
        }
    }

    fn env(&self, c: &mut Command) {
        c.env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .env_remove("CARGO_HOME")
            .env_remove("XDG_CACHE_HOME")
            .stdin(Stdio::null());
        if no_bwrap() {
            c.env("PATH", path_without_bwrap());
        }
    }

    /// Where the per-user directory must be after a bwrap run.
    fn base(&self) -> PathBuf {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let parent: &Path = if self.xdg.is_dir() {
            &self.xdg
        } else {
            &self.tmp
        };
        parent.join(format!("codewhale-{uid}"))
    }
}

#[test]
fn the_first_sandbox_run_on_a_fresh_machine_works() {
    for tier in tiers() {
        for mode in ["workspace-write", "read-only"] {
            for runtime_dir_exists in [false, true] {
                let f = Fresh::new(runtime_dir_exists);
                assert!(!f.base().exists() && !f.tmp.exists() && !f.home.exists());
                let mut c = Command::new(BIN);
                c.args([
                    "sandbox",
                    "run",
                    "--backend",
                    tier.backend,
                    "--sandbox",
                    mode,
                ])
                .arg("-C")
                .arg(&f.ws)
                .args(["--", "echo", "hi"])
                .current_dir(&f.ws);
                f.env(&mut c);
                let out = c.output().unwrap();
                let what = format!(
                    "[{}/{mode}, runtime dir {}]",
                    tier.name,
                    if runtime_dir_exists {
                        "empty"
                    } else {
                        "missing"
                    }
                );
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{what} stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n", "{what}");
                if tier.name == "bwrap" && mode == "workspace-write" {
                    assert!(
                        f.base().is_dir(),
                        "{what} {} was not made",
                        f.base().display()
                    );
                }
            }
        }
    }
}

#[test]
fn the_first_exec_on_a_fresh_machine_runs_its_shell_call() {
    for runtime_dir_exists in [false, true] {
        let model = ScriptedModel::start(
            Wire::Anthropic,
            vec![
                call(
                    "s1",
                    "shell",
                    json!({"command": "echo fresh > inside.txt && echo hi"}),
                ),
                reply("done"),
            ],
        );
        let fx = common::cli::Fixture::new(&model, "");
        let f = Fresh::new(runtime_dir_exists);
        let mut c = fx.cmd(&[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "go",
        ]);
        f.env(&mut c);
        // The fixture's HOME holds the config dir; keep it (it is new too).
        c.env("HOME", &fx.home);
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", common::cli::stderr(&o));
        let ev = common::cli::stdout_lines(&o);
        let s1 = ev
            .iter()
            .find(|e| e["type"] == "tool_result" && e["call_id"] == "s1")
            .unwrap_or_else(|| panic!("no tool_result: {ev:?}"));
        assert_eq!(s1["status"], "ok", "{s1}");
        assert_eq!(s1["exit_code"], 0, "{s1}");
        assert!(
            s1["enforcement"].as_str().unwrap().starts_with("sandboxed"),
            "{s1}"
        );
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("inside.txt")).unwrap(),
            "fresh\n"
        );
    }
}
