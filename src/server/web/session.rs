//! The browser's credentials in `codewhale web`: single-use bootstrap
//! capabilities (printed in the link; ≥ 128 bits, 10 minutes) exchanged by
//! a loopback GET for a session cookie that lives as long as the server
//! (at most 12 hours). The runtime token is never part of either. Pure
//! state with the clock passed in, so expiry is tested without sleeping.

use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// How long a printed link works.
pub const CAPABILITY_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a browser session lasts (the cookie's `Max-Age` too).
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// The cookie's name.
pub const COOKIE: &str = "codewhale_web_session";

/// Why a bootstrap was refused (all answered 401 alike; the reason is for
/// the server's own log line and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    /// Unknown, already used, or expired.
    NotValid,
}

struct Entry {
    secret: String,
    expires: Instant,
}

/// Open capabilities and live sessions of one server process.
#[derive(Default)]
pub struct WebSessions {
    caps: Vec<Entry>,
    sessions: Vec<Entry>,
}

/// 256 random bits from the OS (two v4 UUIDs), as hex with a prefix that
/// says what it is.
fn random(prefix: &str) -> String {
    format!(
        "{prefix}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Constant-time membership: every entry is compared, whichever matches.
fn position(list: &[Entry], presented: &str, now: Instant) -> Option<usize> {
    let mut found = None;
    for (i, e) in list.iter().enumerate() {
        let same = bool::from(e.secret.as_bytes().ct_eq(presented.as_bytes()));
        if same && e.expires > now {
            found = Some(i);
        }
    }
    found
}

/// A capability is `cwcap_` and 64 hex digits; anything else is refused
/// before any comparison.
fn well_formed(cap: &str) -> bool {
    cap.strip_prefix("cwcap_")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl WebSessions {
    /// A new single-use capability for a link.
    pub fn mint(&mut self, now: Instant) -> String {
        self.caps.retain(|e| e.expires > now);
        let secret = random("cwcap_");
        self.caps.push(Entry {
            secret: secret.clone(),
            expires: now + CAPABILITY_TTL,
        });
        secret
    }

    /// Consume `cap` (whatever happens next, it never works again) and
    /// open a session: its cookie value.
    pub fn exchange(&mut self, cap: &str, now: Instant) -> Result<String, Refused> {
        if !well_formed(cap) {
            return Err(Refused::Malformed);
        }
        let Some(i) = position(&self.caps, cap, now) else {
            return Err(Refused::NotValid);
        };
        self.caps.swap_remove(i);
        self.sessions.retain(|e| e.expires > now);
        let secret = random("cwweb_");
        self.sessions.push(Entry {
            secret: secret.clone(),
            expires: now + SESSION_TTL,
        });
        Ok(secret)
    }

    /// Whether a presented cookie value is a live session.
    pub fn valid(&self, cookie: &str, now: Instant) -> bool {
        position(&self.sessions, cookie, now).is_some()
    }

    /// Seconds the cookie should live (`Max-Age`).
    pub fn max_age() -> u64 {
        SESSION_TTL.as_secs()
    }
}

/// The session cookie's value in a `Cookie` header, if any.
pub fn cookie_value(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == COOKIE).then_some(v)
    })
}

/// The `Set-Cookie` line: exactly `HttpOnly; SameSite=Strict; Path=/` and
/// the lifetime — never `Domain`, never `Secure` on plain-http loopback.
pub fn set_cookie(value: &str) -> String {
    format!(
        "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        WebSessions::max_age()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_works_once_then_never() {
        let mut w = WebSessions::default();
        let t = Instant::now();
        let cap = w.mint(t);
        assert!(cap.len() >= 6 + 32, "at least 128 bits: {cap}");
        let cookie = w.exchange(&cap, t).unwrap();
        assert!(w.valid(&cookie, t));
        assert_eq!(w.exchange(&cap, t), Err(Refused::NotValid));
        assert!(!w.valid("cwweb_nope", t));
        assert!(!w.valid(&cap, t), "a capability is not a session");
    }

    #[test]
    fn expired_and_malformed_capabilities_are_refused() {
        let mut w = WebSessions::default();
        let t = Instant::now();
        let cap = w.mint(t);
        let late = t + CAPABILITY_TTL + Duration::from_secs(1);
        assert_eq!(w.exchange(&cap, late), Err(Refused::NotValid));
        assert_eq!(w.exchange("cwcap_zz", t), Err(Refused::Malformed));
        assert_eq!(w.exchange("", t), Err(Refused::Malformed));
        let other = w.mint(t);
        let mut forged = other.clone();
        forged.replace_range(10..11, if &other[10..11] == "a" { "b" } else { "a" });
        assert_eq!(w.exchange(&forged, t), Err(Refused::NotValid));
        assert!(w.exchange(&other, t).is_ok());
    }

    #[test]
    fn sessions_end_with_their_lifetime() {
        let mut w = WebSessions::default();
        let t = Instant::now();
        let cap = w.mint(t);
        let c = w.exchange(&cap, t).unwrap();
        assert!(w.valid(&c, t + SESSION_TTL - Duration::from_secs(1)));
        assert!(!w.valid(&c, t + SESSION_TTL));
    }

    #[test]
    fn the_cookie_line_has_exactly_its_attributes() {
        let line = set_cookie("v");
        assert_eq!(
            line,
            format!("{COOKIE}=v; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200")
        );
        assert!(!line.contains("Domain") && !line.contains("Secure"));
        assert_eq!(
            cookie_value("a=b; codewhale_web_session=xyz; c=d"),
            Some("xyz")
        );
        assert_eq!(cookie_value("codewhale_web_sessionx=1"), None);
    }
}
