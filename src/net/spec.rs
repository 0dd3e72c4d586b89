//! The serialisable form of a command's egress policy, as it travels in
//! `SandboxPolicy` (config → CLI → host), and the proxy environment the
//! command gets.

use serde::{Deserialize, Serialize};

use crate::net::limits::Limits;
use crate::net::policy::{NetworkMode, NetworkPolicy, PolicyError};

/// `network = "allowlist"` with its lists; validated by [`EgressSpec::policy`]
/// (and at construction by the config/CLI layers, which name the key).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSpec {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    /// Bytes (both ways, all connections) per command; default 1 GiB.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// Connections per second after a burst of `burst`.
    #[serde(default = "default_per_second")]
    pub per_second: u32,
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Fixed answers for the proxy's resolver (`name=ip[!loopback];…`),
    /// set only in code (`doctor`'s egress probe): never read from a
    /// config file or JSON, so no setting can point a name at loopback.
    /// The report lists every name it answered.
    #[serde(skip)]
    pub test_resolve: Option<String>,
}

fn default_max_bytes() -> u64 {
    Limits::default().max_bytes
}
fn default_per_second() -> u32 {
    Limits::default().per_second
}
fn default_burst() -> u32 {
    Limits::default().burst
}

impl EgressSpec {
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Self {
        EgressSpec {
            allow,
            deny,
            max_bytes: default_max_bytes(),
            per_second: default_per_second(),
            burst: default_burst(),
            test_resolve: None,
        }
    }

    pub fn policy(&self) -> Result<NetworkPolicy, PolicyError> {
        NetworkPolicy::new(NetworkMode::Allowlist, &self.allow, &self.deny)
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_bytes: self.max_bytes,
            burst: self.burst,
            per_second: self.per_second,
        }
    }
}

/// The variables that point every common tool at the proxy on
/// `127.0.0.1:port` (HTTP CONNECT/forward and SOCKS5 on the same port).
/// A tool that ignores them cannot connect anywhere else.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let mut v = Vec::new();
    for (k, val) in [
        ("HTTP_PROXY", http.as_str()),
        ("HTTPS_PROXY", http.as_str()),
        ("ALL_PROXY", socks.as_str()),
        // Nothing is reachable directly; loopback is the proxy itself.
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
    ] {
        v.push((k.to_string(), val.to_string()));
        v.push((k.to_ascii_lowercase(), val.to_string()));
    }
    for (k, val) in [
        // npm reads npm_config_* (and lower-case only for these).
        ("npm_config_proxy", http.as_str()),
        ("npm_config_https_proxy", http.as_str()),
        // pip: --proxy.
        ("PIP_PROXY", http.as_str()),
        // cargo: http.proxy.
        ("CARGO_HTTP_PROXY", http.as_str()),
        // yarn (berry).
        ("YARN_HTTP_PROXY", http.as_str()),
        ("YARN_HTTPS_PROXY", http.as_str()),
    ] {
        v.push((k.to_string(), val.to_string()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_sets_both_cases_and_tool_specific_names() {
        let env = proxy_env(3128);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("https_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("all_proxy"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("no_proxy"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(get("CARGO_HTTP_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("PIP_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("npm_config_https_proxy"), Some("http://127.0.0.1:3128"));
    }

    #[test]
    fn spec_round_trips_and_validates() {
        let s = EgressSpec::new(vec!["crates.io".into()], vec![]);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<EgressSpec>(&j).unwrap(), s);
        assert!(s.policy().is_ok());
        assert!(EgressSpec::new(vec!["*".into()], vec![]).policy().is_err());
        let t: EgressSpec = toml::from_str("allow = [\"pypi.org\"]").unwrap();
        assert_eq!(t.max_bytes, 1 << 30);
    }
}
