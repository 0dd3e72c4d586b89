//! A model's reasoning as the provider returned it, kept so it can be sent
//! back unchanged where the provider requires it.
//!
//! - DeepSeek's thinking mode (Chat Completions) streams the chain of
//!   thought as `delta.reasoning_content`. Its guide
//!   (<https://api-docs.deepseek.com/guides/thinking_mode>, "Input and
//!   Output Parameters" and "Tool Calls", read 2026-12-02): between two
//!   `user` messages, if the model made tool calls, the `reasoning_content`
//!   of those assistant messages must be passed back in every later request
//!   (the API answers 400 otherwise); if it made none, the field is ignored
//!   and need not be sent.
//! - Anthropic's extended thinking streams `thinking` blocks (with a
//!   `signature`) and `redacted_thinking` blocks (opaque `data`); inside a
//!   tool-use loop the last assistant turn's blocks must be sent back
//!   unmodified (<https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking>,
//!   "Preserving thinking blocks").
//!
//! The text is never shown in receipts; the session file keeps it (it is
//! what went to the model) so a later turn can send it back.

use serde::{Deserialize, Serialize};

/// One piece of reasoning, in the form its wire format needs it back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReasoningPart {
    /// Chat Completions `reasoning_content` (DeepSeek thinking mode), the
    /// whole text of one response (possibly empty: the field was present).
    Content { text: String },
    /// Anthropic `thinking` block: the text and its signature, verbatim.
    Thinking { thinking: String, signature: String },
    /// Anthropic `redacted_thinking` block: opaque, verbatim.
    RedactedThinking { data: String },
    /// An OpenAI Responses `reasoning` item with `store: false`: its id,
    /// summary texts and encrypted content, sent back as they came.
    Encrypted {
        id: String,
        encrypted_content: String,
        summary: Vec<String>,
    },
}

/// The `reasoning_content` among `parts`, if the response had one.
pub fn content_text(parts: &[ReasoningPart]) -> Option<&str> {
    parts.iter().find_map(|p| match p {
        ReasoningPart::Content { text } => Some(text.as_str()),
        _ => None,
    })
}

/// Characters of reasoning text (for the footer's context estimate).
pub fn chars(parts: &[ReasoningPart]) -> usize {
    parts
        .iter()
        .map(|p| match p {
            ReasoningPart::Content { text } => text.len(),
            ReasoningPart::Thinking {
                thinking,
                signature,
            } => thinking.len() + signature.len(),
            ReasoningPart::RedactedThinking { data } => data.len(),
            ReasoningPart::Encrypted {
                encrypted_content,
                summary,
                ..
            } => encrypted_content.len() + summary.iter().map(String::len).sum::<usize>(),
        })
        .sum()
}

/// The reasoning a person may read: DeepSeek's `reasoning_content`,
/// Anthropic's thinking text, the Responses summaries; a redacted block
/// or encrypted content without a summary is only said to be there.
pub fn readable(parts: &[ReasoningPart]) -> String {
    parts
        .iter()
        .map(|p| match p {
            ReasoningPart::Content { text } => text.clone(),
            ReasoningPart::Thinking { thinking, .. } => thinking.clone(),
            ReasoningPart::RedactedThinking { .. } => "[redacted thinking]".into(),
            ReasoningPart::Encrypted { summary, .. } if summary.is_empty() => {
                "[encrypted reasoning, no summary]".into()
            }
            ReasoningPart::Encrypted { summary, .. } => summary.join("\n"),
        })
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}
