//! The egress sidecar's own policy API (`egress-api.yaml`, port 18080):
//! after the sandbox runs, codewhale applies the allow-list's rules there
//! and reads back what the sidecar enforces, so the report says what the
//! sidecar *accepted*, not what codewhale asked for at creation.
//!
//! Access model (the spec's "Access Model"): resolve the sandbox endpoint
//! for the egress port through the lifecycle API, then call `/policy` on
//! it with every header that endpoint reply named (the optional
//! `OPENSANDBOX-EGRESS-AUTH` comes that way). The lifecycle key and the
//! execd token are never sent here.
//!
//! The steps: `PATCH /policy` with the rules (merge: incoming rules win
//! and come first), `GET /policy`, `DELETE /policy` of any allow rule the
//! list does not hold (a sidecar that had more), and `GET` again; the
//! policy is *accepted* when the read-back has `defaultAction: deny` (or
//! none: the spec's default) and, for every rule of the list, the first
//! rule with its target has its action, and no other allow rule.

use super::config::OpenSandboxConfig;
use super::error::OpenSandboxError;
use super::http;
use super::lifecycle::Endpoint;
use serde::Deserialize;

/// The egress sidecar's port (`servers` of `egress-api.yaml`).
pub const EGRESS_PORT: u16 = 18080;

pub use super::lifecycle::SidecarRule as Rule;

/// `NetworkPolicy` of `egress-api.yaml`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    #[serde(default)]
    pub default_action: Option<String>,
    #[serde(default)]
    pub egress: Vec<Rule>,
}

/// `PolicyStatusResponse` of `egress-api.yaml`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    /// `dns` (a DNS proxy answering NXDOMAIN for denied names) or
    /// `dns+nft` (plus nftables sets of the resolved addresses).
    #[serde(default)]
    pub enforcement_mode: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub policy: Option<Policy>,
}

/// What the sidecar said about the allow-list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SidecarVerdict {
    /// The read-back policy holds exactly the list's rules, default deny.
    Accepted { enforcement_mode: String },
    /// Not confirmed: why (a call failed, or the read-back differs).
    NotAccepted { reason: String },
}

/// A client of one sandbox's egress sidecar.
pub struct SidecarClient {
    http: reqwest::Client,
    base: String,
}

impl SidecarClient {
    /// Built from the lifecycle server's `Endpoint` reply for
    /// [`EGRESS_PORT`], as execd's client is: the lifecycle URL's scheme
    /// when the endpoint has none, every endpoint header but one named
    /// like the lifecycle key.
    pub fn new(cfg: &OpenSandboxConfig, ep: &Endpoint) -> Result<Self, OpenSandboxError> {
        let (base, headers) = super::execd::endpoint_parts(cfg, ep, "egress sidecar")?;
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| http::connect_error("building the egress sidecar client", &base, &e))?;
        Ok(SidecarClient { http, base })
    }

    fn url(&self) -> String {
        format!("{}/policy", self.base)
    }

    /// `GET /policy`.
    pub async fn get(&self) -> Result<PolicyStatus, OpenSandboxError> {
        let url = self.url();
        let resp = http::send("GET /policy (egress sidecar)", &url, self.http.get(&url)).await?;
        http::json("GET /policy (egress sidecar)", resp).await
    }

    /// `PATCH /policy` (merge; `minItems: 1`, so never called empty).
    pub async fn patch(&self, rules: &[Rule]) -> Result<PolicyStatus, OpenSandboxError> {
        let url = self.url();
        let call = "PATCH /policy (egress sidecar)";
        let resp = http::send(call, &url, self.http.patch(&url).json(rules)).await?;
        http::json(call, resp).await
    }

    /// `DELETE /policy` of these targets (idempotent).
    pub async fn delete(&self, targets: &[String]) -> Result<PolicyStatus, OpenSandboxError> {
        let url = self.url();
        let call = "DELETE /policy (egress sidecar)";
        let resp = http::send(call, &url, self.http.delete(&url).json(targets)).await?;
        http::json(call, resp).await
    }
}

/// Apply `want` through `client` and read it back (see the module doc).
pub async fn apply(client: &SidecarClient, want: &[Rule]) -> SidecarVerdict {
    match apply_inner(client, want).await {
        Ok(v) => v,
        Err(e) => SidecarVerdict::NotAccepted {
            reason: e.to_string(),
        },
    }
}

async fn apply_inner(
    client: &SidecarClient,
    want: &[Rule],
) -> Result<SidecarVerdict, OpenSandboxError> {
    if !want.is_empty() {
        client.patch(want).await?;
    }
    let mut status = client.get().await?;
    let extra = extra_allows(status.policy.as_ref(), want);
    if !extra.is_empty() {
        client.delete(&extra).await?;
        status = client.get().await?;
    }
    Ok(judge(&status, want))
}

/// Allow rules the read-back holds that the list does not.
fn extra_allows(policy: Option<&Policy>, want: &[Rule]) -> Vec<String> {
    policy
        .map(|p| {
            p.egress
                .iter()
                .filter(|r| r.action == "allow" && !want.iter().any(|w| w.target == r.target))
                .map(|r| r.target.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Does the read-back `status` enforce exactly `want` with default deny?
pub fn judge(status: &PolicyStatus, want: &[Rule]) -> SidecarVerdict {
    let no = |reason: String| SidecarVerdict::NotAccepted { reason };
    let Some(policy) = status.policy.as_ref() else {
        return no("GET /policy answered no `policy`".into());
    };
    match policy.default_action.as_deref() {
        None | Some("deny") => {}
        Some(other) => {
            return no(format!(
                "the sidecar's defaultAction is {other:?}, not \"deny\""
            ))
        }
    }
    for w in want {
        match policy.egress.iter().find(|r| r.target == w.target) {
            Some(r) if r.action == w.action => {}
            Some(r) => {
                return no(format!(
                    "the sidecar's rule for {} is {}, the list's {}",
                    w.target, r.action, w.action
                ))
            }
            None => return no(format!("the sidecar's policy has no rule for {}", w.target)),
        }
    }
    if let Some(t) = extra_allows(Some(policy), want).first() {
        return no(format!(
            "the sidecar still allows {t}, which the list does not"
        ));
    }
    match status.enforcement_mode.as_deref() {
        Some(m) if !m.is_empty() => SidecarVerdict::Accepted {
            enforcement_mode: m.to_string(),
        },
        _ => no("GET /policy answered no `enforcementMode`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(a: &str, t: &str) -> Rule {
        Rule {
            action: a.into(),
            target: t.into(),
        }
    }
    fn status(default: Option<&str>, egress: Vec<Rule>, mode: Option<&str>) -> PolicyStatus {
        PolicyStatus {
            status: Some("ok".into()),
            mode: Some("deny_all".into()),
            enforcement_mode: mode.map(str::to_string),
            reason: None,
            policy: Some(Policy {
                default_action: default.map(str::to_string),
                egress,
            }),
        }
    }

    #[test]
    fn exactly_the_list_with_default_deny_is_accepted() {
        let want = vec![rule("deny", "evil.example"), rule("allow", "pypi.org")];
        assert_eq!(
            judge(&status(Some("deny"), want.clone(), Some("dns+nft")), &want),
            SidecarVerdict::Accepted {
                enforcement_mode: "dns+nft".into()
            }
        );
        // An absent defaultAction is the spec's default: deny.
        assert!(matches!(
            judge(&status(None, want.clone(), Some("dns")), &want),
            SidecarVerdict::Accepted { .. }
        ));
    }

    #[test]
    fn every_difference_is_named() {
        let want = vec![rule("allow", "pypi.org")];
        let cases = [
            (
                status(Some("allow"), want.clone(), Some("dns")),
                "defaultAction is \"allow\"",
            ),
            (
                status(Some("deny"), vec![], Some("dns")),
                "no rule for pypi.org",
            ),
            (
                status(Some("deny"), vec![rule("deny", "pypi.org")], Some("dns")),
                "the sidecar's rule for pypi.org is deny, the list's allow",
            ),
            (
                status(
                    Some("deny"),
                    vec![rule("allow", "pypi.org"), rule("allow", "x.example")],
                    Some("dns"),
                ),
                "still allows x.example",
            ),
            (
                status(Some("deny"), want.clone(), None),
                "no `enforcementMode`",
            ),
        ];
        for (s, needle) in cases {
            match judge(&s, &want) {
                SidecarVerdict::NotAccepted { reason } => {
                    assert!(reason.contains(needle), "{reason} / {needle}")
                }
                other => panic!("{other:?} for {needle}"),
            }
        }
    }
}
