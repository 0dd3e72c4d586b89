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

pub use super::lifecycle::SidecarRule;
use crate::net::EgressSpec;

/// The sidecar's rules for `spec`, and a note for each entry that could
/// not be expressed exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarRules {
    /// Deny rules first: the sidecar evaluates `egress` in order, and in
    /// codewhale a deny entry always wins over an allow entry.
    pub rules: Vec<SidecarRule>,
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
                rules.push(SidecarRule::new(action, &target));
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

/// The `partial` lines (item `network`) of an allowlist run on
/// OpenSandbox, given what the sidecar answered when the list was applied
/// through its API (`verdict`, `sidecar.rs`).
///
/// Accepted in `dns+nft` mode (names *and* the addresses they resolved
/// to are filtered, so an IP literal or a name the list does not hold
/// reaches nothing): the allow-list is enforced by name, and what is left
/// is what every allow-list leaves, as on the local tiers: allowed hosts
/// receive whatever the command sends them. In `dns` mode a direct connect
/// to an IP literal is not refused; with a wildcard entry the sidecar
/// does not refuse DoH resolver names or tunnel-shaped labels under it
/// (codewhale's proxy does, `src/net/covert.rs`). Not accepted: the reason,
/// and the list is only what the sandbox was created with.
pub fn shortfalls(
    rules: &SidecarRules,
    verdict: Option<&super::sidecar::SidecarVerdict>,
) -> Vec<String> {
    use super::sidecar::SidecarVerdict;
    let mut v = vec![
        "allowed hosts can receive whatever the command sends them (no byte cap, no per-connection events on OpenSandbox; the addresses allowed names resolve to are the sidecar's to judge)".to_string(),
    ];
    match verdict {
        Some(SidecarVerdict::Accepted { enforcement_mode }) => {
            if enforcement_mode != "dns+nft" {
                v.push(format!(
                    "the egress sidecar enforces in `{enforcement_mode}` mode: a direct connect to an IP literal is not refused (only `dns+nft` filters addresses)"
                ));
            }
        }
        Some(SidecarVerdict::NotAccepted { reason }) => v.push(format!(
            "the egress sidecar did not confirm the allow-list ({reason}); only the policy the sandbox was created with ({} rules, default deny) applies, and in its `dns` mode IP literals are not refused",
            rules.rules.len()
        )),
        None => v.push(format!(
            "the egress sidecar was not asked to confirm the allow-list; only the policy the sandbox was created with ({} rules, default deny) applies",
            rules.rules.len()
        )),
    }
    if rules
        .rules
        .iter()
        .any(|r| r.action == "allow" && r.target.starts_with("*."))
    {
        v.push("a wildcard entry: the egress sidecar does not refuse DNS-over-HTTPS resolver names or tunnel-shaped labels under it".into());
    }
    v.extend(rules.notes.iter().cloned());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_of(r: &SidecarRules) -> Vec<serde_json::Value> {
        r.rules
            .iter()
            .map(|x| serde_json::to_value(x).unwrap())
            .collect()
    }

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
            json_of(&r),
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
            json_of(&r),
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
            json_of(&r),
            vec![json!({"action": "deny", "target": "x.example"})]
        );
    }

    #[test]
    fn named_sets_expand_to_their_hosts() {
        let r = sidecar_rules(&spec(&["@registries"], &[])).unwrap();
        assert!(r.rules.len() > 3);
        assert!(json_of(&r).contains(&json!({"action": "allow", "target": "crates.io"})));
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
