//! Anthropic Messages API: request body and SSE accumulation.
//!
//! Stream events: `message_start` (input usage), `content_block_start`
//! (`text` or `tool_use` with id and name), `content_block_delta`
//! (`text_delta` or `input_json_delta` fragments), `content_block_stop`,
//! `message_delta` (stop reason, output usage), `message_stop`; `error`.
//!
//! Thinking (extended or adaptive): `content_block_start` of a `thinking`
//! block, `thinking_delta` and `signature_delta` deltas, or a whole
//! `redacted_thinking` block with its `data`. The blocks are kept in order
//! and sent back verbatim, before the text and `tool_use` blocks of their
//! assistant message: inside a tool-use loop the API refuses a request
//! whose last assistant turn lost them
//! (<https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking>,
//! "Preserving thinking blocks"; streaming events under "Streaming
//! thinking").
//!
//! Prompt caching: every request carries `cache_control: {"type":
//! "ephemeral"}` breakpoints ([`cache_breakpoints`]) on the stable prefix
//! (the last tool, the system prompt with the project instructions) and
//! rolling ones on the latest turn, at most the API's four
//! (<https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>).
//! A breakpoint changes what is billed, never what the model sees.
//!
//! Usage: `input_tokens` excludes cache reads and writes, which come as
//! `cache_read_input_tokens` and `cache_creation_input_tokens`; all three
//! are added into [`Usage::input_tokens`]. Thinking tokens are part of
//! `output_tokens` and not reported apart (`reasoning_tokens: None`).

use super::effort::WireReasoning;
use super::stream_parts::{event_json, Part, Parts};
use super::{ChatRequest, Completion, Message, ReasoningPart, Usage};
use serde_json::{json, Value};

/// Output token ceiling per response (the API requires one).
const MAX_TOKENS: u64 = 8192;

/// The JSON body for one streamed request. Consecutive tool results are
/// merged into one `user` message, as the API requires.
pub fn body(model: &str, req: ChatRequest<'_>, reasoning: WireReasoning) -> Value {
    let mut body = uncached_body(model, req, reasoning);
    cache_breakpoints(&mut body);
    body
}

/// [`body`] without the caching breakpoints: what the model sees.
fn uncached_body(model: &str, req: ChatRequest<'_>, reasoning: WireReasoning) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for m in req.messages {
        match m {
            Message::User { text } => {
                messages.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}))
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let mut content: Vec<Value> = reasoning.iter().filter_map(thinking_block).collect();
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
    match reasoning {
        // The budget counts against `max_tokens` and must stay below it:
        // the answer keeps its own MAX_TOKENS on top.
        WireReasoning::AnthropicBudget(Some(budget)) => {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            body["max_tokens"] = json!(MAX_TOKENS + u64::from(budget));
        }
        WireReasoning::AnthropicAdaptive(Some(effort)) => {
            body["output_config"] = json!({ "effort": effort });
        }
        WireReasoning::AnthropicAdaptive(None) => {
            body["thinking"] = json!({"type": "between_tools"});
        }
        WireReasoning::Default
        | WireReasoning::AnthropicBudget(None)
        | WireReasoning::Effort(_)
        | WireReasoning::DeepSeek { .. } => {}
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

/// The API's limit on `cache_control` blocks per request.
pub const MAX_BREAKPOINTS: usize = 4;

/// Sets the prompt-caching breakpoints, never more than
/// [`MAX_BREAKPOINTS`]. The cache is a prefix cache in the order tools,
/// system, messages; a request reads the longest prefix an earlier request
/// wrote at a breakpoint (the API looks back about 20 blocks from each
/// breakpoint), and writes the prefix up to its breakpoints:
///
/// 1. the last tool: the tool list (changes only with MCP servers);
/// 2. the system prompt (with the project instructions): stable for the
///    run;
/// 3. the last block of the last message: the whole conversation so far,
///    read back by the next request of the tool loop;
/// 4. the last block of the message two back (the previous request's
///    rolling breakpoint): its write is read now even when the new turn
///    added more than the look-back's 20 blocks.
///
/// The system prompt becomes one text block (same text): the form that
/// takes a `cache_control`. Empty text blocks cannot carry one and are
/// skipped.
fn cache_breakpoints(body: &mut Value) {
    let mark = json!({"type": "ephemeral"});
    let mut n = 0;
    if let Some(last) = body["tools"].as_array_mut().and_then(|t| t.last_mut()) {
        last["cache_control"] = mark.clone();
        n += 1;
    }
    if let Some(system) = body["system"].as_str().filter(|s| !s.is_empty()) {
        body["system"] = json!([{"type": "text", "text": system, "cache_control": mark.clone()}]);
        n += 1;
    }
    let Some(messages) = body["messages"].as_array_mut() else {
        return;
    };
    let len = messages.len();
    for i in [len.checked_sub(1), len.checked_sub(3)]
        .into_iter()
        .flatten()
    {
        if n >= MAX_BREAKPOINTS {
            break;
        }
        let block = messages[i]["content"]
            .as_array_mut()
            .and_then(|c| c.last_mut())
            .filter(|b| {
                !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                    && b["text"].as_str() != Some("")
            });
        if let Some(b) = block {
            b["cache_control"] = mark.clone();
            n += 1;
        }
    }
}

/// A kept thinking block as the API sent it (other parts are not
/// Anthropic's).
fn thinking_block(p: &ReasoningPart) -> Option<Value> {
    match p {
        ReasoningPart::Thinking {
            thinking,
            signature,
        } => Some(json!({"type": "thinking", "thinking": thinking, "signature": signature})),
        ReasoningPart::RedactedThinking { data } => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        ReasoningPart::Content { .. } | ReasoningPart::Encrypted { .. } => None,
    }
}

/// Folds stream events into a [`Completion`].
#[derive(Default)]
pub struct Accumulator {
    parts: Parts,
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
        let Some(v) = event_json(data)? else {
            return Ok(false);
        };
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
                let s = |k: &str| b[k].as_str().unwrap_or_default().to_string();
                let block = match b["type"].as_str() {
                    Some("tool_use") => Part::Call {
                        id: s("id"),
                        name: s("name"),
                        arguments: String::new(),
                    },
                    Some("thinking") => Part::Reasoning(ReasoningPart::Thinking {
                        thinking: s("thinking"),
                        signature: s("signature"),
                    }),
                    Some("redacted_thinking") => {
                        Part::Reasoning(ReasoningPart::RedactedThinking { data: s("data") })
                    }
                    _ => Part::Text,
                };
                self.parts.insert(idx, block);
            }
            "content_block_delta" => {
                let idx = v["index"].as_u64().unwrap_or(0);
                let d = &v["delta"];
                let piece = |k: &str| d[k].as_str().unwrap_or_default();
                match d["type"].as_str() {
                    Some("text_delta") => self.parts.text_delta(piece("text"), on_text),
                    Some("input_json_delta") => {
                        self.parts.arguments_delta(idx, piece("partial_json"));
                    }
                    Some(kind @ ("thinking_delta" | "signature_delta")) => {
                        if let Some(Part::Reasoning(ReasoningPart::Thinking {
                            thinking,
                            signature,
                        })) = self.parts.get_mut(idx)
                        {
                            if kind == "thinking_delta" {
                                thinking.push_str(piece("thinking"));
                            } else {
                                signature.push_str(piece("signature"));
                            }
                        }
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
        self.stopped
            .then(|| self.parts.completion(Some(self.usage), self.stop_reason))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

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
            WireReasoning::Default,
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

    #[test]
    fn thinking_blocks_are_kept_in_order_and_sent_back_first() {
        // The streaming shape of Anthropic's extended-thinking guide:
        // thinking deltas, then one signature delta, then the answer.
        let mut a = Accumulator::default();
        let evs = [
            r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me \"look\"…"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"\n at a."}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu1","name":"read_file","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a\"}"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":70}}"#,
        ];
        for d in evs {
            a.feed("", d, &mut |_| {}).unwrap();
        }
        a.feed("", r#"{"type":"message_stop"}"#, &mut |_| {})
            .unwrap();
        let c = a.finish().unwrap();
        let want = vec![
            ReasoningPart::Thinking {
                thinking: "Let me \"look\"…\n at a.".into(),
                signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h".into(),
            },
            ReasoningPart::RedactedThinking {
                data: "EmwKAhgBEgy3va3p".into(),
            },
        ];
        assert_eq!(c.reasoning, want);
        let msgs = vec![
            Message::User { text: "go".into() },
            Message::Assistant {
                text: c.text.clone(),
                tool_calls: c.tool_calls.clone(),
                reasoning: c.reasoning.clone(),
            },
            Message::ToolResult {
                call_id: "tu1".into(),
                content: "A".into(),
                is_error: false,
            },
        ];
        let req = ChatRequest {
            system: "s",
            messages: &msgs,
            tools: &[],
        };
        let b = body("m", req, WireReasoning::AnthropicBudget(Some(4_096)));
        let content = &b["messages"][1]["content"];
        assert_eq!(
            content[0],
            json!({"type": "thinking", "thinking": "Let me \"look\"…\n at a.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"})
        );
        assert_eq!(
            content[1],
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"})
        );
        assert_eq!(content[2]["type"], "tool_use");
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert_eq!(b["max_tokens"], MAX_TOKENS + 4_096);
        // Adaptive models: effort in output_config; `none` is between_tools.
        let b = body("m", req, WireReasoning::AnthropicAdaptive(Some("low")));
        assert_eq!(b["output_config"], json!({"effort": "low"}));
        assert!(b.get("thinking").is_none());
        let b = body("m", req, WireReasoning::AnthropicAdaptive(None));
        assert_eq!(b["thinking"], json!({"type": "between_tools"}));
        let b = body("m", req, WireReasoning::Default);
        assert!(b.get("thinking").is_none() && b.get("output_config").is_none());
        assert_eq!(b["max_tokens"], MAX_TOKENS);
    }

    /// Every `cache_control` in `v`, removed; how many there were.
    fn strip_cache_control(v: &mut Value) -> usize {
        match v {
            Value::Object(o) => {
                let here = usize::from(o.remove("cache_control").is_some());
                here + o.values_mut().map(strip_cache_control).sum::<usize>()
            }
            Value::Array(a) => a.iter_mut().map(strip_cache_control).sum(),
            _ => 0,
        }
    }

    #[test]
    fn cache_breakpoints_sit_on_the_prefix_and_the_latest_turns_and_change_nothing_else() {
        let tools = vec![
            crate::provider::ToolSpec {
                name: "a".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            },
            crate::provider::ToolSpec {
                name: "b".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            },
        ];
        let call = |id: &str| Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "a".into(),
                arguments: "{}".into(),
            }],
            reasoning: Vec::new(),
        };
        let result = |id: &str| Message::ToolResult {
            call_id: id.into(),
            content: "out".into(),
            is_error: false,
        };
        let mut msgs = vec![Message::User { text: "go".into() }];
        for n in 0..6 {
            let req = ChatRequest {
                system: "sys + AGENTS.md",
                messages: &msgs,
                tools: &tools,
            };
            let mut b = body("m", req, WireReasoning::Default);
            let mark = json!({"type": "ephemeral"});
            assert_eq!(b["tools"][1]["cache_control"], mark);
            assert!(b["tools"][0].get("cache_control").is_none());
            assert_eq!(b["system"][0]["cache_control"], mark);
            let len = b["messages"].as_array().unwrap().len();
            let last_block = |i: usize| {
                b["messages"][i]["content"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()["cache_control"]
                    .clone()
            };
            assert_eq!(last_block(len - 1), mark);
            if len >= 3 {
                assert_eq!(last_block(len - 3), mark);
            }
            assert_eq!(b["system"][0]["text"], "sys + AGENTS.md");
            let count = strip_cache_control(&mut b);
            assert!(count <= MAX_BREAKPOINTS, "{count} breakpoints");
            assert_eq!(count, if len >= 3 { 4 } else { 3 });
            // Without them the request is what the model sees uncached.
            b["system"] = b["system"][0]["text"].clone();
            assert_eq!(
                b,
                uncached_body("m", req, WireReasoning::Default),
                "request {n}"
            );
            let id = format!("c{n}");
            msgs.push(call(&id));
            msgs.push(result(&id));
        }
    }
}
