//! The browser client's routes and the web mode's middleware: the page
//! and its assets, the bootstrap exchange, `POST /v1/web/link` (bearer
//! clients only), and the `Host` check and security headers on every
//! answer.

use super::guard;
use super::session::{self, Refused};
use super::WebState;
use crate::server::auth::{Auth, Presented};
use crate::server::error::ApiError;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// What the browser's routes need: the sessions and the token (to tell a
/// bearer client from a page).
#[derive(Clone)]
pub struct WebRoutes {
    pub web: Arc<WebState>,
    pub auth: Auth,
}

/// The page, its assets, the link exchange and `POST /v1/web/link`, for
/// the HTTP router to merge (outside its token layer: each checks its own).
pub fn router<S: Clone + Send + Sync + 'static>(w: WebRoutes) -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/app.css", get(app_css))
        .route("/bootstrap/{cap}", get(bootstrap))
        .route("/v1/web/link", post(new_link))
        .with_state(w)
}

/// Outermost layer in web mode: a `Host` that is not this server's
/// loopback name and port is 421 (DNS rebinding); every answer carries
/// the security headers, and HTML the CSP.
pub async fn guard_layer(State(w): State<Arc<WebState>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut res = if guard::host_ok(host.as_deref(), w.port) {
        next.run(req).await
    } else {
        ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!("Host must be 127.0.0.1:{p} or localhost:{p}", p = w.port),
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

fn cookie_of(req_headers: &axum::http::HeaderMap) -> Option<String> {
    req_headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(session::cookie_value)
        .map(str::to_string)
}

/// Whether the request holds a live browser session.
pub fn has_session(w: &WebState, headers: &axum::http::HeaderMap) -> bool {
    cookie_of(headers).is_some_and(|c| w.session_valid(&c))
}

/// The cookie-authenticated request's origin check (see
/// [`guard::cookie_request_ok`]).
pub fn same_origin(req: &Request) -> Result<(), ApiError> {
    let h = req.headers();
    let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok());
    guard::cookie_request_ok(
        req.method(),
        get("host").unwrap_or(""),
        get("origin"),
        get("sec-fetch-site"),
    )
    .map_err(|e| ApiError::new(StatusCode::FORBIDDEN, "cross_origin", e.message()))
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn unauthorized_page() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        super::assets::LOCKED_HTML,
    )
        .into_response()
}

/// `/`: the app for a browser with a session; otherwise a page saying to
/// open the link the terminal printed (never the app, never a token).
pub async fn index(State(s): State<WebRoutes>, req: Request) -> Response {
    if has_session(&s.web, req.headers()) {
        asset("text/html; charset=utf-8", super::assets::INDEX_HTML)
    } else {
        unauthorized_page()
    }
}

pub async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", super::assets::APP_JS)
}

pub async fn app_css() -> Response {
    asset("text/css; charset=utf-8", super::assets::APP_CSS)
}

/// The link's exchange: a loopback peer's valid, unused, unexpired
/// capability becomes the session cookie and a 303 to `/`. Anything else
/// is 401, never the app page.
pub async fn bootstrap(
    State(s): State<WebRoutes>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(cap): Path<String>,
) -> Response {
    let w = &s.web;
    if !peer.ip().is_loopback() {
        return unauthorized_page();
    }
    let got = w
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .exchange(&cap, Instant::now());
    match got {
        Ok(cookie) => {
            if let Some(f) = w
                .redirect_file
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                let _ = std::fs::remove_file(f);
            }
            (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, "/".to_string()),
                    (header::SET_COOKIE, session::set_cookie(&cookie)),
                ],
            )
                .into_response()
        }
        Err(Refused::Malformed | Refused::NotValid) => unauthorized_page(),
    }
}

/// A fresh link (for `codewhale web --new-link`): bearer clients only,
/// so a page cannot mint links for itself.
pub async fn new_link(State(s): State<WebRoutes>, req: Request) -> Result<Response, ApiError> {
    if s.auth.presented_by(req.headers()) != Some(Presented::Header) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a new link needs the runtime token in a header (Authorization: Bearer)",
        ));
    }
    Ok(Json(serde_json::json!({ "url": s.web.mint_link() })).into_response())
}
