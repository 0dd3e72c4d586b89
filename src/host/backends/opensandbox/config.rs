//! `[opensandbox]` configuration: a typed parser for the section and the
//! checks that keep secrets off the wire.
//!
//! Why the checks live here: the lifecycle API key and the execd token are
//! bearer credentials. A plain `http://` URL to anything but loopback would
//! send them (and the whole workspace) in clear text, so it is refused unless
//! the user wrote `allow_insecure_http = true`.
//!
//! The config subsystem (`src/config/`) owns reading files; this module only
//! turns the already-parsed `[opensandbox]` table into [`OpenSandboxConfig`].

use reqwest::Url;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Environment variables consulted (in order) when `api_key` is not in the file.
pub const API_KEY_ENV: &[&str] = &["OPEN_SANDBOX_API_KEY", "CODEWHALE_SANDBOX_API_KEY"];
/// The port execd listens on inside every OpenSandbox sandbox.
pub const EXECD_PORT: u16 = 44772;

/// Everything the OpenSandbox backend needs that is not the sandbox policy.
#[derive(Clone)]
pub struct OpenSandboxConfig {
    /// Lifecycle server base URL as configured (default `http://localhost:8080`).
    pub url: Url,
    /// Lifecycle API key, sent only as `OPEN-SANDBOX-API-KEY` to `url`.
    pub api_key: Option<String>,
    /// Container image the sandbox is created from.
    pub image: String,
    /// Entry process of the sandbox (must keep running; execd is injected).
    pub entrypoint: Vec<String>,
    /// Sandbox time-to-live in seconds (renewed while in use); `None` = manual cleanup.
    pub timeout_s: Option<u64>,
    /// Ask the lifecycle server for a server-proxied execd endpoint.
    pub use_server_proxy: bool,
    /// `resourceLimits` of the create request (`cpu`, `memory`, …).
    pub resource_limits: BTreeMap<String, String>,
    /// Keep the sandbox after the session (reused next time for this workspace).
    pub keep: bool,
    /// Sent as `X-EXECD-ACCESS-TOKEN` to execd, when set.
    pub execd_access_token: Option<String>,
    /// Permit `http://` to a non-loopback host.
    pub allow_insecure_http: bool,
    /// Where the workspace lives inside the sandbox.
    pub remote_workdir: String,
    /// Scratch directory inside the sandbox for sync archives.
    pub remote_tmp: String,
    /// How long to wait for `Running` and for execd's `/ping`.
    pub ready_timeout_s: u64,
    /// Interval between readiness polls.
    pub poll_interval_ms: u64,
    /// Files larger than this are neither uploaded nor synced back.
    pub max_file_bytes: u64,
    /// Upper bound of one upload archive.
    pub max_upload_bytes: u64,
}

impl std::fmt::Debug for OpenSandboxConfig {
    // Hand-written so the key and the token never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenSandboxConfig")
            .field("url", &self.url.as_str())
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("image", &self.image)
            .field("timeout_s", &self.timeout_s)
            .field("use_server_proxy", &self.use_server_proxy)
            .field("resource_limits", &self.resource_limits)
            .field("keep", &self.keep)
            .field(
                "execd_access_token",
                &self.execd_access_token.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("remote_workdir", &self.remote_workdir)
            .finish_non_exhaustive()
    }
}

/// A bad `[opensandbox]` entry: names the file, the line when it can be
/// found, and the key.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: [opensandbox] {key}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: String,
    pub message: String,
}

/// The lifecycle URL used when the file names none.
pub const DEFAULT_URL: &str = "http://localhost:8080";

impl OpenSandboxConfig {
    /// The defaults, talking to the lifecycle server at `url`.
    pub fn with_url(url: Url) -> Self {
        let mut resource_limits = BTreeMap::new();
        resource_limits.insert("cpu".to_string(), "1000m".to_string());
        resource_limits.insert("memory".to_string(), "2Gi".to_string());
        OpenSandboxConfig {
            url,
            api_key: None,
            image: "ubuntu:24.04".to_string(),
            entrypoint: vec!["tail".into(), "-f".into(), "/dev/null".into()],
            timeout_s: Some(3600),
            use_server_proxy: false,
            resource_limits,
            keep: false,
            execd_access_token: None,
            allow_insecure_http: false,
            remote_workdir: "/workspace".to_string(),
            remote_tmp: "/tmp".to_string(),
            ready_timeout_s: 120,
            poll_interval_ms: 500,
            max_file_bytes: 8 * 1024 * 1024,
            max_upload_bytes: 256 * 1024 * 1024,
        }
    }
}

const KNOWN_KEYS: &[&str] = &[
    "url",
    "api_key",
    "image",
    "entrypoint",
    "timeout_s",
    "use_server_proxy",
    "resource_limits",
    "keep",
    "execd_access_token",
    "allow_insecure_http",
    "remote_workdir",
    "remote_tmp",
    "ready_timeout_s",
    "poll_interval_ms",
    "max_file_bytes",
    "max_upload_bytes",
];

/// Whether `url`'s host is loopback (`localhost`, `127.0.0.0/8`, `::1`).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Refuse URLs that would carry credentials in clear text to another host.
pub fn check_transport(url: &Url, allow_insecure_http: bool) -> Result<(), String> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) || allow_insecure_http => Ok(()),
        "http" => Err(format!(
            "plain http:// to the non-loopback host {} would send the API key and the workspace unencrypted; use https:// or set allow_insecure_http = true",
            url.host_str().unwrap_or("?")
        )),
        other => Err(format!("unsupported URL scheme {other:?} (use https:// or http://)")),
    }
}

impl OpenSandboxConfig {
    /// Parse the `[opensandbox]` table read from `source_file`, taking the
    /// API key from the process environment when the file has none.
    pub fn from_table(table: &toml::Table, source_file: &Path) -> Result<Self, ConfigError> {
        Self::from_table_with_env(table, source_file, |k| std::env::var(k).ok())
    }

    /// [`Self::from_table`] with an injectable environment (for tests).
    pub fn from_table_with_env(
        table: &toml::Table,
        source_file: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let p = Parser {
            table,
            file: source_file,
        };
        let url_text = p.string("url")?.unwrap_or_else(|| DEFAULT_URL.to_string());
        let url = Url::parse(&url_text)
            .map_err(|e| p.err("url", format!("{url_text:?} is not a URL: {e}")))?;
        let mut cfg = OpenSandboxConfig::with_url(url);
        for key in table.keys() {
            if !KNOWN_KEYS.contains(&key.as_str()) {
                return Err(p.err(
                    key,
                    format!("unknown key (known: {})", KNOWN_KEYS.join(", ")),
                ));
            }
        }
        cfg.allow_insecure_http = p.bool("allow_insecure_http")?.unwrap_or(false);
        check_transport(&cfg.url, cfg.allow_insecure_http).map_err(|m| p.err("url", m))?;
        cfg.api_key = match p.string("api_key")? {
            Some(k) => Some(k),
            None => API_KEY_ENV
                .iter()
                .find_map(|name| env(name).filter(|v| !v.is_empty())),
        };
        if let Some(v) = p.string("image")? {
            if v.trim().is_empty() {
                return Err(p.err("image", "must not be empty".into()));
            }
            cfg.image = v;
        }
        if let Some(v) = p.string_list("entrypoint")? {
            if v.is_empty() {
                return Err(p.err("entrypoint", "needs at least one element".into()));
            }
            cfg.entrypoint = v;
        }
        match table.get("timeout_s") {
            Some(toml::Value::Integer(0)) => cfg.timeout_s = None,
            Some(_) => {
                let t = p.uint("timeout_s")?.unwrap_or(3600);
                if t < 60 {
                    return Err(p.err(
                        "timeout_s",
                        "must be 0 (manual cleanup) or at least 60 (the server's minimum)".into(),
                    ));
                }
                cfg.timeout_s = Some(t);
            }
            None => {}
        }
        cfg.use_server_proxy = p.bool("use_server_proxy")?.unwrap_or(false);
        cfg.keep = p.bool("keep")?.unwrap_or(false);
        cfg.execd_access_token = p.string("execd_access_token")?;
        if let Some(v) = table.get("resource_limits") {
            let t = v.as_table().ok_or_else(|| {
                p.err(
                    "resource_limits",
                    "expected a table like { cpu = \"500m\", memory = \"512Mi\" }".into(),
                )
            })?;
            cfg.resource_limits.clear();
            for (k, v) in t {
                let s = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    _ => {
                        return Err(p.err(
                            &format!("resource_limits.{k}"),
                            "expected a string such as \"500m\" or \"512Mi\"".into(),
                        ))
                    }
                };
                cfg.resource_limits.insert(k.clone(), s);
            }
        }
        for (key, slot) in [
            ("remote_workdir", &mut cfg.remote_workdir),
            ("remote_tmp", &mut cfg.remote_tmp),
        ] {
            if let Some(v) = p.string(key)? {
                if !v.starts_with('/') || v.split('/').any(|c| c == "..") {
                    return Err(p.err(key, format!("{v:?} must be an absolute path without `..`")));
                }
                *slot = v.trim_end_matches('/').to_string();
                if slot.is_empty() {
                    return Err(p.err(key, "must not be `/`".into()));
                }
            }
        }
        if let Some(v) = p.uint("ready_timeout_s")? {
            cfg.ready_timeout_s = v.max(1);
        }
        if let Some(v) = p.uint("poll_interval_ms")? {
            cfg.poll_interval_ms = v.max(10);
        }
        if let Some(v) = p.uint("max_file_bytes")? {
            cfg.max_file_bytes = v;
        }
        if let Some(v) = p.uint("max_upload_bytes")? {
            cfg.max_upload_bytes = v;
        }
        Ok(cfg)
    }

    /// The lifecycle API root: the spec's servers end in `/v1`.
    pub fn api_base(&self) -> String {
        let s = self.url.as_str().trim_end_matches('/');
        if s.ends_with("/v1") {
            s.to_string()
        } else {
            format!("{s}/v1")
        }
    }
}

struct Parser<'a> {
    table: &'a toml::Table,
    file: &'a Path,
}

impl Parser<'_> {
    fn err(&self, key: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            line: find_line(self.file, key),
            key: key.to_string(),
            message,
        }
    }

    fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.err(key, format!("expected a string, found {}", v.type_str()))),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(self.err(
                key,
                format!("expected true or false, found {}", v.type_str()),
            )),
        }
    }

    fn uint(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
            Some(v) => Err(self.err(key, format!("expected a non-negative integer, found {v}"))),
        }
    }

    fn string_list(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| self.err(key, "expected an array of strings".into()))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(self.err(
                key,
                format!("expected an array of strings, found {}", v.type_str()),
            )),
        }
    }
}

/// Best-effort line number of `key` inside the `[opensandbox]` section of
/// `file` (a `toml::Table` carries no spans, so the source is scanned).
fn find_line(file: &Path, key: &str) -> Option<usize> {
    let text = std::fs::read_to_string(file).ok()?;
    let first = key.split('.').next().unwrap_or(key);
    let mut in_section = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[') {
            let header = t
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim();
            in_section = header == "opensandbox" || header.starts_with("opensandbox.");
            if in_section && header == format!("opensandbox.{first}") {
                return Some(i + 1);
            }
            continue;
        }
        if in_section {
            if let Some(rest) = t.strip_prefix(first) {
                if rest.trim_start().starts_with('=') || rest.trim_start().starts_with('.') {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "config_tests.rs"]
mod tests;
