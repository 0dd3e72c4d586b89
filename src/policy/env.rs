//! Environment policy: which variables a sandboxed command sees.
//!
//! Secrets leak most easily through the environment, so by default every
//! variable whose name looks like a credential is removed, as are known
//! provider keys and agent sockets. `keep` re-admits names explicitly;
//! `set` adds or overrides values.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Substrings (upper-cased) that mark a variable name as secret.
pub const SECRET_NAME_MARKERS: &[&str] =
    &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Names removed even though they match no marker, each with its reason.
pub const ALWAYS_SCRUBBED: &[(&str, &str)] = &[
    (
        "SSH_AUTH_SOCK",
        "a path to the ssh-agent: signing without reading the key",
    ),
    ("GPG_AGENT_INFO", "a path to the gpg-agent"),
    (
        "DATABASE_URL",
        "connection strings usually embed a password",
    ),
    ("GITHUB_PAT", "GitHub personal access token"),
    ("GH_ENTERPRISE_TOKEN", "GitHub Enterprise token"),
    ("NPM_CONFIG__AUTH", "npm registry credential"),
    ("PGPASS", "PostgreSQL password"),
    ("AWS_PROFILE", "selects stored AWS credentials"),
    ("OPEN_SANDBOX_API_KEY", "OpenSandbox lifecycle key"),
    ("CODEWHALE_SANDBOX_API_KEY", "OpenSandbox lifecycle key"),
];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvPolicy {
    /// Remove secret-looking variables (default true).
    pub scrub_secrets: bool,
    /// Names kept even if they look secret (`[sandbox.env] keep`).
    pub keep: Vec<String>,
    /// Variables set or overridden for the command (`[sandbox.env] set`).
    pub set: BTreeMap<String, String>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy {
            scrub_secrets: true,
            keep: Vec::new(),
            set: BTreeMap::new(),
        }
    }
}

/// Whether `name` looks like a credential-carrying variable.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_MARKERS.iter().any(|m| upper.contains(m))
        || ALWAYS_SCRUBBED.iter().any(|(n, _)| *n == upper)
}

/// The result of applying an [`EnvPolicy`]: the environment to pass and the
/// names that were removed (for the `Enforcement` report; never the values).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubbedEnv {
    pub vars: BTreeMap<String, String>,
    pub removed: Vec<String>,
}

impl EnvPolicy {
    /// Apply the policy to `base`.
    pub fn apply<I, K, V>(&self, base: I) -> ScrubbedEnv
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut out = ScrubbedEnv::default();
        for (k, v) in base {
            let k = k.into();
            let keep = self.keep.iter().any(|kept| kept == &k);
            if self.scrub_secrets && !keep && is_secret_name(&k) {
                out.removed.push(k);
            } else {
                out.vars.insert(k, v.into());
            }
        }
        for (k, v) in &self.set {
            out.vars.insert(k.clone(), v.clone());
        }
        out.removed.sort();
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn removes_secret_names_keeps_others() {
        let p = EnvPolicy::default();
        let r = p.apply([
            ("OPENAI_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "ghp"),
            ("MY_SECRET", "x"),
            ("DB_PASSWORD", "x"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "x"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
        ]);
        assert_eq!(r.vars.keys().collect::<Vec<_>>(), vec!["HOME", "PATH"]);
        assert_eq!(r.removed.len(), 7);
    }

    #[test]
    fn keep_and_set_apply() {
        let mut p = EnvPolicy::default();
        p.keep.push("GITHUB_TOKEN".into());
        p.set.insert("LANG".into(), "C".into());
        let r = p.apply([("GITHUB_TOKEN", "x"), ("API_KEY", "y")]);
        assert_eq!(r.vars.get("GITHUB_TOKEN").map(String::as_str), Some("x"));
        assert_eq!(r.vars.get("LANG").map(String::as_str), Some("C"));
        assert_eq!(r.removed, vec!["API_KEY".to_string()]);
    }

    #[test]
    fn scrub_can_be_disabled() {
        let p = EnvPolicy {
            scrub_secrets: false,
            ..EnvPolicy::default()
        };
        assert!(p.apply([("API_KEY", "y")]).removed.is_empty());
    }
}
