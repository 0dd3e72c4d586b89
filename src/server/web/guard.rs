//! What every request to `codewhale web` must satisfy, as pure functions
//! over the few headers that matter: the `Host` is this server's loopback
//! name and port (DNS rebinding → 421); a cookie-authenticated unsafe
//! request comes from the page's own origin (cross-site request forgery
//! from another local port → 403). The response headers every answer
//! carries are here too.

use axum::http::Method;

/// The page's Content-Security-Policy: nothing but this origin's own
/// scripts, styles and connections; never framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Headers on every response (name, value).
pub const ALWAYS: &[(&str, &str)] = &[
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
];

/// Whether `host` (the `Host` header) names this server: `127.0.0.1:P`
/// or `localhost:P` exactly. A `Host` without the port is refused too.
pub fn host_ok(host: Option<&str>, port: u16) -> bool {
    let Some(h) = host else { return false };
    let want = port.to_string();
    matches!(
        h.rsplit_once(':'),
        Some((name, p)) if p == want && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost"))
    )
}

/// Whether `host` may ask for the phone page of `app-server --mobile`
/// on `port`: an IP literal (a LAN address typed into the phone, or
/// loopback) or `localhost`, with the port. A DNS name is refused (421):
/// DNS rebinding needs one, and the page has no business under another
/// site's name. The page holds no secret either way; the API behind it
/// needs the bearer token.
pub fn mobile_host_ok(host: Option<&str>, port: u16) -> bool {
    let Some(h) = host else { return false };
    let Some((name, p)) = h.rsplit_once(':') else {
        return false;
    };
    if p != port.to_string() {
        return false;
    }
    let literal = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .map_or_else(
            || name.parse::<std::net::Ipv4Addr>().is_ok(),
            |v6| v6.parse::<std::net::Ipv6Addr>().is_ok(),
        );
    literal || name.eq_ignore_ascii_case("localhost")
}

/// Why a cookie-authenticated request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrossSite {
    NoOrigin,
    OtherOrigin,
    FetchMetadata,
}

impl CrossSite {
    pub fn message(self) -> &'static str {
        match self {
            CrossSite::NoOrigin => "a browser request that changes state must carry Origin",
            CrossSite::OtherOrigin => "Origin is not this page's origin",
            CrossSite::FetchMetadata => "Sec-Fetch-Site says the request is not same-origin",
        }
    }
}

fn safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A request authenticated by a cookie (not a bearer token): unsafe
/// methods need `Origin` equal to `http://<Host>` — the exact origin the
/// page was served from — and, when present, `Sec-Fetch-Site:
/// same-origin` (a sibling port is `same-site`, and refused).
pub fn cookie_request_ok(
    method: &Method,
    host: &str,
    origin: Option<&str>,
    fetch_site: Option<&str>,
) -> Result<(), CrossSite> {
    if let Some(site) = fetch_site {
        if site != "same-origin" && site != "none" && !safe(method) {
            return Err(CrossSite::FetchMetadata);
        }
        if site == "cross-site" {
            return Err(CrossSite::FetchMetadata);
        }
    }
    if safe(method) {
        return Ok(());
    }
    match origin {
        None => Err(CrossSite::NoOrigin),
        Some(o) if o == format!("http://{host}") => Ok(()),
        Some(_) => Err(CrossSite::OtherOrigin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_servers_loopback_names_and_port() {
        assert!(host_ok(Some("127.0.0.1:7878"), 7878));
        assert!(host_ok(Some("localhost:7878"), 7878));
        assert!(!host_ok(Some("127.0.0.1"), 7878), "no port");
        assert!(!host_ok(Some("localhost"), 7878));
        assert!(!host_ok(Some("evil.test:7878"), 7878), "rebinding");
        assert!(!host_ok(Some("127.0.0.1:7879"), 7878));
        assert!(!host_ok(Some("127.0.0.2:7878"), 7878));
        assert!(!host_ok(None, 7878));
    }

    #[test]
    fn the_phone_page_answers_ip_literals_and_localhost_only() {
        assert!(mobile_host_ok(Some("192.168.1.20:7878"), 7878));
        assert!(mobile_host_ok(Some("127.0.0.1:7878"), 7878));
        assert!(mobile_host_ok(Some("[2001:db8::7]:7878"), 7878));
        assert!(mobile_host_ok(Some("LOCALHOST:7878"), 7878));
        assert!(!mobile_host_ok(Some("evil.test:7878"), 7878), "rebinding");
        assert!(!mobile_host_ok(Some("192.168.1.20.nip.io:7878"), 7878));
        assert!(!mobile_host_ok(Some("192.168.1.20"), 7878), "no port");
        assert!(!mobile_host_ok(Some("192.168.1.20:7879"), 7878));
        assert!(!mobile_host_ok(Some("[::1"), 7878));
        assert!(!mobile_host_ok(None, 7878));
    }

    #[test]
    fn unsafe_cookie_requests_come_from_the_page() {
        let post = Method::POST;
        let h = "127.0.0.1:7878";
        assert_eq!(
            cookie_request_ok(&post, h, Some("http://127.0.0.1:7878"), Some("same-origin")),
            Ok(())
        );
        assert_eq!(
            cookie_request_ok(&post, h, Some("http://127.0.0.1:7878"), None),
            Ok(())
        );
        assert_eq!(
            cookie_request_ok(&post, h, None, Some("same-origin")),
            Err(CrossSite::NoOrigin)
        );
        assert_eq!(
            cookie_request_ok(&post, h, Some("http://127.0.0.1:9999"), Some("same-site")),
            Err(CrossSite::FetchMetadata),
            "a sibling port is same-site, not same-origin"
        );
        assert_eq!(
            cookie_request_ok(&post, h, Some("http://127.0.0.1:9999"), None),
            Err(CrossSite::OtherOrigin)
        );
        assert_eq!(
            cookie_request_ok(&post, h, Some("http://localhost:7878"), None),
            Err(CrossSite::OtherOrigin),
            "the exact origin, not another name of it"
        );
        assert_eq!(
            cookie_request_ok(&Method::PATCH, h, Some("null"), None),
            Err(CrossSite::OtherOrigin)
        );
        // Reads need no Origin, but not from another site.
        assert_eq!(cookie_request_ok(&Method::GET, h, None, None), Ok(()));
        assert_eq!(
            cookie_request_ok(&Method::GET, h, None, Some("cross-site")),
            Err(CrossSite::FetchMetadata)
        );
    }
}
