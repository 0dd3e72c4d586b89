use super::*;

fn parse(text: &str, env: &[(&str, &str)]) -> Result<OpenSandboxConfig, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let doc: toml::Table = toml::from_str(text).unwrap();
    let table = doc
        .get("opensandbox")
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    OpenSandboxConfig::from_table_with_env(&table, &file, |k| {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    })
}

#[test]
fn defaults() {
    let c = parse("[opensandbox]\n", &[]).unwrap();
    assert_eq!(c.url.as_str(), "http://localhost:8080/");
    assert_eq!(c.api_base(), "http://localhost:8080/v1");
    assert_eq!(c.timeout_s, Some(3600));
    assert!(!c.keep);
    assert!(c.api_key.is_none());
    assert_eq!(
        c.resource_limits.get("cpu").map(String::as_str),
        Some("1000m")
    );
}

#[test]
fn full_table() {
    let c = parse(
        "[sandbox]\nbackend = \"opensandbox\"\n[opensandbox]\nurl = \"https://os.example.com/v1\"\napi_key = \"k\"\nimage = \"python:3.12\"\ntimeout_s = 0\nuse_server_proxy = true\nkeep = true\nexecd_access_token = \"t\"\nresource_limits = { cpu = \"500m\", memory = \"512Mi\" }\nremote_workdir = \"/srv/ws/\"\n",
        &[("OPEN_SANDBOX_API_KEY", "from-env")],
    )
    .unwrap();
    assert_eq!(c.api_base(), "https://os.example.com/v1");
    assert_eq!(
        c.api_key.as_deref(),
        Some("k"),
        "the file wins over the env"
    );
    assert_eq!(c.timeout_s, None);
    assert!(c.use_server_proxy && c.keep);
    assert_eq!(c.execd_access_token.as_deref(), Some("t"));
    assert_eq!(c.resource_limits.len(), 2);
    assert_eq!(c.remote_workdir, "/srv/ws");
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("\"k\"") && !dbg.contains("\"t\""), "{dbg}");
}

#[test]
fn api_key_from_env_in_order() {
    let c = parse("[opensandbox]\n", &[("CODEWHALE_SANDBOX_API_KEY", "b")]).unwrap();
    assert_eq!(c.api_key.as_deref(), Some("b"));
    let c = parse(
        "[opensandbox]\n",
        &[
            ("OPEN_SANDBOX_API_KEY", "a"),
            ("CODEWHALE_SANDBOX_API_KEY", "b"),
        ],
    )
    .unwrap();
    assert_eq!(c.api_key.as_deref(), Some("a"));
}

#[test]
fn insecure_http_refused_unless_allowed() {
    let e = parse("[opensandbox]\n\nurl = \"http://10.0.0.5:8080\"\n", &[]).unwrap_err();
    assert_eq!(e.key, "url");
    assert_eq!(e.line, Some(3), "{e}");
    assert!(
        e.to_string().contains("config.toml:3: [opensandbox] url"),
        "{e}"
    );
    assert!(e.to_string().contains("allow_insecure_http"), "{e}");
    let c = parse(
        "[opensandbox]\nurl = \"http://10.0.0.5:8080\"\nallow_insecure_http = true\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.url.host_str(), Some("10.0.0.5"));
    for ok in [
        "http://127.0.0.1:9",
        "http://[::1]:9",
        "http://localhost",
        "https://x.y",
    ] {
        parse(&format!("[opensandbox]\nurl = \"{ok}\"\n"), &[]).unwrap();
    }
}

#[test]
fn bad_values_name_file_line_key() {
    let cases = [
        ("[opensandbox]\nkeep = \"yes\"\n", "keep", 2),
        (
            "[opensandbox]\nimage = \"x\"\ntimeout_s = 30\n",
            "timeout_s",
            3,
        ),
        ("[opensandbox]\nbogus = 1\n", "bogus", 2),
        ("[opensandbox]\nurl = \"not a url\"\n", "url", 2),
        (
            "[opensandbox]\nremote_workdir = \"rel\"\n",
            "remote_workdir",
            2,
        ),
        ("[opensandbox]\nentrypoint = []\n", "entrypoint", 2),
        (
            "[opensandbox]\nresource_limits = { cpu = 1.5 }\n",
            "resource_limits.cpu",
            2,
        ),
        ("[opensandbox]\nurl = \"ftp://x\"\n", "url", 2),
    ];
    for (text, key, line) in cases {
        let e = parse(text, &[]).unwrap_err();
        assert_eq!(e.key, key, "{text}");
        assert_eq!(e.line, Some(line), "{text}: {e}");
        assert!(e.to_string().contains("config.toml"), "{e}");
    }
}
