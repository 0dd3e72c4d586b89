//! The fake lifecycle server (`sandbox-lifecycle.yml`, under `/v1`).

use super::{error, Sbx, State, API_KEY, ROUTE_HEADER};
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

type S = AxState<Arc<State>>;

pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/v1/sandboxes", get(list).post(create))
        .route("/v1/sandboxes/{id}", get(fetch).delete(delete))
        .route("/v1/sandboxes/{id}/renew-expiration", post(renew))
        .route("/v1/sandboxes/{id}/endpoints/{port}", get(endpoint))
        .with_state(state)
}

fn auth(headers: &HeaderMap) -> Result<(), Response> {
    match headers
        .get("OPEN-SANDBOX-API-KEY")
        .and_then(|v| v.to_str().ok())
    {
        Some(API_KEY) => Ok(()),
        Some(_) => Err(error(
            StatusCode::UNAUTHORIZED,
            "INVALID_API_KEY",
            "the API key is wrong",
        )),
        None => Err(error(
            StatusCode::UNAUTHORIZED,
            "MISSING_API_KEY",
            "OPEN-SANDBOX-API-KEY header is required",
        )),
    }
}

fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn sandbox_json(id: &str, s: &Sbx) -> Value {
    json!({
        "id": id,
        "status": {"state": s.state, "reason": "fake", "message": "fake sandbox"},
        "metadata": s.metadata,
        "entrypoint": s.entrypoint,
        "expiresAt": s.expires_at.map(rfc3339),
        "createdAt": "2026-01-01T00:00:00Z",
    })
}

async fn list(AxState(st): S, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    st.record(
        "lifecycle",
        "GET",
        "/v1/sandboxes",
        q.as_deref().unwrap_or(""),
        &headers,
        None,
    );
    if let Err(r) = auth(&headers) {
        return r;
    }
    let pairs = query_pairs(&q);
    let mut want_meta = BTreeMap::new();
    let mut states = Vec::new();
    for (k, v) in &pairs {
        match k.as_str() {
            "metadata" => {
                for (mk, mv) in url::form_urlencoded::parse(v.as_bytes()) {
                    want_meta.insert(mk.into_owned(), mv.into_owned());
                }
            }
            "state" => states.push(v.clone()),
            _ => {}
        }
    }
    let sh = st.lock();
    let items: Vec<Value> = sh
        .sandboxes
        .iter()
        .filter(|(_, s)| want_meta.iter().all(|(k, v)| s.metadata.get(k) == Some(v)))
        .filter(|(_, s)| states.is_empty() || states.contains(&s.state))
        .map(|(id, s)| sandbox_json(id, s))
        .collect();
    let n = items.len();
    Json(json!({
        "items": items,
        "pagination": {"page": 1, "pageSize": 20, "totalItems": n, "totalPages": 1, "hasNextPage": false}
    }))
    .into_response()
}

/// `NetworkPolicy` of `sandbox-lifecycle.yml` (OpenSandbox commit in
/// `opensandbox-spec/README.md`): `defaultAction` in `allow|deny`,
/// `egress` an array of `NetworkRule {action: allow|deny, target: string}`
/// (both required), `additionalProperties: false` on both objects; the
/// create call answers `400 BadRequest` for a request that breaks it.
fn network_policy_error(np: &Value) -> Option<String> {
    let Some(obj) = np.as_object() else {
        return (!np.is_null()).then(|| "networkPolicy must be an object".into());
    };
    for k in obj.keys() {
        if k != "defaultAction" && k != "egress" {
            return Some(format!("networkPolicy: unknown field {k:?}"));
        }
    }
    if let Some(a) = obj.get("defaultAction") {
        if a != "allow" && a != "deny" {
            return Some(format!(
                "networkPolicy.defaultAction: {a} is not allow|deny"
            ));
        }
    }
    let rules = match obj.get("egress") {
        None => return None,
        Some(Value::Array(r)) => r,
        Some(_) => return Some("networkPolicy.egress must be an array".into()),
    };
    for (i, r) in rules.iter().enumerate() {
        let Some(r) = r.as_object() else {
            return Some(format!("networkPolicy.egress[{i}] must be an object"));
        };
        if r.keys().any(|k| k != "action" && k != "target") {
            return Some(format!("networkPolicy.egress[{i}]: unknown field"));
        }
        if !matches!(
            r.get("action").and_then(Value::as_str),
            Some("allow" | "deny")
        ) {
            return Some(format!(
                "networkPolicy.egress[{i}].action must be allow|deny"
            ));
        }
        if r.get("target").and_then(Value::as_str).is_none() {
            return Some(format!("networkPolicy.egress[{i}].target is required"));
        }
    }
    None
}

async fn create(AxState(st): S, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    st.record(
        "lifecycle",
        "POST",
        "/v1/sandboxes",
        "",
        &headers,
        Some(body.clone()),
    );
    if let Err(r) = auth(&headers) {
        return r;
    }
    if body.get("image").is_none() || body.get("entrypoint").is_none() {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "image and entrypoint are required",
        );
    }
    if let Some(why) = body.get("networkPolicy").and_then(network_policy_error) {
        return error(StatusCode::BAD_REQUEST, "INVALID_REQUEST", &why);
    }
    let metadata: BTreeMap<String, String> = body
        .get("metadata")
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_default();
    let mut sh = st.lock();
    sh.next_id += 1;
    let id = format!("sbx-{}", sh.next_id);
    // `timeout` seconds from now; `null` = manual cleanup (no expiry).
    let expires_at = body
        .get("timeout")
        .and_then(Value::as_i64)
        .map(|t| time::OffsetDateTime::now_utc() + time::Duration::seconds(t));
    let s = Sbx {
        expires_at,
        state: "Pending".into(),
        polls: 0,
        metadata,
        entrypoint: body["entrypoint"].clone(),
    };
    let reply = sandbox_json(&id, &s);
    // The sidecar starts from the create request's policy
    // (`CreateSandboxRequest.networkPolicy`: "Shape matches the sidecar
    // `/policy` endpoint").
    if let Some(np) = body.get("networkPolicy").filter(|v| !v.is_null()) {
        sh.egress_policies.insert(id.clone(), np.clone());
    }
    sh.sandboxes.insert(id, s);
    (StatusCode::ACCEPTED, Json(reply)).into_response()
}

async fn fetch(AxState(st): S, Path(id): Path<String>, headers: HeaderMap) -> Response {
    st.record(
        "lifecycle",
        "GET",
        &format!("/v1/sandboxes/{id}"),
        "",
        &headers,
        None,
    );
    if let Err(r) = auth(&headers) {
        return r;
    }
    let pending = st.opts.pending_polls;
    let final_state = st.opts.final_state.clone();
    let mut sh = st.lock();
    let Some(s) = sh.sandboxes.get_mut(&id) else {
        return error(
            StatusCode::NOT_FOUND,
            "SANDBOX_NOT_FOUND",
            &format!("sandbox {id} not found"),
        );
    };
    s.polls += 1;
    if s.state != "Running" {
        s.state = if s.polls <= pending {
            "Pending".into()
        } else if s.polls == pending + 1 {
            // A state this client has never heard of: must mean "not ready".
            "Allocating".into()
        } else {
            final_state.unwrap_or_else(|| "Running".into())
        };
    }
    Json(sandbox_json(&id, s)).into_response()
}

async fn delete(AxState(st): S, Path(id): Path<String>, headers: HeaderMap) -> Response {
    st.record(
        "lifecycle",
        "DELETE",
        &format!("/v1/sandboxes/{id}"),
        "",
        &headers,
        None,
    );
    if let Err(r) = auth(&headers) {
        return r;
    }
    let mut sh = st.lock();
    if sh.sandboxes.remove(&id).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            "SANDBOX_NOT_FOUND",
            "no such sandbox",
        );
    }
    sh.deleted.push(id);
    StatusCode::NO_CONTENT.into_response()
}

async fn renew(
    AxState(st): S,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    st.record(
        "lifecycle",
        "POST",
        &format!("/v1/sandboxes/{id}/renew-expiration"),
        "",
        &headers,
        Some(body.clone()),
    );
    if let Err(r) = auth(&headers) {
        return r;
    }
    // As the lifecycle server: `ensure_future_expiration`
    // (server/src/services/validators.py) only requires a future time —
    // a *shorter* expiry is accepted (recorded here as a violation of the
    // client's rule never to shorten); a sandbox without expiry cannot
    // gain one (409, server/src/services/docker.py `renew_expiration`).
    let Some(new) = body.get("expiresAt").and_then(Value::as_str).and_then(|s| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    }) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_REQUEST",
            "expiresAt must be an RFC 3339 date-time",
        );
    };
    if new <= time::OffsetDateTime::now_utc() {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_EXPIRATION",
            "New expiration time must be in the future.",
        );
    }
    let mut sh = st.lock();
    let Some(sbx) = sh.sandboxes.get_mut(&id) else {
        return error(
            StatusCode::NOT_FOUND,
            "SANDBOX_NOT_FOUND",
            "no such sandbox",
        );
    };
    let Some(current) = sbx.expires_at else {
        return error(
            StatusCode::CONFLICT,
            "INVALID_EXPIRATION",
            &format!("Sandbox {id} does not have automatic expiration enabled."),
        );
    };
    sbx.expires_at = Some(new);
    if new < current {
        sh.violations.push(format!(
            "renew of {id} shortened its life from {} to {}",
            rfc3339(current),
            rfc3339(new)
        ));
    }
    Json(json!({"expiresAt": rfc3339(new)})).into_response()
}

async fn endpoint(
    AxState(st): S,
    Path((id, port)): Path<(String, u16)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    st.record(
        "lifecycle",
        "GET",
        &format!("/v1/sandboxes/{id}/endpoints/{port}"),
        q.as_deref().unwrap_or(""),
        &headers,
        None,
    );
    if let Err(r) = auth(&headers) {
        return r;
    }
    if port == 18080 {
        return egress_endpoint(&st, &id);
    }
    if port != 44772 {
        return error(
            StatusCode::NOT_FOUND,
            "NO_SERVICE",
            "nothing listens on that port",
        );
    }
    match st.lock().sandboxes.get(&id) {
        Some(s) if s.state == "Running" => {}
        Some(_) => {
            return error(
                StatusCode::CONFLICT,
                "SANDBOX_NOT_RUNNING",
                "the sandbox is not running",
            )
        }
        None => {
            return error(
                StatusCode::NOT_FOUND,
                "SANDBOX_NOT_FOUND",
                "no such sandbox",
            )
        }
    }
    let addr = st.execd_addr.lock().map(|a| a.clone()).unwrap_or_default();
    // No scheme, as the real server answers; the route header must be echoed.
    Json(json!({"endpoint": addr, "headers": {ROUTE_HEADER: id}})).into_response()
}

/// The endpoint of the egress sidecar (port 18080 in `egress-api.yaml`):
/// only a running sandbox created with a `networkPolicy` has one; the
/// reply names the headers every sidecar call must carry (the route and
/// `OPENSANDBOX-EGRESS-AUTH`, "clients must forward them").
fn egress_endpoint(st: &State, id: &str) -> Response {
    let sh = st.lock();
    let has = sh.egress_policies.contains_key(id)
        && st.opts.egress != super::egress::EgressBehaviour::Absent;
    match sh.sandboxes.get(id) {
        Some(s) if s.state == "Running" && has => {}
        Some(s) if s.state == "Running" => {
            return error(
                StatusCode::NOT_FOUND,
                "NO_SERVICE",
                "nothing listens on that port",
            )
        }
        Some(_) => {
            return error(
                StatusCode::CONFLICT,
                "SANDBOX_NOT_RUNNING",
                "the sandbox is not running",
            )
        }
        None => {
            return error(
                StatusCode::NOT_FOUND,
                "SANDBOX_NOT_FOUND",
                "no such sandbox",
            )
        }
    }
    let addr = st.egress_addr.lock().map(|a| a.clone()).unwrap_or_default();
    Json(json!({"endpoint": addr, "headers": {
        ROUTE_HEADER: id,
        super::egress::EGRESS_AUTH_HEADER: super::egress::EGRESS_TOKEN,
    }}))
    .into_response()
}
