//! The CORS allow-list: built-in dev origins plus what the user adds
//! (`--cors-origin`, `DEEPSEEK_CORS_ORIGINS`, `[runtime_api] cors_origins`).
//! No wildcard; preflights allow only the headers the API reads.

use axum::http::{HeaderName, HeaderValue, Method};
use std::path::Path;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub const BUILT_IN: &[&str] = &[
    "http://localhost:3000",
    "http://127.0.0.1:3000",
    "http://localhost:1420",
    "http://127.0.0.1:1420",
    "tauri://localhost",
];

pub const ALLOWED_HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    "accept",
    "x-codewhale-runtime-token",
    "x-deepseek-runtime-token",
];

/// One checked origin: `scheme://host[:port]`, nothing else.
pub fn check_origin(source: &str, o: &str) -> Result<String, String> {
    let o = o.trim();
    if o == "*" || o.contains('*') {
        return Err(format!(
            "{source}: `{o}`: wildcard origins are not supported"
        ));
    }
    let u = url::Url::parse(o).map_err(|e| format!("{source}: `{o}` is not an origin ({e})"))?;
    let origin = u.origin().ascii_serialization();
    let has_path = u.path() != "/" && !u.path().is_empty();
    if u.host_str().is_none() || has_path || u.query().is_some() {
        return Err(format!(
            "{source}: `{o}` is not an origin (scheme://host[:port])"
        ));
    }
    // Non-special schemes (tauri://) have an opaque origin: keep the text.
    Ok(if origin == "null" {
        o.trim_end_matches('/').to_string()
    } else {
        origin
    })
}

/// `[runtime_api] cors_origins` of `<home>/config.toml`, if set.
pub fn from_config(home: &Path) -> Result<Vec<String>, String> {
    let path = home.join("config.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let v: toml::Value = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(list) = v.get("runtime_api").and_then(|r| r.get("cors_origins")) else {
        return Ok(Vec::new());
    };
    let src = format!("{} [runtime_api] cors_origins", path.display());
    list.as_array()
        .ok_or_else(|| format!("{src}: must be a list of strings"))?
        .iter()
        .map(|o| {
            o.as_str()
                .ok_or_else(|| format!("{src}: must be a list of strings"))
                .and_then(|o| check_origin(&src, o))
        })
        .collect()
}

/// Built-ins plus every user source, checked and deduplicated.
pub fn allow_list(
    flags: &[String],
    env: Option<String>,
    config: Vec<String>,
) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = BUILT_IN.iter().map(|s| s.to_string()).collect();
    for f in flags {
        out.push(check_origin("--cors-origin", f)?);
    }
    for e in env
        .iter()
        .flat_map(|e| e.split(','))
        .filter(|s| !s.trim().is_empty())
    {
        out.push(check_origin("DEEPSEEK_CORS_ORIGINS", e)?);
    }
    out.extend(config);
    let mut seen = std::collections::HashSet::new();
    out.retain(|o| seen.insert(o.clone()));
    Ok(out)
}

pub fn layer(origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::OPTIONS])
        .allow_headers(
            ALLOWED_HEADERS
                .iter()
                .map(|h| HeaderName::from_static(h))
                .collect::<Vec<_>>(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_origins_stack_on_the_built_ins_and_wildcards_are_refused() {
        let l = allow_list(
            &["http://localhost:5173".into()],
            Some("http://localhost:8080, http://localhost:5173".into()),
            vec![],
        )
        .unwrap();
        assert!(l.starts_with(&BUILT_IN.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
        assert!(l.contains(&"http://localhost:5173".to_string()));
        assert!(l.contains(&"http://localhost:8080".to_string()));
        assert_eq!(
            l.iter().filter(|o| *o == "http://localhost:5173").count(),
            1
        );
        let e = allow_list(&["*".into()], None, vec![]).unwrap_err();
        assert!(e.contains("--cors-origin") && e.contains("wildcard"), "{e}");
        let e = allow_list(&[], Some("http://x/path".into()), vec![]).unwrap_err();
        assert!(e.contains("DEEPSEEK_CORS_ORIGINS"), "{e}");
        assert_eq!(
            check_origin("t", "tauri://localhost").unwrap(),
            "tauri://localhost"
        );
    }

    #[test]
    fn config_origins_name_the_file_and_key() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("config.toml"),
            "[runtime_api]\ncors_origins = [\"http://a:1\"]\n",
        )
        .unwrap();
        assert_eq!(from_config(d.path()).unwrap(), ["http://a:1"]);
        std::fs::write(
            d.path().join("config.toml"),
            "[runtime_api]\ncors_origins = \"http://a:1\"\n",
        )
        .unwrap();
        let e = from_config(d.path()).unwrap_err();
        assert!(e.contains("config.toml [runtime_api] cors_origins"), "{e}");
    }
}
