#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Provider error paths against the scripted model: 401, 429 with
//! Retry-After, 500 then success, a stream cut mid-way, a refused
//! non-loopback http:// base URL, and a missing key.

use crate::common;

use common::cli::*;
use common::scripted_model::{reply, ScriptedModel, Step, Wire};
use std::time::{Duration, Instant};

fn status(code: u16, retry_after: Option<u64>) -> Step {
    Step::Status {
        code,
        retry_after,
        body: format!("{{\"error\":\"scripted {code}\"}}"),
    }
}

#[test]
fn unauthorized_names_provider_and_model_and_exits_1() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let model = ScriptedModel::start(wire, vec![status(401, None)]);
        let f = Fixture::new(&model, "");
        let o = f.run(&["exec", "--provider", "custom", "hi"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("provider custom, model scripted"), "{err}");
        assert!(err.contains("authentication failed (HTTP 401)"), "{err}");
        assert!(!err.contains("test-key"), "key leaked: {err}");
        assert_eq!(model.requests().len(), 1, "401 is not retried");
        let recs = records(&f.session_files()[0]);
        assert_seq_contiguous(&recs);
        let last = recs.last().unwrap();
        assert_eq!(last["status"], "error");
        assert!(recs.iter().any(|r| r["type"] == "turn_interrupted"));
    }
}

#[test]
fn rate_limit_honours_retry_after_then_succeeds() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![status(429, Some(1)), reply("ok")]);
    let f = Fixture::new(&model, "");
    let t = Instant::now();
    let o = f.run(&["exec", "--provider", "custom", "hi"]);
    let waited = t.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n");
    assert_eq!(model.requests().len(), 2);
    // Retry-After: 1 means at least a second between the two requests
    // (a lower bound on behaviour, not a speed assertion).
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
}

#[test]
fn server_error_then_success() {
    let model = ScriptedModel::start(
        Wire::Anthropic,
        vec![status(500, None), status(503, None), reply("fine")],
    );
    let f = Fixture::new(&model, "");
    let o = f.run(&["exec", "--provider", "custom", "hi"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "fine\n");
    assert_eq!(model.requests().len(), 3);
}

#[test]
fn stream_cut_midway_is_transient_exit_75() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let model = ScriptedModel::start(
            wire,
            vec![Step::Cut {
                text: "partial ans".into(),
            }],
        );
        let f = Fixture::new(&model, "");
        let o = f.run(&[
            "exec",
            "--provider",
            "custom",
            "--output-format",
            "stream-json",
            "hi",
        ]);
        assert_eq!(o.status.code(), Some(75), "{wire:?}: {}", stderr(&o));
        let ev = stdout_lines(&o);
        let e = of_type(&ev, "error");
        assert_eq!(e.len(), 1, "{ev:?}");
        assert_eq!(e[0]["category"], "provider_transient");
        assert_eq!(e[0]["exit_code"], 75);
        let msg = e[0]["message"].as_str().unwrap();
        assert!(msg.contains("provider custom, model scripted"), "{msg}");
        assert_eq!(ev.last().unwrap()["type"], "done");
        assert_eq!(ev.last().unwrap()["status"], "error");
        let recs = records(&f.session_files()[0]);
        assert_seq_contiguous(&recs);
        assert!(recs.iter().any(|r| r["type"] == "turn_interrupted"));
        assert_eq!(model.requests().len(), 1, "a broken stream is not replayed");
    }
}

#[test]
fn non_loopback_plain_http_is_refused() {
    let f = Fixture::with_config(
        "[providers.custom]\nkind = \"openai-compatible\"\nbase_url = \"http://192.0.2.1/v1\"\napi_key = \"k\"\nmodel = \"m\"\n",
    );
    let o = f.run(&["exec", "--provider", "custom", "hi"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("refusing plain http://"), "{err}");
    assert!(f.session_files().is_empty(), "nothing started");
}

#[test]
fn missing_key_says_how_to_set_one() {
    // Default provider, no key anywhere, and OLLAMA_HOST pointing at a
    // closed loopback port so the Ollama fallback finds nothing.
    let f = Fixture::with_config("");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let o = f
        .cmd(&["exec", "hi"])
        .env("OLLAMA_HOST", format!("http://127.0.0.1:{port}"))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("DEEPSEEK_API_KEY"), "{err}");
    assert!(
        err.contains("codewhale auth set --provider deepseek"),
        "{err}"
    );
}

#[test]
fn auth_set_then_list_shows_presence_never_the_key() {
    let f = Fixture::with_config("");
    let mut c = f.cmd(&["auth", "set", "--provider", "openai"]);
    c.stdin(std::process::Stdio::piped());
    c.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"sk-very-secret\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("sk-very-secret"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(f.cw_home.join("auth.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o600);
    }
    let o = f
        .cmd(&["auth", "list"])
        .env("MISTRAL_API_KEY", "m-secret")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("sk-very-secret") && !out.contains("m-secret"),
        "{out}"
    );
    let line = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("openai").contains("auth store"), "{out}");
    assert!(line("mistral").contains("env MISTRAL_API_KEY"), "{out}");
    assert!(line("anthropic").contains("missing"), "{out}");
    assert!(line("ollama").contains("n/a"), "{out}");
}

#[test]
fn ollama_fallback_when_nothing_is_configured() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("hi from ollama")]);
    let f = Fixture::with_config("");
    let o = f
        .cmd(&["exec", "hi"])
        .env("OLLAMA_HOST", format!("http://127.0.0.1:{}", model.port))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("using the local Ollama"), "{err}");
    assert!(err.contains("scripted-llama"), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hi from ollama\n");
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].body["model"], "scripted-llama:latest",
        "embedding model skipped"
    );
    assert_eq!(
        reqs[0].authorization, None,
        "no key sent to a local runtime"
    );
}

#[test]
fn bad_tool_name_and_empty_prompt_are_usage_errors() {
    let f = Fixture::with_config("");
    let o = f.run(&["exec", "--allowed-tools", "rm_rf", "hi"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown tool `rm_rf`"),
        "{}",
        stderr(&o)
    );
    let o = f.run(&["exec"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("empty prompt"), "{}", stderr(&o));
}
