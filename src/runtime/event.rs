//! One event-log record and the envelope it is served in.
//!
//! The stored record is the served envelope minus `previous_seq` (which
//! depends on the subscriber's cursor) and the `kind`/`created_at` aliases,
//! so a replay never re-derives anything but those three.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The store format of one line of `events.jsonl`.
pub const LOG_SCHEMA: &str = "codewhale.runtime-events";
pub const LOG_VERSION: u32 = 1;
/// The HTTP/SSE and JSON-RPC envelope version (independent of the store's).
pub const ENVELOPE_SCHEMA_VERSION: u32 = 1;

/// Every event name the runtime writes. Clients may see only these; the
/// drift test pins the list.
pub const EVENT_NAMES: &[&str] = &[
    "thread.started",
    "thread.forked",
    "thread.updated",
    "turn.started",
    "turn.lifecycle",
    "turn.steered",
    "turn.interrupt_requested",
    "turn.completed",
    "item.started",
    "item.delta",
    "item.completed",
    "item.failed",
    "item.interrupted",
    "approval.required",
    "approval.decided",
    "approval.timeout",
    "approval.canceled",
    "user_input.required",
    "user_input.answered",
    "user_input.canceled",
    "tool_call.requested",
    "tool_call.resolved",
    "tool_call.timeout",
    "tool_call.canceled",
    "sandbox.denied",
    "sandbox.allowed",
    "auto_review.requested",
    "auto_review.decided",
    "auto_review.paused",
    "auto_review.resumed",
    "subagent.started",
    "subagent.completed",
    "todo.updated",
    "runtime.recovered",
];

/// One committed line. `seq` is serialized first so that even a torn
/// fragment names the sequence number it had reserved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Global across all threads, strictly increasing, never reused.
    pub seq: u64,
    pub schema: String,
    pub v: u32,
    /// RFC 3339 UTC with milliseconds.
    pub ts: String,
    pub event: String,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub item_id: Option<String>,
    pub payload: Value,
}

/// What a caller appends; the log adds `seq`, `ts` and the schema.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub event: &'static str,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub item_id: Option<String>,
    pub payload: Value,
}

impl NewEvent {
    pub fn thread(event: &'static str, thread: &str, payload: Value) -> Self {
        NewEvent {
            event,
            thread_id: Some(thread.to_string()),
            turn_id: None,
            item_id: None,
            payload,
        }
    }

    pub fn turn(event: &'static str, thread: &str, turn: &str, payload: Value) -> Self {
        NewEvent {
            turn_id: Some(turn.to_string()),
            ..NewEvent::thread(event, thread, payload)
        }
    }

    pub fn item(event: &'static str, thread: &str, turn: &str, item: &str, payload: Value) -> Self {
        NewEvent {
            item_id: Some(item.to_string()),
            ..NewEvent::turn(event, thread, turn, payload)
        }
    }
}

impl LogRecord {
    /// The served envelope. `previous_seq` is the subscriber's: the last
    /// event it was given on this stream, or its cursor for the first.
    pub fn envelope(&self, previous_seq: u64) -> Value {
        json!({
            "schema_version": ENVELOPE_SCHEMA_VERSION,
            "seq": self.seq,
            "previous_seq": previous_seq,
            "event": self.event,
            "kind": self.event,
            "thread_id": self.thread_id,
            "turn_id": self.turn_id,
            "item_id": self.item_id,
            "timestamp": self.ts,
            "created_at": self.ts,
            "payload": self.payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_is_the_first_field_of_a_line() {
        let r = LogRecord {
            seq: 7,
            schema: LOG_SCHEMA.into(),
            v: LOG_VERSION,
            ts: "2026-01-01T00:00:00.000Z".into(),
            event: "turn.started".into(),
            thread_id: Some("thr_a".into()),
            turn_id: None,
            item_id: None,
            payload: json!({}),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"seq":7,"#), "{line}");
    }

    #[test]
    fn envelope_has_the_aliases_and_the_cursor() {
        let r = LogRecord {
            seq: 42,
            schema: LOG_SCHEMA.into(),
            v: LOG_VERSION,
            ts: "2026-02-11T20:18:49.123Z".into(),
            event: "item.delta".into(),
            thread_id: Some("thr_1".into()),
            turn_id: Some("turn_1".into()),
            item_id: Some("item_1".into()),
            payload: json!({"delta": "x", "kind": "agent_message"}),
        };
        let e = r.envelope(38);
        assert_eq!(e["schema_version"], 1);
        assert_eq!(e["seq"], 42);
        assert_eq!(e["previous_seq"], 38);
        assert_eq!(e["event"], e["kind"]);
        assert_eq!(e["timestamp"], e["created_at"]);
        assert_eq!(e["payload"]["delta"], "x");
    }

    #[test]
    fn event_names_are_unique() {
        let mut v = EVENT_NAMES.to_vec();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), EVENT_NAMES.len());
    }
}
