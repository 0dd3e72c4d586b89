#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale exec` reads everything through `config::load`: the project
//! override tightens the sandbox (and `--no-project-config` skips it), an
//! invalid override is an error naming file, line and key (exit 78), keys a
//! project may not set are reported, and the user's `[sandbox] deny_read`
//! reaches the file tools.

use crate::common;

use common::cli::*;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

fn by_call<'a>(events: &'a [Value], ty: &str, id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == ty && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no {ty} for {id}"))
}

fn write_model() -> ScriptedModel {
    ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call(
                "w",
                "write_file",
                json!({"path": "made.txt", "content": "x"}),
            ),
            reply("done"),
        ],
    )
}

fn project_override(f: &Fixture, text: &str) {
    std::fs::create_dir_all(f.ws.join(".codewhale")).unwrap();
    std::fs::write(f.ws.join(".codewhale/config.toml"), text).unwrap();
}

fn exec(f: &Fixture, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--output-format",
        "stream-json",
    ];
    args.extend_from_slice(extra);
    args.push("go");
    f.run(&args)
}

#[test]
fn project_override_tightens_the_sandbox_and_no_project_config_skips_it() {
    let model = write_model();
    let f = Fixture::new(&model, "");
    project_override(&f, "sandbox_mode = \"read-only\"\n");
    let o = exec(&f, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["type"], "metadata");
    assert_eq!(ev[0]["sandbox"], "read-only");
    assert_eq!(ev[0]["config"]["project_config"], "applied");
    assert!(ev[0]["config"]["posture"]
        .as_str()
        .unwrap()
        .contains("sandbox=read-only"));
    assert_eq!(by_call(&ev, "tool_result", "w")["status"], "denied");
    assert!(!f.ws.join("made.txt").exists(), "read-only sandbox wrote");

    // Positive control: the same run with the override skipped writes.
    let model = write_model();
    let g = Fixture::new(&model, "");
    project_override(&g, "sandbox_mode = \"read-only\"\n");
    let o = exec(&g, &["--no-project-config"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["sandbox"], "workspace-write");
    assert_eq!(
        ev[0]["config"]["project_config"],
        "skipped (--no-project-config)"
    );
    assert_eq!(by_call(&ev, "tool_result", "w")["status"], "ok");
    assert!(g.ws.join("made.txt").exists());
}

#[test]
fn a_project_cannot_loosen_and_its_foreign_keys_are_reported() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    let f = Fixture::with_config(&format!(
        "sandbox_mode = \"read-only\"\n[providers.custom]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n",
        model.base_url()
    ));
    project_override(
        &f,
        "sandbox_mode = \"danger-full-access\"\nbase_url = \"http://198.51.100.7/v1\"\n",
    );
    let o = exec(&f, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let ev = stdout_lines(&o);
    assert_eq!(ev[0]["sandbox"], "read-only", "the project loosened it");
    let ignored: Vec<&str> = ev[0]["config"]["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert!(ignored.contains(&"base_url"), "{ignored:?}");
    assert!(ignored.contains(&"sandbox_mode"), "{ignored:?}");
    assert!(err.contains("`base_url` ignored"), "{err}");
    // The model was reached at the user's base URL, not the project's.
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn an_invalid_override_is_an_error_naming_file_line_and_key() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    let f = Fixture::new(&model, "");
    project_override(&f, "model = \"m\"\nsandbox_mode = \"wide-open\"\n");
    let o = exec(&f, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(78), "{err}");
    assert!(err.contains(".codewhale/config.toml"), "{err}");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("sandbox_mode"), "{err}");
    assert!(model.requests().is_empty(), "ran despite a bad override");
    assert!(f.session_files().is_empty());
    // --no-project-config really skips it.
    let o = exec(&f, &["--no-project-config"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn user_sandbox_deny_read_reaches_the_file_tools() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            call("secret", "read_file", json!({"path": "secret.txt"})),
            call("plain", "read_file", json!({"path": "plain.txt"})),
            reply("done"),
        ],
    );
    // The workspace path is only known after the fixture exists, so write
    // the config afterwards.
    let f = Fixture::new(&model, "");
    let cfg = std::fs::read_to_string(f.cw_home.join("config.toml")).unwrap();
    std::fs::write(
        f.cw_home.join("config.toml"),
        format!(
            "[sandbox]\ndeny_read = [\"{}\"]\n{cfg}",
            f.ws.join("secret.txt").display()
        ),
    )
    .unwrap();
    std::fs::write(f.ws.join("secret.txt"), "TOP-SECRET").unwrap();
    std::fs::write(f.ws.join("plain.txt"), "plain").unwrap();
    let o = exec(&f, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    assert_eq!(by_call(&ev, "tool_result", "secret")["status"], "denied");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("TOP-SECRET"));
    assert_eq!(by_call(&ev, "tool_result", "plain")["output"], "plain");
}

#[test]
fn danger_full_access_without_auto_keeps_the_sandbox_and_says_so() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    let f = Fixture::new(&model, "");
    let o = f.run(&[
        "exec",
        "--provider",
        "custom",
        "--sandbox",
        "danger-full-access",
        "--output-format",
        "stream-json",
        "hi",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(stdout_lines(&o)[0]["sandbox"], "workspace-write");
    assert!(err.contains("without --auto"), "{err}");
    // Positive control: with --auto the flag removes the sandbox.
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    let g = Fixture::new(&model, "");
    let o = g.run(&[
        "exec",
        "--auto",
        "--provider",
        "custom",
        "--sandbox",
        "danger-full-access",
        "--output-format",
        "stream-json",
        "hi",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout_lines(&o)[0]["sandbox"], "danger-full-access");
}
