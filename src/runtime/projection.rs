//! The records as the log says they are: a pure fold of committed events
//! into threads, turns, items and open requests, and the plan of events a
//! start appends for work a dead process left open.

use super::event::{LogRecord, NewEvent};
use super::model::{
    now_rfc3339, ItemStatus, ThreadRecord, TurnItemRecord, TurnRecord, TurnStatus, RESTART_ERROR,
};
use super::pending::{PendingRequest, RequestKind};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// An open request as clients see it in a snapshot (identifiers and the
/// question, never an answer).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenRequest {
    pub request: PendingRequest,
    pub item_id: Option<String>,
    pub seq: u64,
    pub payload: Value,
}

#[derive(Debug, Default)]
pub struct State {
    pub threads: BTreeMap<String, ThreadRecord>,
    pub turns: HashMap<String, TurnRecord>,
    /// Turn ids of each thread, oldest first.
    pub thread_turns: HashMap<String, Vec<String>>,
    pub items: HashMap<String, TurnItemRecord>,
    /// Item ids of each turn, oldest first.
    pub turn_items: HashMap<String, Vec<String>>,
    pub open_requests: BTreeMap<String, OpenRequest>,
    /// Every committed event of each thread, in seq order (replay source).
    pub thread_events: HashMap<String, Vec<Arc<LogRecord>>>,
    pub last_seq: u64,
}

/// A committed record whose payload does not fit its event name.
#[derive(Debug, thiserror::Error)]
#[error("event seq {seq} ({event}): {reason}")]
pub struct ProjectionError {
    pub seq: u64,
    pub event: String,
    pub reason: String,
}

fn field<T: serde::de::DeserializeOwned>(rec: &LogRecord, key: &str) -> Result<T, ProjectionError> {
    serde_json::from_value(rec.payload.get(key).cloned().unwrap_or(Value::Null)).map_err(|e| {
        ProjectionError {
            seq: rec.seq,
            event: rec.event.clone(),
            reason: format!("payload.{key}: {e}"),
        }
    })
}

fn request_kind(event: &str) -> Option<RequestKind> {
    match event {
        "approval.required" => Some(RequestKind::Approval),
        "user_input.required" => Some(RequestKind::UserInput),
        "tool_call.requested" => Some(RequestKind::ToolCall),
        _ => None,
    }
}

impl State {
    /// Apply one committed record (in seq order).
    pub fn apply(&mut self, rec: Arc<LogRecord>) -> Result<(), ProjectionError> {
        self.last_seq = self.last_seq.max(rec.seq);
        if let Some(t) = &rec.thread_id {
            self.thread_events
                .entry(t.clone())
                .or_default()
                .push(rec.clone());
        }
        match rec.event.as_str() {
            "thread.started" | "thread.forked" | "thread.updated" => {
                let t: ThreadRecord = field(&rec, "thread")?;
                self.threads.insert(t.id.clone(), t);
            }
            "turn.started" | "turn.lifecycle" | "turn.completed" => {
                let turn: TurnRecord = field(&rec, "turn")?;
                if let Some(th) = self.threads.get_mut(&turn.thread_id) {
                    th.latest_turn_id = Some(turn.id.clone());
                    th.updated_at = rec.ts.clone();
                }
                let list = self.thread_turns.entry(turn.thread_id.clone()).or_default();
                if !list.contains(&turn.id) {
                    list.push(turn.id.clone());
                }
                self.turns.insert(turn.id.clone(), turn);
            }
            "item.started" | "item.completed" | "item.failed" | "item.interrupted" => {
                let item: TurnItemRecord = field(&rec, "item")?;
                let list = self.turn_items.entry(item.turn_id.clone()).or_default();
                if !list.contains(&item.id) {
                    list.push(item.id.clone());
                }
                self.items.insert(item.id.clone(), item);
            }
            "item.delta" => {
                // The delta is materialized into the item before clients
                // can see the event (both happen under one lock).
                let delta: String = field(&rec, "delta")?;
                if let Some(item) = rec.item_id.as_ref().and_then(|i| self.items.get_mut(i)) {
                    let text = item
                        .metadata
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    item.metadata["text"] = Value::String(text + &delta);
                }
            }
            ev => {
                if let Some(kind) = request_kind(ev) {
                    let id: String = field(&rec, "request_id")?;
                    let (Some(thread_id), Some(turn_id)) =
                        (rec.thread_id.clone(), rec.turn_id.clone())
                    else {
                        return Err(ProjectionError {
                            seq: rec.seq,
                            event: rec.event.clone(),
                            reason: "a request needs thread_id and turn_id".into(),
                        });
                    };
                    self.open_requests.insert(
                        id.clone(),
                        OpenRequest {
                            request: PendingRequest {
                                id,
                                kind,
                                thread_id,
                                turn_id,
                            },
                            item_id: rec.item_id.clone(),
                            seq: rec.seq,
                            payload: rec.payload.clone(),
                        },
                    );
                } else if RequestKind::from_terminal_event(ev) {
                    let id: String = field(&rec, "request_id")?;
                    self.open_requests.remove(&id);
                }
            }
        }
        Ok(())
    }

    /// What a start appends for threads no live process owns (`owned`
    /// says which are): every open request canceled, every open item
    /// interrupted, every open turn finished as `interrupted` with
    /// [`RESTART_ERROR`].
    pub fn restart_plan(&self, owned: &dyn Fn(&str) -> bool) -> Vec<NewEvent> {
        let mut out = Vec::new();
        for r in self.open_requests.values() {
            let req = &r.request;
            if owned(&req.thread_id) {
                continue;
            }
            let ev = req
                .kind
                .terminal_event(&super::pending::Settlement::Canceled(String::new()));
            out.push(NewEvent {
                event: ev,
                thread_id: Some(req.thread_id.clone()),
                turn_id: Some(req.turn_id.clone()),
                item_id: r.item_id.clone(),
                payload: json!({"request_id": req.id, "reason": RESTART_ERROR}),
            });
        }
        let now = now_rfc3339();
        let mut turns: Vec<&TurnRecord> = self
            .turns
            .values()
            .filter(|t| t.status.is_open() && !owned(&t.thread_id))
            .collect();
        turns.sort_by(|a, b| a.id.cmp(&b.id));
        for turn in turns {
            for item_id in self.turn_items.get(&turn.id).into_iter().flatten() {
                let Some(item) = self.items.get(item_id) else {
                    continue;
                };
                if !item.status.is_open() {
                    continue;
                }
                let mut item = item.clone();
                item.status = ItemStatus::Interrupted;
                item.metadata["error"] = RESTART_ERROR.into();
                out.push(NewEvent::item(
                    "item.interrupted",
                    &turn.thread_id,
                    &turn.id,
                    &item.id,
                    json!({ "item": item }),
                ));
            }
            let mut t = turn.clone();
            t.status = TurnStatus::Interrupted;
            t.error = Some(RESTART_ERROR.into());
            t.completed_at = Some(now.clone());
            out.push(NewEvent::turn(
                "turn.completed",
                &t.thread_id,
                &t.id,
                json!({ "turn": t }),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::event::{LOG_SCHEMA, LOG_VERSION};
    use crate::runtime::model::{ItemKind, TurnUsage};

    fn rec(seq: u64, e: NewEvent) -> Arc<LogRecord> {
        Arc::new(LogRecord {
            seq,
            schema: LOG_SCHEMA.into(),
            v: LOG_VERSION,
            ts: format!("2026-01-01T00:00:{seq:02}.000Z"),
            event: e.event.into(),
            thread_id: e.thread_id,
            turn_id: e.turn_id,
            item_id: e.item_id,
            payload: e.payload,
        })
    }

    fn thread() -> ThreadRecord {
        ThreadRecord {
            id: "thr_a".into(),
            created_at: "t".into(),
            updated_at: "t".into(),
            model: "m".into(),
            provider: None,
            workspace: "/w".into(),
            mode: crate::runtime::ThreadMode::Agent,
            system_prompt: None,
            latest_turn_id: None,
            archived: false,
            title: None,
            allow_shell: true,
            trust_mode: false,
            auto_approve: false,
            client_tools: Vec::new(),
            task_id: None,
        }
    }

    fn turn(status: TurnStatus) -> TurnRecord {
        TurnRecord {
            id: "turn_a".into(),
            thread_id: "thr_a".into(),
            status,
            effective_provider: None,
            effective_model: None,
            created_at: "t".into(),
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
        }
    }

    fn item(status: ItemStatus) -> TurnItemRecord {
        TurnItemRecord {
            id: "item_a".into(),
            turn_id: "turn_a".into(),
            kind: ItemKind::AgentMessage,
            status,
            metadata: json!({}),
        }
    }

    fn open_turn_state() -> State {
        let mut s = State::default();
        let evs = vec![
            NewEvent::thread("thread.started", "thr_a", json!({"thread": thread()})),
            NewEvent::turn(
                "turn.started",
                "thr_a",
                "turn_a",
                json!({"turn": turn(TurnStatus::InProgress)}),
            ),
            NewEvent::item(
                "item.started",
                "thr_a",
                "turn_a",
                "item_a",
                json!({"item": item(ItemStatus::InProgress)}),
            ),
            NewEvent::item(
                "item.delta",
                "thr_a",
                "turn_a",
                "item_a",
                json!({"delta": "hel", "kind": "agent_message"}),
            ),
            NewEvent::item(
                "item.delta",
                "thr_a",
                "turn_a",
                "item_a",
                json!({"delta": "lo", "kind": "agent_message"}),
            ),
            NewEvent::item(
                "approval.required",
                "thr_a",
                "turn_a",
                "item_a",
                json!({"request_id": "appr_1"}),
            ),
        ];
        for (i, e) in evs.into_iter().enumerate() {
            s.apply(rec(i as u64 + 1, e)).unwrap();
        }
        s
    }

    #[test]
    fn the_fold_builds_records_and_materializes_deltas() {
        let s = open_turn_state();
        assert_eq!(s.threads["thr_a"].latest_turn_id.as_deref(), Some("turn_a"));
        assert_eq!(s.items["item_a"].metadata["text"], "hello");
        assert_eq!(s.thread_turns["thr_a"], ["turn_a"]);
        assert_eq!(s.open_requests.len(), 1);
        assert_eq!(s.thread_events["thr_a"].len(), 6);
        assert_eq!(s.last_seq, 6);
    }

    #[test]
    fn restart_interrupts_what_nobody_owns() {
        let s = open_turn_state();
        let plan = s.restart_plan(&|_| false);
        let names: Vec<&str> = plan.iter().map(|e| e.event).collect();
        assert_eq!(
            names,
            ["approval.canceled", "item.interrupted", "turn.completed"]
        );
        assert_eq!(plan[1].payload["item"]["status"], "interrupted");
        assert_eq!(plan[2].payload["turn"]["status"], "interrupted");
        assert_eq!(plan[2].payload["turn"]["error"], RESTART_ERROR);
        // Applying the plan closes everything: a second start plans nothing.
        let mut s = s;
        for (i, e) in plan.into_iter().enumerate() {
            s.apply(rec(10 + i as u64, e)).unwrap();
        }
        assert!(s.restart_plan(&|_| false).is_empty());
        assert_eq!(s.turns["turn_a"].status, TurnStatus::Interrupted);
        assert_eq!(s.items["item_a"].status, ItemStatus::Interrupted);
        assert!(s.open_requests.is_empty());
    }

    #[test]
    fn restart_leaves_a_live_owners_turn_alone() {
        let s = open_turn_state();
        assert!(s.restart_plan(&|t| t == "thr_a").is_empty());
    }

    #[test]
    fn a_payload_that_does_not_fit_is_an_error_naming_the_seq() {
        let mut s = State::default();
        let e = s
            .apply(rec(
                3,
                NewEvent::thread("thread.started", "thr_a", json!({"thread": 1})),
            ))
            .unwrap_err();
        assert_eq!(e.seq, 3);
        assert!(e.to_string().contains("payload.thread"), "{e}");
    }
}
