//! Every error answer is `{"error": {"code", "message"}}`, and the message
//! names the field, parameter or id at fault.

use crate::runtime::driver::DriverError;
use crate::runtime::{RuntimeError, SettleError};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad(field: &str, message: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("{field}: {message}"),
        )
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no {what} `{id}`"),
        )
    }
}

pub fn body(code: &str, message: &str) -> serde_json::Value {
    json!({"error": {"code": code, "message": message}})
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(body(self.code, &self.message))).into_response()
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        match &e {
            RuntimeError::NotFound { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            // Unknown, already settled and wrongly routed ids look the same
            // to a client: there is nothing pending under that name.
            RuntimeError::Settle(s) => {
                let id = match s {
                    SettleError::Unknown(i)
                    | SettleError::AlreadySettled(i)
                    | SettleError::WrongRoute(i) => i,
                };
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no pending request `{id}` here (unknown or already settled)"),
                )
            }
            RuntimeError::Invalid { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", e.to_string())
            }
            RuntimeError::Busy(_) => {
                ApiError::new(StatusCode::CONFLICT, "turn_running", e.to_string())
            }
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
        }
    }
}

impl From<DriverError> for ApiError {
    fn from(e: DriverError) -> Self {
        match e {
            DriverError::Runtime(r) => r.into(),
            DriverError::Setup(m) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "turn_setup",
                format!("cannot start a turn: {m}"),
            ),
        }
    }
}

/// `Json<T>` whose rejections are [`ApiError`]s (serde's message names the
/// field: "unknown field `titel`", "missing field `prompt`").
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(r) => Err(json_rejection(r)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::JsonDataError(e) => {
            // "Failed to deserialize …: <path>: <what>" → "body.<path>: <what>"
            let text = e.body_text();
            let detail = text.split_once(": ").map_or(text.as_str(), |(_, d)| d);
            ApiError::bad("body", detail)
        }
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::bad("body", format!("not JSON ({})", e.body_text()))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "body: send Content-Type: application/json",
        ),
        JsonRejection::BytesRejection(e) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("body: {}", e.body_text()),
        ),
        other => ApiError::bad("body", other.body_text()),
    }
}

/// `Query<T>` with [`ApiError`] rejections naming the parameter.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                let text = e.body_text();
                let detail = text.split_once(": ").map_or(text.as_str(), |(_, d)| d);
                Err(ApiError::bad("query", detail))
            }
            Err(e) => Err(ApiError::bad("query", e.body_text())),
        }
    }
}

/// Turn axum's and tower-http's own plain-text error answers (unknown
/// route, wrong method, a body over the limit) into the JSON shape.
pub async fn json_errors(req: Request, next: axum::middleware::Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    // JSON (ours) and HTML (`codewhale web`'s pages) are answers already.
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return res;
    }
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNAUTHORIZED => "unauthorized",
        s if s.is_server_error() => "internal",
        _ => "invalid_request",
    };
    let msg = match status {
        StatusCode::NOT_FOUND => "no such route".to_string(),
        StatusCode::METHOD_NOT_ALLOWED => "this route does not take that method".to_string(),
        StatusCode::PAYLOAD_TOO_LARGE => "body: larger than the limit".to_string(),
        s => s.canonical_reason().unwrap_or("error").to_string(),
    };
    let mut out = ApiError::new(status, code, msg).into_response();
    for (k, v) in res.headers() {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}
