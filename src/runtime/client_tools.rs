//! Tools a runtime-driven turn offers beyond the built-ins, each answered
//! by a runtime client through one pending request:
//!
//! - `ask_user`: the model asks the person questions
//!   (`user_input.required`); the answers reach the model but are never
//!   stored — the event, the item and the session file keep a
//!   `response_redacted` receipt only.
//! - the thread's `client_tools`: the client runs the call itself
//!   (`tool_call.requested`) and posts the result; terminal events carry
//!   identifiers and status, never the result.
//!
//! A request nobody answers within the timeout ends the call with a
//! `no_response` error for the model (the request's one terminal event is
//! `user_input.canceled` / `tool_call.timeout`).

use super::model::ClientTool;
use super::pending::{Answer, RequestKind, Settlement};
use super::store::{Runtime, ASK_USER};
use super::tap::TapHandle;
use super::TurnRecord;
use crate::agent::tools::{ToolOutput, ToolStatus};
use crate::agent::{ExtraOutput, ExtraTools};
use crate::provider::ToolSpec;
use serde_json::{json, Value};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub struct RuntimeTools {
    pub rt: Runtime,
    pub turn: TurnRecord,
    pub tap: TapHandle,
    pub client_tools: Vec<ClientTool>,
    /// How long a question or a client call waits for its answer.
    pub timeout: Duration,
}

/// The `ask_user` tool as the model is offered it.
pub fn ask_user_spec() -> ToolSpec {
    ToolSpec {
        name: ASK_USER.into(),
        description: "Ask the person you are working for one or more questions and wait for \
                      their answers. Use it only for a decision or a fact only they have."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "question": {"type": "string"},
                            "options": {"type": "array", "items": {"type": "string"}}
                        },
                        "required": ["id", "question"]
                    }
                }
            },
            "required": ["questions"]
        }),
    }
}

/// The questions of an `ask_user` call, or why they are unusable.
pub fn questions(args: &Value) -> Result<Vec<Value>, String> {
    let qs = args
        .get("questions")
        .and_then(Value::as_array)
        .ok_or("`questions` must be an array of {id, question, options?}")?;
    if qs.is_empty() {
        return Err("`questions` is empty".into());
    }
    let mut out = Vec::new();
    for (i, q) in qs.iter().enumerate() {
        let id = q.get("id").and_then(Value::as_str);
        let text = q.get("question").and_then(Value::as_str);
        let (Some(id), Some(text)) = (id, text) else {
            return Err(format!("questions[{i}] needs string `id` and `question`"));
        };
        let options: Vec<&str> = q
            .get("options")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push(json!({"id": id, "question": text, "options": options}));
    }
    Ok(out)
}

fn error(category: &'static str, msg: String) -> ExtraOutput {
    ExtraOutput {
        output: ToolOutput::error(category, msg),
        record_as: None,
    }
}

impl RuntimeTools {
    /// Post one pending request of `kind` for the call `call_id` of tool
    /// `name` and wait for it to settle. The request's payload is
    /// `fields` plus the tool, the call id and the timeout. An answer goes
    /// to `answered` with the request's id (`None` there: an answer of
    /// the wrong kind); no answer in time ends the call with `unanswered`
    /// as its `no_response` error, a withdrawn request with the reason —
    /// the same for every kind, so the two tools cannot drift apart.
    async fn settle(
        &self,
        kind: RequestKind,
        call_id: &str,
        name: &str,
        fields: Value,
        unanswered: String,
        answered: impl FnOnce(String, Answer) -> Option<ExtraOutput>,
    ) -> ExtraOutput {
        let mut payload = json!({
            "tool": name,
            "tool_call_id": call_id,
            "timeout_ms": self.timeout.as_millis() as u64,
        });
        if let (Some(p), Value::Object(extra)) = (payload.as_object_mut(), fields) {
            p.extend(extra);
        }
        let item = self.tap.item_of_call(call_id);
        let res = self
            .rt
            .request(kind, &self.turn, item.as_deref(), payload, self.timeout)
            .await;
        match res {
            Ok((id, Settlement::Answered(a))) => answered(id, a)
                .unwrap_or_else(|| error("runtime", format!("{name}: an answer of another kind"))),
            Ok((_, Settlement::TimedOut)) => error("no_response", format!("{name}: {unanswered}")),
            Ok((_, Settlement::Canceled(why))) => {
                error("no_response", format!("{name}: withdrawn ({why})"))
            }
            Err(e) => error("runtime", format!("{name}: {e}")),
        }
    }

    async fn ask(&self, call_id: &str, args: &Value) -> ExtraOutput {
        let qs = match questions(args) {
            Ok(q) => q,
            Err(e) => return error("bad_arguments", format!("ask_user: {e}; nobody was asked")),
        };
        self.settle(
            RequestKind::UserInput,
            call_id,
            ASK_USER,
            json!({ "questions": qs }),
            format!(
                "nobody answered within {} s; continue without the answer or stop",
                self.timeout.as_secs()
            ),
            |id, a| {
                let Answer::UserInput { answers } = a else {
                    return None;
                };
                let n = answers.as_array().map_or(0, Vec::len);
                Some(ExtraOutput {
                    output: ToolOutput::ok(json!({ "answers": answers }).to_string()),
                    record_as: Some(
                        json!({"response_redacted": true, "input_id": id, "answer_count": n})
                            .to_string(),
                    ),
                })
            },
        )
        .await
    }

    async fn client_call(&self, call_id: &str, name: &str, args: &Value) -> ExtraOutput {
        self.settle(
            RequestKind::ToolCall,
            call_id,
            name,
            json!({ "arguments": args }),
            format!(
                "the client returned no result within {} s",
                self.timeout.as_secs()
            ),
            |_, a| {
                let Answer::ToolResult { output, success } = a else {
                    return None;
                };
                let mut o = ToolOutput::ok(output);
                if !success {
                    o.status = ToolStatus::Error;
                    o.error_category = Some("client_tool_failed");
                }
                Some(ExtraOutput {
                    output: o,
                    record_as: None,
                })
            },
        )
        .await
    }
}

impl ExtraTools for RuntimeTools {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut v = vec![ask_user_spec()];
        v.extend(self.client_tools.iter().map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        }));
        v
    }

    fn call<'a>(
        &'a self,
        call_id: &'a str,
        name: &'a str,
        args: &'a Value,
    ) -> Pin<Box<dyn Future<Output = ExtraOutput> + Send + 'a>> {
        Box::pin(async move {
            if name == ASK_USER {
                self.ask(call_id, args).await
            } else {
                self.client_call(call_id, name, args).await
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_checked_before_anyone_is_asked() {
        let ok = questions(
            &json!({"questions": [{"id": "q1", "question": "Which?", "options": ["a", "b"]}]}),
        )
        .unwrap();
        assert_eq!(ok[0]["options"], json!(["a", "b"]));
        assert!(questions(&json!({})).unwrap_err().contains("questions"));
        assert!(questions(&json!({"questions": []}))
            .unwrap_err()
            .contains("empty"));
        assert!(questions(&json!({"questions": [{"id": "q"}]}))
            .unwrap_err()
            .contains("questions[0]"));
    }
}
