#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! One precedence rule for every command (docs/CONFIG.md): the user
//! config, then the command line, then the project's tighten-only
//! override. A project `sandbox_mode = "read-only"` tightens
//! `sandbox run --sandbox workspace-write` exactly as it tightens
//! `exec --sandbox workspace-write`: in both, a write in the workspace is
//! refused by the real sandbox and the host has no file afterwards; with
//! `--no-project-config` (the positive control) both write it.

mod common;

use common::cli::{stderr, stdout_lines, Fixture};
use common::sandbox::{no_bwrap, path_without_bwrap, tiers};
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::json;

fn project_read_only(f: &Fixture) {
    std::fs::create_dir_all(f.ws.join(".codewhale")).unwrap();
    std::fs::write(
        f.ws.join(".codewhale/config.toml"),
        "sandbox_mode = \"read-only\"\n",
    )
    .unwrap();
}

fn cmd(f: &Fixture, args: &[&str]) -> std::process::Command {
    let mut c = f.cmd(args);
    // Fresh per-test state (no earlier command prepared the machine).
    let tmp = f.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    c.env("TMPDIR", &tmp);
    if no_bwrap() {
        c.env("PATH", path_without_bwrap());
    }
    c
}

fn sandbox_run(f: &Fixture, backend: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let report = f.root.join("report.json");
    let report_s = report.to_str().unwrap().to_string();
    let mut args = vec![
        "sandbox",
        "run",
        "--backend",
        backend,
        "--sandbox",
        "workspace-write",
        "--report-json",
        &report_s,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", "echo x > made.txt"]);
    let o = cmd(f, &args).output().unwrap();
    let rep: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (o.status.code().unwrap_or(-1), rep)
}

fn exec(f: &Fixture, backend: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec![
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
        "--backend",
        backend,
        "--sandbox",
        "workspace-write",
    ];
    args.extend_from_slice(extra);
    args.push("go");
    let o = cmd(f, &args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout_lines(&o)
}

fn shell_model() -> ScriptedModel {
    ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("s", "shell", json!({"command": "echo x > made.txt"})),
            reply("done"),
        ],
    )
}

#[test]
fn project_read_only_tightens_sandbox_run_and_exec_alike() {
    for tier in tiers() {
        // sandbox run
        let f = Fixture::with_config("");
        project_read_only(&f);
        let (code, rep) = sandbox_run(&f, tier.backend, &[]);
        assert_ne!(code, 0, "{}: the write must be refused: {rep}", tier.name);
        assert_eq!(rep["enforcement"]["mode"], "read-only", "{rep}");
        assert!(
            !f.ws.join("made.txt").exists(),
            "{}: sandbox run wrote",
            tier.name
        );
        let (code, rep) = sandbox_run(&f, tier.backend, &["--no-project-config"]);
        assert_eq!(code, 0, "{}: positive control: {rep}", tier.name);
        assert_eq!(rep["enforcement"]["mode"], "workspace-write", "{rep}");
        assert!(f.ws.join("made.txt").exists());

        // exec, the same flags and the same override
        let model = shell_model();
        let g = Fixture::new(&model, "");
        project_read_only(&g);
        let ev = exec(&g, tier.backend, &[]);
        assert_eq!(ev[0]["sandbox"], "read-only", "{}: {:?}", tier.name, ev[0]);
        // The command ran in the sandbox (not a set-up failure) and failed.
        let res = ev
            .iter()
            .find(|e| e["type"] == "tool_result" && e["call_id"] == "s")
            .expect("tool_result");
        assert!(!res["enforcement"].is_null(), "{res}");
        assert_ne!(res["exit_code"], 0, "{res}");
        assert_ne!(res["exit_code"], 125, "set-up failure, not a denial: {res}");
        assert!(!g.ws.join("made.txt").exists(), "{}: exec wrote", tier.name);
        let model = shell_model();
        let h = Fixture::new(&model, "");
        project_read_only(&h);
        let ev = exec(&h, tier.backend, &["--no-project-config"]);
        assert_eq!(ev[0]["sandbox"], "workspace-write");
        assert!(
            h.ws.join("made.txt").exists(),
            "{}: positive control: {ev:?}",
            tier.name
        );
    }
}
