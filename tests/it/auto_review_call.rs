//! Auto-Review's reviewer request against the scripted model's reviewer
//! lane, over real HTTP on loopback, for each wire format: what is sent
//! (no tools, not streamed, temperature 0, the document as the one user
//! message) and what each answer or failure means (allow, deny, and every
//! way of being unavailable). The turn-level wiring is in
//! `auto_review_runtime`.

use crate::common;

use codewhale::agent::review::{Reviewer, OUTPUT_BUDGET};
use codewhale::authz::reviewer::{ReviewDocument, ReviewInputs, ReviewVerdict, Risk};
use codewhale::authz::{Approval, DecidedBy, Decision, Gate, Mode, Posture, ToolCall, Verdict};
use codewhale::net::NetworkMode;
use codewhale::policy::SandboxMode;
use codewhale::provider::registry::{ProviderSettings, WireFormat};
use common::scripted_model::{review_text, verdict, Review, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const WIRES: [Wire; 3] = [Wire::OpenAi, Wire::Anthropic, Wire::Responses];

fn settings(m: &ScriptedModel) -> ProviderSettings {
    let mut s = ProviderSettings::openai_compatible("scripted", &m.base_url(), "reviewer-model");
    s.wire = match m.wire {
        Wire::OpenAi => WireFormat::OpenAiCompatible,
        Wire::Anthropic => WireFormat::Anthropic,
        Wire::Responses => WireFormat::OpenAiResponses,
    };
    s
}

fn document(command: &str) -> ReviewDocument {
    let mut v = Verdict::decided(
        Decision::Ask,
        DecidedBy::Posture,
        Gate::Baseline,
        "not read-only",
    );
    v.sandbox = Some(SandboxMode::WorkspaceWrite);
    v.to_reviewer = true;
    let call = ToolCall::shell(command, "/w");
    ReviewDocument::build(&ReviewInputs {
        call: &call,
        verdict: &v,
        posture: &Posture::new(Mode::Work, Approval::AutoReview),
        network: NetworkMode::Off,
        workspace: Path::new("/w"),
        workspace_trusted: false,
    })
}

fn review(m: &ScriptedModel, answers: Vec<Review>, timeout: Duration) -> (ReviewVerdict, u32) {
    m.reviews(answers);
    let r = Reviewer::new(settings(m), timeout).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let out = rt.block_on(r.review(&document("cargo run --example x")));
    (out.verdict, out.requests)
}

/// The user message of a recorded reviewer request, per wire format.
fn user_message(body: &Value, wire: Wire) -> String {
    match wire {
        Wire::OpenAi => body["messages"][1]["content"].as_str().unwrap().into(),
        Wire::Anthropic => body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .into(),
        Wire::Responses => body["input"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .into(),
    }
}

#[test]
fn the_request_is_one_unstreamed_message_without_tools_at_temperature_zero() {
    for wire in WIRES {
        let m = ScriptedModel::start(wire, vec![]);
        let (v, n) = review(
            &m,
            vec![verdict("low", "allow", "runs an example")],
            Duration::from_secs(10),
        );
        assert!(v.is_allow(), "{wire:?}: {v:?}");
        assert_eq!(n, 1);
        let reqs = m.review_requests();
        assert_eq!(reqs.len(), 1, "{wire:?}");
        let b = &reqs[0].body;
        assert_eq!(b["stream"], false, "{wire:?}");
        assert!(b.get("tools").is_none(), "{wire:?}");
        assert_eq!(b["temperature"], 0.0, "{wire:?}");
        assert_eq!(b["model"], "reviewer-model");
        // The user message is the document and nothing else.
        let doc: Value = serde_json::from_str(&user_message(b, wire)).unwrap();
        assert_eq!(doc["proposed_call"]["command"], "cargo run --example x");
        assert_eq!(doc["observations"]["posture"], "Work + Auto-Review");
        let n_messages = match wire {
            Wire::OpenAi => b["messages"].as_array().unwrap().len() - 1,
            Wire::Anthropic => b["messages"].as_array().unwrap().len(),
            Wire::Responses => b["input"].as_array().unwrap().len(),
        };
        assert_eq!(n_messages, 1, "{wire:?}: one user message");
    }
}

#[test]
fn a_deny_is_the_reviewers_and_allow_at_high_risk_is_a_deny() {
    let m = ScriptedModel::start(Wire::OpenAi, vec![]);
    let (v, _) = review(
        &m,
        vec![verdict("medium", "deny", "uploads the workspace")],
        Duration::from_secs(10),
    );
    assert_eq!(
        v,
        ReviewVerdict::Deny {
            risk: Risk::Medium,
            reason: "uploads the workspace".into()
        }
    );
    let (v, _) = review(
        &m,
        vec![verdict("high", "allow", "fine")],
        Duration::from_secs(10),
    );
    assert_eq!(v.decision().as_str(), "deny");
    assert_eq!(v.risk(), Some(Risk::High));
}

fn unavailable(v: &ReviewVerdict) -> &str {
    match v {
        ReviewVerdict::Unavailable { reason } => reason,
        other => panic!("expected unavailable, got {other:?}"),
    }
}

#[test]
fn chaos_is_unavailable_each_with_its_reason() {
    let m = ScriptedModel::start(Wire::OpenAi, vec![]);
    let t = Duration::from_secs(10);
    let (v, _) = review(&m, vec![review_text("Looks safe to me, go ahead.")], t);
    assert!(unavailable(&v).contains("malformed"), "{v:?}");
    let (v, _) = review(
        &m,
        vec![review_text(
            r#"{"risk":"low","decision":"allow","reason":"ok","also":"run rm -rf"}"#,
        )],
        t,
    );
    assert!(unavailable(&v).contains("malformed"), "{v:?}");
    let (v, _) = review(
        &m,
        vec![Review::Status {
            code: 503,
            body: "{\"error\":\"overloaded\"}".into(),
        }],
        t,
    );
    assert!(unavailable(&v).contains("503"), "{v:?}");
    let (v, _) = review(&m, vec![Review::Cut], t);
    assert!(unavailable(&v).contains("cut"), "{v:?}");
    let started = std::time::Instant::now();
    let (v, _) = review(&m, vec![Review::Hang], Duration::from_secs(1));
    assert!(unavailable(&v).contains("timeout"), "{v:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Positive control: the same server answers a well-formed allow.
    let (v, _) = review(&m, vec![verdict("low", "allow", "ok")], t);
    assert!(v.is_allow());
}

#[test]
fn a_clipped_answer_is_retried_once_with_twice_the_budget() {
    for wire in WIRES {
        let m = ScriptedModel::start(wire, vec![]);
        let cut = Review::Answer {
            text: "{\"risk\":\"lo".into(),
            clipped: true,
        };
        let (v, n) = review(
            &m,
            vec![cut.clone(), verdict("low", "allow", "ok")],
            Duration::from_secs(10),
        );
        assert!(v.is_allow(), "{wire:?}: {v:?}");
        assert_eq!(n, 2);
        let budget = |b: &Value| {
            b.get("max_tokens")
                .or_else(|| b.get("max_output_tokens"))
                .and_then(Value::as_u64)
                .unwrap()
        };
        let reqs = m.review_requests();
        assert_eq!(budget(&reqs[0].body), OUTPUT_BUDGET as u64);
        assert_eq!(budget(&reqs[1].body), 2 * OUTPUT_BUDGET as u64);
        // Clipped twice: unavailable, and no third request.
        let (v, n) = review(&m, vec![cut.clone(), cut], Duration::from_secs(10));
        assert!(unavailable(&v).contains("clipped"), "{v:?}");
        assert_eq!(n, 2);
        assert_eq!(m.review_requests().len(), 4);
    }
}

#[test]
fn a_refused_temperature_is_retried_once_without_it() {
    let m = ScriptedModel::start(Wire::OpenAi, vec![]);
    let refusal = Review::Status {
        code: 400,
        body: json!({"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model.",
                               "type": "invalid_request_error", "param": "temperature"}})
        .to_string(),
    };
    let (v, _) = review(
        &m,
        vec![refusal, verdict("low", "allow", "ok")],
        Duration::from_secs(10),
    );
    assert!(v.is_allow(), "{v:?}");
    let reqs = m.review_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["temperature"], 0.0);
    assert!(reqs[1].body.get("temperature").is_none());
    // Another 400 is not retried.
    let (v, _) = review(
        &m,
        vec![Review::Status {
            code: 400,
            body: "{\"error\":\"bad\"}".into(),
        }],
        Duration::from_secs(10),
    );
    assert!(unavailable(&v).contains("400"));
    assert_eq!(m.review_requests().len(), 3);
}

#[test]
fn an_oversized_document_is_never_sent() {
    let m = ScriptedModel::start(Wire::OpenAi, vec![]);
    m.reviews(vec![verdict("low", "allow", "ok")]);
    let r = Reviewer::new(settings(&m), Duration::from_secs(10)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let big = format!("echo {}", "x".repeat(70 * 1024));
    let out = rt.block_on(r.review(&document(&big)));
    assert!(unavailable(&out.verdict).contains("64 KiB"));
    assert_eq!(out.requests, 0);
    assert!(m.review_requests().is_empty());
    // Identical calls are reviewed again (no cache): two reviews, two requests.
    m.reviews(vec![verdict("low", "allow", "ok")]);
    let d = document("cargo run");
    assert!(rt.block_on(r.review(&d)).verdict.is_allow());
    assert!(rt.block_on(r.review(&d)).verdict.is_allow());
    assert_eq!(m.review_requests().len(), 2);
}
