//! One non-streaming request without tools: the Auto-Review reviewer's
//! call (and any other single-answer request that must not stream).
//!
//! The body is each wire format's own [`wire`](super::wire) body (no
//! tools, one system prompt, one user message) switched to
//! `"stream": false`, with an output budget, `temperature` when asked and
//! reasoning turned off where the provider allows it. The answer is the
//! format's non-streaming response: Chat Completions
//! (`choices[0].message.content`, `finish_reason`), Anthropic Messages
//! (`content[].text`, `stop_reason`), Responses (`output[].content[]`
//! `output_text`, `status`/`incomplete_details.reason`).
//!
//! Nothing here retries on its own except a refused `temperature` (the
//! caller decides what a failure means): no backoff, no fallback.

use super::effort::{ReasoningControl, WireReasoning};
use super::{anthropic, openai, responses, ChatRequest, Message, Provider, Usage, WireFormat};
use super::{ProviderError, ProviderSettings};
use serde_json::{json, Value};

/// What the request asks for beyond the text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OneShotOptions {
    /// The output budget (`max_tokens`, `max_output_tokens`).
    pub max_tokens: u32,
    /// `temperature` (`None`: the field is left out).
    pub temperature: Option<f64>,
}

/// A finished non-streaming answer.
#[derive(Clone, Debug, PartialEq)]
pub struct OneShotAnswer {
    pub text: String,
    /// The provider marked the answer as cut by the output budget
    /// (`finish_reason: "length"`, `stop_reason: "max_tokens"`,
    /// `incomplete_details.reason: "max_output_tokens"`).
    pub clipped: bool,
    pub usage: Option<Usage>,
}

/// The reasoning setting that turns reasoning off, or the lowest the
/// model accepts (OpenAI's effort models cannot turn it off: left at the
/// provider's default).
fn reasoning_off(control: Option<ReasoningControl>) -> WireReasoning {
    match control {
        Some(ReasoningControl::DeepSeek) => WireReasoning::DeepSeek {
            enabled: false,
            effort: None,
        },
        Some(ReasoningControl::AnthropicThinking { .. }) => WireReasoning::AnthropicBudget(None),
        Some(ReasoningControl::AnthropicAdaptive) => WireReasoning::AnthropicAdaptive(None),
        Some(ReasoningControl::OpenAiEffort) | None => WireReasoning::Default,
    }
}

/// The exact body of the request (what `permissions check` prints).
pub fn body(s: &ProviderSettings, system: &str, user: &str, o: OneShotOptions) -> Value {
    let messages = [Message::User { text: user.into() }];
    let req = ChatRequest {
        system,
        messages: &messages,
        tools: &[],
    };
    let reasoning = reasoning_off(s.reasoning);
    let mut b = match s.wire {
        WireFormat::OpenAiCompatible | WireFormat::AzureOpenAi => {
            let mut b = openai::body(&s.model, req, false, reasoning);
            b["max_tokens"] = json!(o.max_tokens);
            b
        }
        WireFormat::Anthropic => {
            let mut b = anthropic::body(&s.model, req, reasoning);
            b["max_tokens"] = json!(o.max_tokens);
            b
        }
        WireFormat::OpenAiResponses => {
            let mut b = responses::body(&s.model, req, reasoning);
            b["max_output_tokens"] = json!(o.max_tokens);
            b
        }
    };
    if let Some(obj) = b.as_object_mut() {
        obj.insert("stream".into(), json!(false));
        obj.remove("stream_options");
        obj.remove("tools");
        obj.remove("tool_choice");
        match o.temperature {
            Some(t) => {
                obj.insert("temperature".into(), json!(t));
            }
            None => {
                obj.remove("temperature");
            }
        }
    }
    b
}

/// The text, clipped flag and usage of a non-streaming response body.
pub fn parse(wire: WireFormat, v: &Value) -> Result<OneShotAnswer, String> {
    match wire {
        WireFormat::OpenAiCompatible | WireFormat::AzureOpenAi => {
            let c = &v["choices"][0];
            let text = c["message"]["content"]
                .as_str()
                .ok_or("no choices[0].message.content in the response")?;
            Ok(OneShotAnswer {
                text: text.into(),
                clipped: c["finish_reason"] == "length",
                usage: v.get("usage").map(openai::parse_usage),
            })
        }
        WireFormat::Anthropic => {
            let blocks = v["content"]
                .as_array()
                .ok_or("no content array in the response")?;
            let text: String = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            let u = &v["usage"];
            let usage = v.get("usage").map(|_| {
                let fresh = u["input_tokens"].as_u64().unwrap_or(0);
                let read = u["cache_read_input_tokens"].as_u64().unwrap_or(0);
                let write = u["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                Usage {
                    input_tokens: fresh + read + write,
                    output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
                    cached_input_tokens: read,
                    cache_write_tokens: write,
                    reasoning_tokens: None,
                }
            });
            Ok(OneShotAnswer {
                text,
                clipped: v["stop_reason"] == "max_tokens",
                usage,
            })
        }
        WireFormat::OpenAiResponses => {
            let items = v["output"]
                .as_array()
                .ok_or("no output array in the response")?;
            let text: String = items
                .iter()
                .filter(|i| i["type"] == "message")
                .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
                .filter(|c| c["type"] == "output_text")
                .filter_map(|c| c["text"].as_str().map(str::to_string))
                .collect();
            Ok(OneShotAnswer {
                text,
                clipped: v["status"] == "incomplete"
                    && v["incomplete_details"]["reason"] == "max_output_tokens",
                usage: v.get("usage").map(responses::parse_usage),
            })
        }
    }
}

/// Whether an HTTP 400 body refuses the `temperature` field.
fn refuses_temperature(status: u16, body: &str) -> bool {
    status == 400 && body.to_ascii_lowercase().contains("temperature")
}

impl Provider {
    /// Send one non-streaming request (see the module docs). A 400 that
    /// names `temperature` is retried once without it; every other
    /// failure is returned as it is.
    pub async fn complete_once(
        &self,
        system: &str,
        user: &str,
        o: OneShotOptions,
    ) -> Result<OneShotAnswer, ProviderError> {
        match self.send_once(system, user, o).await {
            Err((status, body, _))
                if o.temperature.is_some() && refuses_temperature(status, &body) =>
            {
                let o = OneShotOptions {
                    temperature: None,
                    ..o
                };
                self.send_once(system, user, o).await.map_err(|(_, _, e)| e)
            }
            r => r.map_err(|(_, _, e)| e),
        }
    }

    /// One attempt; an error keeps the status and body it came with.
    async fn send_once(
        &self,
        system: &str,
        user: &str,
        o: OneShotOptions,
    ) -> Result<OneShotAnswer, (u16, String, ProviderError)> {
        let s = &self.settings;
        let b = body(s, system, user, o);
        let mut rb = self.http.post(super::wire::url(s)).json(&b);
        let key = s.api_key.as_ref().map(|k| k.expose());
        rb = match (s.wire, key) {
            (WireFormat::OpenAiCompatible | WireFormat::OpenAiResponses, Some(k)) => {
                rb.bearer_auth(k)
            }
            (WireFormat::AzureOpenAi, Some(k)) => rb.header("api-key", k),
            (WireFormat::Anthropic, k) => {
                let rb = rb.header("anthropic-version", super::wire::ANTHROPIC_VERSION);
                match k {
                    Some(k) => rb.header("x-api-key", k),
                    None => rb,
                }
            }
            (_, None) => rb,
        };
        let resp = rb.send().await.map_err(|e| {
            (
                0,
                String::new(),
                self.transient(super::describe_reqwest(&e)),
            )
        })?;
        let status = resp.status().as_u16();
        let text = match resp.text().await {
            Ok(t) => t,
            Err(e) => {
                return Err((
                    status,
                    String::new(),
                    self.cut(format!("response body cut mid-way: {e}")),
                ))
            }
        };
        if !(200..300).contains(&status) {
            let short: String = text.chars().take(500).collect();
            let e = ProviderError::Http {
                provider: s.id.clone(),
                model: s.model.clone(),
                status,
                body: short,
            };
            return Err((status, text, e));
        }
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            (
                status,
                String::new(),
                self.cut(format!("response body is not complete JSON: {e}")),
            )
        })?;
        parse(s.wire, &v).map_err(|d| (status, String::new(), self.protocol(d)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn opts() -> OneShotOptions {
        OneShotOptions {
            max_tokens: 512,
            temperature: Some(0.0),
        }
    }

    #[test]
    fn the_body_has_no_tools_no_stream_and_the_one_user_message() {
        let s = ProviderSettings::openai_compatible("x", "http://127.0.0.1:1/v1", "m");
        let b = body(&s, "SYS", "{\"doc\":1}", opts());
        assert_eq!(b["stream"], false);
        assert!(b.get("stream_options").is_none() && b.get("tools").is_none());
        assert_eq!(b["temperature"], 0.0);
        assert_eq!(b["max_tokens"], 512);
        assert_eq!(
            b["messages"],
            json!([{"role": "system", "content": "SYS"}, {"role": "user", "content": "{\"doc\":1}"}])
        );
        let mut a = s.clone();
        a.wire = WireFormat::Anthropic;
        let b = body(
            &a,
            "SYS",
            "U",
            OneShotOptions {
                temperature: None,
                ..opts()
            },
        );
        assert_eq!(b["stream"], false);
        assert!(b.get("temperature").is_none());
        assert_eq!(b["max_tokens"], 512);
        let mut r = s;
        r.wire = WireFormat::OpenAiResponses;
        let b = body(&r, "SYS", "U", opts());
        assert_eq!(b["max_output_tokens"], 512);
        assert!(b.get("tools").is_none());
    }

    #[test]
    fn deepseek_thinking_is_turned_off() {
        let mut s = ProviderSettings::openai_compatible("deepseek", "http://127.0.0.1:1", "m");
        s.reasoning = Some(ReasoningControl::DeepSeek);
        let b = body(&s, "S", "U", opts());
        assert_eq!(b["thinking"], json!({"type": "disabled"}));
    }

    #[test]
    fn clipped_answers_are_recognised_per_format() {
        let oai = json!({"choices": [{"message": {"content": "{\"ri"}, "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 4}});
        let a = parse(WireFormat::OpenAiCompatible, &oai).unwrap();
        assert!(a.clipped);
        assert_eq!(a.usage.unwrap().input_tokens, 10);
        let ant = json!({"content": [{"type": "text", "text": "x"}], "stop_reason": "max_tokens",
                         "usage": {"input_tokens": 3, "output_tokens": 2}});
        assert!(parse(WireFormat::Anthropic, &ant).unwrap().clipped);
        let ok = json!({"content": [{"type": "text", "text": "x"}], "stop_reason": "end_turn"});
        assert!(!parse(WireFormat::Anthropic, &ok).unwrap().clipped);
        let rsp = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                         "output": [{"type": "message", "content": [{"type": "output_text", "text": "y"}]}]});
        let a = parse(WireFormat::OpenAiResponses, &rsp).unwrap();
        assert!(a.clipped && a.text == "y");
        assert!(parse(WireFormat::OpenAiCompatible, &json!({"error": "x"})).is_err());
    }

    #[test]
    fn only_a_400_naming_temperature_is_a_refusal() {
        assert!(refuses_temperature(
            400,
            "{\"error\":{\"message\":\"Unsupported parameter: 'temperature'\"}}"
        ));
        assert!(!refuses_temperature(400, "bad request"));
        assert!(!refuses_temperature(503, "temperature"));
    }
}
