#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Contract tests: every request body codewhale sends to OpenSandbox
//! validates against the schemas of the vendored OpenAPI files in
//! `../shared/opensandbox-spec/` (relative to the crate root; CI has it
//! there). Bodies are captured by the fake server during real runs.
#![cfg(unix)]

use crate::common;
use common::{fake_opensandbox, opensandbox_env};

use codewhale::host::opensandbox;
use codewhale::host::ExecRequest;
use codewhale::policy::SandboxMode;
use opensandbox_env::{sh, Env};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn spec(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/opensandbox-spec")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the OpenSandbox spec {} is required for the contract tests: {e}",
            path.display()
        )
    });
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("spec YAML");
    serde_json::to_value(yaml).expect("spec as JSON")
}

/// A validator for `components.schemas.<name>` with the document's `$ref`s
/// resolvable (`#/components/...`). Formats (`date-time`) are checked.
fn validator(doc: &Value, name: &str) -> (jsonschema::Validator, Value) {
    let root = json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": doc["components"].clone(),
    });
    let v = jsonschema::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema {name}: {e}"));
    (v, doc["components"]["schemas"][name].clone())
}

/// Validate, and also refuse top-level keys the schema does not define
/// (most request schemas are open, so a typo would otherwise pass).
fn check(doc: &Value, name: &str, body: &Value) {
    let (v, schema) = validator(doc, name);
    let errors: Vec<String> = v.iter_errors(body).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{name} rejects {body}: {errors:?}");
    let props = schema["properties"].as_object().expect("properties");
    for k in body.as_object().expect("object body").keys() {
        assert!(
            props.contains_key(k),
            "{name} has no property {k:?} (body {body})"
        );
    }
}

#[tokio::test]
async fn every_request_body_matches_the_spec() {
    let lifecycle = spec("sandbox-lifecycle.yml");
    let execd = spec("execd-api.yaml");
    // Negative controls: the validators do reject wrong bodies.
    let (v, _) = validator(&lifecycle, "RenewSandboxExpirationRequest");
    assert!(!v.is_valid(&json!({"expiresAt": "tomorrow"})));
    assert!(!v.is_valid(&json!({"expiresAt": "2030-01-01T00:00:00Z", "extra": 1})));
    let (v, _) = validator(&lifecycle, "CreateSandboxRequest");
    assert!(!v.is_valid(&json!({"image": {"uri": "x"}, "entrypoint": [], "timeout": 5})));
    let (v, _) = validator(&execd, "RunCommandRequest");
    assert!(!v.is_valid(&json!({"cwd": "/"})));

    // keep = true exercises list + create; timeout_s = 0 sends `timeout: null`.
    let env = Env::start_with(|_| {}, "keep = true\nuse_server_proxy = true\n").await;
    std::fs::write(env.ws.join("a.txt"), "a").unwrap();
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    let mut req = ExecRequest::new(sh("echo x > b.txt"));
    req.timeout = Some(Duration::from_millis(1500));
    opensandbox::run(&env.cfg, &r, req).await.expect("run");
    let env2 = Env::start_with(|_| {}, "timeout_s = 0\n").await;
    let r2 = env2.resolved(SandboxMode::ReadOnly);
    opensandbox::run(&env2.cfg, &r2, ExecRequest::new(sh("true")))
        .await
        .expect("run");

    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for rec in env.fake.requests().into_iter().chain(env2.fake.requests()) {
        let Some(body) = &rec.body else { continue };
        let name = match (rec.method.as_str(), rec.path.as_str()) {
            ("POST", "/v1/sandboxes") => ("CreateSandboxRequest", &lifecycle),
            ("POST", p) if p.ends_with("/renew-expiration") => {
                ("RenewSandboxExpirationRequest", &lifecycle)
            }
            ("POST", "/command") => ("RunCommandRequest", &execd),
            other => panic!("unexpected body on {other:?}"),
        };
        check(name.1, name.0, body);
        *seen.entry(name.0).or_default() += 1;
    }
    assert_eq!(seen.get("CreateSandboxRequest"), Some(&2));
    assert!(seen
        .get("RenewSandboxExpirationRequest")
        .is_some_and(|n| *n >= 1));
    assert!(seen.get("RunCommandRequest").is_some_and(|n| *n >= 4));
    let metas: Vec<Value> = env.fake.state.lock().upload_metadata.clone();
    assert!(!metas.is_empty());
    for m in &metas {
        check(&execd, "FileMetadata", m);
    }

    // Specific shapes the spec spells out in prose.
    let reqs = env.fake.requests();
    let user_cmd = reqs
        .iter()
        .filter_map(|r| r.body.as_ref())
        .find(|b| b["command"] == "sh -c 'echo x > b.txt'")
        .expect("the user's command as one shell string");
    assert_eq!(
        user_cmd["timeout"], 3500,
        "milliseconds, plus codewhale's 2 s grace"
    );
    let create = reqs
        .iter()
        .find(|r| r.path == "/v1/sandboxes" && r.method == "POST")
        .unwrap();
    let body = create.body.as_ref().unwrap();
    assert_eq!(
        body["networkPolicy"],
        json!({"defaultAction": "deny", "egress": []})
    );
    assert_eq!(body["timeout"], 3600);
    let null_timeout = env2
        .fake
        .requests()
        .into_iter()
        .find(|r| r.path == "/v1/sandboxes")
        .unwrap();
    assert_eq!(null_timeout.body.unwrap()["timeout"], Value::Null);
    let ep = reqs
        .iter()
        .find(|r| r.path.contains("/endpoints/"))
        .unwrap();
    assert!(ep.path.ends_with("/endpoints/44772"));
    assert_eq!(ep.query, "use_server_proxy=true");
}

#[tokio::test]
async fn credentials_go_only_where_they_belong() {
    let env = Env::start(|_| {}).await;
    let r = env.resolved(SandboxMode::WorkspaceWrite);
    opensandbox::run(&env.cfg, &r, ExecRequest::new(sh("echo hi > f")))
        .await
        .expect("run");
    let reqs = env.fake.requests();
    assert!(reqs.iter().any(|r| r.server == "execd"));
    for rec in &reqs {
        let h = &rec.headers;
        match rec.server {
            "lifecycle" => {
                assert_eq!(
                    h.get("open-sandbox-api-key").map(String::as_str),
                    Some(fake_opensandbox::API_KEY)
                );
                assert!(!h.contains_key("x-execd-access-token"), "{rec:?}");
            }
            _ => {
                assert!(
                    !h.contains_key("open-sandbox-api-key"),
                    "lifecycle key sent to execd: {rec:?}"
                );
                assert_eq!(
                    h.get("x-execd-access-token").map(String::as_str),
                    Some(fake_opensandbox::EXECD_TOKEN)
                );
                assert!(
                    h.contains_key(fake_opensandbox::ROUTE_HEADER),
                    "endpoint header missing: {rec:?}"
                );
            }
        }
    }
    assert!(env.fake.violations().is_empty());
    // Positive control: the fake does notice the lifecycle key on execd.
    let resp = reqwest::Client::new()
        .get(format!("{}/ping", env.fake.execd_url))
        .header("OPEN-SANDBOX-API-KEY", fake_opensandbox::API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(env.fake.violations().len(), 1);
}
