//! Client of execd, the daemon inside each sandbox (`execd-api.yaml`).
//!
//! Invariants:
//! - Built from the lifecycle server's `Endpoint` reply: the endpoint has no
//!   scheme (we add the lifecycle URL's), and every header it returned is
//!   sent on every call (secured-access gateways need them).
//! - Never carries the lifecycle API key: its HTTP client is separate from
//!   the lifecycle client's and has only the endpoint headers and
//!   `X-EXECD-ACCESS-TOKEN` (when configured).

use super::config::{check_transport, OpenSandboxConfig};
use super::error::OpenSandboxError;
use super::events::{EventParser, StreamEvent};
use super::http;
use super::lifecycle::{Endpoint, API_KEY_HEADER};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use std::collections::BTreeMap;

/// Header carrying the execd access token.
pub const ACCESS_TOKEN_HEADER: &str = "X-EXECD-ACCESS-TOKEN";

/// `RunCommandRequest`: the fields codewhale sets.
#[derive(Clone, Debug, Serialize)]
pub struct RunCommandRequest {
    pub command: String,
    pub cwd: String,
    /// Milliseconds (the server kills the command after this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    pub envs: BTreeMap<String, String>,
}

/// `FileMetadata` of one upload part.
#[derive(Clone, Debug, Serialize)]
pub struct FileMetadata {
    pub path: String,
    /// Octal digits written as a decimal integer (`644`), as the spec shows.
    pub mode: u32,
}

/// The base URL and default headers of a client for a sandbox endpoint
/// the lifecycle server returned (execd, the egress sidecar): the
/// lifecycle URL's scheme when the endpoint has none, the transport
/// checked, every endpoint header sent (marked sensitive) except one named
/// like the lifecycle key, which is never forwarded. `what` names the
/// endpoint in errors.
pub(super) fn endpoint_parts(
    cfg: &OpenSandboxConfig,
    ep: &Endpoint,
    what: &str,
) -> Result<(String, HeaderMap), OpenSandboxError> {
    let call = format!("{what} endpoint");
    let base = if ep.endpoint.contains("://") {
        ep.endpoint.clone()
    } else {
        format!("{}://{}", cfg.url.scheme(), ep.endpoint)
    };
    let base = base.trim_end_matches('/').to_string();
    let parsed = reqwest::Url::parse(&base).map_err(|e| OpenSandboxError::Protocol {
        call: call.clone(),
        detail: format!("endpoint {:?} is not a URL: {e}", ep.endpoint),
    })?;
    check_transport(&parsed, cfg.allow_insecure_http)
        .map_err(|m| OpenSandboxError::Unsupported(format!("{what} endpoint {base}: {m}")))?;
    let mut headers = HeaderMap::new();
    for (k, v) in &ep.headers {
        if k.eq_ignore_ascii_case(API_KEY_HEADER) {
            // Never forward anything under the lifecycle key's name.
            continue;
        }
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| OpenSandboxError::Protocol {
                call: call.clone(),
                detail: format!("endpoint header name {k:?} is invalid"),
            })?;
        let mut value = HeaderValue::from_str(v).map_err(|_| OpenSandboxError::Protocol {
            call: call.clone(),
            detail: format!("endpoint header {k} has an invalid value"),
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok((base, headers))
}

#[derive(Clone)]
pub struct ExecdClient {
    http: reqwest::Client,
    base: String,
}

impl ExecdClient {
    /// Build the client for `ep`; `scheme` is the lifecycle URL's scheme.
    pub fn new(cfg: &OpenSandboxConfig, ep: &Endpoint) -> Result<Self, OpenSandboxError> {
        let (base, mut headers) = endpoint_parts(cfg, ep, "execd")?;
        if let Some(tok) = &cfg.execd_access_token {
            let mut v = HeaderValue::from_str(tok).map_err(|_| {
                OpenSandboxError::Unsupported(
                    "execd_access_token is not a valid header value".into(),
                )
            })?;
            v.set_sensitive(true);
            headers.insert(ACCESS_TOKEN_HEADER, v);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| http::connect_error("building the execd client", &base, &e))?;
        Ok(ExecdClient { http, base })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /ping`: true when execd answers 200.
    pub async fn ping(&self) -> Result<(), OpenSandboxError> {
        let url = self.url("/ping");
        let req = self
            .http
            .get(&url)
            .timeout(std::time::Duration::from_secs(5));
        http::send("GET /ping", &url, req).await?;
        Ok(())
    }

    /// `POST /command`, calling `on_event` for each event until the
    /// terminal one, which is returned. Stops reading there: execd keeps
    /// the connection open for a while after the end, and some deployments
    /// drop it without the final chunk — neither matters once we have it.
    pub async fn run<F>(
        &self,
        body: &RunCommandRequest,
        mut on_event: F,
    ) -> Result<StreamEvent, OpenSandboxError>
    where
        F: FnMut(&StreamEvent),
    {
        let call = "POST /command";
        let url = self.url("/command");
        let resp = http::send(call, &url, self.http.post(&url).json(body)).await?;
        let mut stream = resp.bytes_stream();
        let mut parser = EventParser::new();
        loop {
            let events = match stream.next().await {
                Some(Ok(chunk)) => parser.push(&chunk),
                Some(Err(e)) => {
                    // A broken connection: whatever was complete still counts.
                    let mut evs = parser.finish();
                    if let Some(t) = take_terminal(&mut evs, &mut on_event) {
                        return Ok(t);
                    }
                    return Err(http::connect_error(
                        "POST /command (stream ended before the command finished)",
                        &url,
                        &e,
                    ));
                }
                None => {
                    let mut evs = parser.finish();
                    if let Some(t) = take_terminal(&mut evs, &mut on_event) {
                        return Ok(t);
                    }
                    return Err(OpenSandboxError::Protocol {
                        call: call.into(),
                        detail: "the event stream ended without execution_complete or error".into(),
                    });
                }
            };
            let mut events = events;
            if let Some(t) = take_terminal(&mut events, &mut on_event) {
                return Ok(t);
            }
        }
    }

    /// `DELETE /command?id=…`: interrupt a running command.
    pub async fn interrupt(&self, id: &str) -> Result<(), OpenSandboxError> {
        let url = self.url("/command");
        let req = self
            .http
            .delete(&url)
            .query(&[("id", id)])
            .timeout(std::time::Duration::from_secs(10));
        http::send("DELETE /command", &url, req).await?;
        Ok(())
    }

    /// `POST /files/upload` of one file: a `metadata` file part (the
    /// `FileMetadata` JSON), then the `file` part; both carry a filename.
    pub async fn upload(
        &self,
        meta: &FileMetadata,
        bytes: Vec<u8>,
    ) -> Result<(), OpenSandboxError> {
        let call = "POST /files/upload";
        let url = self.url("/files/upload");
        let meta_json = serde_json::to_string(meta).map_err(|e| OpenSandboxError::Protocol {
            call: call.into(),
            detail: e.to_string(),
        })?;
        let bad_mime = |e: reqwest::Error| OpenSandboxError::Protocol {
            call: call.into(),
            detail: format!("building the multipart body: {e}"),
        };
        let form = reqwest::multipart::Form::new()
            .part(
                "metadata",
                // A file part (with a filename), as the official SDKs send
                // it: execd reads `form.File["metadata"]`, and Go's
                // multipart parser files a part without a filename under
                // the form's values, where execd never looks (400
                // INVALID_FILE_METADATA "metadata file is missing").
                reqwest::multipart::Part::text(meta_json)
                    .file_name("metadata.json")
                    .mime_str("application/json")
                    .map_err(bad_mime)?,
            )
            .part(
                "file",
                reqwest::multipart::Part::bytes(bytes)
                    .file_name("codewhale-sync.tar")
                    .mime_str("application/octet-stream")
                    .map_err(bad_mime)?,
            );
        http::send(call, &url, self.http.post(&url).multipart(form)).await?;
        Ok(())
    }

    /// `GET /files/download?path=…`, refusing bodies over `limit` bytes.
    pub async fn download(
        &self,
        path: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, OpenSandboxError> {
        let call = format!("GET /files/download?path={path}");
        let url = self.url("/files/download");
        let resp = http::send(&call, &url, self.http.get(&url).query(&[("path", path)])).await?;
        let mut out = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| http::connect_error(&call, &url, &e))?;
            if out.len() as u64 + chunk.len() as u64 > limit {
                return Ok(None);
            }
            out.extend_from_slice(&chunk);
        }
        Ok(Some(out))
    }
}

/// Hand every event to `on_event`; return the first terminal one.
fn take_terminal<F: FnMut(&StreamEvent)>(
    events: &mut Vec<StreamEvent>,
    on_event: &mut F,
) -> Option<StreamEvent> {
    for ev in events.drain(..) {
        on_event(&ev);
        if ev.is_terminal() {
            return Some(ev);
        }
    }
    None
}
