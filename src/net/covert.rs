//! Names and requests that carry DNS out of the sandbox when the allow list
//! only meant to let a registry or a CDN in: DNS-over-HTTPS resolvers (RFC
//! 8484) and subdomain-label tunnels (data encoded in the labels of a name
//! the proxy resolves, so it reaches the DNS operator of an allowed
//! domain in the query). The sandbox has no DNS of its own (no UDP, no
//! resolver), so these are the two ways left; both only matter where the
//! command chooses the name, i.e. under a wildcard entry (`*.example.com`).
//!
//! The policy ([`crate::net::policy`]) asks this module about a name that
//! only a wildcard allowed, and the HTTP front end about a plain-HTTP
//! request's media type; an exact entry always wins (the user named that
//! host, so the command chose nothing).

/// Public DNS-over-HTTPS resolvers, by name: each entry covers the name and
/// every name below it (`mozilla.cloudflare-dns.com`). From the providers'
/// own documentation of their DoH endpoints (Google Public DNS, Cloudflare
/// 1.1.1.1, Quad9, OpenDNS, AdGuard, NextDNS, CleanBrowsing, Mullvad,
/// Control D, AliDNS, DNSPod, DNS.SB, SWITCH, dns0.eu). Not complete, and
/// cannot be (anyone can run a resolver): it is why a wildcard entry is
/// weaker than an exact one, and the list only stops the well-known ones.
const DOH_RESOLVERS: &[&str] = &[
    "dns.google",
    "dns.google.com",
    "dns64.dns.google",
    "cloudflare-dns.com",
    "one.one.one.one",
    "dns.quad9.net",
    "dns9.quad9.net",
    "dns10.quad9.net",
    "dns11.quad9.net",
    "doh.opendns.com",
    "doh.familyshield.opendns.com",
    "dns.adguard.com",
    "dns.adguard-dns.com",
    "dns-family.adguard.com",
    "dns.nextdns.io",
    "doh.cleanbrowsing.org",
    "doh.mullvad.net",
    "dns.mullvad.net",
    "dns.controld.com",
    "freedns.controld.com",
    "dns.alidns.com",
    "doh.pub",
    "doh.dns.sb",
    "dns.switch.ch",
    "dns0.eu",
];

/// A label the command chose longer than this is a payload, not a host:
/// real hostnames under a wildcard (bucket names, CDN and preview
/// deployments) stay well under it, a tunnel fills labels to 63.
pub const MAX_CHOSEN_LABEL: usize = 40;
/// The most characters (without dots) the command may choose under a
/// wildcard, over all its labels.
pub const MAX_CHOSEN_CHARS: usize = 64;
/// The most labels the command may choose under a wildcard.
pub const MAX_CHOSEN_LABELS: usize = 4;
/// A chosen label of at least this many hex digits (with both digits and
/// letters) reads as encoded data.
pub const MIN_HEX_RUN: usize = 16;
/// A chosen label at least this long, without hyphens, that switches
/// between letters and digits at least [`MIN_SWITCHES`] times reads as
/// base32/base36-encoded data (`mzxw6ytb2oi4dk3lq7rs`): host names made of
/// words and numbers are hyphenated or switch a few times
/// (`d111111abcdef8`). (Shannon entropy does not tell them apart at these
/// lengths: `my-loadbalancer-1234567890` scores above random base32.)
pub const MIN_ENCODED_LEN: usize = 20;
pub const MIN_SWITCHES: usize = 6;

/// The known DoH resolver `name` is (or is below), if any.
pub fn doh_resolver(name: &str) -> Option<&'static str> {
    DOH_RESOLVERS.iter().copied().find(|r| {
        name == *r
            || name
                .strip_suffix(r)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
    })
}

/// Why the labels a command chose under a wildcard (`chosen`, the part of
/// the name left of the wildcard's suffix, without the joining dot) look
/// like a tunnel, or `None` when they look like a host name.
pub fn tunnel_shape(chosen: &str) -> Option<String> {
    let labels: Vec<&str> = chosen.split('.').collect();
    if labels.len() > MAX_CHOSEN_LABELS {
        return Some(format!(
            "{} labels chosen below the wildcard (at most {MAX_CHOSEN_LABELS})",
            labels.len()
        ));
    }
    let chars: usize = labels.iter().map(|l| l.len()).sum();
    if chars > MAX_CHOSEN_CHARS {
        return Some(format!(
            "{chars} characters chosen below the wildcard (at most {MAX_CHOSEN_CHARS})"
        ));
    }
    for l in &labels {
        if l.len() > MAX_CHOSEN_LABEL {
            return Some(format!(
                "a label of {} characters (at most {MAX_CHOSEN_LABEL})",
                l.len()
            ));
        }
        if l.len() >= MIN_HEX_RUN
            && l.bytes().all(|b| b.is_ascii_hexdigit())
            && l.bytes().any(|b| b.is_ascii_digit())
            && l.bytes().any(|b| b.is_ascii_alphabetic())
        {
            return Some(format!("a hex-encoded label of {} characters", l.len()));
        }
        if l.len() >= MIN_ENCODED_LEN && !l.contains('-') && switches(l) >= MIN_SWITCHES {
            return Some(format!(
                "an encoded-looking label of {} characters ({} letter/digit switches)",
                l.len(),
                switches(l)
            ));
        }
    }
    None
}

/// Is this media type (a `Content-Type` or one entry of an `Accept`
/// header) DNS in HTTP: RFC 8484's `application/dns-message`, or the JSON
/// form Google and Cloudflare serve (`application/dns-json`)?
pub fn is_dns_media_type(value: &str) -> bool {
    value.split(',').any(|v| {
        let t = v.split(';').next().unwrap_or("").trim();
        t.eq_ignore_ascii_case("application/dns-message")
            || t.eq_ignore_ascii_case("application/dns-json")
    })
}

/// Is this path-and-query RFC 8484's GET form (`/dns-query?dns=<base64url>`)?
pub fn is_doh_get(path_and_query: &str) -> bool {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return false;
    };
    path.ends_with("/dns-query") && query.split('&').any(|kv| kv.starts_with("dns="))
}

/// How often `s` switches between an ASCII letter and a digit.
fn switches(s: &str) -> usize {
    s.as_bytes()
        .windows(2)
        .filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doh_resolvers_by_name_and_below() {
        assert_eq!(doh_resolver("dns.google"), Some("dns.google"));
        assert_eq!(
            doh_resolver("mozilla.cloudflare-dns.com"),
            Some("cloudflare-dns.com")
        );
        assert_eq!(
            doh_resolver("cloudflare-dns.com"),
            Some("cloudflare-dns.com")
        );
        assert_eq!(doh_resolver("fonts.google"), None);
        assert_eq!(doh_resolver("xdns.google"), None);
        assert_eq!(doh_resolver("notcloudflare-dns.com"), None);
        assert_eq!(doh_resolver("quad9.net"), None);
    }

    #[test]
    fn ordinary_wildcard_names_are_not_tunnels() {
        for chosen in [
            "static",
            "index",
            "objects",
            "d111111abcdef8",
            "my-company-build-artifacts-prod",
            "my-loadbalancer-1234567890.us-west-2",
            "github-production-release-asset-2e65be",
            "ec2-203-0-113-25.compute-1",
            "my-app-git-feature-branch-team",
            "a.b.c.d",
            "cdn",
        ] {
            assert_eq!(tunnel_shape(chosen), None, "{chosen}");
        }
    }

    #[test]
    fn tunnel_shaped_names_are_named_with_the_reason() {
        let long = "a".repeat(41);
        assert!(tunnel_shape(&long)
            .unwrap()
            .contains("a label of 41 characters"));
        let two = format!("{}.{}", "a".repeat(40), "b".repeat(30));
        assert!(tunnel_shape(&two).unwrap().contains("70 characters chosen"));
        assert!(tunnel_shape("a.b.c.d.e").unwrap().contains("5 labels"));
        assert!(tunnel_shape("4f6b2c9e1d0a7b3c")
            .unwrap()
            .contains("hex-encoded label of 16"));
        // base32 of random bytes (RFC 4648 alphabet, lower-cased).
        assert_eq!(
            tunnel_shape("mzxw6ytb2oi4dk3lq7rsgs5dfpj2hq").as_deref(),
            Some("an encoded-looking label of 30 characters (14 letter/digit switches)")
        );
        // All-letter hex-alphabet words are not encoded data.
        assert_eq!(tunnel_shape("deadbeefcafefeed"), None);
    }

    #[test]
    fn dns_media_types_and_the_get_form() {
        assert!(is_dns_media_type("application/dns-message"));
        assert!(is_dns_media_type("Application/DNS-Message; charset=x"));
        assert!(is_dns_media_type("text/html, application/dns-json"));
        assert!(!is_dns_media_type("application/json"));
        assert!(is_doh_get(
            "/dns-query?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDY29tAAABAAE"
        ));
        assert!(!is_doh_get("/dns-query"));
        assert!(!is_doh_get("/search?dns=x"));
    }
}
