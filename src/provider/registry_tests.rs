use super::*;
use std::collections::BTreeMap;

fn no_env(_: &str) -> Option<String> {
    None
}

fn store() -> (tempfile::TempDir, AuthStore) {
    let t = tempfile::tempdir().unwrap();
    let s = AuthStore::new(t.path());
    (t, s)
}

#[test]
fn default_is_deepseek_with_flash_alias() {
    let (_t, s) = store();
    let p = select(None, None, &ExecConfig::default(), &s, &no_env).unwrap();
    assert_eq!(p.id, "deepseek");
    assert_eq!(p.model, "deepseek-chat");
    assert_eq!(p.key_source, KeySource::Missing);
    assert!(p.price.is_none());
}

#[test]
fn env_key_beats_store_and_config() {
    let (_t, s) = store();
    s.set("openai", "from-store").unwrap();
    let env = |n: &str| (n == "OPENAI_API_KEY").then(|| "from-env".to_string());
    let p = select(Some("openai"), None, &ExecConfig::default(), &s, &env).unwrap();
    assert_eq!(p.api_key.unwrap().expose(), "from-env");
    assert_eq!(p.key_source, KeySource::Env("OPENAI_API_KEY".into()));
    let p = select(Some("openai"), None, &ExecConfig::default(), &s, &no_env).unwrap();
    assert_eq!(p.key_source, KeySource::AuthStore);
}

#[test]
fn custom_provider_from_config() {
    let (_t, s) = store();
    let mut providers = BTreeMap::new();
    providers.insert(
        "custom".to_string(),
        ProviderEntry {
            kind: Some("openai-compatible".into()),
            base_url: Some("http://127.0.0.1:1234/v1".into()),
            api_key: Some("k".into()),
            model: Some("scripted".into()),
            ..Default::default()
        },
    );
    let cfg = ExecConfig {
        providers,
        ..Default::default()
    };
    let p = select(Some("custom"), None, &cfg, &s, &no_env).unwrap();
    assert_eq!(p.wire, WireFormat::OpenAiCompatible);
    assert_eq!(p.model, "scripted");
    assert_eq!(p.key_source, KeySource::Config);
}

#[test]
fn unknown_provider_names_it() {
    let (_t, s) = store();
    let e = select(Some("nope"), None, &ExecConfig::default(), &s, &no_env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope") && e.contains("deepseek"), "{e}");
}

#[test]
fn plain_http_only_to_loopback_unless_allowed() {
    assert!(check_base_url("x", "http://127.0.0.1:8000/v1", false).is_ok());
    assert!(check_base_url("x", "http://localhost:8000/v1", false).is_ok());
    assert!(check_base_url("x", "http://[::1]:8000/v1", false).is_ok());
    assert!(check_base_url("x", "https://api.example.com", false).is_ok());
    let e = check_base_url("x", "http://10.0.0.5/v1", false).unwrap_err();
    assert!(e.to_string().contains("refusing plain http"), "{e}");
    assert!(check_base_url("x", "http://10.0.0.5/v1", true).is_ok());
    assert!(check_base_url("x", "ftp://h/", true).is_err());
}

#[test]
fn local_runtimes_need_no_key() {
    let (_t, s) = store();
    for id in ["ollama", "vllm", "sglang"] {
        let p = select(Some(id), None, &ExecConfig::default(), &s, &no_env).unwrap();
        assert_eq!(p.key_source, KeySource::NotNeeded, "{id}");
    }
}

#[test]
fn cost_uses_price_per_million() {
    let p = Price {
        input_per_mtok: 1.0,
        output_per_mtok: 2.0,
    };
    assert!((p.cost(1_000_000, 500_000) - 2.0).abs() < 1e-9);
}
