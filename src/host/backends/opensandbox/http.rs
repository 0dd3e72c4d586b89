//! The one function every OpenSandbox call goes through: send, then turn a
//! non-success reply (`{code, message}` per both specs' `ErrorResponse`)
//! into an [`OpenSandboxError`] that names the call.

use super::error::OpenSandboxError;
use reqwest::{RequestBuilder, Response, StatusCode};

/// How much of an unparseable error body is quoted in a message.
const BODY_QUOTE: usize = 300;

#[derive(serde::Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// Send `req` and return the response if its status is a success.
pub async fn send(
    call: &str,
    url: &str,
    req: RequestBuilder,
) -> Result<Response, OpenSandboxError> {
    let resp = req.send().await.map_err(|e| connect_error(call, url, &e))?;
    if resp.status().is_success() {
        return Ok(resp);
    }
    Err(status_error(call, resp).await)
}

/// A transport-level failure as a `Connect` error (with the cause chain).
pub fn connect_error(call: &str, url: &str, e: &reqwest::Error) -> OpenSandboxError {
    let mut detail = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        src = s.source();
    }
    OpenSandboxError::Connect {
        call: call.to_string(),
        url: url.to_string(),
        detail,
    }
}

async fn status_error(call: &str, resp: Response) -> OpenSandboxError {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
        Ok(b) if !b.code.is_empty() || !b.message.is_empty() => (b.code, b.message),
        _ => {
            let mut quoted: String = text.chars().take(BODY_QUOTE).collect();
            if quoted.trim().is_empty() {
                quoted = status.canonical_reason().unwrap_or("no body").to_string();
            }
            ("-".to_string(), quoted)
        }
    };
    let call = call.to_string();
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => OpenSandboxError::Auth {
            call,
            status: status.as_u16(),
            code,
            message,
        },
        StatusCode::NOT_FOUND => OpenSandboxError::NotFound {
            call,
            code,
            message,
        },
        StatusCode::CONFLICT => OpenSandboxError::Conflict {
            call,
            code,
            message,
        },
        s => OpenSandboxError::Status {
            call,
            status: s.as_u16(),
            code,
            message,
            transient: s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS,
        },
    }
}

/// Parse a JSON success body, naming the call on failure.
pub async fn json<T: serde::de::DeserializeOwned>(
    call: &str,
    resp: Response,
) -> Result<T, OpenSandboxError> {
    let bytes = resp.bytes().await.map_err(|e| OpenSandboxError::Protocol {
        call: call.to_string(),
        detail: format!("reading the body: {e}"),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| OpenSandboxError::Protocol {
        call: call.to_string(),
        detail: format!(
            "{e} in {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(BODY_QUOTE)])
        ),
    })
}
