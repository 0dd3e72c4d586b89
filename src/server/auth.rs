//! Who may call `/v1/*`: one token per server process, compared in
//! constant time, taken from a header or the cookie and never from the
//! query string. The token is never printed or logged; without one
//! configured the process makes one up and keeps it to itself.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

/// Where the token came from (shown by `/v1/runtime/info`; never the token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenSource {
    Flag,
    CodewhaleEnv,
    DeepseekEnv,
    Generated,
    /// `--insecure-no-auth` on a loopback bind.
    Disabled,
}

impl TokenSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSource::Flag => "flag",
            TokenSource::CodewhaleEnv => "env:CODEWHALE_RUNTIME_TOKEN",
            TokenSource::DeepseekEnv => "env:DEEPSEEK_RUNTIME_TOKEN",
            TokenSource::Generated => "generated",
            TokenSource::Disabled => "disabled",
        }
    }
}

/// The process's token (absent = auth disabled).
#[derive(Clone)]
pub struct Auth {
    token: Option<String>,
    pub source: TokenSource,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.debug_struct("Auth")
            .field("source", &self.source)
            .finish()
    }
}

pub const COOKIE: &str = "codewhale_runtime_token";

impl Auth {
    /// `--auth-token`, else `CODEWHALE_RUNTIME_TOKEN`, else
    /// `DEEPSEEK_RUNTIME_TOKEN` (empty values count as unset), else a fresh
    /// random one; or none with `insecure_no_auth`.
    pub fn resolve(
        flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        insecure_no_auth: bool,
    ) -> Auth {
        if insecure_no_auth {
            return Auth {
                token: None,
                source: TokenSource::Disabled,
            };
        }
        let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty());
        let (token, source) = if let Some(t) = nonempty(flag.map(str::to_string)) {
            (t, TokenSource::Flag)
        } else if let Some(t) = nonempty(env("CODEWHALE_RUNTIME_TOKEN")) {
            (t, TokenSource::CodewhaleEnv)
        } else if let Some(t) = nonempty(env("DEEPSEEK_RUNTIME_TOKEN")) {
            (t, TokenSource::DeepseekEnv)
        } else {
            (generate(), TokenSource::Generated)
        };
        Auth {
            token: Some(token),
            source,
        }
    }

    pub fn enabled(&self) -> bool {
        self.token.is_some()
    }

    /// Whether the request carries the token (any accepted form).
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        self.presented_by(headers).is_some()
    }

    /// How the request carries the token: a header (a bearer client) or
    /// only the cookie (a browser, which `codewhale web` holds to its own
    /// origin); `None`: it does not. With auth disabled, a header.
    pub fn presented_by(&self, headers: &HeaderMap) -> Option<Presented> {
        let Some(expected) = &self.token else {
            return Some(Presented::Header);
        };
        let matches = |v: &[String]| {
            v.iter()
                .any(|t| bool::from(t.as_bytes().ct_eq(expected.as_bytes())))
        };
        let (by_header, by_cookie) = presented(headers);
        if matches(&by_header) {
            Some(Presented::Header)
        } else if matches(&by_cookie) {
            Some(Presented::Cookie)
        } else {
            None
        }
    }
}

/// How a request presented the runtime token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presented {
    Header,
    Cookie,
}

/// 256 random bits (two v4 UUIDs' worth of the OS RNG), as hex.
fn generate() -> String {
    format!(
        "cwrt_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Every token the request presents: in headers (`Authorization: Bearer`,
/// the two runtime-token headers), and in the cookie.
fn presented(h: &HeaderMap) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut cookies = Vec::new();
    for v in h.get_all("authorization") {
        if let Some(t) = v.to_str().ok().and_then(|s| {
            s.strip_prefix("Bearer ")
                .or_else(|| s.strip_prefix("bearer "))
        }) {
            out.push(t.trim().to_string());
        }
    }
    for name in ["x-codewhale-runtime-token", "x-deepseek-runtime-token"] {
        for v in h.get_all(name) {
            if let Ok(s) = v.to_str() {
                out.push(s.trim().to_string());
            }
        }
    }
    for v in h.get_all("cookie") {
        if let Ok(s) = v.to_str() {
            for pair in s.split(';') {
                if let Some((k, val)) = pair.trim().split_once('=') {
                    if k == COOKIE {
                        cookies.push(val.to_string());
                    }
                }
            }
        }
    }
    (out, cookies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn auth(t: &str) -> Auth {
        Auth::resolve(Some(t), &|_| None, false)
    }

    fn with(name: &'static str, v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn every_accepted_form_and_only_the_right_token() {
        let a = auth("s3cret");
        assert!(a.allows(&with("authorization", "Bearer s3cret")));
        assert!(a.allows(&with("x-codewhale-runtime-token", "s3cret")));
        assert!(a.allows(&with("x-deepseek-runtime-token", "s3cret")));
        assert!(a.allows(&with("cookie", "a=b; codewhale_runtime_token=s3cret")));
        assert!(!a.allows(&HeaderMap::new()));
        assert!(!a.allows(&with("authorization", "Bearer s3cre")));
        assert!(
            !a.allows(&with("authorization", "s3cret")),
            "Bearer is required"
        );
        assert!(!a.allows(&with("cookie", "other=s3cret")));
        assert_eq!(
            a.presented_by(&with("cookie", "codewhale_runtime_token=s3cret")),
            Some(Presented::Cookie)
        );
        assert_eq!(
            a.presented_by(&with("authorization", "Bearer s3cret")),
            Some(Presented::Header)
        );
    }

    #[test]
    fn sources_in_order_and_generated_when_absent() {
        let env = |k: &str| match k {
            "CODEWHALE_RUNTIME_TOKEN" => Some("c".to_string()),
            "DEEPSEEK_RUNTIME_TOKEN" => Some("d".to_string()),
            _ => None,
        };
        assert_eq!(
            Auth::resolve(Some("f"), &env, false).source,
            TokenSource::Flag
        );
        assert_eq!(
            Auth::resolve(None, &env, false).source,
            TokenSource::CodewhaleEnv
        );
        let only_d = |k: &str| (k == "DEEPSEEK_RUNTIME_TOKEN").then(|| "d".to_string());
        let a = Auth::resolve(None, &only_d, false);
        assert_eq!(a.source, TokenSource::DeepseekEnv);
        assert!(a.allows(&with("x-codewhale-runtime-token", "d")));
        let g = Auth::resolve(Some(""), &|_| None, false);
        assert_eq!(g.source, TokenSource::Generated);
        assert!(!g.allows(&HeaderMap::new()));
        assert!(!format!("{g:?}").contains("cwrt_"), "Debug never shows it");
        let off = Auth::resolve(Some("x"), &env, true);
        assert!(!off.enabled() && off.allows(&HeaderMap::new()));
    }
}
