//! `network = "allowlist"` on OpenSandbox: the allow and deny lists as the
//! remote egress sidecar's `networkPolicy`, given when the sandbox is
//! created (`CreateSandboxRequest.networkPolicy` in
//! `sandbox-lifecycle.yml`; rules `{action, target}` with `target` an FQDN
//! or `*.domain`, "IP/CIDR not yet supported", `additionalProperties:
//! false`).
//!
//! Pure: the mapping and what it cannot express. The sidecar is not
//! codewhale's proxy, so what it does not check is reported `partial`
//! (see [`shortfalls`]); its behaviour is taken from OpenSandbox's
//! `components/egress/README.md`: a DNS proxy answering NXDOMAIN for
//! denied names (mode `dns`), plus nftables sets of the resolved
//! addresses only in mode `dns+nft`.

use crate::net::EgressSpec;
use serde_json::{json, Value};

/// The sidecar's rules for `spec`, and a note for each entry that could
/// not be expressed exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarRules {
    /// Deny rules first: the sidecar evaluates `egress` in order, and in
    /// codewhale a deny entry always wins over an allow entry.
    pub rules: Vec<Value>,
    pub notes: Vec<String>,
}

/// Map `spec` to sidecar rules. An error names the entry (the same
/// validation the proxy applies).
pub fn sidecar_rules(spec: &EgressSpec) -> Result<SidecarRules, String> {
    let policy = spec
        .policy()
        .map_err(|e| format!("[sandbox.network]: {e}"))?;
    let mut rules = Vec::new();
    let mut notes = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (action, patterns) in [("deny", policy.deny()), ("allow", policy.allow())] {
        for p in patterns {
            let Some(target) = p.domain_rule() else {
                notes.push(format!(
                    "{action} entry {:?} is an IP literal, which the OpenSandbox egress sidecar does not take: {}",
                    p.source(),
                    if action == "allow" {
                        "not allowed on OpenSandbox"
                    } else {
                        "left out (IP literals are refused by the default deny unless the sidecar's DNS-only mode lets a direct connect through)"
                    }
                ));
                continue;
            };
            if let Some(port) = p.port() {
                notes.push(format!(
                    "{action} entry {:?}: the sidecar's rules have no port, so it applies to every port, not only {port}",
                    p.source()
                ));
            }
            // The first rule for a target wins: a later duplicate (an allow
            // after a deny of the same name) would change nothing.
            if seen.insert(target.clone()) {
                rules.push(json!({"action": action, "target": target}));
            }
        }
    }
    Ok(SidecarRules { rules, notes })
}

/// A short stable digest of the rules, for the sandbox's reuse label: a
/// kept sandbox created with one list is never reused for another.
pub fn rules_label(rules: &SidecarRules) -> String {
    let text = serde_json::to_string(&rules.rules).unwrap_or_default();
    let hash = super::sync::sha256_hex(text.as_bytes());
    format!("allowlist-{}", &hash[..16])
}

/// What the sidecar does not enforce that codewhale's own proxy does:
/// reported as `partial` items of every allowlist run on OpenSandbox.
pub fn shortfalls(rules: &SidecarRules) -> Vec<String> {
    let mut v = vec![
        format!(
            "allowlist enforced by the OpenSandbox egress sidecar ({} rules, default deny, set when the sandbox was created), not by codewhale's proxy",
            rules.rules.len()
        ),
        "the sidecar decides by DNS answers: in its `dns` mode a connect to an IP literal or DNS-over-HTTPS through an allowed name is not refused (only `dns+nft` filters addresses)".into(),
        "resolved addresses are not checked for loopback, private or cloud-metadata ranges, and no per-connection events, byte cap or rate limit reach codewhale".into(),
    ];
    v.extend(rules.notes.iter().cloned());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(allow: &[&str], deny: &[&str]) -> EgressSpec {
        EgressSpec::new(
            allow.iter().map(|s| s.to_string()).collect(),
            deny.iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn deny_rules_come_first_and_wildcards_keep_their_form() {
        let r = sidecar_rules(&spec(&["pypi.org", "*.crates.io"], &["evil.crates.io"])).unwrap();
        assert_eq!(
            r.rules,
            vec![
                json!({"action": "deny", "target": "evil.crates.io"}),
                json!({"action": "allow", "target": "pypi.org"}),
                json!({"action": "allow", "target": "*.crates.io"}),
            ]
        );
        assert!(r.notes.is_empty());
    }

    #[test]
    fn ip_literals_are_left_out_and_ports_are_noted() {
        let r = sidecar_rules(&spec(&["10.0.0.1", "github.com:443"], &[])).unwrap();
        assert_eq!(
            r.rules,
            vec![json!({"action": "allow", "target": "github.com"})]
        );
        assert_eq!(r.notes.len(), 2);
        assert!(r.notes[0].contains("IP literal") && r.notes[0].contains("not allowed"));
        assert!(r.notes[1].contains("every port"));
    }

    #[test]
    fn a_name_both_denied_and_allowed_is_one_deny_rule() {
        let r = sidecar_rules(&spec(&["x.example"], &["x.example"])).unwrap();
        assert_eq!(
            r.rules,
            vec![json!({"action": "deny", "target": "x.example"})]
        );
    }

    #[test]
    fn named_sets_expand_to_their_hosts() {
        let r = sidecar_rules(&spec(&["@registries"], &[])).unwrap();
        assert!(r.rules.len() > 3);
        assert!(r
            .rules
            .contains(&json!({"action": "allow", "target": "crates.io"})));
    }

    #[test]
    fn the_label_differs_per_list_and_is_stable() {
        let a = sidecar_rules(&spec(&["a.example"], &[])).unwrap();
        let b = sidecar_rules(&spec(&["b.example"], &[])).unwrap();
        assert_eq!(rules_label(&a), rules_label(&a.clone()));
        assert_ne!(rules_label(&a), rules_label(&b));
        assert!(rules_label(&a).starts_with("allowlist-"));
    }

    #[test]
    fn a_bad_entry_is_an_error_naming_it() {
        let e = sidecar_rules(&spec(&["*"], &[])).unwrap_err();
        assert!(e.contains("[sandbox.network]"), "{e}");
    }
}
