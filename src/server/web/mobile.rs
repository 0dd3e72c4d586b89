//! `app-server --mobile`: the phone page at `/mobile`. The page and its
//! assets are public and hold no secret (the token is typed into the page
//! and kept in its memory; every API call carries it as a bearer token),
//! so the only check here is the `Host` ([`guard::mobile_host_ok`]: an IP
//! literal or `localhost`, never a DNS name), plus the security headers
//! and CSP of `codewhale web`. The `/v1` API is unchanged: bearer auth.

use super::{assets, guard};
use crate::server::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// `/mobile` and its assets under `/mobile/`, for the HTTP router to
/// merge (outside its token layer). `port` is the bound port.
pub fn router<S: Clone + Send + Sync + 'static>(port: u16) -> Router<S> {
    Router::new()
        .route("/mobile", get(page))
        .route("/mobile/app.js", get(app_js))
        .route("/mobile/app.css", get(app_css))
        .route("/mobile/mobile.css", get(mobile_css))
        .route_layer(middleware::from_fn_with_state(port, guard_layer))
}

/// A `Host` that is not an IP literal or `localhost` with this port is
/// 421; every answer carries the security headers and the CSP.
async fn guard_layer(State(port): State<u16>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok());
    let mut res = if guard::mobile_host_ok(host, port) {
        next.run(req).await
    } else {
        ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!("the phone page answers an IP address or localhost with port {port}, not a DNS name"),
        )
        .into_response()
    };
    let h = res.headers_mut();
    for (k, v) in guard::ALWAYS {
        h.insert(*k, HeaderValue::from_static(v));
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(guard::CSP),
    );
    res
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", assets::MOBILE_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", assets::APP_JS)
}

async fn app_css() -> Response {
    asset("text/css; charset=utf-8", assets::APP_CSS)
}

async fn mobile_css() -> Response {
    asset("text/css; charset=utf-8", assets::MOBILE_CSS)
}
