//! The network policy: `off | on | allowlist`, and under `allowlist` which
//! host names a sandboxed command may reach through the egress proxy.
//!
//! Patterns are host names, compared case-insensitively with a trailing dot
//! removed: `crates.io` is exactly that host, `*.crates.io` every name
//! *below* it (not `crates.io` itself, list both when both are wanted), and
//! `@registries` a named set. An optional `:PORT` limits a pattern to one
//! port. IP literals (`10.1.2.3`, `[fd00::1]:8080`) are refused by the proxy
//! unless a pattern names that literal. `deny` always wins over `allow`, and
//! a few names are denied whatever the lists say (cloud metadata names and
//! `localhost`). Decisions are made on the name *before* anything is
//! resolved, so a refused name never reaches a DNS server.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::net::covert;

/// Whether, and how, a sandboxed command reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// No network at all (empty namespace / no TCP / no sockets).
    #[default]
    Off,
    /// Only through the egress proxy, only to allowed names.
    Allowlist,
    /// The host network, unfiltered.
    On,
}

impl NetworkMode {
    /// Order by how much each mode lets through, used by the shrink rule.
    fn rank(self) -> u8 {
        match self {
            NetworkMode::Off => 0,
            NetworkMode::Allowlist => 1,
            NetworkMode::On => 2,
        }
    }

    /// The spelling used in config files, flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Off => "off",
            NetworkMode::Allowlist => "allowlist",
            NetworkMode::On => "on",
        }
    }

    /// Parse the config/flag spelling (`off`, `on`, `allowlist`).
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        match s {
            "off" => Ok(NetworkMode::Off),
            "on" => Ok(NetworkMode::On),
            "allowlist" => Ok(NetworkMode::Allowlist),
            other => Err(PolicyError::BadMode(other.to_string())),
        }
    }
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a pattern, set name or mode was rejected. Each variant names the
/// offending entry so the caller can add the file/key or flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("`{0}` is not a network mode (expected \"off\", \"on\" or \"allowlist\")")]
    BadMode(String),
    #[error("`{entry}` is not a host pattern: {reason}")]
    BadPattern { entry: String, reason: &'static str },
    #[error("`@{0}` is not a known host set (known: {known})", known = SETS.iter().map(|(n, _)| format!("@{n}")).collect::<Vec<_>>().join(", "))]
    UnknownSet(String),
}

/// Named sets of hosts, so users need not know every registry's CDN. Kept
/// to registries and their download hosts: a set is a promise about what it
/// lets through, so it stays small and is documented in `docs/NETWORK.md`.
const SETS: &[(&str, &[&str])] = &[
    (
        "registries",
        &[
            // Rust: the index (sparse protocol) and crate downloads.
            "crates.io",
            "*.crates.io",
            // npm / yarn.
            "registry.npmjs.org",
            "registry.yarnpkg.com",
            // Python: the simple index and the file CDN.
            "pypi.org",
            "files.pythonhosted.org",
            // Go module proxy and checksum database.
            "proxy.golang.org",
            "sum.golang.org",
            // Ruby, Maven Central.
            "rubygems.org",
            "index.rubygems.org",
            "repo.maven.apache.org",
            "repo1.maven.org",
        ],
    ),
    (
        "github",
        &[
            "github.com",
            "codeload.github.com",
            "objects.githubusercontent.com",
            "raw.githubusercontent.com",
        ],
    ),
];

/// Names refused whatever the lists say: cloud metadata services reached by
/// name, and `localhost` (RFC 6761 reserves it and every name below it for
/// loopback). Their addresses are refused by the classifier too; refusing
/// the names as well means they are never even resolved.
const BUILTIN_DENY: &[&str] = &[
    "localhost",
    "*.localhost",
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.tencentyun.com",
    "metadata.azure.com",
];

/// What a client asked to reach, before anything is resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Target {
    /// A host name, lower-cased, without a trailing dot.
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl Target {
    /// Parse the host part of a CONNECT authority, URI or SOCKS5 request.
    /// Brackets around an IPv6 literal are accepted. Names that a libc
    /// resolver would read as a number (`127.1`, `0x7f.1`, `2130706433`)
    /// are rejected: they are IP literals in disguise.
    pub fn parse(host: &str) -> Result<Self, PolicyError> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Target::Ip(ip));
        }
        Ok(Target::Name(normalize_name(host)?))
    }

    /// The spelling used in events and reports.
    pub fn display(&self) -> String {
        match self {
            Target::Name(n) => n.clone(),
            Target::Ip(ip) => ip.to_string(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// Lower-case, drop one trailing dot, and check the name is a plausible DNS
/// name (letters, digits, `-`, `_`; labels 1..=63; total ≤ 253).
fn normalize_name(host: &str) -> Result<String, PolicyError> {
    let bad = |reason| PolicyError::BadPattern {
        entry: host.to_string(),
        reason,
    };
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if name.is_empty() {
        return Err(bad("empty host name"));
    }
    if name.len() > 253 {
        return Err(bad("longer than 253 characters"));
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(bad("a label is empty or longer than 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad(
                "only ASCII letters, digits, '-' and '_' are allowed (write IDNs in punycode)",
            ));
        }
    }
    // inet_aton accepts `127.1`, `0x7f000001`, `017700000001`: a last label
    // that is a number (decimal, octal or hex) makes the name numeric.
    let last = name.rsplit('.').next().unwrap_or("");
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return Err(bad(
            "a numeric last label makes this an IP address in disguise",
        ));
    }
    Ok(name)
}

/// The host part of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum HostPart {
    /// Exactly this name.
    Exact(String),
    /// Every name strictly below this suffix.
    Below(String),
    /// Exactly this IP literal.
    Ip(IpAddr),
}

/// One allow or deny entry, with an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: HostPart,
    port: Option<u16>,
    /// The entry as written (or `@set: entry`), quoted in events.
    source: String,
}

impl HostPattern {
    /// Parse one entry. Named sets are expanded by [`expand`], not here.
    pub fn parse(entry: &str) -> Result<Self, PolicyError> {
        let bad = |reason| PolicyError::BadPattern {
            entry: entry.to_string(),
            reason,
        };
        let entry_trim = entry.trim();
        if entry_trim.is_empty() {
            return Err(bad("empty entry"));
        }
        let (host, port) = split_port(entry_trim).map_err(bad)?;
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let part = if let Ok(ip) = bare.parse::<IpAddr>() {
            HostPart::Ip(ip)
        } else if host == "*" {
            return Err(bad(
                "`*` would allow everything: use network = \"on\" instead",
            ));
        } else if let Some(suffix) = host.strip_prefix("*.") {
            HostPart::Below(normalize_name(suffix).map_err(|e| match e {
                PolicyError::BadPattern { reason, .. } => bad(reason),
                other => other,
            })?)
        } else if host.contains('*') {
            return Err(bad(
                "`*` is only allowed as a whole first label (`*.example.com`)",
            ));
        } else {
            HostPart::Exact(normalize_name(host).map_err(|e| match e {
                PolicyError::BadPattern { reason, .. } => bad(reason),
                other => other,
            })?)
        };
        Ok(HostPattern {
            host: part,
            port,
            source: entry_trim.to_string(),
        })
    }

    /// Does this pattern match the target on this port?
    pub fn matches(&self, target: &Target, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, target) {
            (HostPart::Exact(p), Target::Name(n)) => p == n,
            (HostPart::Below(s), Target::Name(n)) => n
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPart::Ip(p), Target::Ip(ip)) => p == ip,
            _ => false,
        }
    }

    /// Is every (name, port) this pattern matches also matched by `self`?
    /// The repository-override shrink rule keeps only covered entries.
    pub fn covers(&self, other: &HostPattern) -> bool {
        if let Some(p) = self.port {
            if other.port != Some(p) {
                return false;
            }
        }
        match (&self.host, &other.host) {
            (HostPart::Exact(a), HostPart::Exact(b)) => a == b,
            (HostPart::Ip(a), HostPart::Ip(b)) => a == b,
            (HostPart::Below(s), HostPart::Exact(b)) => b
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPart::Below(s), HostPart::Below(t)) => {
                t == s
                    || t.strip_suffix(s.as_str())
                        .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
            }
            _ => false,
        }
    }

    /// The entry as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The entry as it can be parsed again: the host of a named set's
    /// member (`@registries: crates.io` → `crates.io`), else the source.
    pub fn entry(&self) -> &str {
        match self
            .source
            .strip_prefix('@')
            .and_then(|s| s.split_once(": "))
        {
            Some((_, host)) => host,
            None => &self.source,
        }
    }

    /// The port the entry is limited to, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The host part as a domain rule (`name` or `*.suffix`), without the
    /// port; `None` for an IP literal. Used where another enforcer takes
    /// domain rules only (OpenSandbox's egress sidecar).
    pub fn domain_rule(&self) -> Option<String> {
        match &self.host {
            HostPart::Exact(n) => Some(n.clone()),
            HostPart::Below(s) => Some(format!("*.{s}")),
            HostPart::Ip(_) => None,
        }
    }

    /// Is this a wildcard (`*.suffix`), under which the command chooses
    /// the labels?
    pub fn is_wildcard(&self) -> bool {
        matches!(self.host, HostPart::Below(_))
    }

    /// Does this pattern name an IP literal?
    pub fn is_ip(&self) -> bool {
        matches!(self.host, HostPart::Ip(_))
    }
}

/// Split `host:port` (`[v6]:port` for IPv6). A bare IPv6 literal has no port.
fn split_port(entry: &str) -> Result<(&str, Option<u16>), &'static str> {
    if entry.starts_with('[') {
        let close = entry.find(']').ok_or("unclosed `[`")?;
        let rest = &entry[close + 1..];
        return match rest.strip_prefix(':') {
            Some(p) => Ok((&entry[..=close], Some(parse_port(p)?))),
            None if rest.is_empty() => Ok((&entry[..=close], None)),
            None => Err("unexpected text after `]`"),
        };
    }
    if entry.matches(':').count() > 1 {
        // An unbracketed IPv6 literal.
        return Ok((entry, None));
    }
    match entry.split_once(':') {
        Some((h, p)) => Ok((h, Some(parse_port(p)?))),
        None => Ok((entry, None)),
    }
}

fn parse_port(p: &str) -> Result<u16, &'static str> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err("the port must be a number from 1 to 65535"),
        Ok(n) => Ok(n),
    }
}

/// What a person typed after `--allow-domain`, made into one entry:
/// a URL gives its host (and explicit port), with a note saying so; a
/// comma list, `localhost`, an IP literal and the cloud metadata names
/// are refused with the reason (none of them can ever be reached through
/// the proxy, which decides by name and refuses loopback, private and
/// metadata addresses). `Ok((entry, note))`.
pub fn flag_entry(raw: &str) -> Result<(String, Option<String>), String> {
    let t = raw.trim();
    if t.contains(',') {
        return Err(
            "one name per flag: repeat it (--allow-domain a.example --allow-domain b.example)"
                .into(),
        );
    }
    if t.starts_with('@') {
        return Ok((t.to_string(), None));
    }
    let (entry, note) = if t.contains("://") {
        let u = url::Url::parse(t).map_err(|e| format!("not a URL ({e})"))?;
        let host = u
            .host_str()
            .ok_or_else(|| "the URL names no host".to_string())?;
        let entry = match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let note = format!("taking the URL's host: {entry}");
        (entry, Some(note))
    } else {
        (t.to_string(), None)
    };
    let host = split_port(&entry)
        .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
        .unwrap_or(&entry)
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return Err("localhost is the loopback, which the allow list never reaches: the sandbox's own loopback needs no entry (it stays usable with the network off), the host's is never reachable".into());
    }
    if matches!(
        host.as_str(),
        "metadata" | "metadata.google.internal" | "metadata.azure.internal"
    ) {
        return Err("a cloud metadata service: never reachable from the sandbox".into());
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        let why = if ip.is_loopback() {
            "a loopback address: the host's loopback is never reachable (the sandbox's own needs no entry)"
        } else if matches!(ip, std::net::IpAddr::V4(v4) if v4.is_link_local())
            || host == "fd00:ec2::254"
        {
            "a link-local (cloud metadata) address: never reachable from the sandbox"
        } else {
            "an IP literal: the allow list is by name (the proxy resolves names itself and checks the addresses); name the host instead"
        };
        return Err(why.into());
    }
    Ok((entry, note))
}

/// Expand entries into patterns: `@set` becomes the set's hosts (each
/// quoted as `@set: host`), anything else is parsed as one pattern.
pub fn expand(entries: &[String]) -> Result<Vec<HostPattern>, PolicyError> {
    let mut out = Vec::new();
    for entry in entries {
        let e = entry.trim();
        if let Some(set) = e.strip_prefix('@') {
            let hosts = SETS
                .iter()
                .find(|(n, _)| *n == set)
                .map(|(_, h)| *h)
                .ok_or_else(|| PolicyError::UnknownSet(set.to_string()))?;
            for h in hosts {
                let mut p = HostPattern::parse(h)?;
                p.source = format!("@{set}: {h}");
                out.push(p);
            }
        } else {
            out.push(HostPattern::parse(e)?);
        }
    }
    Ok(out)
}

/// The names of the known sets with their hosts (for `docs/NETWORK.md`,
/// `sandbox explain` and tests).
pub fn known_sets() -> impl Iterator<Item = (&'static str, &'static [&'static str])> {
    SETS.iter().copied()
}

/// Which rule decided, and which way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleMatch {
    pub allowed: bool,
    /// `allow: crates.io`, `deny: *.evil.example`, `built-in deny: localhost`,
    /// `not in the allow list`, `ip literal not allowed`, ...
    pub rule: String,
}

impl RuleMatch {
    fn allow(rule: impl Into<String>) -> Self {
        RuleMatch {
            allowed: true,
            rule: rule.into(),
        }
    }
    fn refuse(rule: impl Into<String>) -> Self {
        RuleMatch {
            allowed: false,
            rule: rule.into(),
        }
    }
}

/// The effective network policy of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub mode: NetworkMode,
    allow: Vec<HostPattern>,
    deny: Vec<HostPattern>,
}

impl NetworkPolicy {
    /// A policy from a mode and the raw allow/deny entries.
    pub fn new(mode: NetworkMode, allow: &[String], deny: &[String]) -> Result<Self, PolicyError> {
        Ok(NetworkPolicy {
            mode,
            allow: expand(allow)?,
            deny: expand(deny)?,
        })
    }

    /// No network.
    pub fn off() -> Self {
        NetworkPolicy {
            mode: NetworkMode::Off,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }

    /// The allow patterns, in order.
    pub fn allow(&self) -> &[HostPattern] {
        &self.allow
    }

    /// The deny patterns, in order.
    pub fn deny(&self) -> &[HostPattern] {
        &self.deny
    }

    /// Add allow entries (`--allow-domain`). Under `off`, this turns the
    /// mode into `allowlist`: naming a domain is asking for it.
    pub fn extend_allow(&mut self, entries: &[String]) -> Result<(), PolicyError> {
        self.allow.extend(expand(entries)?);
        if !entries.is_empty() && self.mode == NetworkMode::Off {
            self.mode = NetworkMode::Allowlist;
        }
        Ok(())
    }

    /// Decide on a name (or IP literal) and port, before any resolution.
    pub fn decide(&self, target: &Target, port: u16) -> RuleMatch {
        match self.mode {
            NetworkMode::Off => return RuleMatch::refuse("network = off"),
            NetworkMode::On => return RuleMatch::allow("network = on"),
            NetworkMode::Allowlist => {}
        }
        for b in BUILTIN_DENY {
            if let Ok(p) = HostPattern::parse(b) {
                if p.matches(target, port) {
                    return RuleMatch::refuse(format!("built-in deny: {b}"));
                }
            }
        }
        if let Some(p) = self.deny.iter().find(|p| p.matches(target, port)) {
            return RuleMatch::refuse(format!("deny: {}", p.source));
        }
        // An exact entry (the user named this host) wins; a wildcard lets
        // the command choose labels, so what it chose is checked for the
        // shapes that carry DNS out (src/net/covert.rs).
        if let Some(p) = self
            .allow
            .iter()
            .find(|p| !p.is_wildcard() && p.matches(target, port))
        {
            return RuleMatch::allow(format!("allow: {}", p.source));
        }
        if let Some(p) = self.allow.iter().find(|p| p.matches(target, port)) {
            if let (HostPart::Below(suffix), Target::Name(n)) = (&p.host, target) {
                if let Some(r) = covert::doh_resolver(n) {
                    return RuleMatch::refuse(format!(
                        "dns-over-https resolver {r}: allowed only by an exact entry, not by {}",
                        p.source
                    ));
                }
                let chosen = n
                    .strip_suffix(suffix.as_str())
                    .and_then(|h| h.strip_suffix('.'))
                    .unwrap_or(n);
                if let Some(why) = covert::tunnel_shape(chosen) {
                    return RuleMatch::refuse(format!(
                        "dns tunnelling: {why} under {}; allowed only by an exact entry",
                        p.source
                    ));
                }
            }
            return RuleMatch::allow(format!("allow: {}", p.source));
        }
        match target {
            Target::Ip(_) => RuleMatch::refuse("ip literal not in the allow list"),
            Target::Name(n) => match covert::doh_resolver(n) {
                Some(r) => RuleMatch::refuse(format!(
                    "not in the allow list (dns-over-https resolver {r})"
                )),
                None => RuleMatch::refuse("not in the allow list"),
            },
        }
    }

    /// Decide on a plain-HTTP request that carries DNS (RFC 8484's
    /// `application/dns-message`, or the JSON form): only a host allowed by
    /// an exact entry may receive one, since through an allowed host that
    /// is not a resolver's, or one reached through a wildcard, a DNS
    /// query is the command's way around the list. The name's own decision
    /// comes first.
    pub fn decide_dns_request(&self, target: &Target, port: u16) -> RuleMatch {
        let by_name = self.decide(target, port);
        if !by_name.allowed || self.mode == NetworkMode::On {
            return by_name;
        }
        if self
            .allow
            .iter()
            .any(|p| !p.is_wildcard() && p.matches(target, port))
        {
            return by_name;
        }
        RuleMatch::refuse(format!(
            "dns-over-https request (application/dns-message): allowed only to a host of an exact entry, not by {}",
            by_name.rule.strip_prefix("allow: ").unwrap_or(&by_name.rule)
        ))
    }

    /// Apply a repository's network settings, which may only shrink what
    /// this (user) policy allows: the mode can only go down (`on` →
    /// `allowlist` → `off`), deny entries are added, and allow entries are
    /// kept only where one of ours covers them. Returns the result and the
    /// repository entries that were ignored because they would widen it.
    pub fn restrict(
        &self,
        repo_mode: Option<NetworkMode>,
        repo_allow: Option<&[String]>,
        repo_deny: &[String],
    ) -> Result<(NetworkPolicy, Vec<String>), PolicyError> {
        let mut ignored = Vec::new();
        let mode = match repo_mode {
            Some(m) if m.rank() < self.mode.rank() => m,
            Some(m) => {
                if m.rank() > self.mode.rank() {
                    ignored.push(format!("network = \"{m}\""));
                }
                self.mode
            }
            None => self.mode,
        };
        let mut deny = self.deny.clone();
        deny.extend(expand(repo_deny)?);
        let allow = match repo_allow {
            None => self.allow.clone(),
            Some(entries) => {
                let theirs = expand(entries)?;
                if self.mode == NetworkMode::On {
                    // From "everything" any list is a shrink.
                    theirs
                } else {
                    let mut kept = Vec::new();
                    for p in theirs {
                        if self.allow.iter().any(|ours| ours.covers(&p)) {
                            kept.push(p);
                        } else {
                            ignored.push(p.source.clone());
                        }
                    }
                    kept
                }
            }
        };
        Ok((NetworkPolicy { mode, allow, deny }, ignored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }
    fn name(n: &str) -> Target {
        Target::parse(n).unwrap()
    }
    fn allowlist(allow: &[&str], deny: &[&str]) -> NetworkPolicy {
        NetworkPolicy::new(NetworkMode::Allowlist, &s(allow), &s(deny)).unwrap()
    }

    #[test]
    fn doh_resolvers_need_an_exact_entry() {
        let wild = allowlist(&["*.google", "*.cloudflare-dns.com"], &[]);
        assert!(wild.decide(&name("fonts.google"), 443).allowed);
        let r = wild.decide(&name("dns.google"), 443);
        assert!(!r.allowed);
        assert_eq!(
            r.rule,
            "dns-over-https resolver dns.google: allowed only by an exact entry, not by *.google"
        );
        assert!(
            !wild
                .decide(&name("mozilla.cloudflare-dns.com"), 443)
                .allowed
        );
        // Named exactly, even next to the wildcard, it is the user's call.
        let exact = allowlist(&["*.google", "dns.google"], &[]);
        let r = exact.decide(&name("dns.google"), 443);
        assert!(r.allowed, "{r:?}");
        assert_eq!(r.rule, "allow: dns.google");
        // Off the list, the refusal says what the name is.
        let r = allowlist(&["crates.io"], &[]).decide(&name("dns.google"), 443);
        assert_eq!(
            r.rule,
            "not in the allow list (dns-over-https resolver dns.google)"
        );
    }

    #[test]
    fn tunnel_shaped_names_under_a_wildcard_are_refused_but_not_exact_ones() {
        let tunnel = format!("{}.{}.t1.parent.test", "a".repeat(63), "b".repeat(63));
        let long = format!("{}.parent.test", "c".repeat(41));
        let wild = allowlist(&["*.parent.test"], &[]);
        assert!(wild.decide(&name("api.parent.test"), 443).allowed);
        let r = wild.decide(&name(&tunnel), 443);
        assert!(!r.allowed);
        assert!(
            r.rule.starts_with("dns tunnelling: ")
                && r.rule
                    .ends_with("under *.parent.test; allowed only by an exact entry"),
            "{}",
            r.rule
        );
        let r = wild.decide(&name(&long), 443);
        assert_eq!(
            r.rule,
            "dns tunnelling: a label of 41 characters (at most 40) under *.parent.test; allowed only by an exact entry"
        );
        assert!(
            !wild
                .decide(&name("4f6b2c9e1d0a7b3c.parent.test"), 443)
                .allowed
        );
        // The same long name listed exactly: chosen by the user, allowed.
        let exact = allowlist(&["*.parent.test", &long], &[]);
        assert!(exact.decide(&name(&long), 443).allowed);
        // `network = on` decides nothing by name.
        let on = NetworkPolicy::new(NetworkMode::On, &[], &[]).unwrap();
        assert!(on.decide(&name(&tunnel), 443).allowed);
    }

    #[test]
    fn dns_requests_go_only_to_hosts_of_exact_entries() {
        let p = allowlist(&["*.parent.test", "doh.test", "pkg.test"], &[]);
        assert!(p.decide_dns_request(&name("doh.test"), 80).allowed);
        let r = p.decide_dns_request(&name("api.parent.test"), 80);
        assert!(!r.allowed);
        assert_eq!(
            r.rule,
            "dns-over-https request (application/dns-message): allowed only to a host of an exact entry, not by *.parent.test"
        );
        // A name off the list keeps its own reason.
        assert_eq!(
            p.decide_dns_request(&name("evil.test"), 80).rule,
            "not in the allow list"
        );
    }

    #[test]
    fn exact_and_wildcard_patterns() {
        let p = allowlist(&["crates.io", "*.crates.io"], &[]);
        assert!(p.decide(&name("crates.io"), 443).allowed);
        assert!(p.decide(&name("CRATES.IO."), 443).allowed);
        assert!(p.decide(&name("static.crates.io"), 443).allowed);
        assert!(p.decide(&name("a.b.crates.io"), 443).allowed);
        assert!(!p.decide(&name("evilcrates.io"), 443).allowed);
        assert!(!p.decide(&name("crates.io.evil.example"), 443).allowed);
        let only_below = allowlist(&["*.crates.io"], &[]);
        assert!(!only_below.decide(&name("crates.io"), 443).allowed);
    }

    #[test]
    fn deny_wins_and_names_its_rule() {
        let p = allowlist(&["*.example.com"], &["upload.example.com"]);
        let d = p.decide(&name("upload.example.com"), 443);
        assert!(!d.allowed);
        assert_eq!(d.rule, "deny: upload.example.com");
        let a = p.decide(&name("www.example.com"), 443);
        assert_eq!(a, RuleMatch::allow("allow: *.example.com"));
        assert_eq!(
            p.decide(&name("other.test"), 443).rule,
            "not in the allow list"
        );
    }

    #[test]
    fn ports_restrict_a_pattern() {
        let p = allowlist(&["github.com:22", "github.com:443"], &[]);
        assert!(p.decide(&name("github.com"), 22).allowed);
        assert!(p.decide(&name("github.com"), 443).allowed);
        assert!(!p.decide(&name("github.com"), 80).allowed);
    }

    #[test]
    fn ip_literals_only_when_named() {
        let p = allowlist(&["*.example.com", "10.1.2.3", "[fd00::1]:8080"], &[]);
        assert_eq!(
            p.decide(&name("10.9.9.9"), 80).rule,
            "ip literal not in the allow list"
        );
        assert!(p.decide(&name("10.1.2.3"), 80).allowed);
        assert!(p.decide(&name("[fd00::1]"), 8080).allowed);
        assert!(!p.decide(&name("fd00::1"), 80).allowed);
    }

    #[test]
    fn numeric_names_are_ip_literals_in_disguise() {
        for n in ["127.1", "2130706433", "0x7f.1", "0x7f000001", "1.2.3.4.5"] {
            assert!(Target::parse(n).is_err(), "{n}");
        }
        assert!(Target::parse("1password.com").is_ok());
        assert!(Target::parse("a.b-c_d.example").is_ok());
        assert!(Target::parse("bad name").is_err());
        assert!(Target::parse("ünicode.example").is_err());
        assert!(Target::parse(&format!("{}.example", "a".repeat(64))).is_err());
    }

    #[test]
    fn builtin_denies_cannot_be_allowed() {
        let p = allowlist(
            &["localhost", "metadata.google.internal", "*.localhost"],
            &[],
        );
        for n in ["localhost", "x.localhost", "metadata.google.internal"] {
            let d = p.decide(&name(n), 80);
            assert!(!d.allowed, "{n}");
            assert!(d.rule.starts_with("built-in deny"), "{}", d.rule);
        }
    }

    #[test]
    fn modes() {
        let off = NetworkPolicy::new(NetworkMode::Off, &s(&["crates.io"]), &[]).unwrap();
        assert_eq!(off.decide(&name("crates.io"), 443).rule, "network = off");
        let on = NetworkPolicy::new(NetworkMode::On, &[], &[]).unwrap();
        assert!(on.decide(&name("anything.example"), 443).allowed);
        assert_eq!(NetworkMode::parse("allowlist"), Ok(NetworkMode::Allowlist));
        assert!(matches!(
            NetworkMode::parse("yes"),
            Err(PolicyError::BadMode(_))
        ));
        let mut p = NetworkPolicy::off();
        p.extend_allow(&s(&["pypi.org"])).unwrap();
        assert_eq!(p.mode, NetworkMode::Allowlist);
        assert!(p.decide(&name("pypi.org"), 443).allowed);
    }

    #[test]
    fn named_sets_expand_and_are_quoted() {
        let p = allowlist(&["@registries"], &[]);
        let d = p.decide(&name("files.pythonhosted.org"), 443);
        assert!(d.allowed);
        assert_eq!(d.rule, "allow: @registries: files.pythonhosted.org");
        assert!(p.decide(&name("index.crates.io"), 443).allowed);
        assert!(!p.decide(&name("evil.example"), 443).allowed);
        let e = NetworkPolicy::new(NetworkMode::Allowlist, &s(&["@nope"]), &[]).unwrap_err();
        assert!(e.to_string().contains("@registries"), "{e}");
    }

    #[test]
    fn bad_patterns_name_the_entry() {
        for (entry, frag) in [
            ("*", "use network"),
            ("a.*.example", "whole first label"),
            ("crates.io:0", "port"),
            ("crates.io:99999", "port"),
            ("[::1", "unclosed"),
            ("", "empty"),
        ] {
            let e = HostPattern::parse(entry).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(frag), "{entry}: {msg}");
            assert!(msg.contains(&format!("`{entry}`")), "{entry}: {msg}");
        }
    }

    #[test]
    fn repository_override_may_only_shrink() {
        let user = allowlist(&["*.example.com", "crates.io"], &["bad.example.com"]);
        let (p, ignored) = user
            .restrict(
                Some(NetworkMode::On),
                Some(&s(&["api.example.com", "*.deep.example.com", "evil.test"])),
                &s(&["crates.io"]),
            )
            .unwrap();
        assert_eq!(p.mode, NetworkMode::Allowlist);
        assert_eq!(ignored, s(&["network = \"on\"", "evil.test"]));
        assert!(p.decide(&name("api.example.com"), 443).allowed);
        assert!(p.decide(&name("x.deep.example.com"), 443).allowed);
        assert!(!p.decide(&name("www.example.com"), 443).allowed);
        assert!(!p.decide(&name("evil.test"), 443).allowed);
        // The repository's deny is added, the user's deny stays.
        assert!(!p.decide(&name("crates.io"), 443).allowed);
        assert!(!p.decide(&name("bad.example.com"), 443).allowed);

        // Lowering the mode works; no allow list keeps the user's.
        let (off, ignored) = user.restrict(Some(NetworkMode::Off), None, &[]).unwrap();
        assert_eq!(off.mode, NetworkMode::Off);
        assert!(ignored.is_empty());

        // From `on`, any list shrinks.
        let on = NetworkPolicy::new(NetworkMode::On, &[], &[]).unwrap();
        let (p, ignored) = on
            .restrict(Some(NetworkMode::Allowlist), Some(&s(&["pypi.org"])), &[])
            .unwrap();
        assert!(ignored.is_empty());
        assert!(p.decide(&name("pypi.org"), 443).allowed);
        assert!(!p.decide(&name("crates.io"), 443).allowed);
    }

    #[test]
    fn covers_respects_ports_and_depth() {
        let p = |e: &str| HostPattern::parse(e).unwrap();
        assert!(p("*.a.com").covers(&p("x.a.com:443")));
        assert!(!p("*.a.com:443").covers(&p("x.a.com")));
        assert!(p("*.a.com:443").covers(&p("x.a.com:443")));
        assert!(!p("*.a.com").covers(&p("a.com")));
        assert!(!p("*.a.com").covers(&p("*.ba.com")));
        assert!(!p("x.a.com").covers(&p("*.x.a.com")));
        assert!(p("10.0.0.1").covers(&p("10.0.0.1:80")));
    }
}
