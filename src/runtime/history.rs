//! A thread's earlier turns as the model is sent them: every user message
//! (steered ones included), each model request's text and tool calls, and
//! each call's result — read from the turns' session files, which hold
//! exactly what went to the model (a user's answers appear only as their
//! `response_redacted` receipt). A compaction replaces everything before it
//! with its summary.
//!
//! Pure: [`from_records`] folds one session file; [`Replay`] strings turns
//! together.

use crate::agent::compaction;
use crate::provider::{Message, ReasoningPart, ToolCall};
use crate::session::{Event, Record};
use serde_json::Value;

/// What an unfinished call gets, so every call the model made has a result.
pub const NO_RESULT: &str = "not run: the turn ended before this call finished";

pub use crate::agent::compaction::SUMMARY_PREFIX;

#[derive(Default)]
struct Pending {
    text: String,
    calls: Vec<ToolCall>,
    reasoning: Vec<ReasoningPart>,
    results: Vec<Message>,
}

impl Pending {
    fn flush(&mut self, out: &mut Vec<Message>) {
        let p = std::mem::take(self);
        if p.text.is_empty() && p.calls.is_empty() && p.reasoning.is_empty() {
            return;
        }
        // Every call gets a result: the providers require the pairing.
        let missing: Vec<Message> = p
            .calls
            .iter()
            .filter(|c| {
                !p.results
                    .iter()
                    .any(|r| matches!(r, Message::ToolResult { call_id, .. } if *call_id == c.id))
            })
            .map(|c| Message::ToolResult {
                call_id: c.id.clone(),
                content: NO_RESULT.into(),
                is_error: true,
            })
            .collect();
        out.push(Message::Assistant {
            text: p.text,
            tool_calls: p.calls,
            reasoning: p.reasoning,
        });
        out.extend(p.results);
        out.extend(missing);
    }
}

/// A tool output of an earlier turn longer than this (bytes) is replayed
/// as its head and tail: a long session would otherwise carry every large
/// output of every turn into each later request. The turn that ran the
/// tool saw it whole; the session file keeps what was sent then.
pub const HISTORY_OUTPUT_LIMIT: usize = 8 * 1024;
/// Bytes kept at each end of a truncated output.
const KEEP: usize = 3 * 1024;

/// `output` cut to its head and tail around a line saying how much was
/// hidden, when it is over [`HISTORY_OUTPUT_LIMIT`] (char boundaries kept).
fn head_and_tail(output: &str) -> String {
    if output.len() <= HISTORY_OUTPUT_LIMIT {
        return output.to_string();
    }
    let mut head = KEEP;
    while !output.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = output.len() - KEEP;
    while !output.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[… {} of {} bytes of this earlier tool output hidden here; the session file keeps it …]\n{}",
        &output[..head],
        tail - head,
        output.len(),
        &output[tail..]
    )
}

/// The raw argument text a call was made with (the session file keeps
/// unparseable arguments under `{"_raw": …}`).
fn arguments(args: &Value) -> String {
    match args.get("_raw").and_then(Value::as_str) {
        Some(raw) if args.as_object().is_some_and(|o| o.len() == 1) => raw.to_string(),
        _ => args.to_string(),
    }
}

/// One session file's conversation, in order (an automatic compaction in
/// it replaces what came before, as [`Replay::extend_records`] does).
pub fn from_records(records: &[Record]) -> Vec<Message> {
    let mut r = Replay::default();
    r.extend_records(records);
    r.messages
}

/// Fold `records` onto `out`. A compaction record rebuilds the
/// conversation the way the loop did ([`compaction::split`]: the summary,
/// then the latest user request and the pending calls).
fn fold(out: &mut Vec<Message>, records: &[Record]) {
    let mut p = Pending::default();
    let mut turn = 0;
    for r in records {
        if r.turn != turn {
            p.flush(out);
            turn = r.turn;
        }
        match &r.event {
            Event::UserMessage { text } => {
                p.flush(out);
                out.push(Message::User { text: text.clone() });
            }
            Event::AssistantMessage { text } => p.text = text.clone(),
            Event::Reasoning { parts, .. } => p.reasoning = parts.clone(),
            Event::ToolCall {
                call_id,
                tool,
                args,
                ..
            } => p.calls.push(ToolCall {
                id: call_id.clone(),
                name: tool.clone(),
                arguments: arguments(args),
            }),
            Event::ToolResult {
                call_id,
                status,
                output,
                ..
            } => p.results.push(Message::ToolResult {
                call_id: call_id.clone(),
                content: head_and_tail(output),
                is_error: status != "ok",
            }),
            Event::Compaction { summary, .. } => {
                p.flush(out);
                let kept = compaction::split(out).kept;
                *out = compaction::compacted(summary, kept);
            }
            _ => {}
        }
    }
    p.flush(out);
}

/// Turns strung together, oldest first.
#[derive(Default)]
pub struct Replay {
    pub messages: Vec<Message>,
}

impl Replay {
    /// A compaction: what came before is replaced by its summary.
    pub fn compacted(&mut self, summary: &str) {
        self.messages = vec![Message::User {
            text: format!("{SUMMARY_PREFIX}{summary}"),
        }];
    }

    pub fn extend(&mut self, m: Vec<Message>) {
        self.messages.extend(m);
    }

    /// One turn's session file, after what came before it.
    pub fn extend_records(&mut self, records: &[Record]) {
        fold(&mut self.messages, records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(turn: u32, event: Event) -> Record {
        Record {
            schema: "codewhale.session".into(),
            v: 2,
            seq: 0,
            ts: "t".into(),
            thread: "s".into(),
            turn,
            event,
        }
    }

    fn result(id: &str, status: &str, output: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            tool: "read_file".into(),
            status: status.into(),
            exit_code: None,
            duration_ms: 0,
            files_touched: Vec::new(),
            error_category: None,
            enforcement: None,
            network: None,
            enforced: None,
            output: output.into(),
            truncated: false,
        }
    }

    fn call(id: &str, args: Value) -> Event {
        Event::ToolCall {
            call_id: id.into(),
            tool: "read_file".into(),
            args,
            mcp: None,
        }
    }

    #[test]
    fn calls_and_results_are_replayed_in_order() {
        let recs = vec![
            rec(0, Event::UserMessage { text: "go".into() }),
            rec(1, Event::TurnStarted),
            rec(1, call("c1", json!({"path": "a"}))),
            rec(1, result("c1", "ok", "A")),
            rec(1, call("c2", json!({"_raw": "{bad"}))),
            rec(1, result("c2", "not_run", "bad args")),
            rec(1, Event::TurnCompleted),
            rec(
                2,
                Event::UserMessage {
                    text: "steered".into(),
                },
            ),
            rec(2, Event::TurnStarted),
            rec(
                2,
                Event::AssistantMessage {
                    text: "done".into(),
                },
            ),
            rec(2, Event::TurnCompleted),
        ];
        let m = from_records(&recs);
        assert_eq!(m.len(), 6, "{m:#?}");
        assert_eq!(m[0], Message::User { text: "go".into() });
        let Message::Assistant { tool_calls, .. } = &m[1] else {
            panic!("{m:#?}")
        };
        assert_eq!(tool_calls.len(), 2, "both calls in one assistant message");
        assert_eq!(tool_calls[1].arguments, "{bad", "raw arguments as sent");
        assert!(
            matches!(&m[2], Message::ToolResult { content, is_error: false, .. } if content == "A")
        );
        assert!(matches!(&m[3], Message::ToolResult { is_error: true, .. }));
        assert_eq!(
            m[4],
            Message::User {
                text: "steered".into()
            }
        );
        assert!(
            matches!(&m[5], Message::Assistant { text, tool_calls, .. } if text == "done" && tool_calls.is_empty())
        );
    }

    #[test]
    fn reasoning_comes_back_with_its_assistant_message() {
        let parts = vec![ReasoningPart::Content {
            text: "think \"first\"".into(),
        }];
        let recs = vec![
            rec(0, Event::UserMessage { text: "go".into() }),
            rec(1, Event::TurnStarted),
            rec(
                1,
                Event::Reasoning {
                    event_v: 1,
                    parts: parts.clone(),
                },
            ),
            rec(1, call("c1", json!({"path": "a"}))),
            rec(1, result("c1", "ok", "A")),
            rec(
                2,
                Event::AssistantMessage {
                    text: "done".into(),
                },
            ),
        ];
        let m = from_records(&recs);
        assert!(
            matches!(&m[1], Message::Assistant { reasoning, tool_calls, .. } if *reasoning == parts && tool_calls.len() == 1),
            "{m:#?}"
        );
        assert!(
            matches!(&m[3], Message::Assistant { reasoning, .. } if reasoning.is_empty()),
            "{m:#?}"
        );
    }

    #[test]
    fn large_earlier_outputs_come_back_as_head_and_tail() {
        let big: String = (0..4000).map(|i| format!("line {i} é\n")).collect();
        assert!(big.len() > HISTORY_OUTPUT_LIMIT);
        let recs = vec![
            rec(0, Event::UserMessage { text: "go".into() }),
            rec(1, call("c1", json!({}))),
            rec(1, result("c1", "ok", &big)),
            rec(1, call("c2", json!({}))),
            rec(1, result("c2", "ok", "small")),
        ];
        let m = from_records(&recs);
        let Message::ToolResult { content, .. } = &m[2] else {
            panic!("{m:#?}")
        };
        assert!(content.len() < 2 * KEEP + 200, "{}", content.len());
        assert!(content.starts_with("line 0 é\n"));
        assert!(content.ends_with("line 3999 é\n"));
        // The marker states exactly what is missing between head and tail.
        let (head, rest) = content.split_once("\n[… ").unwrap();
        let (hidden, rest) = rest.split_once(" of ").unwrap();
        let (total, tail) = rest.split_once(" bytes").unwrap();
        let tail = tail.split_once("…]\n").unwrap().1;
        let hidden: usize = hidden.parse().unwrap();
        assert_eq!(total.parse::<usize>().unwrap(), big.len());
        assert_eq!(head.len() + hidden + tail.len(), big.len());
        assert!(big.starts_with(head) && big.ends_with(tail));
        assert!(matches!(&m[3], Message::ToolResult { content, .. } if content == "small"));
    }

    #[test]
    fn an_unfinished_call_still_gets_a_result() {
        let recs = vec![
            rec(0, Event::UserMessage { text: "go".into() }),
            rec(1, call("c1", json!({}))),
        ];
        let m = from_records(&recs);
        assert!(
            matches!(&m[2], Message::ToolResult { call_id, content, is_error: true } if call_id == "c1" && content == NO_RESULT),
            "{m:#?}"
        );
    }

    #[test]
    fn compaction_replaces_what_came_before() {
        let mut r = Replay::default();
        r.extend(vec![Message::User { text: "old".into() }]);
        r.compacted("they asked for X");
        r.extend(vec![Message::User { text: "new".into() }]);
        assert_eq!(r.messages.len(), 2);
        assert!(
            matches!(&r.messages[0], Message::User { text } if text.ends_with("they asked for X"))
        );
    }

    #[test]
    fn an_automatic_compaction_replays_as_the_loop_sent_it() {
        let recs = vec![
            rec(1, Event::UserMessage { text: "old".into() }),
            rec(
                1,
                Event::AssistantMessage {
                    text: "old answer".into(),
                },
            ),
            rec(2, Event::UserMessage { text: "now".into() }),
            rec(2, call("c1", json!({"path": "a"}))),
            rec(2, result("c1", "ok", "A")),
            rec(
                3,
                Event::Compaction {
                    event_v: 1,
                    auto: true,
                    reason: "threshold".into(),
                    window: Some(1000),
                    tokens_before: 900,
                    tokens_after: 100,
                    summarised: 2,
                    kept: 3,
                    summary: "they asked for X".into(),
                },
            ),
            rec(
                3,
                Event::AssistantMessage {
                    text: "done".into(),
                },
            ),
        ];
        let mut r = Replay::default();
        r.extend(vec![Message::User {
            text: "an earlier turn".into(),
        }]);
        r.extend_records(&recs);
        let m = r.messages;
        assert_eq!(
            m[0],
            Message::User {
                text: format!("{SUMMARY_PREFIX}they asked for X")
            }
        );
        assert_eq!(m[1], Message::User { text: "now".into() });
        assert!(matches!(&m[2], Message::Assistant { tool_calls, .. } if tool_calls[0].id == "c1"));
        assert!(matches!(&m[3], Message::ToolResult { call_id, .. } if call_id == "c1"));
        assert!(matches!(&m[4], Message::Assistant { text, .. } if text == "done"));
        assert_eq!(m.len(), 5);
    }
}
