//! The one place a command's environment is built.
//!
//! Secrets leak most easily through the environment, so the rule (the
//! request's variables, or this process's, with the policy's secret names
//! removed and its `set` entries applied: [`crate::policy::EnvPolicy`])
//! is applied here, once per run, by the dispatcher. Every backend
//! receives the result as a [`ChildEnv`] and starts its command with
//! exactly those variables (`env_clear` + these), adding only what the
//! sandbox itself needs (a private `TMPDIR`, the egress proxy's
//! variables). A backend has no other way to get an environment, so a new
//! one cannot forget the scrub.

use super::request::ExecRequest;
use crate::policy::env::EnvPolicy;
use std::collections::BTreeMap;

/// A command's environment after the policy's scrub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildEnv {
    vars: BTreeMap<String, String>,
    /// Names removed (for the enforcement report; never the values).
    removed: Vec<String>,
    /// The request carried its own environment (not this process's).
    explicit: bool,
}

impl ChildEnv {
    /// `req.env`, or this process's environment, scrubbed by `policy`.
    pub fn for_run(policy: &EnvPolicy, req: &ExecRequest) -> ChildEnv {
        let explicit = req.env.is_some();
        let base: Vec<(String, String)> = match &req.env {
            Some(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            None => std::env::vars().collect(),
        };
        let s = policy.apply(base);
        ChildEnv {
            vars: s.vars,
            removed: s.removed,
            explicit,
        }
    }

    /// For a command on another machine (OpenSandbox): variables taken
    /// from this process are kept only where they mean the same there
    /// (`portable`); what the request set explicitly and the policy's own
    /// `set` entries stay. The removed names are those of the variables
    /// that would have been sent.
    pub fn for_remote(self, policy: &EnvPolicy, portable: impl Fn(&str) -> bool) -> ChildEnv {
        if self.explicit {
            return self;
        }
        ChildEnv {
            vars: self
                .vars
                .into_iter()
                .filter(|(k, _)| portable(k) || policy.set.contains_key(k))
                .collect(),
            removed: self.removed.into_iter().filter(|k| portable(k)).collect(),
            explicit: false,
        }
    }

    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    pub fn get(&self, name: &str) -> Option<&String> {
        self.vars.get(name)
    }

    /// Names the scrub removed.
    pub fn removed(&self) -> &[String] {
        &self.removed
    }

    /// Add or override what the sandbox itself needs (never a value from
    /// the host's environment that the scrub removed).
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(name.into(), value.into());
    }

    pub fn extend<I, K, V>(&mut self, vars: I)
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        for (k, v) in vars {
            self.insert(k, v);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn req(env: &[(&str, &str)]) -> ExecRequest {
        let mut r = ExecRequest::new(vec!["true".into()]);
        r.env = Some(
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        r
    }

    #[test]
    fn secrets_are_removed_and_set_entries_applied() {
        let mut p = EnvPolicy::default();
        p.set.insert("NPM_CONFIG_FETCH_RETRIES".into(), "0".into());
        let e = ChildEnv::for_run(&p, &req(&[("PATH", "/bin"), ("GH_TOKEN", "ghp")]));
        assert_eq!(e.get("PATH").map(String::as_str), Some("/bin"));
        assert!(e.get("GH_TOKEN").is_none());
        assert_eq!(e.removed(), ["GH_TOKEN".to_string()]);
        assert_eq!(
            e.get("NPM_CONFIG_FETCH_RETRIES").map(String::as_str),
            Some("0")
        );
    }

    #[test]
    fn remote_keeps_portable_and_set_names_of_the_process_env_only() {
        let mut p = EnvPolicy::default();
        p.set.insert("OFFLINE".into(), "1".into());
        let portable = |k: &str| k == "LANG";
        let mut r = ExecRequest::new(vec!["true".into()]);
        r.env = None;
        let e = ChildEnv::for_run(&p, &r).for_remote(&p, portable);
        for k in e.vars().keys() {
            assert!(k == "LANG" || k == "OFFLINE", "{k}");
        }
        assert_eq!(e.get("OFFLINE").map(String::as_str), Some("1"));
        // An explicit environment is sent as given (scrubbed).
        let e = ChildEnv::for_run(&p, &req(&[("PATH", "/bin"), ("GH_TOKEN", "x")]))
            .for_remote(&p, portable);
        assert_eq!(e.get("PATH").map(String::as_str), Some("/bin"));
        assert_eq!(e.removed(), ["GH_TOKEN".to_string()]);
    }
}
