#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `model = "auto"` end to end: the router picks the model per turn from
//! `[router]`, and when the chosen one keeps failing with 429 / 5xx (after
//! its own retries, which honour `Retry-After`) the next model answers.
//! Each choice, its reason and the failures are in the stream and in the
//! session record. Two scripted model servers on loopback play the two
//! providers.

use crate::common;

use common::cli::*;
use common::scripted_model::{reply, ScriptedModel, Step, Wire};
use serde_json::Value;

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

fn status(code: u16, retry_after: Option<u64>) -> Step {
    Step::Status {
        code,
        retry_after,
        body: format!("{{\"error\":\"scripted {code}\"}}"),
    }
}

fn router_fixture(a: &ScriptedModel, b: &ScriptedModel, retries: u32) -> Fixture {
    Fixture::with_config(&format!(
        "model = \"auto\"\n\
         [providers.a]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"ka\"\n\
         [providers.b]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"kb\"\n\
         price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n\
         [router]\ncheap = \"a/m-cheap\"\nstrong = \"b/m-strong\"\nretries_per_model = {retries}\n\
         [router.rules]\nplan = \"cheap\"\n",
        a.base_url(),
        b.base_url()
    ))
}

fn choice(ev: &[Value]) -> &Value {
    of_type(ev, "model_choice")[0]
}

#[test]
fn falls_back_after_429_with_retry_after_then_503() {
    let a = ScriptedModel::start(Wire::OpenAi, vec![status(429, Some(1)), status(503, None)]);
    let b = ScriptedModel::start(Wire::OpenAi, vec![reply("strong answered")]);
    let f = router_fixture(&a, &b, 1);
    let o = run(&f, &["exec", "--output-format", "stream-json", "plan this"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("model auto: routing between a/m-cheap, b/m-strong"),
        "{err}"
    );
    let ev = stdout_lines(&o);
    // a got both attempts (429, then the retry → 503); the retry waited for
    // the server's Retry-After of 1 s.
    let ra = a.requests();
    assert_eq!(ra.len(), 2);
    assert!(ra.iter().all(|r| r.body["model"] == "m-cheap"));
    assert!(
        ra[1].at.duration_since(ra[0].at) >= std::time::Duration::from_millis(950),
        "Retry-After not honoured"
    );
    let rb = b.requests();
    assert_eq!(rb.len(), 1);
    assert_eq!(rb[0].body["model"], "m-strong");
    assert_eq!(rb[0].authorization.as_deref(), Some("Bearer kb"));
    let c = choice(&ev);
    assert_eq!(c["kind"], "plan");
    assert_eq!(c["provider"], "a");
    assert_eq!(c["model"], "m-cheap");
    assert!(
        c["reason"].as_str().unwrap().contains("rule plan = cheap"),
        "{c}"
    );
    assert_eq!(c["used_provider"], "b");
    assert_eq!(c["used_model"], "m-strong");
    let failed = c["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]["error"].as_str().unwrap().contains("HTTP 503"),
        "{c}"
    );
    // Usage and cost are the answering model's.
    let u = of_type(&ev, "turn_usage")[0];
    assert_eq!(u["provider"], "b");
    assert_eq!(u["cost"], "0.000140 USD");
    // The turn record carries the choice.
    let recs = records(&f.session_files()[0]);
    let mc: Vec<&Value> = recs
        .iter()
        .filter(|r| r["type"] == "model_choice")
        .collect();
    assert_eq!(mc.len(), 1);
    assert_eq!(mc[0]["turn"], 1);
    assert_eq!(mc[0]["used_model"], "m-strong");
    assert!(mc[0]["reason"].as_str().unwrap().contains("plan"));
}

#[test]
fn falls_back_on_a_429_without_retries() {
    let a = ScriptedModel::start(Wire::OpenAi, vec![status(429, None)]);
    let b = ScriptedModel::start(Wire::OpenAi, vec![reply("ok")]);
    let f = router_fixture(&a, &b, 0);
    let o = run(&f, &["exec", "--output-format", "stream-json", "hi"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ev = stdout_lines(&o);
    let c = choice(&ev);
    assert!(
        c["failed"][0]["error"]
            .as_str()
            .unwrap()
            .contains("HTTP 429"),
        "{c}"
    );
    assert_eq!(c["used_provider"], "b");
    assert_eq!(a.requests().len(), 1);
}

#[test]
fn a_non_transient_error_does_not_fall_back() {
    let a = ScriptedModel::start(Wire::OpenAi, vec![status(400, None)]);
    let b = ScriptedModel::start(Wire::OpenAi, vec![reply("never")]);
    let f = router_fixture(&a, &b, 0);
    let o = run(&f, &["exec", "--output-format", "stream-json", "hi"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        b.requests().is_empty(),
        "a 400 is the request's fault, not the model's"
    );
}

#[test]
fn an_explicit_provider_overrides_config_auto() {
    let a = ScriptedModel::start(Wire::OpenAi, vec![]);
    let b = ScriptedModel::start(Wire::OpenAi, vec![reply("direct")]);
    let f = Fixture::with_config(&format!(
        "model = \"auto\"\n[providers.b]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\napi_key = \"kb\"\nmodel = \"m-b\"\n\
         [router]\ncheap = \"a/x\"\n",
        b.base_url()
    ));
    let o = run(&f, &["exec", "--provider", "b", "hi"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(b.requests()[0].body["model"], "m-b");
    assert!(a.requests().is_empty());
}

#[test]
fn auto_without_router_table_is_a_clear_error() {
    let f = Fixture::with_config("model = \"auto\"\n");
    let o = run(&f, &["exec", "hi"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("needs a [router] table"),
        "{}",
        stderr(&o)
    );
    let f = Fixture::with_config("model = \"auto\"\n[router]\ncheap = \"nomodel\"\n");
    let o = run(&f, &["exec", "hi"]);
    assert!(stderr(&o).contains("[router] cheap"), "{}", stderr(&o));
}
