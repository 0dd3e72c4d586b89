//! OpenAI-compatible Chat Completions: request body and SSE accumulation.
//!
//! Stream shape: `data: {"choices":[{"delta":{"content":…,"tool_calls":[{"index":0,
//! "id":…,"function":{"name":…,"arguments":"<fragment>"}}]},"finish_reason":…}]}`,
//! an optional usage chunk (`stream_options.include_usage`), then `data: [DONE]`.
//!
//! Usage: `prompt_tokens` (all input), `completion_tokens` (all output),
//! `prompt_tokens_details.cached_tokens` (OpenAI; DeepSeek reports
//! `prompt_cache_hit_tokens`) and `completion_tokens_details.reasoning_tokens`.
//!
//! Reasoning: DeepSeek's thinking mode streams `delta.reasoning_content`
//! beside `delta.content`; it is kept and sent back on the assistant
//! messages of every user turn that made tool calls, and left out of the
//! others, where DeepSeek ignores it ([`super::reasoning`]).

use super::effort::WireReasoning;
use super::reasoning::{self, ReasoningPart};
use super::{ChatRequest, Completion, Message, ToolCall, Usage};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The JSON body for one streamed request. `stream_usage` asks for the
/// final usage chunk; a few compatibility APIs reject the field.
pub fn body(
    model: &str,
    req: ChatRequest<'_>,
    stream_usage: bool,
    reasoning: WireReasoning,
) -> Value {
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    let keep = keeps_reasoning(req.messages);
    for (i, m) in req.messages.iter().enumerate() {
        messages.push(match m {
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let mut v = json!({"role": "assistant", "content": text});
                if let Some(r) = reasoning::content_text(reasoning).filter(|_| keep[i]) {
                    v["reasoning_content"] = json!(r);
                }
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                }
                v
            }
            Message::ToolResult {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
    });
    if stream_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    match reasoning {
        WireReasoning::Effort(e) => body["reasoning_effort"] = json!(e),
        // DeepSeek's guide: `{"thinking": {"type": "enabled"|"disabled"}}`
        // beside `reasoning_effort` (the OpenAI SDK's `extra_body`).
        WireReasoning::DeepSeek { enabled, effort } => {
            body["thinking"] = json!({"type": if enabled { "enabled" } else { "disabled" }});
            if let Some(e) = effort {
                body["reasoning_effort"] = json!(e);
            }
        }
        // Anthropic's controls have no Chat Completions form.
        WireReasoning::Default
        | WireReasoning::AnthropicBudget(_)
        | WireReasoning::AnthropicAdaptive(_) => {}
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
    }
    body
}

/// For each message: whether its `reasoning_content` goes back. DeepSeek's
/// rule (thinking-mode guide, "Input and Output Parameters"): between two
/// `user` messages, if the model made tool calls, every assistant
/// message's `reasoning_content` there must be passed back in all later
/// requests; where it made none, the field is ignored, so it is left out.
fn keeps_reasoning(messages: &[Message]) -> Vec<bool> {
    let mut keep = vec![false; messages.len()];
    let mut start = 0;
    for end in 0..=messages.len() {
        let boundary = end == messages.len() || matches!(messages[end], Message::User { .. });
        if !boundary {
            continue;
        }
        let span = &messages[start..end];
        let called = span
            .iter()
            .any(|m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()));
        if called {
            for k in keep.iter_mut().take(end).skip(start) {
                *k = true;
            }
        }
        start = end + 1;
    }
    keep
}

/// One `usage` object of the Chat Completions format.
pub fn parse_usage(u: &Value) -> Usage {
    let cached = u["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .or_else(|| u["prompt_cache_hit_tokens"].as_u64())
        .unwrap_or(0);
    Usage {
        input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: cached,
        cache_write_tokens: 0,
        reasoning_tokens: u["completion_tokens_details"]["reasoning_tokens"].as_u64(),
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Folds stream chunks into a [`Completion`].
#[derive(Default)]
pub struct Accumulator {
    text: String,
    /// `reasoning_content` deltas; `None` when the stream carried none.
    reasoning: Option<String>,
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    finish: Option<String>,
    done: bool,
}

impl Accumulator {
    /// Feed one SSE `data` payload. `Ok(true)` at `[DONE]`.
    pub fn feed(&mut self, data: &str, on_text: &mut dyn FnMut(&str)) -> Result<bool, String> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| format!("unparseable stream chunk: {e}"))?;
        if let Some(err) = v.get("error") {
            return Err(format!("error in stream: {err}"));
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(parse_usage(u));
        }
        for choice in v["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            if let Some(r) = delta["reasoning_content"].as_str() {
                self.reasoning.get_or_insert_with(String::new).push_str(r);
            }
            if let Some(t) = delta["content"].as_str() {
                if !t.is_empty() {
                    self.text.push_str(t);
                    on_text(t);
                }
            }
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let idx = tc["index"].as_u64().unwrap_or(self.calls.len() as u64);
                let p = self.calls.entry(idx).or_default();
                if let Some(id) = tc["id"].as_str() {
                    p.id = id.to_string();
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    p.name.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    p.arguments.push_str(a);
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                self.finish = Some(f.to_string());
            }
        }
        Ok(false)
    }

    /// The completion, or `None` if the stream never finished.
    pub fn finish(self) -> Option<Completion> {
        if !self.done && self.finish.is_none() {
            return None;
        }
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(i, p)| ToolCall {
                id: if p.id.is_empty() {
                    format!("call_{i}")
                } else {
                    p.id
                },
                name: p.name,
                arguments: p.arguments,
            })
            .collect();
        Some(Completion {
            text: self.text,
            tool_calls,
            reasoning: self
                .reasoning
                .map(|text| vec![ReasoningPart::Content { text }])
                .unwrap_or_default(),
            usage: self.usage,
            stop_reason: self.finish,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::provider::ToolSpec;

    #[test]
    fn accumulates_text_and_fragmented_tool_calls() {
        let mut a = Accumulator::default();
        let mut seen = String::new();
        let mut on = |t: &str| seen.push_str(t);
        for d in [
            r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3}}"#,
        ] {
            assert!(!a.feed(d, &mut on).unwrap());
        }
        assert!(a.feed("[DONE]", &mut on).unwrap());
        let c = a.finish().unwrap();
        assert_eq!(seen, "Hello");
        assert_eq!(c.text, "Hello");
        assert_eq!(c.tool_calls[0].name, "read_file");
        assert_eq!(c.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(c.usage.unwrap().input_tokens, 10);
    }

    #[test]
    fn usage_reads_cached_and_reasoning_tokens() {
        let u = parse_usage(&json!({"prompt_tokens": 100, "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 60},
            "completion_tokens_details": {"reasoning_tokens": 12}}));
        assert_eq!(
            (
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                u.reasoning_tokens
            ),
            (100, 60, 30, Some(12))
        );
        // DeepSeek's spelling of the cache hit.
        let u = parse_usage(&json!({"prompt_tokens": 10, "completion_tokens": 1,
            "prompt_cache_hit_tokens": 7, "prompt_cache_miss_tokens": 3}));
        assert_eq!((u.cached_input_tokens, u.reasoning_tokens), (7, None));
    }

    #[test]
    fn unfinished_stream_is_none() {
        let mut a = Accumulator::default();
        a.feed(r#"{"choices":[{"delta":{"content":"x"}}]}"#, &mut |_| {})
            .unwrap();
        assert!(a.finish().is_none());
    }

    #[test]
    fn body_carries_tools_and_tool_results() {
        let msgs = vec![
            Message::User { text: "hi".into() },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                }],
                reasoning: Vec::new(),
            },
            Message::ToolResult {
                call_id: "c1".into(),
                content: "out".into(),
                is_error: false,
            },
        ];
        let tools = vec![ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        }];
        let b = body(
            "m",
            ChatRequest {
                system: "sys",
                messages: &msgs,
                tools: &tools,
            },
            true,
            WireReasoning::Default,
        );
        assert!(b.get("reasoning_effort").is_none() && b.get("thinking").is_none());
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][2]["tool_calls"][0]["id"], "c1");
        assert_eq!(b["messages"][3]["tool_call_id"], "c1");
        assert_eq!(b["tools"][0]["function"]["name"], "t");
    }

    fn assistant(text: &str, calls: &[&str], reasoning: &str) -> Message {
        Message::Assistant {
            text: text.into(),
            tool_calls: calls
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            reasoning: vec![ReasoningPart::Content {
                text: reasoning.into(),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            call_id: id.into(),
            content: "out".into(),
            is_error: false,
        }
    }

    #[test]
    fn reasoning_content_is_collected_from_the_stream() {
        // DeepSeek's thinking-mode stream: `reasoning_content` deltas
        // first (content null), then `content` (reasoning_content null).
        let mut a = Accumulator::default();
        for d in [
            r#"{"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":null,"reasoning_content":"Think "}}]}"#,
            r#"{"choices":[{"delta":{"content":null,"reasoning_content":"\"hard\"\n"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok","reasoning_content":null}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ] {
            a.feed(d, &mut |_| {}).unwrap();
        }
        let c = a.finish().unwrap();
        assert_eq!(c.text, "ok");
        assert_eq!(
            c.reasoning,
            vec![ReasoningPart::Content {
                text: "Think \"hard\"\n".into()
            }]
        );
        // A stream without the field has no reasoning.
        let mut a = Accumulator::default();
        a.feed(
            r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#,
            &mut |_| {},
        )
        .unwrap();
        assert!(a.finish().unwrap().reasoning.is_empty());
    }

    #[test]
    fn reasoning_content_goes_back_only_in_user_turns_with_tool_calls() {
        let msgs = vec![
            Message::User { text: "q1".into() },
            assistant("", &["c1"], "r-call"),
            result("c1"),
            assistant("a1", &[], "r-final"),
            Message::User { text: "q2".into() },
            assistant("a2", &[], "r-plain"),
            Message::User { text: "q3".into() },
            assistant("", &["c2"], ""),
            result("c2"),
        ];
        let b = body(
            "m",
            ChatRequest {
                system: "s",
                messages: &msgs,
                tools: &[],
            },
            false,
            WireReasoning::DeepSeek {
                enabled: true,
                effort: Some("max"),
            },
        );
        assert_eq!(b["thinking"], json!({"type": "enabled"}));
        assert_eq!(b["reasoning_effort"], "max");
        let m = b["messages"].as_array().unwrap();
        // [0] is the system message.
        assert_eq!(m[2]["reasoning_content"], "r-call");
        assert_eq!(m[4]["reasoning_content"], "r-final");
        // No tool call between q2 and q3: DeepSeek ignores it, not sent.
        assert!(m[6].get("reasoning_content").is_none(), "{}", m[6]);
        // An empty reasoning of a tool-call turn is still sent (the field
        // must be present).
        assert_eq!(m[8]["reasoning_content"], "");
    }
}
