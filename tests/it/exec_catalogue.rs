#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Catalogue entries end to end: `codewhale exec --provider ID --model M`
//! for a sample of built-in ids of each wire format, against the scripted
//! model (real HTTP on loopback), with the base URL pointed at it by
//! `[providers.ID] base_url` and the key in the entry's own variable.
//! Checks the URL path, the key header, the answer, and the per-turn
//! accounting (input / cached / output / reasoning tokens, cost or
//! `unknown`). Also: `models list`, `auth list` over every id, local model
//! discovery, the Ollama fallback at a port given by config.

use crate::common;

use common::cli::*;
use common::scripted_model::{reply, reply_with_usage, ScriptedModel, Wire};
use serde_json::{json, Value};

/// `f.cmd` with the test's own TMPDIR (HOME and CODEWHALE_HOME are the
/// fixture's already; the environment is otherwise cleared).
fn cmd(f: &Fixture, args: &[&str]) -> std::process::Command {
    let tmp = f.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = f.cmd(args);
    c.env("TMPDIR", &tmp);
    c
}

fn run(f: &Fixture, args: &[&str]) -> std::process::Output {
    cmd(f, args).output().unwrap()
}

struct Case {
    id: &'static str,
    wire: Wire,
    key_env: &'static str,
    /// Suffix after `http://127.0.0.1:PORT` for the base URL.
    base_suffix: &'static str,
    model: &'static str,
    path: &'static str,
}

fn usage_for(wire: Wire) -> Value {
    match wire {
        // OpenAI Chat Completions usage with cache and reasoning details.
        Wire::OpenAi => json!({"prompt_tokens": 1000, "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 400},
            "completion_tokens_details": {"reasoning_tokens": 120}}),
        // Anthropic: input excludes cache reads, which come apart.
        Wire::Anthropic => json!({"input_tokens": 600, "cache_read_input_tokens": 400,
            "cache_creation_input_tokens": 0, "output_tokens": 300}),
        // Responses: input includes the cached tokens, output the reasoning.
        Wire::Responses => {
            json!({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 400},
            "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 120}})
        }
    }
}

fn run_case(c: &Case) -> (Vec<Value>, ScriptedModel, Value) {
    let model = ScriptedModel::start(
        c.wire,
        vec![reply_with_usage(
            "answer from the catalogue",
            usage_for(c.wire),
        )],
    );
    let f = Fixture::with_config(&format!(
        "[providers.{}]\nbase_url = \"http://127.0.0.1:{}{}\"\n",
        c.id, model.port, c.base_suffix
    ));
    let o = cmd(
        &f,
        &[
            "exec",
            "--provider",
            c.id,
            "--model",
            c.model,
            "--output-format",
            "stream-json",
            "say hi",
        ],
    )
    .env(c.key_env, "test-key-123")
    .output()
    .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{}: {err}", c.id);
    let r = run(&f, &["receipts", "--last", "--format", "json"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
    (stdout_lines(&o), model, receipt)
}

#[test]
fn each_wire_format_for_a_sample_of_catalogue_entries() {
    let cases = [
        Case {
            id: "groq",
            wire: Wire::OpenAi,
            key_env: "GROQ_API_KEY",
            base_suffix: "/v1",
            model: "llama-3.3-70b-versatile",
            path: "/v1/chat/completions",
        },
        Case {
            id: "google",
            wire: Wire::OpenAi,
            key_env: "GEMINI_API_KEY",
            base_suffix: "/v1",
            model: "gemini-3.1-pro-preview",
            path: "/v1/chat/completions",
        },
        Case {
            id: "openai",
            wire: Wire::OpenAi,
            key_env: "OPENAI_API_KEY",
            base_suffix: "/v1",
            model: "gpt-4o-mini",
            path: "/v1/chat/completions",
        },
        Case {
            id: "qwen",
            wire: Wire::OpenAi,
            key_env: "DASHSCOPE_API_KEY",
            base_suffix: "/v1",
            model: "qwen-plus",
            path: "/v1/chat/completions",
        },
        Case {
            id: "anthropic",
            wire: Wire::Anthropic,
            key_env: "ANTHROPIC_API_KEY",
            base_suffix: "",
            model: "claude-sonnet-5-5",
            path: "/v1/messages",
        },
        Case {
            id: "minimax-anthropic",
            wire: Wire::Anthropic,
            key_env: "MINIMAX_API_KEY",
            base_suffix: "/anthropic",
            model: "MiniMax-M2.7",
            path: "/anthropic/v1/messages",
        },
        Case {
            id: "azure-openai",
            wire: Wire::OpenAi,
            key_env: "AZURE_OPENAI_API_KEY",
            base_suffix: "",
            model: "my-deployment",
            path: "/openai/deployments/my-deployment/chat/completions",
        },
    ];
    for c in &cases {
        let (ev, model, receipt) = run_case(c);
        let reqs = model.requests();
        assert_eq!(reqs.len(), 1, "{}", c.id);
        let r = &reqs[0];
        assert_eq!(r.path, c.path, "{}", c.id);
        match (c.id, c.wire) {
            ("azure-openai", _) => {
                assert_eq!(r.api_key.as_deref(), Some("test-key-123"));
                assert_eq!(r.authorization, None);
                assert_eq!(r.query.as_deref(), Some("api-version=2024-10-21"));
            }
            (_, Wire::OpenAi | Wire::Responses) => {
                assert_eq!(
                    r.authorization.as_deref(),
                    Some("Bearer test-key-123"),
                    "{}",
                    c.id
                );
                assert_eq!(r.body["model"], c.model);
                assert_eq!(r.body["stream_options"]["include_usage"], true, "{}", c.id);
            }
            (_, Wire::Anthropic) => {
                assert_eq!(r.x_api_key.as_deref(), Some("test-key-123"), "{}", c.id);
                assert_eq!(r.body["model"], c.model);
            }
        }
        assert_eq!(ev[0]["provider"], c.id);
        assert_eq!(ev[0]["model"], c.model);
        let text: String = of_type(&ev, "content")
            .iter()
            .map(|e| e["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(text, "answer from the catalogue", "{}", c.id);
        let u = of_type(&ev, "turn_usage")[0];
        assert_eq!(u["input_tokens"], 1000, "{}: {u}", c.id);
        assert_eq!(u["cached_input_tokens"], 400, "{}: {u}", c.id);
        assert_eq!(u["output_tokens"], 300, "{}: {u}", c.id);
        assert_eq!(u["usage_reported"], true);
        match c.wire {
            Wire::OpenAi | Wire::Responses => assert_eq!(u["reasoning_tokens"], 120, "{}", c.id),
            Wire::Anthropic => assert!(u["reasoning_tokens"].is_null(), "{}", c.id),
        }
        // Prices: gpt-4o-mini has dated list prices including cached
        // input; 600*0.15 + 400*0.075 + 300*0.60 = 90 + 30 + 180 = 300 µ$.
        // claude-sonnet-5-5's cached rate is not in the table: unknown.
        // The others have no price at all: unknown, never 0.
        let want = match c.id {
            "openai" => "0.000300 USD",
            _ => "unknown",
        };
        assert_eq!(u["cost"], want, "{}: {u}", c.id);
        let done = ev.last().unwrap();
        assert_eq!(done["type"], "done");
        assert_eq!(done["cost"], want);
        // The receipt carries the same accounting.
        let ru = &receipt["usage"];
        assert_eq!(ru["input_tokens"], 1000, "{}: {ru}", c.id);
        assert_eq!(ru["cached_input_tokens"], 400, "{}: {ru}", c.id);
        assert_eq!(ru["cost"], want, "{}: {ru}", c.id);
        assert_eq!(ru["models"][0], format!("{}/{}", c.id, c.model));
    }
}

/// One `exec --provider ID --json` turn against a scripted reply with the
/// given OpenAI-style usage; returns the request body and the summary.
fn one_openai_turn(id: &str, key_env: &str, extra: &[&str], usage: Value) -> (Value, Value) {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply_with_usage("ok", usage)]);
    let f = Fixture::with_config(&format!(
        "[providers.{id}]\nbase_url = \"http://127.0.0.1:{}/v1\"\n",
        model.port
    ));
    let mut args = vec!["exec", "--provider", id, "--json"];
    args.extend_from_slice(extra);
    args.push("hi");
    let o = cmd(&f, &args).env(key_env, "k").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let body = model.requests()[0].body.clone();
    (body, stdout_lines(&o)[0].clone())
}

#[test]
fn grok_4_6_is_priced_up_to_its_long_context_threshold_and_unknown_past_it() {
    // docs.x.ai: $2.00 in / $6.00 out per 1M. 1000*2 + 300*6 = 3800 µ$.
    let usage = json!({"prompt_tokens": 1000, "completion_tokens": 300});
    let (body, s) = one_openai_turn("xai", "XAI_API_KEY", &[], usage);
    assert_eq!(body["model"], "grok-4.6", "the default model");
    assert_eq!(s["cost"], "0.003800 USD", "{s}");
    // Past 200,000 prompt tokens the long-context rate is not in the
    // table: unknown, not the short-context figure.
    let usage = json!({"prompt_tokens": 200_001, "completion_tokens": 300});
    let (_, s) = one_openai_turn("xai", "XAI_API_KEY", &[], usage);
    assert_eq!(s["cost"], "unknown", "{s}");
}

#[test]
fn deepseek_default_goes_on_the_wire_as_deepseek_flash_with_unknown_cost() {
    // DeepSeek's pricing page names `deepseek-flash` as the model to send;
    // its peak/off-peak price is not one list price, so cost is unknown.
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5});
    let (body, s) = one_openai_turn("deepseek", "DEEPSEEK_API_KEY", &[], usage);
    assert_eq!(body["model"], "deepseek-flash");
    assert_eq!(s["cost"], "unknown", "{s}");
}

#[test]
fn cohere_is_asked_for_no_usage_chunk_and_its_cost_is_unknown() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("hello")]);
    let f = Fixture::with_config(&format!(
        "[providers.cohere]\nbase_url = \"http://127.0.0.1:{}/v1\"\n",
        model.port
    ));
    let o = cmd(&f, &["exec", "--provider", "cohere", "--json", "hi"])
        .env("COHERE_API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = model.requests();
    assert!(
        reqs[0].body.get("stream_options").is_none(),
        "{}",
        reqs[0].body
    );
    assert_eq!(reqs[0].body["model"], "command-a-03-2025");
    let s = &stdout_lines(&o)[0];
    assert_eq!(s["cost"], "unknown");
}

#[test]
fn missing_key_names_the_catalogue_variable() {
    let f = Fixture::with_config("");
    let o = run(
        &f,
        &["exec", "--provider", "nvidia-nim", "--model", "m", "hi"],
    );
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(err.contains("NVIDIA_API_KEY"), "{err}");
    assert!(
        err.contains("codewhale auth set --provider nvidia-nim"),
        "{err}"
    );
}

#[test]
fn models_list_prints_every_id_and_json_carries_prices() {
    let f = Fixture::with_config("");
    let o = run(&f, &["models", "list"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.lines().count() >= 40, "{text}");
    for id in ["anthropic", "azure-openai", "bedrock", "jan", "huggingface"] {
        assert!(text.lines().any(|l| l.starts_with(id)), "{id}: {text}");
    }
    let o = run(&f, &["models", "list", "--provider", "openai", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "codewhale.models");
    let p = &v["providers"][0];
    assert_eq!(p["id"], "openai");
    assert_eq!(p["default_model"], "gpt-5.6");
    assert_eq!(p["wire"], "openai-compatible");
    let mini = p["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "gpt-4o-mini")
        .unwrap();
    assert_eq!(mini["price"]["cached_input"], 0.075);
    assert!(mini["price"]["date"].is_string());
    let unpriced = p["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "gpt-5.6")
        .unwrap();
    assert!(unpriced["price"].is_null());
    let o = run(&f, &["models", "list", "--provider", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--provider \"nope\""));
}

#[test]
fn auth_set_and_list_work_for_every_catalogue_id() {
    let f = Fixture::with_config("");
    let o = run(&f, &["models", "list", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<String> = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.len() >= 40);
    for id in ids
        .iter()
        .filter(|i| *i == "sambanova" || *i == "github-models")
    {
        let mut c = cmd(&f, &["auth", "set", "--provider", id]);
        c.stdin(std::process::Stdio::piped());
        let mut child = c
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"secret-value-xyz\n")
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(!String::from_utf8_lossy(&o.stdout).contains("secret-value-xyz"));
        assert!(!stderr(&o).contains("secret-value-xyz"));
    }
    let o = run(&f, &["auth", "list", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(!out.contains("secret-value-xyz"), "{out}");
    let rows: Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    for id in &ids {
        let r = rows
            .iter()
            .find(|r| r["provider"] == id.as_str())
            .unwrap_or_else(|| panic!("{id}"));
        let want = id == "sambanova" || id == "github-models";
        assert_eq!(r["key_present"], want, "{id}: {r}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(f.cw_home.join("auth.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn ollama_fallback_at_a_port_given_by_config_picks_a_chat_model() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("local answer")]);
    // No `provider`, no key for the default: the `[providers.ollama]`
    // address is where the fallback looks (no real port 11434 involved).
    let f = Fixture::with_config(&format!(
        "[providers.ollama]\nbase_url = \"http://127.0.0.1:{}/v1\"\n",
        model.port
    ));
    let o = run(&f, &["exec", "hi"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "using the local Ollama at http://127.0.0.1:{} with model scripted-llama:latest",
            model.port
        )),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "local answer\n");
    let reqs = model.requests();
    assert_eq!(
        reqs[0].body["model"], "scripted-llama:latest",
        "embedding model skipped"
    );
    assert_eq!(reqs[0].authorization, None);
}

#[test]
fn local_runtime_without_model_uses_the_first_listed_by_v1_models() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("served")]);
    let f = Fixture::with_config(&format!(
        "[providers.vllm]\nbase_url = \"http://127.0.0.1:{}/v1\"\n",
        model.port
    ));
    let o = run(&f, &["exec", "--provider", "vllm", "hi"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("using scripted-served"), "{err}");
    assert_eq!(model.requests()[0].body["model"], "scripted-served");
}

#[test]
fn non_local_plain_http_stays_refused_for_a_catalogue_id() {
    let f = Fixture::with_config("[providers.groq]\nbase_url = \"http://10.1.2.3/v1\"\n");
    let o = cmd(&f, &["exec", "--provider", "groq", "hi"])
        .env("GROQ_API_KEY", "k")
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("refusing plain http"), "{}", stderr(&o));
}
