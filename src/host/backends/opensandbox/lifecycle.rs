//! Client of the OpenSandbox lifecycle server (`sandbox-lifecycle.yml`).
//!
//! Invariant: this is the only client that carries the lifecycle API key
//! (`OPEN-SANDBOX-API-KEY`), and it only ever talks to the configured
//! lifecycle URL. execd gets its own client ([`super::execd`]) built without
//! the key, so the key cannot leak into a sandbox by construction.

use super::config::OpenSandboxConfig;
use super::error::OpenSandboxError;
use super::http;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Header carrying the lifecycle API key.
pub const API_KEY_HEADER: &str = "OPEN-SANDBOX-API-KEY";

/// `SandboxStatus` (only what we read).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SandboxStatus {
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// `Sandbox` / `CreateSandboxResponse` (only what we read).
#[derive(Clone, Debug, Deserialize)]
pub struct SandboxInfo {
    pub id: String,
    #[serde(default)]
    pub status: SandboxStatus,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default, rename = "expiresAt")]
    pub expires_at: Option<String>,
}

#[derive(Deserialize)]
struct ListResponse {
    #[serde(default)]
    items: Vec<SandboxInfo>,
}

/// `Endpoint`: a host[:port][/path] without scheme, plus headers every
/// request to it must carry.
#[derive(Clone, Debug, Deserialize)]
pub struct Endpoint {
    pub endpoint: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// `CreateSandboxRequest`: the fields codewhale sets.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSandboxRequest {
    pub image: ImageSpec,
    pub entrypoint: Vec<String>,
    /// Seconds; `null` (manual cleanup) is sent explicitly when absent.
    pub timeout: Option<u64>,
    pub resource_limits: BTreeMap<String, String>,
    pub metadata: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicy>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ImageSpec {
    pub uri: String,
}

/// `NetworkRule` of both `sandbox-lifecycle.yml` and `egress-api.yaml`:
/// `action` is `allow` or `deny`, `target` an FQDN or `*.domain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SidecarRule {
    pub action: String,
    pub target: String,
}

impl SidecarRule {
    pub fn new(action: &str, target: &str) -> Self {
        SidecarRule {
            action: action.to_string(),
            target: target.to_string(),
        }
    }
}

/// Egress policy; `defaultAction: deny` with no rules blocks all egress.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicy {
    pub default_action: String,
    pub egress: Vec<SidecarRule>,
}

#[derive(Serialize)]
struct RenewRequest {
    #[serde(rename = "expiresAt")]
    expires_at: String,
}

/// The lifecycle client.
#[derive(Clone)]
pub struct LifecycleClient {
    http: reqwest::Client,
    base: String,
}

impl LifecycleClient {
    pub fn new(cfg: &OpenSandboxConfig) -> Result<Self, OpenSandboxError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &cfg.api_key {
            let mut v = HeaderValue::from_str(key).map_err(|_| {
                OpenSandboxError::Unsupported(
                    "the OpenSandbox API key contains characters not allowed in an HTTP header"
                        .into(),
                )
            })?;
            v.set_sensitive(true);
            headers.insert(API_KEY_HEADER, v);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| http::connect_error("building the HTTP client", &cfg.api_base(), &e))?;
        Ok(LifecycleClient {
            http,
            base: cfg.api_base(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /sandboxes?metadata=k=v&…` (AND of all pairs), Running/Pending only.
    pub async fn find(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<SandboxInfo>, OpenSandboxError> {
        let filter = labels
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect::<Vec<_>>()
            .join("&");
        let url = self.url("/sandboxes");
        let call = "GET /v1/sandboxes";
        let req = self.http.get(&url).query(&[
            ("metadata", filter.as_str()),
            ("state", "Running"),
            ("state", "Pending"),
            ("pageSize", "20"),
        ]);
        let resp = http::send(call, &url, req).await?;
        let list: ListResponse = http::json(call, resp).await?;
        // Filter again locally: a server that ignores the filter must not
        // hand us some other workspace's sandbox.
        Ok(list
            .items
            .into_iter()
            .filter(|s| labels.iter().all(|(k, v)| s.metadata.get(k) == Some(v)))
            .collect())
    }

    /// `POST /sandboxes` → 202.
    pub async fn create(
        &self,
        body: &CreateSandboxRequest,
    ) -> Result<SandboxInfo, OpenSandboxError> {
        let url = self.url("/sandboxes");
        let call = "POST /v1/sandboxes";
        let resp = http::send(call, &url, self.http.post(&url).json(body)).await?;
        http::json(call, resp).await
    }

    /// `GET /sandboxes/{id}`.
    pub async fn get(&self, id: &str) -> Result<SandboxInfo, OpenSandboxError> {
        let url = self.url(&format!("/sandboxes/{}", enc(id)));
        let call = format!("GET /v1/sandboxes/{id}");
        let resp = http::send(&call, &url, self.http.get(&url)).await?;
        http::json(&call, resp).await
    }

    /// `GET /sandboxes/{id}/endpoints/{port}`.
    pub async fn endpoint(
        &self,
        id: &str,
        port: u16,
        use_server_proxy: bool,
    ) -> Result<Endpoint, OpenSandboxError> {
        let url = self.url(&format!("/sandboxes/{}/endpoints/{port}", enc(id)));
        let call = format!("GET /v1/sandboxes/{id}/endpoints/{port}");
        let mut req = self.http.get(&url);
        if use_server_proxy {
            req = req.query(&[("use_server_proxy", "true")]);
        }
        let resp = http::send(&call, &url, req).await?;
        http::json(&call, resp).await
    }

    /// `POST /sandboxes/{id}/renew-expiration`.
    pub async fn renew(
        &self,
        id: &str,
        expires_at: time::OffsetDateTime,
    ) -> Result<(), OpenSandboxError> {
        let url = self.url(&format!("/sandboxes/{}/renew-expiration", enc(id)));
        let call = format!("POST /v1/sandboxes/{id}/renew-expiration");
        let body = RenewRequest {
            expires_at: rfc3339(expires_at),
        };
        http::send(&call, &url, self.http.post(&url).json(&body)).await?;
        Ok(())
    }

    /// `DELETE /sandboxes/{id}` → 204.
    pub async fn delete(&self, id: &str) -> Result<(), OpenSandboxError> {
        let url = self.url(&format!("/sandboxes/{}", enc(id)));
        let call = format!("DELETE /v1/sandboxes/{id}");
        http::send(&call, &url, self.http.delete(&url)).await?;
        Ok(())
    }
}

/// RFC 3339 UTC with whole seconds (`2025-11-16T14:30:45Z`), as the spec shows.
pub fn rfc3339(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Percent-encode one metadata key/value or path segment.
fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_utc_whole_seconds() {
        let t = time::macros::datetime!(2025-11-16 14:30:45.123 +02:00);
        assert_eq!(rfc3339(t), "2025-11-16T12:30:45Z");
    }

    #[test]
    fn create_request_shape() {
        let body = CreateSandboxRequest {
            image: ImageSpec {
                uri: "ubuntu:24.04".into(),
            },
            entrypoint: vec!["tail".into()],
            timeout: None,
            resource_limits: BTreeMap::new(),
            metadata: BTreeMap::new(),
            network_policy: Some(NetworkPolicy {
                default_action: "deny".into(),
                egress: vec![],
            }),
        };
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(v["timeout"], serde_json::Value::Null);
        assert_eq!(v["networkPolicy"]["defaultAction"], "deny");
        assert!(v.get("resourceLimits").is_some());
    }
}
