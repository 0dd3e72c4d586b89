//! OpenAI Responses API (`POST {base}/responses`, streamed): request body
//! and SSE accumulation.
//!
//! Why a third wire: OpenAI's reasoning models keep their reasoning across
//! tool calls only through Responses; over Chat Completions each request
//! starts its reasoning again (<https://developers.openai.com/api/docs/guides/reasoning>,
//! "Reasoning models work better with the Responses API"). With
//! `store: false` nothing is kept on OpenAI's side, so the reasoning comes
//! back as encrypted items (`include: ["reasoning.encrypted_content"]`)
//! that the next request sends in its `input`, unchanged
//! ("Encrypted reasoning items", same guide).
//!
//! Request: `instructions` (the system prompt), `input` items — user
//! messages (`input_text`), assistant messages (`output_text`), `reasoning`
//! items (`id`, `summary`, `encrypted_content`), `function_call` (`call_id`,
//! `name`, `arguments`) and `function_call_output` (`call_id`, `output`) —
//! and `tools` as `{"type": "function", name, description, parameters}`.
//!
//! Stream (<https://platform.openai.com/docs/api-reference/responses-streaming>):
//! `response.output_item.added` / `.done` (the item; `.done` is the final
//! form), `response.output_text.delta`, `response.function_call_arguments.delta`,
//! then `response.completed` (with `usage`), or `response.failed` /
//! `response.incomplete` / `error`. There is no `[DONE]`.
//!
//! Usage: `input_tokens` (all, cached included),
//! `input_tokens_details.cached_tokens`, `output_tokens` (reasoning
//! included), `output_tokens_details.reasoning_tokens`.

use super::effort::WireReasoning;
use super::stream_parts::{event_json, Part, Parts};
use super::{ChatRequest, Completion, Message, ReasoningPart, Usage};
use serde_json::{json, Value};

/// The JSON body for one streamed request.
pub fn body(model: &str, req: ChatRequest<'_>, reasoning: WireReasoning) -> Value {
    let mut input = Vec::new();
    for m in req.messages {
        match m {
            Message::User { text } => input.push(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
            ),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                for p in reasoning {
                    if let ReasoningPart::Encrypted {
                        id,
                        encrypted_content,
                        summary,
                    } = p
                    {
                        let summary: Vec<Value> = summary
                            .iter()
                            .map(|s| json!({"type": "summary_text", "text": s}))
                            .collect();
                        input.push(json!({"type": "reasoning", "id": id, "summary": summary,
                                          "encrypted_content": encrypted_content}));
                    }
                }
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": text}]}));
                }
                for c in tool_calls {
                    input.push(json!({"type": "function_call", "call_id": c.id,
                                      "name": c.name, "arguments": c.arguments}));
                }
            }
            Message::ToolResult {
                call_id, content, ..
            } => input.push(
                json!({"type": "function_call_output", "call_id": call_id, "output": content}),
            ),
        }
    }
    let mut body = json!({
        "model": model,
        "instructions": req.system,
        "input": input,
        "stream": true,
        "store": false,
        "include": ["reasoning.encrypted_content"],
    });
    if let WireReasoning::Effort(e) = reasoning {
        body["reasoning"] = json!({ "effort": e });
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.parameters})
            })
            .collect();
    }
    body
}

/// The `usage` object of `response.completed`.
pub fn parse_usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: u["input_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        cache_write_tokens: 0,
        reasoning_tokens: u["output_tokens_details"]["reasoning_tokens"].as_u64(),
    }
}

/// One output item as `response.output_item.*` gives it.
fn item(v: &Value) -> Part {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    match v["type"].as_str() {
        Some("message") => Part::Text,
        Some("function_call") => Part::Call {
            id: s("call_id"),
            name: s("name"),
            arguments: s("arguments"),
        },
        Some("reasoning") => Part::Reasoning(ReasoningPart::Encrypted {
            id: s("id"),
            encrypted_content: s("encrypted_content"),
            summary: v["summary"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str().map(str::to_string))
                .collect(),
        }),
        _ => Part::Other,
    }
}

/// Folds stream events into a [`Completion`].
#[derive(Default)]
pub struct Accumulator {
    parts: Parts,
    usage: Option<Usage>,
    status: Option<String>,
    done: bool,
}

impl Accumulator {
    /// Feed one SSE event. `Ok(true)` at `response.completed` (or
    /// `response.incomplete`).
    pub fn feed(
        &mut self,
        event: &str,
        data: &str,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<bool, String> {
        let Some(v) = event_json(data)? else {
            return Ok(false);
        };
        let idx = v["output_index"].as_u64().unwrap_or(0);
        match v["type"].as_str().unwrap_or(event) {
            "response.output_item.added" | "response.output_item.done" => {
                let new = item(&v["item"]);
                // `.done` carries the final arguments; keep streamed ones
                // when an `.added` item had none yet.
                self.parts.insert(idx, new);
            }
            "response.output_text.delta" => self
                .parts
                .text_delta(v["delta"].as_str().unwrap_or_default(), on_text),
            "response.function_call_arguments.delta" => self
                .parts
                .arguments_delta(idx, v["delta"].as_str().unwrap_or_default()),
            "response.completed" | "response.incomplete" => {
                let r = &v["response"];
                if r["usage"].is_object() {
                    self.usage = Some(parse_usage(&r["usage"]));
                }
                self.status = r["status"].as_str().map(str::to_string);
                self.done = true;
                return Ok(true);
            }
            "response.failed" => {
                return Err(format!("response failed: {}", v["response"]["error"]))
            }
            "error" => return Err(format!("error in stream: {v}")),
            _ => {}
        }
        Ok(false)
    }

    /// The completion, or `None` if the stream never completed.
    pub fn finish(self) -> Option<Completion> {
        self.done
            .then(|| self.parts.completion(self.usage, self.status))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The same two calls, streamed as Responses events and as Chat
    /// Completions chunks, assemble into the same tool calls.
    #[test]
    fn streamed_events_assemble_into_the_same_tool_calls_as_chat_completions() {
        let mut r = Accumulator::default();
        let evs = [
            r#"{"type":"response.created","response":{"status":"in_progress"}}"#,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan."}],"encrypted_content":"gAAAAB-enc"}}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"message","role":"assistant","content":[]}}"#,
            r#"{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"Hel"}"#,
            r#"{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"lo"}"#,
            r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"c1","name":"read_file","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{\"pa"}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":2,"delta":"th\":\"a\"}"}"#,
            r#"{"type":"response.output_item.added","output_index":3,"item":{"type":"function_call","id":"fc_2","call_id":"c2","name":"search","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":3,"delta":"{\"pattern\":\"x\"}"}"#,
            r#"{"type":"response.output_item.done","output_index":3,"item":{"type":"function_call","id":"fc_2","call_id":"c2","name":"search","arguments":"{\"pattern\":\"x\"}"}}"#,
        ];
        let mut seen = String::new();
        for d in evs {
            assert!(!r.feed("", d, &mut |t| seen.push_str(t)).unwrap());
        }
        assert!(r
            .feed(
                "",
                r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":30}}}}"#,
                &mut |_| {}
            )
            .unwrap());
        let c = r.finish().unwrap();
        let mut o = crate::provider::openai::Accumulator::default();
        for d in [
            r#"{"choices":[{"delta":{"content":"Hello"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"search","arguments":"{\"pattern\":\"x\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            o.feed(d, &mut |_| {}).unwrap();
        }
        let cc = o.finish().unwrap();
        assert_eq!(c.tool_calls, cc.tool_calls);
        assert_eq!((c.text.as_str(), seen.as_str()), ("Hello", "Hello"));
        assert_eq!(
            c.reasoning,
            vec![ReasoningPart::Encrypted {
                id: "rs_1".into(),
                encrypted_content: "gAAAAB-enc".into(),
                summary: vec!["Plan.".into()],
            }]
        );
        let u = c.usage.unwrap();
        assert_eq!(
            (
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                u.reasoning_tokens
            ),
            (120, 100, 50, Some(30))
        );
        // Sent back: the reasoning item verbatim, before the calls.
        let msgs = vec![
            Message::User { text: "go".into() },
            Message::Assistant {
                text: c.text.clone(),
                tool_calls: c.tool_calls.clone(),
                reasoning: c.reasoning.clone(),
            },
            Message::ToolResult {
                call_id: "c1".into(),
                content: "A".into(),
                is_error: false,
            },
        ];
        let b = body(
            "gpt-5.6",
            ChatRequest {
                system: "sys",
                messages: &msgs,
                tools: &[],
            },
            WireReasoning::Effort("high"),
        );
        assert_eq!(b["store"], false);
        assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(b["reasoning"], json!({"effort": "high"}));
        assert_eq!(b["instructions"], "sys");
        let input = b["input"].as_array().unwrap();
        assert_eq!(
            input[1],
            json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."}], "encrypted_content": "gAAAAB-enc"})
        );
        assert_eq!(input[2]["content"][0]["text"], "Hello");
        assert_eq!(input[3]["type"], "function_call");
        assert_eq!(input[3]["call_id"], "c1");
        assert_eq!(
            input[5],
            json!({"type": "function_call_output", "call_id": "c1", "output": "A"})
        );
    }

    #[test]
    fn an_unfinished_or_failed_stream_is_not_a_completion() {
        let mut r = Accumulator::default();
        r.feed(
            "",
            r#"{"type":"response.output_text.delta","delta":"x"}"#,
            &mut |_| {},
        )
        .unwrap();
        assert!(r.finish().is_none());
        let mut r = Accumulator::default();
        assert!(r
            .feed(
                "",
                r#"{"type":"response.failed","response":{"error":{"code":"server_error"}}}"#,
                &mut |_| {}
            )
            .is_err());
    }
}
