//! A served envelope read back as a typed value. The TUI and ACP are
//! runtime clients in this process: they follow the same envelopes a
//! remote client does, and match on [`ServedEvent`]'s variants — the
//! records' own types (`TurnRecord`, `TurnItemRecord`, [`ApprovalAsk`]) —
//! instead of event names and payload keys, so a renamed field breaks
//! the build here rather than a screen at run time.

use super::item_meta::ApprovalAsk;
use super::model::{TurnItemRecord, TurnRecord};
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;

/// One envelope: where it belongs and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    pub seq: u64,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub item_id: Option<String>,
    pub event: ServedEvent,
}

/// How an item ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemEnd {
    Completed,
    Failed,
    Interrupted,
}

impl ItemEnd {
    pub fn event_name(self) -> &'static str {
        match self {
            ItemEnd::Completed => "item.completed",
            ItemEnd::Failed => "item.failed",
            ItemEnd::Interrupted => "item.interrupted",
        }
    }
}

/// How a question was settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalEnd {
    /// A client answered (`decision` allow or deny).
    Decided { allow: bool },
    /// Nobody answered in time: denied as `no response`.
    TimedOut,
    /// Withdrawn (the turn ended first).
    Canceled,
}

/// A path or connection the sandbox refused, as `sandbox.denied` carries
/// it (the stream-json fields, docs/EXEC.md).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SandboxDenial {
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub path: Option<PathBuf>,
    #[serde(default)]
    pub host: Option<String>,
}

/// A review by Auto-Review's model reviewer, as `auto_review.decided`
/// carries it (the loop's `AutoReviewDecided` in its serde form).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ReviewDecided {
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub decision: crate::authz::reviewer::ReviewDecision,
    #[serde(default)]
    pub risk: Option<crate::authz::reviewer::Risk>,
    #[serde(default)]
    pub reason: String,
    /// The sub-agent whose own reviewer this was (`None`: the thread's).
    #[serde(default)]
    pub agent_id: Option<String>,
}

/// The breaker tripped: the thread is in Ask until Auto-Review is chosen
/// again (`auto_review.paused`), or, with `agent_id`, that sub-agent
/// stopped (its own breaker; the thread's posture is unchanged).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ReviewPaused {
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub agent_id: Option<String>,
}

/// The events this crate's clients act on; every other name is
/// [`ServedEvent::Other`] (clients ignore what they do not show).
#[derive(Clone, Debug, PartialEq)]
pub enum ServedEvent {
    TurnStarted(Box<TurnRecord>),
    /// Live usage of a running turn.
    TurnLifecycle(Box<TurnRecord>),
    TurnCompleted(Box<TurnRecord>),
    ItemStarted(Box<TurnItemRecord>),
    /// Streamed text of an item (`kind`: the item's kind, e.g.
    /// `agent_message`).
    ItemDelta {
        kind: String,
        delta: String,
    },
    ItemFinished {
        end: ItemEnd,
        item: Box<TurnItemRecord>,
    },
    ApprovalRequired(Box<ApprovalAsk>),
    ApprovalSettled {
        approval_id: String,
        end: ApprovalEnd,
    },
    SandboxDenied(SandboxDenial),
    ReviewDecided(ReviewDecided),
    ReviewPaused(ReviewPaused),
    /// Auto-Review was selected again (`auto_review.resumed`), by this
    /// client or another.
    ReviewResumed,
    /// The model's to-do list as it now stands (`todo.updated`).
    TodoUpdated(Vec<TodoItem>),
    /// A name this crate's clients do not act on, or a payload that did
    /// not read as its type (kept by name, never guessed at).
    Other(String),
}

/// One entry of the to-do list (the `todo` tool's type).
pub use crate::agent::tools::todo::{TodoItem, TodoStatus};

#[derive(Deserialize)]
struct TodoPayload {
    items: Vec<TodoItem>,
}

#[derive(Deserialize)]
struct TurnPayload {
    turn: TurnRecord,
}

#[derive(Deserialize)]
struct ItemPayload {
    item: TurnItemRecord,
}

#[derive(Deserialize)]
struct DeltaPayload {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    delta: String,
}

#[derive(Deserialize)]
struct SettledPayload {
    #[serde(default)]
    approval_id: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    decision: Option<String>,
}

impl Served {
    /// Read one envelope (`None`: not an envelope at all).
    pub fn decode(env: &Value) -> Option<Served> {
        let name = env.get("event")?.as_str()?;
        let text = |k: &str| env.get(k).and_then(Value::as_str).map(str::to_string);
        let payload = env.get("payload").cloned().unwrap_or(Value::Null);
        Some(Served {
            seq: env.get("seq").and_then(Value::as_u64).unwrap_or(0),
            thread_id: text("thread_id"),
            turn_id: text("turn_id"),
            item_id: text("item_id"),
            event: ServedEvent::decode(name, payload),
        })
    }
}

impl ServedEvent {
    fn decode(name: &str, payload: Value) -> ServedEvent {
        fn read<T: serde::de::DeserializeOwned>(p: Value) -> Option<T> {
            serde_json::from_value(p).ok()
        }
        let turn = |p: Value| read::<TurnPayload>(p).map(|t| Box::new(t.turn));
        let item = |p: Value| read::<ItemPayload>(p).map(|i| Box::new(i.item));
        let end =
            |end: ItemEnd, p: Value| item(p).map(|item| ServedEvent::ItemFinished { end, item });
        let settled = |p: Value, how: fn(Option<&str>) -> ApprovalEnd| {
            read::<SettledPayload>(p).map(|s| ServedEvent::ApprovalSettled {
                end: how(s.decision.as_deref()),
                approval_id: s.approval_id.or(s.id).unwrap_or_default(),
            })
        };
        let typed = match name {
            "turn.started" => turn(payload).map(ServedEvent::TurnStarted),
            "turn.lifecycle" => turn(payload).map(ServedEvent::TurnLifecycle),
            "turn.completed" => turn(payload).map(ServedEvent::TurnCompleted),
            "item.started" => item(payload).map(ServedEvent::ItemStarted),
            "item.delta" => read::<DeltaPayload>(payload).map(|d| ServedEvent::ItemDelta {
                kind: d.kind,
                delta: d.delta,
            }),
            "item.completed" => end(ItemEnd::Completed, payload),
            "item.failed" => end(ItemEnd::Failed, payload),
            "item.interrupted" => end(ItemEnd::Interrupted, payload),
            "approval.required" => {
                read::<ApprovalAsk>(payload).map(|a| ServedEvent::ApprovalRequired(Box::new(a)))
            }
            "approval.decided" => settled(payload, |d| ApprovalEnd::Decided {
                allow: d == Some("allow"),
            }),
            "approval.timeout" => settled(payload, |_| ApprovalEnd::TimedOut),
            "approval.canceled" => settled(payload, |_| ApprovalEnd::Canceled),
            "sandbox.denied" => read::<SandboxDenial>(payload).map(ServedEvent::SandboxDenied),
            "auto_review.decided" => read::<ReviewDecided>(payload).map(ServedEvent::ReviewDecided),
            "auto_review.paused" => read::<ReviewPaused>(payload).map(ServedEvent::ReviewPaused),
            "auto_review.resumed" => Some(ServedEvent::ReviewResumed),
            "todo.updated" => {
                read::<TodoPayload>(payload).map(|t| ServedEvent::TodoUpdated(t.items))
            }
            _ => None,
        };
        typed.unwrap_or_else(|| ServedEvent::Other(name.to_string()))
    }
}

/// For the tests of this crate's clients (the TUI, ACP).
#[cfg(test)]
pub mod testing {
    use crate::runtime::{ItemKind, ItemStatus, TurnItemRecord, TurnRecord, TurnStatus, TurnUsage};
    use serde_json::Value;

    fn merge(base: Value, over: &Value) -> Value {
        match (base, over) {
            (Value::Object(mut b), Value::Object(o)) => {
                for (k, v) in o {
                    let merged = match b.remove(k) {
                        Some(old) => merge(old, v),
                        None => v.clone(),
                    };
                    b.insert(k.clone(), merged);
                }
                Value::Object(b)
            }
            (_, o) => o.clone(),
        }
    }

    /// A served envelope as the runtime writes it: a test names only the
    /// fields it cares about, and the `turn` or `item` record of the
    /// payload is completed with a real record's other fields (clients
    /// read them as `TurnRecord`/`TurnItemRecord`).
    pub fn complete(mut env: Value) -> Value {
        let turn = TurnRecord {
            id: "turn_1".into(),
            thread_id: "thr_1".into(),
            status: TurnStatus::InProgress,
            effective_provider: None,
            effective_model: None,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            started_at: None,
            completed_at: None,
            duration_ms: None,
            usage: TurnUsage::default(),
            error: None,
            session_id: None,
            cost_usd: None,
            by_model: Vec::new(),
            routing: Vec::new(),
            context_tokens: None,
        };
        let item = TurnItemRecord {
            id: "item_1".into(),
            turn_id: "turn_1".into(),
            kind: ItemKind::Status,
            status: ItemStatus::InProgress,
            metadata: serde_json::json!({}),
        };
        if let Some(p) = env.get_mut("payload") {
            for (key, base) in [
                ("turn", serde_json::to_value(&turn)),
                ("item", serde_json::to_value(&item)),
            ] {
                if let (Some(over), Ok(base)) = (p.get(key).cloned(), base) {
                    p[key] = merge(base, &over);
                }
            }
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(event: &str, payload: Value) -> Value {
        json!({"seq": 7, "event": event, "thread_id": "thr_1", "turn_id": "turn_1",
               "item_id": "item_1", "payload": payload})
    }

    #[test]
    fn a_required_approval_reads_as_the_approvers_type() {
        let ask = ApprovalAsk {
            approval_id: "appr_1".into(),
            tool: "shell".into(),
            tool_call_id: "c1".into(),
            command: Some("rm -rf build".into()),
            reason: "outside the rules".into(),
            asked_by: Some("gate".into()),
            agent_role: None,
            gate: 8,
            hold: true,
            matched_rule: None,
            timeout_ms: 300_000,
        };
        let mut p = serde_json::to_value(&ask).unwrap();
        p["request_id"] = json!("appr_1");
        let s = Served::decode(&env("approval.required", p)).unwrap();
        assert_eq!(s.seq, 7);
        assert_eq!(s.item_id.as_deref(), Some("item_1"));
        assert_eq!(s.event, ServedEvent::ApprovalRequired(Box::new(ask)));
    }

    /// `todo.updated` reads back as the list the loop published (its
    /// serde form: the `agent::event::TodoUpdated` payload).
    #[test]
    fn a_todo_update_reads_as_the_typed_list() {
        let items = vec![
            TodoItem {
                id: "1".into(),
                text: "tests".into(),
                status: TodoStatus::InProgress,
            },
            TodoItem {
                id: "2".into(),
                text: "docs".into(),
                status: TodoStatus::Pending,
            },
        ];
        let p = serde_json::to_value(crate::agent::event::TodoUpdated {
            call_id: "c1".into(),
            items: items.clone(),
        })
        .unwrap();
        let s = Served::decode(&env("todo.updated", p)).unwrap();
        assert_eq!(s.event, ServedEvent::TodoUpdated(items));
        // A payload that is not a list is kept by name, never guessed at.
        let s = Served::decode(&env("todo.updated", json!({"items": 3}))).unwrap();
        assert_eq!(s.event, ServedEvent::Other("todo.updated".into()));
    }

    #[test]
    fn settlements_say_how() {
        let d = Served::decode(&env(
            "approval.decided",
            json!({"approval_id": "a", "decision": "deny", "decided_by": "client"}),
        ))
        .unwrap();
        assert_eq!(
            d.event,
            ServedEvent::ApprovalSettled {
                approval_id: "a".into(),
                end: ApprovalEnd::Decided { allow: false }
            }
        );
        let t = Served::decode(&env("approval.timeout", json!({"approval_id": "b"}))).unwrap();
        assert!(matches!(
            t.event,
            ServedEvent::ApprovalSettled {
                end: ApprovalEnd::TimedOut,
                ..
            }
        ));
    }

    #[test]
    fn a_payload_that_does_not_read_stays_a_name() {
        let s = Served::decode(&env("turn.completed", json!({"turn": 3}))).unwrap();
        assert_eq!(s.event, ServedEvent::Other("turn.completed".into()));
        let s = Served::decode(&env("thread.updated", json!({}))).unwrap();
        assert_eq!(s.event, ServedEvent::Other("thread.updated".into()));
        assert!(Served::decode(&json!({"no": "event"})).is_none());
    }

    #[test]
    fn deltas_and_denials_read() {
        let s = Served::decode(&env(
            "item.delta",
            json!({"kind": "agent_message", "delta": "hi"}),
        ))
        .unwrap();
        assert_eq!(
            s.event,
            ServedEvent::ItemDelta {
                kind: "agent_message".into(),
                delta: "hi".into()
            }
        );
        let s = Served::decode(&env(
            "sandbox.denied",
            json!({"call_id": "c", "tool": "shell", "reason": "read denied",
                   "path": "/home/u/.ssh/id_rsa", "inferred": false}),
        ))
        .unwrap();
        let ServedEvent::SandboxDenied(d) = s.event else {
            panic!("{:?}", s.event)
        };
        assert_eq!(d.path, Some(PathBuf::from("/home/u/.ssh/id_rsa")));
    }
}
