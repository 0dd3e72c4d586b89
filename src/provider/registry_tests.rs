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
fn default_is_deepseek_flash_sent_under_its_own_name() {
    let (_t, s) = store();
    let p = select(None, None, &ExecConfig::default(), &s, &no_env).unwrap();
    assert_eq!(p.id, "deepseek");
    // DeepSeek's pricing page: "Use deepseek-flash as the model name";
    // the old `deepseek-chat` rewrite would send a retired name.
    assert_eq!(p.model, "deepseek-flash");
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
    for id in ["ollama", "vllm", "sglang", "lmstudio", "jan"] {
        let p = select(Some(id), None, &ExecConfig::default(), &s, &no_env).unwrap();
        assert_eq!(p.key_source, KeySource::NotNeeded, "{id}");
    }
}

#[test]
fn config_price_wins_and_names_its_source() {
    let (_t, s) = store();
    let mut providers = BTreeMap::new();
    providers.insert(
        "openai".to_string(),
        ProviderEntry {
            price_input_per_mtok: Some(1.0),
            price_output_per_mtok: Some(2.0),
            ..Default::default()
        },
    );
    let cfg = ExecConfig {
        providers,
        ..Default::default()
    };
    let p = select(Some("openai"), Some("gpt-4o-mini"), &cfg, &s, &no_env).unwrap();
    let price = p.price.unwrap();
    assert_eq!(price.input_per_mtok, 1.0);
    assert_eq!(price.cached_input_per_mtok, None);
    assert!(price.source.contains("config"));
}

#[test]
fn every_catalogue_id_selects_with_an_explicit_model() {
    let (_t, s) = store();
    let env = |n: &str| {
        (n == "AZURE_OPENAI_ENDPOINT").then(|| "https://res.openai.azure.com".to_string())
    };
    for e in catalogue::all() {
        let p = select(
            Some(e.id),
            Some("some-model"),
            &ExecConfig::default(),
            &s,
            &env,
        )
        .unwrap_or_else(|err| panic!("{}: {err}", e.id));
        assert_eq!(p.id, e.id);
        assert_eq!(p.model, "some-model");
        assert_eq!(p.wire, e.wire);
        let expect = if e.local {
            KeySource::NotNeeded
        } else {
            KeySource::Missing
        };
        assert_eq!(p.key_source, expect, "{}", e.id);
    }
}

#[test]
fn azure_needs_an_endpoint_and_gets_an_api_version() {
    let (_t, s) = store();
    let e = select(
        Some("azure-openai"),
        None,
        &ExecConfig::default(),
        &s,
        &no_env,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("AZURE_OPENAI_ENDPOINT"), "{e}");
    let env =
        |n: &str| (n == "AZURE_OPENAI_ENDPOINT").then(|| "https://r.openai.azure.com".to_string());
    let p = select(
        Some("azure-openai"),
        Some("dep"),
        &ExecConfig::default(),
        &s,
        &env,
    )
    .unwrap();
    assert_eq!(p.api_version.as_deref(), Some(AZURE_API_VERSION));
    assert_eq!(p.base_url, "https://r.openai.azure.com");
}

#[test]
fn base_url_override_keeps_the_builtin_wire() {
    let (_t, s) = store();
    let mut providers = BTreeMap::new();
    providers.insert(
        "anthropic".to_string(),
        ProviderEntry {
            base_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        },
    );
    let cfg = ExecConfig {
        providers,
        ..Default::default()
    };
    let p = select(Some("anthropic"), None, &cfg, &s, &no_env).unwrap();
    assert_eq!(p.wire, WireFormat::Anthropic);
    assert_eq!(p.model, "claude-sonnet-5-5");
    // The catalogue price of the default model applies.
    assert_eq!(p.price.unwrap().input_per_mtok, 2.0);
}

#[test]
fn local_runtime_without_model_is_left_for_discovery() {
    let (_t, s) = store();
    let p = select(Some("vllm"), None, &ExecConfig::default(), &s, &no_env).unwrap();
    assert_eq!(p.model, "");
    assert!(p.local);
}
