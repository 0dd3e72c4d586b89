//! Shared helpers for the `exec` integration tests: a temp HOME, a temp
//! CODEWHALE_HOME with a `[providers.custom]` pointing at the scripted
//! model, a workspace, and readers for stream-json and session files.
#![allow(dead_code)]

use super::scripted_model::ScriptedModel;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub cw_home: PathBuf,
    pub ws: PathBuf,
}

impl Fixture {
    /// Config: `[providers.custom]` for `model`, key `test-key`, plus `extra`.
    pub fn new(model: &ScriptedModel, extra: &str) -> Self {
        Self::with_config(&format!(
            "[providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n{extra}",
            model.kind(),
            model.base_url()
        ))
    }

    pub fn with_config(config: &str) -> Self {
        Self::with_config_in(config, &std::env::temp_dir())
    }

    /// As [`Fixture::with_config`], in a fresh directory under `parent`
    /// (a real-sandbox test that must see its paths outside the
    /// command's private `/tmp` passes `CARGO_TARGET_TMPDIR`).
    pub fn with_config_in(config: &str, parent: &Path) -> Self {
        let dir = tempfile::tempdir_in(parent).expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let home = root.join("home");
        let cw_home = root.join("cwhome");
        let ws = root.join("ws");
        for d in [&home, &cw_home, &ws] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(cw_home.join("config.toml"), config).expect("config");
        Fixture {
            _dir: dir,
            root,
            home,
            cw_home,
            ws,
        }
    }

    /// `codewhale ARGS…` with a clean environment (no real keys, no real HOME).
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_codewhale"));
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEWHALE_HOME", &self.cw_home)
            // A fresh machine: no per-user codewhale directory exists yet.
            .env("TMPDIR", self.root.join("host-tmp"))
            .env("XDG_RUNTIME_DIR", self.root.join("host-runtime"))
            .current_dir(&self.ws)
            .stdin(std::process::Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run codewhale")
    }

    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.cw_home.join("sessions"))
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

pub fn stdout_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

pub fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("session file");
    assert!(
        text.ends_with('\n'),
        "every committed record ends with a newline"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).expect("session line is JSON"))
        .collect()
}

/// Sequence numbers are 1..=n without gaps.
pub fn assert_seq_contiguous(recs: &[Value]) {
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["seq"].as_u64(), Some(i as u64 + 1), "record {i}: {r}");
        assert_eq!(r["schema"], "codewhale.session");
        assert_eq!(r["v"], codewhale::session::VERSION);
    }
}

pub fn of_type<'a>(v: &'a [Value], ty: &str) -> Vec<&'a Value> {
    v.iter().filter(|e| e["type"] == ty).collect()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
