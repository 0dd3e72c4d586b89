//! What the two streams of indexed parts have in common — Anthropic
//! Messages' content blocks (`content_block_start` / `_delta`, by `index`)
//! and OpenAI Responses' output items (`response.output_item.*`, by
//! `output_index`): each event's JSON, the parts kept by index while they
//! stream in, text shown as it arrives, and the completion assembled from
//! the parts in index order (calls with `{}` for arguments that never
//! streamed, reasoning verbatim). Each wire's accumulator keeps only its
//! own event names and usage.

use super::{Completion, ReasoningPart, ToolCall, Usage};
use serde_json::Value;
use std::collections::BTreeMap;

/// One part of a response as it streams in.
pub(super) enum Part {
    Text,
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    Reasoning(ReasoningPart),
    Other,
}

/// The parts and the text of one response so far.
#[derive(Default)]
pub(super) struct Parts {
    text: String,
    parts: BTreeMap<u64, Part>,
}

/// The JSON of one named SSE event; `None` for an empty `data`.
pub(super) fn event_json(data: &str) -> Result<Option<Value>, String> {
    if data.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(data)
        .map(Some)
        .map_err(|e| format!("unparseable stream event: {e}"))
}

impl Parts {
    pub(super) fn insert(&mut self, index: u64, part: Part) {
        self.parts.insert(index, part);
    }

    pub(super) fn get_mut(&mut self, index: u64) -> Option<&mut Part> {
        self.parts.get_mut(&index)
    }

    /// Answer text: kept, and shown as it arrives.
    pub(super) fn text_delta(&mut self, t: &str, on_text: &mut dyn FnMut(&str)) {
        self.text.push_str(t);
        on_text(t);
    }

    /// A piece of the arguments of the call at `index`.
    pub(super) fn arguments_delta(&mut self, index: u64, piece: &str) {
        if let Some(Part::Call { arguments, .. }) = self.parts.get_mut(&index) {
            arguments.push_str(piece);
        }
    }

    /// The completion: text, calls and reasoning in index order.
    pub(super) fn completion(
        self,
        usage: Option<Usage>,
        stop_reason: Option<String>,
    ) -> Completion {
        let mut tool_calls = Vec::new();
        let mut reasoning = Vec::new();
        for (i, p) in self.parts {
            match p {
                Part::Call {
                    id,
                    name,
                    arguments,
                } => tool_calls.push(ToolCall {
                    id: if id.is_empty() {
                        format!("call_{i}")
                    } else {
                        id
                    },
                    name,
                    // An empty input streams no fragments: that is `{}`.
                    arguments: if arguments.is_empty() {
                        "{}".into()
                    } else {
                        arguments
                    },
                }),
                Part::Reasoning(r) => reasoning.push(r),
                Part::Text | Part::Other => {}
            }
        }
        Completion {
            text: self.text,
            tool_calls,
            reasoning,
            usage,
            stop_reason,
        }
    }
}
