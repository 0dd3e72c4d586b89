//! Recognising a provider's "the prompt is longer than the context window"
//! answer, so the loop can compact and retry instead of failing the turn.
//!
//! The shapes, as the APIs send them (all HTTP 400):
//!
//! - OpenAI Chat Completions and the Responses API: `error.code =
//!   "context_length_exceeded"`, e.g. `{"error": {"message": "This model's
//!   maximum context length is 8192 tokens. However, your messages resulted
//!   in 8227 tokens. Please reduce the length of the messages.", "type":
//!   "invalid_request_error", "param": "messages", "code":
//!   "context_length_exceeded"}}` (OpenAI's error-codes guide; as reported
//!   verbatim in crewAIInc/crewAI-examples#121 and NextChat#625).
//! - DeepSeek (OpenAI-compatible, but its `code` is the generic
//!   `invalid_request_error`): `"This model's maximum context length is
//!   131072 tokens. However, you requested 131134 tokens (122942 in the
//!   messages, 8192 in the completion). Please reduce the length of the
//!   messages or completion."` (evalstate/fast-agent#621,
//!   bytedance/deer-flow#66).
//! - Anthropic Messages: `{"type": "error", "error": {"type":
//!   "invalid_request_error", "message": "prompt is too long: 208310 tokens >
//!   200000 maximum"}}` (Anthropic's errors page lists 400
//!   `invalid_request_error`; the message as in anthropics/claude-code#12186).
//!
//! The window the error names (OpenAI/DeepSeek "maximum context length is
//! N", Anthropic "> N maximum") is returned when present.

use serde_json::Value;

/// A context-length refusal: the window the provider named, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextLimit {
    pub window: Option<u64>,
}

/// Whether an HTTP error answer (`status`, `body`) says the prompt was
/// longer than the model's context window.
pub fn recognise(status: u16, body: &str) -> Option<ContextLimit> {
    if status != 400 && status != 413 {
        return None;
    }
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let err = v.get("error").unwrap_or(&Value::Null);
    let code = err.get("code").and_then(Value::as_str).unwrap_or("");
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or(body)
        .to_string();
    let lower = message.to_ascii_lowercase();
    let hit = code == "context_length_exceeded"
        || lower.contains("maximum context length")
        || lower.contains("prompt is too long")
        || lower.contains("exceeds the context window");
    if !hit {
        return None;
    }
    Some(ContextLimit {
        window: number_after(&lower, "maximum context length is ")
            .or_else(|| anthropic_maximum(&lower)),
    })
}

/// The integer right after `marker` in `s`.
fn number_after(s: &str, marker: &str) -> Option<u64> {
    let rest = &s[s.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Anthropic's `… tokens > N maximum`.
fn anthropic_maximum(s: &str) -> Option<u64> {
    let before = &s[..s.find(" maximum")?];
    let n = before.rsplit(['>', ' ']).find(|w| !w.is_empty())?;
    n.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn openai_chat_completions() {
        let b = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(recognise(400, b).unwrap().window, Some(8192));
    }

    #[test]
    fn openai_responses_without_a_number() {
        let b = r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#;
        assert_eq!(recognise(400, b), Some(ContextLimit { window: None }));
    }

    #[test]
    fn deepseek_generic_code() {
        let b = r#"{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;
        assert_eq!(recognise(400, b).unwrap().window, Some(131072));
    }

    #[test]
    fn anthropic_prompt_too_long() {
        let b = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        assert_eq!(recognise(400, b).unwrap().window, Some(200000));
    }

    #[test]
    fn other_errors_are_not_context_errors() {
        let b = r#"{"error":{"message":"Invalid max_tokens value, the valid range of max_tokens is [1, 8192]","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;
        assert_eq!(recognise(400, b), None);
        assert_eq!(recognise(500, "prompt is too long"), None);
    }
}
