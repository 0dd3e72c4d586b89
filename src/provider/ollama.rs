//! The no-configuration fallback: a local Ollama serving a chat model.
//!
//! Used only when no provider was chosen (flag or config) and the default
//! provider has no key. `GET /api/tags` lists the pulled models; embedding
//! models are skipped because they cannot chat.

use std::time::Duration;

/// The native API root of a default local Ollama.
pub const DEFAULT_ROOT: &str = "http://localhost:11434";

/// The first chat-capable model a local Ollama at `root` serves, if any.
pub async fn first_chat_model(root: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(300))
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let v: serde_json::Value = client
        .get(format!("{}/api/tags", root.trim_end_matches('/')))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    pick_chat_model(&v)
}

/// Pick a chat model from an `/api/tags` answer.
pub fn pick_chat_model(tags: &serde_json::Value) -> Option<String> {
    tags["models"]
        .as_array()?
        .iter()
        .filter_map(|m| m["name"].as_str())
        .find(|n| !n.contains("embed"))
        .map(str::to_string)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn skips_embedding_models() {
        let v =
            serde_json::json!({"models": [{"name": "nomic-embed-text"}, {"name": "qwen2.5:7b"}]});
        assert_eq!(pick_chat_model(&v).as_deref(), Some("qwen2.5:7b"));
        assert_eq!(pick_chat_model(&serde_json::json!({"models": []})), None);
    }
}
