//! Local runtime discovery: which models a local server offers.
//!
//! * Ollama: `GET {root}/api/tags` → `{"models":[{"name", "details":
//!   {"family", "families"}}]}` (shape from Ollama's `docs/api.md`).
//!   Embedding models cannot chat and are skipped: their names carry
//!   `embed` or their family is a BERT one (`bert`, `nomic-bert`).
//! * vLLM, SGLang, LM Studio, llama.cpp server, LocalAI, Jan: the OpenAI
//!   `GET {base}/models` → `{"object":"list","data":[{"id"}]}`; ids with
//!   `embed` are skipped likewise.
//!
//! Used when no provider is configured (the Ollama fallback) and when a
//! local runtime is chosen without `--model`.

use serde_json::Value;
use std::time::Duration;

/// The native API root of a default local Ollama.
pub const OLLAMA_DEFAULT_ROOT: &str = "http://localhost:11434";

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(500))
        .timeout(Duration::from_secs(3))
        .build()
        .map_err(|e| format!("http client: {e}"))
}

async fn get_json(url: &str) -> Result<Value, String> {
    let resp = client()?
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", resp.status().as_u16()));
    }
    resp.json()
        .await
        .map_err(|e| format!("GET {url}: not JSON: {e}"))
}

/// The Ollama root for an OpenAI-style base URL (`…/v1` stripped).
pub fn ollama_root(base_url: &str) -> String {
    let b = base_url.trim_end_matches('/');
    b.strip_suffix("/v1").unwrap_or(b).to_string()
}

/// The chat models an Ollama at `root` serves, in its order.
pub async fn ollama_chat_models(root: &str) -> Result<Vec<String>, String> {
    let v = get_json(&format!("{}/api/tags", root.trim_end_matches('/'))).await?;
    chat_models_from_tags(&v).ok_or_else(|| format!("{root}/api/tags: no `models` array"))
}

fn is_embedding(name: &str, families: &[&str]) -> bool {
    name.to_ascii_lowercase().contains("embed")
        || families
            .iter()
            .any(|f| f.to_ascii_lowercase().contains("bert"))
}

/// Chat models from an `/api/tags` answer (`None`: not that shape).
pub fn chat_models_from_tags(tags: &Value) -> Option<Vec<String>> {
    Some(
        tags["models"]
            .as_array()?
            .iter()
            .filter_map(|m| {
                let name = m["name"].as_str().or_else(|| m["model"].as_str())?;
                let d = &m["details"];
                let mut fams: Vec<&str> = d["families"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                fams.extend(d["family"].as_str());
                (!is_embedding(name, &fams)).then(|| name.to_string())
            })
            .collect(),
    )
}

/// The chat model ids an OpenAI-compatible local server lists.
pub async fn openai_models(base_url: &str) -> Result<Vec<String>, String> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let v = get_json(&url).await?;
    models_from_list(&v).ok_or_else(|| format!("{url}: no `data` array"))
}

/// Ids from a `/v1/models` answer (`None`: not that shape).
pub fn models_from_list(v: &Value) -> Option<Vec<String>> {
    Some(
        v["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str())
            .filter(|id| !is_embedding(id, &[]))
            .map(str::to_string)
            .collect(),
    )
}

/// The models a local runtime `id` at `base_url` offers: Ollama's native
/// list (chat models only), else `/v1/models`.
pub async fn local_models(id: &str, base_url: &str) -> Result<Vec<String>, String> {
    if id == "ollama" {
        ollama_chat_models(&ollama_root(base_url)).await
    } else {
        openai_models(base_url).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tags_skip_embedding_models_by_name_and_family() {
        let v = json!({"models": [
            {"name": "nomic-embed-text:latest", "details": {"family": "nomic-bert", "families": ["nomic-bert"]}},
            {"name": "mxbai:latest", "details": {"family": "bert", "families": ["bert"]}},
            {"name": "qwen2.5-coder:7b", "details": {"family": "qwen2", "families": ["qwen2"]}},
            {"name": "llama3.1:8b", "details": {"family": "llama"}},
            // Ollama's own docs/api.md example: `families` may be null;
            // `all-minilm` is an embedding model without "embed" in its name.
            {"name": "all-minilm:latest", "details": {"family": "bert", "families": null}},
            {"name": "codellama:13b", "details": {"family": "llama", "families": null}}
        ]});
        assert_eq!(
            chat_models_from_tags(&v).unwrap(),
            vec!["qwen2.5-coder:7b", "llama3.1:8b", "codellama:13b"]
        );
        assert_eq!(chat_models_from_tags(&json!({"models": []})), Some(vec![]));
        assert_eq!(chat_models_from_tags(&json!({"x": 1})), None);
    }

    #[test]
    fn v1_models_list() {
        let v = json!({"object": "list", "data": [
            {"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model"},
            {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model"}]});
        assert_eq!(
            models_from_list(&v).unwrap(),
            vec!["Qwen/Qwen2.5-7B-Instruct"]
        );
    }

    #[test]
    fn root_strips_v1() {
        assert_eq!(ollama_root("http://127.0.0.1:9/v1/"), "http://127.0.0.1:9");
        assert_eq!(ollama_root("http://h:1"), "http://h:1");
    }
}
