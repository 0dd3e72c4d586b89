//! The HTTP front end, parsed by hyper: `CONNECT host:port` opens a tunnel
//! (TLS and anything else), an absolute-form request (`GET http://host/`)
//! is relayed to the origin over a fresh connection. Refusals are answered
//! `403` with the rule in the body, so `curl -v` shows why.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::net::covert;
use crate::net::events::Protocol;
use crate::net::gate::{Gate, Verdict};
use crate::net::proxy::meter::{relay, Metered};
use crate::net::proxy::socket::ClientStream;

type Body = BoxBody<Bytes, hyper::Error>;

/// The request head must arrive within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Hop-by-hop headers (RFC 9110 §7.6.1) and the proxy's own, never
/// forwarded to the origin.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

pub async fn serve<S>(gate: Arc<Gate>, stream: S)
where
    S: ClientStream,
{
    let svc = hyper::service::service_fn(move |req| handle::<S>(Arc::clone(&gate), req));
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades()
        .await;
}

fn text(status: StatusCode, msg: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(msg)).map_err(|n| match n {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn refused(host: &str, port: u16, rule: &str) -> Response<Body> {
    text(
        StatusCode::FORBIDDEN,
        format!("codewhale egress proxy: {host}:{port} refused: {rule}\n"),
    )
}

async fn handle<S: ClientStream>(
    gate: Arc<Gate>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if req.method() == Method::CONNECT {
        return Ok(connect::<S>(gate, req).await);
    }
    Ok(forward(gate, req).await)
}

async fn connect<S: ClientStream>(gate: Arc<Gate>, req: Request<Incoming>) -> Response<Body> {
    let Some((host, port)) = req
        .uri()
        .authority()
        .and_then(|a| a.port_u16().map(|p| (a.host().to_string(), p)))
    else {
        return text(
            StatusCode::BAD_REQUEST,
            "codewhale egress proxy: CONNECT needs host:port\n".into(),
        );
    };
    let (id, addrs, counters) = match gate.admit(Protocol::HttpConnect, &host, port).await {
        Verdict::Refuse { rule, .. } => return refused(&host, port, &rule),
        Verdict::Dial {
            id,
            addrs,
            counters,
        } => (id, addrs, counters),
    };
    let upstream = match gate.dial(id, &addrs).await {
        Ok(s) => s,
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                format!("codewhale egress proxy: {host}:{port}: {e}\n"),
            )
        }
    };
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            // Back to the accepted socket (and whatever hyper read past
            // the head) so the relay can splice; else relay the wrapper.
            Ok(upgraded) => match upgraded.downcast::<TokioIo<S>>() {
                Ok(parts) => {
                    let io = parts.io.into_inner();
                    relay(io, parts.read_buf, upstream, id, counters, gate).await
                }
                Err(upgraded) => {
                    let io = TokioIo::new(upgraded);
                    relay(io, Bytes::new(), upstream, id, counters, gate).await
                }
            },
            Err(e) => gate.log.set_error(id, format!("upgrade: {e}")),
        }
    });
    Response::new(Empty::new().map_err(|n| match n {}).boxed())
}

/// Does this plain-HTTP request carry DNS (RFC 8484: an
/// `application/dns-message` Content-Type or Accept, the JSON form's
/// `application/dns-json`, or the GET form `/dns-query?dns=`)? Such a
/// request goes only to a host an exact entry names (src/net/covert.rs).
fn carries_dns(req: &Request<Incoming>) -> bool {
    let media = |name| {
        req.headers()
            .get_all(name)
            .iter()
            .any(|v| v.to_str().is_ok_and(covert::is_dns_media_type))
    };
    media(hyper::header::CONTENT_TYPE)
        || media(hyper::header::ACCEPT)
        || req
            .uri()
            .path_and_query()
            .is_some_and(|pq| covert::is_doh_get(pq.as_str()))
}

async fn forward(gate: Arc<Gate>, mut req: Request<Incoming>) -> Response<Body> {
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("http") {
        return text(
            StatusCode::BAD_REQUEST,
            "codewhale egress proxy: only absolute http:// requests are relayed; use CONNECT for https\n"
                .into(),
        );
    }
    let Some(authority) = uri.authority().cloned() else {
        return text(
            StatusCode::BAD_REQUEST,
            "codewhale egress proxy: the request URI names no host\n".into(),
        );
    };
    let host = authority.host().to_string();
    let port = authority.port_u16().unwrap_or(80);
    let verdict = if carries_dns(&req) {
        gate.admit_dns_request(Protocol::HttpForward, &host, port)
            .await
    } else {
        gate.admit(Protocol::HttpForward, &host, port).await
    };
    let (id, addrs, counters) = match verdict {
        Verdict::Refuse { rule, .. } => return refused(&host, port, &rule),
        Verdict::Dial {
            id,
            addrs,
            counters,
        } => (id, addrs, counters),
    };
    let upstream = match gate.dial(id, &addrs).await {
        Ok(s) => s,
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                format!("codewhale egress proxy: {host}:{port}: {e}\n"),
            )
        }
    };
    let io = TokioIo::new(Metered::new(upstream, counters, Arc::clone(&gate)));
    let (mut sender, conn) = match hyper::client::conn::http1::handshake::<_, Incoming>(io).await {
        Ok(x) => x,
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                format!("codewhale egress proxy: {e}\n"),
            )
        }
    };
    let conn_gate = Arc::clone(&gate);
    tokio::spawn(async move {
        let r = tokio::select! {
            r = conn => r,
            _ = conn_gate.stopped() => return,
        };
        if let Err(e) = r {
            if conn_gate.budget.exceeded() {
                conn_gate.log.set_error(id, "byte cap reached".into());
            } else {
                conn_gate.log.set_error(id, format!("upstream: {e}"));
            }
        }
    });
    // Origin-form for the origin server, Host from the authority decided on.
    let path = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_else(|_| hyper::Uri::from_static("/"));
    *req.uri_mut() = path;
    let headers = req.headers_mut();
    for h in HOP_BY_HOP {
        headers.remove(HeaderName::from_static(h));
    }
    let host_header = match authority.port() {
        Some(p) => format!("{}:{}", authority.host(), p),
        None => authority.host().to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&host_header) {
        headers.insert(HOST, v);
    }
    match sender.send_request(req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            for h in HOP_BY_HOP {
                parts.headers.remove(HeaderName::from_static(h));
            }
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => {
            if gate.budget.exceeded() {
                gate.log.set_error(id, "byte cap reached".into());
            }
            text(
                StatusCode::BAD_GATEWAY,
                format!("codewhale egress proxy: {e}\n"),
            )
        }
    }
}
