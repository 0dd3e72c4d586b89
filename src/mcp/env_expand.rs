//! `${VAR}` and `${VAR:-default}` in an `mcp.json` server's `env` values,
//! expanded from codewhale's own environment when the server starts (the
//! syntax Claude Code documents for `.mcp.json`, "Environment variable
//! expansion"). A secret can so be carried by reference: the file names
//! the variable, never the value. An unset variable without a default
//! fails the server's start naming it.

use regex::Regex;
use std::collections::BTreeMap;
use std::sync::OnceLock;

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // A literal pattern: it always compiles.
        #[allow(clippy::expect_used)]
        Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}").expect("valid regex")
    })
}

/// One value with its references expanded through `get`.
pub fn expand_value(v: &str, get: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut missing = None;
    let out = pattern().replace_all(v, |c: &regex::Captures<'_>| {
        let name = &c[1];
        match (get(name), c.get(2)) {
            (Some(val), _) => val,
            (None, Some(d)) => d.as_str().to_string(),
            (None, None) => {
                missing.get_or_insert_with(|| name.to_string());
                String::new()
            }
        }
    });
    match missing {
        Some(n) => Err(n),
        None => Ok(out.into_owned()),
    }
}

/// A server's `env` expanded; the error names the key and the unset
/// variable (never a value).
pub fn expand(
    env: &BTreeMap<String, String>,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, String> {
    env.iter()
        .map(|(k, v)| {
            expand_value(v, get).map(|x| (k.clone(), x)).map_err(|n| {
                format!("env `{k}`: `${{{n}}}` is not set in codewhale's environment (and has no `:-default`)")
            })
        })
        .collect()
}

/// [`expand`] from the process environment.
pub fn expand_from_process(
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    expand(env, &|n| std::env::var(n).ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn expands_defaults_and_names_the_missing() {
        let get = |n: &str| (n == "TOKEN").then(|| "t0k".to_string());
        assert_eq!(expand_value("Bearer ${TOKEN}", &get).unwrap(), "Bearer t0k");
        assert_eq!(expand_value("${NOPE:-x}", &get).unwrap(), "x");
        assert_eq!(expand_value("plain $TOKEN", &get).unwrap(), "plain $TOKEN");
        let mut env = BTreeMap::new();
        env.insert("API".to_string(), "${MISSING}".to_string());
        let e = expand(&env, &get).unwrap_err();
        assert!(e.contains("env `API`") && e.contains("${MISSING}"), "{e}");
    }
}
