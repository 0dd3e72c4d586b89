use super::*;
use std::collections::BTreeSet;

fn is_loopback_http(u: &reqwest::Url) -> bool {
    u.scheme() == "http"
        && matches!(
            u.host(),
            Some(url::Host::Domain("localhost"))
                | Some(url::Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
        )
}

#[test]
fn at_least_forty_unique_ids() {
    let ids: BTreeSet<&str> = ids().collect();
    assert_eq!(ids.len(), all().len(), "duplicate ids");
    assert!(ids.len() >= 40, "{}", ids.len());
    for id in &ids {
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{id}"
        );
    }
}

#[test]
fn every_url_is_https_or_loopback_for_local_ones() {
    for e in all() {
        let u = reqwest::Url::parse(e.base_url).unwrap_or_else(|err| panic!("{}: {err}", e.id));
        if e.local {
            assert!(
                is_loopback_http(&u),
                "{}: local runtime not on loopback",
                e.id
            );
            assert!(e.key_env.is_none(), "{}", e.id);
        } else {
            assert_eq!(u.scheme(), "https", "{}", e.id);
            assert!(
                e.key_env.is_some(),
                "{}: hosted without a key variable",
                e.id
            );
            assert!(!e.default_model.is_empty(), "{}", e.id);
        }
        assert!(!e.source.is_empty(), "{}: no source", e.id);
    }
}

#[test]
fn every_price_carries_a_date_and_source() {
    for e in all() {
        for m in e.models {
            if let Some(p) = m.price {
                let d: Vec<&str> = p.date.split('-').collect();
                assert!(
                    d.len() == 3
                        && d[0].len() == 4
                        && d[1].len() == 2
                        && d[2].len() == 2
                        && d.iter().all(|x| x.chars().all(|c| c.is_ascii_digit())),
                    "{}/{}: date {:?}",
                    e.id,
                    m.id,
                    p.date
                );
                assert!(p.source.starts_with("https://"), "{}/{}", e.id, m.id);
                assert!(p.input > 0.0 && p.output > 0.0, "{}/{}", e.id, m.id);
            }
        }
    }
}

#[test]
fn model_ids_are_unique_per_entry_and_thresholds_fit_the_window() {
    for e in all() {
        let ids: BTreeSet<&str> = e.models.iter().map(|m| m.id).collect();
        assert_eq!(ids.len(), e.models.len(), "{}: a model listed twice", e.id);
        for m in e.models {
            let Some(p) = m.price else { continue };
            if let Some(limit) = p.up_to_prompt_tokens {
                let window = m
                    .context_window
                    .unwrap_or_else(|| panic!("{}/{}: threshold without a window", e.id, m.id));
                assert!(limit > 0 && limit < u64::from(window), "{}/{}", e.id, m.id);
            }
            // A price names the page it was read from, not just a site.
            let u = reqwest::Url::parse(p.source.split_whitespace().next().unwrap_or(""))
                .unwrap_or_else(|err| panic!("{}/{}: source {err}", e.id, m.id));
            assert!(u.path().len() > 1, "{}/{}: {}", e.id, m.id, p.source);
        }
    }
}

#[test]
fn upstream_defaults_table_holds() {
    for (id, model) in [
        ("anthropic", "claude-sonnet-5-5"),
        ("openai", "gpt-5.6"),
        ("google", "gemini-3.1-pro-preview"),
        ("xai", "grok-4.6"),
        ("deepseek", "deepseek-flash"),
    ] {
        assert_eq!(get(id).unwrap().default_model, model, "{id}");
    }
}

#[test]
fn issue_named_services_are_present() {
    for id in [
        "google",
        "groq",
        "together",
        "fireworks",
        "deepinfra",
        "cerebras",
        "perplexity",
        "cohere",
        "zai",
        "zhipu",
        "qwen",
        "baichuan",
        "minimax",
        "stepfun",
        "siliconflow",
        "novita",
        "hyperbolic",
        "nebius",
        "sambanova",
        "lambda",
        "github-models",
        "azure-openai",
        "bedrock",
        "nvidia-nim",
        "huggingface",
        "lmstudio",
        "llamacpp-server",
        "localai",
        "jan",
        "ollama",
        "vllm",
        "sglang",
    ] {
        assert!(get(id).is_some(), "{id}");
    }
}

#[test]
fn docs_table_is_in_step_with_the_catalogue() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/PROVIDERS.md"))
        .expect("docs/PROVIDERS.md");
    for e in all() {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` | {} |", e.id, e.name)))
            .unwrap_or_else(|| panic!("docs/PROVIDERS.md has no catalogue row for {}", e.id));
        assert!(
            row.contains(&format!("`{}`", e.base_url)),
            "{}: {row}",
            e.id
        );
        if let Some(k) = e.key_env {
            assert!(row.contains(&format!("`{k}`")), "{}: {row}", e.id);
        }
    }
}

/// `$2.00`, `$0.15`, `$0.075`: how docs/PROVIDERS.md writes a price.
fn money(v: f64) -> String {
    if ((v * 100.0).round() - v * 100.0).abs() < 1e-9 {
        format!("${v:.2}")
    } else {
        format!("${v:.3}")
    }
}

/// `1,048,576`.
fn thousands(n: u32) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn docs_price_table_is_in_step_with_the_catalogue() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/PROVIDERS.md"))
        .expect("docs/PROVIDERS.md");
    let mut priced = 0;
    for e in all() {
        for m in e.models {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` | `{}` |", e.id, m.id)))
                .unwrap_or_else(|| {
                    panic!("docs/PROVIDERS.md has no price row for {}/{}", e.id, m.id)
                });
            let cells: Vec<&str> = row.split(" | ").collect();
            let ctx = m.context_window.map(thousands).unwrap_or("unknown".into());
            assert_eq!(cells[2], ctx, "{row}");
            match m.price {
                Some(p) => {
                    priced += 1;
                    assert_eq!(cells[3], money(p.input), "{row}");
                    let cached = p.cached_input.map(money).unwrap_or("unknown".into());
                    assert_eq!(cells[4], cached, "{row}");
                    assert_eq!(cells[5], money(p.output), "{row}");
                    assert!(cells[7].starts_with(p.date), "{row}");
                    let url = p.source.split_whitespace().next().unwrap_or("");
                    assert!(cells[8].contains(url), "{row}");
                }
                None => assert_eq!(&cells[3..6], ["unknown"; 3], "{row}"),
            }
        }
    }
    assert!(
        doc.contains(&format!("**{priced} models carry a price**")),
        "docs/PROVIDERS.md must say how many models carry a price ({priced})"
    );
}

#[test]
fn docs_reasoning_table_is_in_step_with_the_catalogue() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/PROVIDERS.md"))
        .expect("docs/PROVIDERS.md");
    for e in all() {
        for m in e.models {
            let Some(r) = m.reasoning else { continue };
            let row = doc
                .lines()
                .find(|l| {
                    l.starts_with(&format!("| `{}` | `{}` | ", e.id, m.id)) && l.contains(r.date)
                })
                .unwrap_or_else(|| {
                    panic!(
                        "docs/PROVIDERS.md has no reasoning row for {}/{}",
                        e.id, m.id
                    )
                });
            let url = r.source.split_whitespace().next().unwrap_or("");
            assert!(row.contains(url), "{row}");
        }
    }
}
