//! The fake egress sidecar (`egress-api.yaml`, OpenSandbox commit in
//! `opensandbox-spec/README.md`): `GET|PATCH|DELETE /policy` of the
//! sandbox named by the endpoint's route header, on its own loopback port
//! (the lifecycle server hands it out for port 18080).
//!
//! What it reproduces from the spec:
//! - the initial policy is the create request's `networkPolicy` ("Shape
//!   matches the sidecar `/policy` endpoint", `sandbox-lifecycle.yml`);
//! - `PATCH` merges: "Existing rules remain unless overridden by incoming
//!   rules. Incoming rules are applied with higher priority than existing
//!   rules. If multiple incoming rules refer to the same `target`, the
//!   first one wins." Body: an array, `minItems: 1`, of `NetworkRule
//!   {action: allow|deny, target}` (`additionalProperties: false`), else
//!   `400` text/plain;
//! - `DELETE` takes an array of target strings; "targets not found in the
//!   current policy are silently ignored (idempotent)";
//! - every answer is a `PolicyStatusResponse` (`status`, `mode`,
//!   `enforcementMode`, `policy` on GET); errors are `text/plain`;
//! - auth: the optional `OPENSANDBOX-EGRESS-AUTH` header, which the
//!   endpoint reply names ("clients must forward them"): missing or wrong
//!   → `401`. The lifecycle key and the execd token arriving here are
//!   recorded as violations.
//!
//! Faults for the tests (`FakeOptions::egress`): no sidecar (the endpoint
//! for 18080 is 404), a PATCH answered 500, or a sidecar that answers 200
//! to PATCH but keeps its old rules.

use super::{State, ROUTE_HEADER};
use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;

type S = AxState<Arc<State>>;

/// The header and value the fake's sidecar requires.
pub const EGRESS_AUTH_HEADER: &str = "OPENSANDBOX-EGRESS-AUTH";
pub const EGRESS_TOKEN: &str = "egress-token-789";

/// How the fake's sidecar behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EgressBehaviour {
    /// As the spec says, reporting this `enforcementMode`.
    Works { enforcement_mode: String },
    /// No sidecar: the lifecycle server's endpoint for 18080 answers 404.
    Absent,
    /// `PATCH /policy` answers `500` ("The sidecar failed to apply …").
    PatchFails,
    /// `PATCH` answers 200 but the rules are not applied.
    IgnoresPatch,
}

pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/policy", get(read).patch(patch).delete(delete))
        .with_state(state)
}

fn text(status: StatusCode, msg: &str) -> Response {
    (status, [("content-type", "text/plain")], msg.to_string()).into_response()
}

/// The sandbox id this request is routed to, after the auth checks.
fn check(st: &State, headers: &HeaderMap, route: &str) -> Result<String, Response> {
    for (h, what) in [
        ("OPEN-SANDBOX-API-KEY", "lifecycle API key"),
        ("X-EXECD-ACCESS-TOKEN", "execd access token"),
    ] {
        if headers.contains_key(h) {
            st.lock()
                .violations
                .push(format!("{what} sent to the egress sidecar {route}"));
        }
    }
    if headers
        .get(EGRESS_AUTH_HEADER)
        .and_then(|v| v.to_str().ok())
        != Some(EGRESS_TOKEN)
    {
        return Err(text(
            StatusCode::UNAUTHORIZED,
            "missing or wrong OPENSANDBOX-EGRESS-AUTH",
        ));
    }
    let id = headers
        .get(ROUTE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    match st.lock().sandboxes.get(&id) {
        Some(s) if s.state == "Running" => Ok(id),
        _ => Err(text(StatusCode::FORBIDDEN, "no route to that sandbox")),
    }
}

fn enforcement_mode(st: &State) -> String {
    match &st.opts.egress {
        EgressBehaviour::Works { enforcement_mode } => enforcement_mode.clone(),
        _ => "dns".into(),
    }
}

/// `PolicyStatusResponse`; `mode` derived from the default action.
fn status(st: &State, policy: &Value, with_policy: bool) -> Response {
    let mode = if policy["defaultAction"] == "allow" {
        "allow_all"
    } else {
        "deny_all"
    };
    let mut v = json!({"status": "ok", "mode": mode, "enforcementMode": enforcement_mode(st)});
    if with_policy {
        v["policy"] = policy.clone();
    }
    Json(v).into_response()
}

fn policy_of(st: &State, id: &str) -> Value {
    st.lock()
        .egress_policies
        .get(id)
        .cloned()
        .unwrap_or_else(|| json!({}))
}

/// A `NetworkRule` as the spec's schema has it, or why not.
fn rule_error(i: usize, r: &Value) -> Option<String> {
    let Some(o) = r.as_object() else {
        return Some(format!("[{i}] must be an object"));
    };
    if o.keys().any(|k| k != "action" && k != "target") {
        return Some(format!("[{i}]: unknown field"));
    }
    if !matches!(
        o.get("action").and_then(Value::as_str),
        Some("allow" | "deny")
    ) {
        return Some(format!("[{i}].action must be allow|deny"));
    }
    if o.get("target").and_then(Value::as_str).is_none() {
        return Some(format!("[{i}].target is required"));
    }
    None
}

async fn read(AxState(st): S, headers: HeaderMap) -> Response {
    st.record("egress", "GET", "/policy", "", &headers, None);
    let id = match check(&st, &headers, "GET /policy") {
        Ok(id) => id,
        Err(r) => return r,
    };
    let p = policy_of(&st, &id);
    status(&st, &p, true)
}

async fn patch(AxState(st): S, headers: HeaderMap, body: Bytes) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    st.record("egress", "PATCH", "/policy", "", &headers, parsed.clone());
    let id = match check(&st, &headers, "PATCH /policy") {
        Ok(id) => id,
        Err(r) => return r,
    };
    let Some(Value::Array(incoming)) = parsed else {
        return text(StatusCode::BAD_REQUEST, "body must be an array of rules");
    };
    if incoming.is_empty() {
        return text(StatusCode::BAD_REQUEST, "at least one rule (minItems: 1)");
    }
    if let Some(why) = incoming
        .iter()
        .enumerate()
        .find_map(|(i, r)| rule_error(i, r))
    {
        return text(StatusCode::BAD_REQUEST, &why);
    }
    match st.opts.egress {
        EgressBehaviour::PatchFails => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to apply policy: nftables: operation not permitted",
            )
        }
        EgressBehaviour::IgnoresPatch => {
            let p = policy_of(&st, &id);
            return status(&st, &p, false);
        }
        _ => {}
    }
    let mut p = policy_of(&st, &id);
    let existing: Vec<Value> = p["egress"].as_array().cloned().unwrap_or_default();
    let mut merged: Vec<Value> = Vec::new();
    for r in incoming {
        if !merged.iter().any(|m| m["target"] == r["target"]) {
            merged.push(r);
        }
    }
    for r in existing {
        if !merged.iter().any(|m| m["target"] == r["target"]) {
            merged.push(r);
        }
    }
    p["egress"] = Value::Array(merged);
    st.lock().egress_policies.insert(id, p.clone());
    status(&st, &p, false)
}

async fn delete(AxState(st): S, headers: HeaderMap, body: Bytes) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    st.record("egress", "DELETE", "/policy", "", &headers, parsed.clone());
    let id = match check(&st, &headers, "DELETE /policy") {
        Ok(id) => id,
        Err(r) => return r,
    };
    let Some(Value::Array(targets)) = parsed else {
        return text(StatusCode::BAD_REQUEST, "body must be an array of targets");
    };
    if targets.is_empty() || targets.iter().any(|t| !t.is_string()) {
        return text(StatusCode::BAD_REQUEST, "at least one target string");
    }
    let mut p = policy_of(&st, &id);
    let kept: Vec<Value> = p["egress"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| !targets.contains(&r["target"]))
        .collect();
    p["egress"] = Value::Array(kept);
    st.lock().egress_policies.insert(id, p.clone());
    status(&st, &p, false)
}
