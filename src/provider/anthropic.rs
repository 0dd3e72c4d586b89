//! Anthropic Messages API: request body and SSE accumulation.
//!
//! Stream events: `message_start` (input usage), `content_block_start`
//! (`text` or `tool_use` with id and name), `content_block_delta`
//! (`text_delta` or `input_json_delta` fragments), `content_block_stop`,
//! `message_delta` (stop reason, output usage), `message_stop`; `error`.
//!
//! Usage: `input_tokens` excludes cache reads and writes, which come as
//! `cache_read_input_tokens` and `cache_creation_input_tokens`; all three
//! are added into [`Usage::input_tokens`]. Thinking tokens are part of
//! `output_tokens` and not reported apart (`reasoning_tokens: None`).

use super::{ChatRequest, Completion, Message, ToolCall, Usage};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Output token ceiling per response (the API requires one).
const MAX_TOKENS: u64 = 8192;

/// The JSON body for one streamed request. Consecutive tool results are
/// merged into one `user` message, as the API requires.
pub fn body(model: &str, req: ChatRequest<'_>) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for m in req.messages {
        match m {
            Message::User { text } => {
                messages.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}))
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    let input: Value =
                        serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                    content.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                messages.push(json!({"role": "assistant", "content": content}));
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                let block = json!({"type": "tool_result", "tool_use_id": call_id,
                                   "content": content, "is_error": is_error});
                let merge = messages.last().is_some_and(|last| {
                    last["role"] == "user"
                        && last["content"][0]["type"].as_str() == Some("tool_result")
                });
                match messages.last_mut() {
                    Some(last) if merge => {
                        if let Some(arr) = last["content"].as_array_mut() {
                            arr.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": MAX_TOKENS,
        "system": req.system,
        "messages": messages,
        "stream": true,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

/// Folds stream events into a [`Completion`].
#[derive(Default)]
pub struct Accumulator {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    stopped: bool,
}

impl Accumulator {
    fn input(&mut self, u: &Value) {
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let (fresh, read, write) = (
            n("input_tokens"),
            n("cache_read_input_tokens"),
            n("cache_creation_input_tokens"),
        );
        self.usage.input_tokens = fresh + read + write;
        self.usage.cached_input_tokens = read;
        self.usage.cache_write_tokens = write;
    }

    /// Feed one SSE event. `Ok(true)` at `message_stop`.
    pub fn feed(
        &mut self,
        event: &str,
        data: &str,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<bool, String> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| format!("unparseable stream event: {e}"))?;
        let kind = v["type"].as_str().unwrap_or(event);
        match kind {
            "message_start" => {
                let u = &v["message"]["usage"];
                self.input(u);
                self.usage.output_tokens = u["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let idx = v["index"].as_u64().unwrap_or(0);
                let b = &v["content_block"];
                let block = if b["type"] == "tool_use" {
                    Block::Tool {
                        id: b["id"].as_str().unwrap_or_default().to_string(),
                        name: b["name"].as_str().unwrap_or_default().to_string(),
                        json: String::new(),
                    }
                } else {
                    Block::Text
                };
                self.blocks.insert(idx, block);
            }
            "content_block_delta" => {
                let idx = v["index"].as_u64().unwrap_or(0);
                let d = &v["delta"];
                match (d["type"].as_str(), self.blocks.get_mut(&idx)) {
                    (Some("text_delta"), _) => {
                        let t = d["text"].as_str().unwrap_or_default();
                        self.text.push_str(t);
                        on_text(t);
                    }
                    (Some("input_json_delta"), Some(Block::Tool { json, .. })) => {
                        json.push_str(d["partial_json"].as_str().unwrap_or_default());
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(r.to_string());
                }
                let u = &v["usage"];
                if let Some(o) = u["output_tokens"].as_u64() {
                    self.usage.output_tokens = o;
                }
                // Newer streams repeat the cumulative input counts here.
                if u["input_tokens"].is_u64() {
                    self.input(u);
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => return Err(format!("error in stream: {}", v["error"])),
            _ => {}
        }
        Ok(false)
    }

    /// The completion, or `None` if `message_stop` never came.
    pub fn finish(self) -> Option<Completion> {
        if !self.stopped {
            return None;
        }
        let tool_calls = self
            .blocks
            .into_values()
            .filter_map(|b| match b {
                Block::Tool { id, name, json } => Some(ToolCall {
                    id,
                    name,
                    // An empty input streams no fragments: that is `{}`.
                    arguments: if json.is_empty() { "{}".into() } else { json },
                }),
                Block::Text => None,
            })
            .collect();
        Some(Completion {
            text: self.text,
            tool_calls,
            reasoning: Vec::new(),
            usage: Some(self.usage),
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_text_and_tool_use() {
        let mut a = Accumulator::default();
        let mut seen = String::new();
        let mut on = |t: &str| seen.push_str(t);
        let evs = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":12,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu1","name":"read_file","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a\"}"}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}"#,
            ),
        ];
        for (e, d) in evs {
            assert!(!a.feed(e, d, &mut on).unwrap());
        }
        assert!(a
            .feed("message_stop", r#"{"type":"message_stop"}"#, &mut on)
            .unwrap());
        let c = a.finish().unwrap();
        assert_eq!(seen, "Hi");
        assert_eq!(c.tool_calls[0].id, "tu1");
        assert_eq!(c.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(c.usage.unwrap().output_tokens, 7);
        assert_eq!(c.usage.unwrap().input_tokens, 12);
        assert_eq!(c.usage.unwrap().reasoning_tokens, None);
        assert_eq!(c.stop_reason.as_deref(), Some("tool_use"));
    }

    #[test]
    fn consecutive_tool_results_share_one_user_message() {
        let msgs = vec![
            Message::ToolResult {
                call_id: "a".into(),
                content: "1".into(),
                is_error: false,
            },
            Message::ToolResult {
                call_id: "b".into(),
                content: "2".into(),
                is_error: true,
            },
        ];
        let b = body(
            "m",
            ChatRequest {
                system: "s",
                messages: &msgs,
                tools: &[],
            },
        );
        assert_eq!(b["messages"].as_array().unwrap().len(), 1);
        assert_eq!(b["messages"][0]["content"][1]["is_error"], true);
    }

    #[test]
    fn cache_reads_and_writes_are_added_into_input() {
        let mut a = Accumulator::default();
        let start = r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":90,"cache_creation_input_tokens":3,"output_tokens":1}}}"#;
        a.feed("message_start", start, &mut |_| {}).unwrap();
        a.feed("message_stop", r#"{"type":"message_stop"}"#, &mut |_| {})
            .unwrap();
        let u = a.finish().unwrap().usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.cached_input_tokens, u.cache_write_tokens),
            (98, 90, 3)
        );
    }

    #[test]
    fn error_event_is_an_error() {
        let mut a = Accumulator::default();
        assert!(a
            .feed(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
                &mut |_| {}
            )
            .is_err());
    }
}
