//! Pending requests (gate-8 approvals, user-input questions, client-run
//! tool calls) and their one settlement owner. Pure: this table decides who
//! wins; the runtime makes the winner's terminal event durable before the
//! engine hears the answer.
//!
//! A request is settled exactly once: answered by a client, timed out, or
//! canceled with its turn. The first to take it from the table owns the
//! settlement; everyone after gets [`SettleError`] (served as 404) and never
//! reaches the engine.

use serde::Serialize;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    Approval,
    UserInput,
    ToolCall,
}

impl RequestKind {
    /// The event that makes the request pending.
    pub fn opened_event(self) -> &'static str {
        match self {
            RequestKind::Approval => "approval.required",
            RequestKind::UserInput => "user_input.required",
            RequestKind::ToolCall => "tool_call.requested",
        }
    }

    /// The one terminal event of a settlement.
    pub fn terminal_event(self, how: &Settlement) -> &'static str {
        use RequestKind::*;
        match (self, how) {
            (Approval, Settlement::Answered(_)) => "approval.decided",
            (Approval, Settlement::TimedOut) => "approval.timeout",
            (Approval, Settlement::Canceled(_)) => "approval.canceled",
            (UserInput, Settlement::Answered(_)) => "user_input.answered",
            // A question nobody answered is withdrawn like a canceled one.
            (UserInput, Settlement::TimedOut | Settlement::Canceled(_)) => "user_input.canceled",
            (ToolCall, Settlement::Answered(_)) => "tool_call.resolved",
            (ToolCall, Settlement::TimedOut) => "tool_call.timeout",
            (ToolCall, Settlement::Canceled(_)) => "tool_call.canceled",
        }
    }

    /// Whether an event name is one of this family's terminal events.
    pub fn from_terminal_event(event: &str) -> bool {
        matches!(
            event,
            "approval.decided"
                | "approval.timeout"
                | "approval.canceled"
                | "user_input.answered"
                | "user_input.canceled"
                | "tool_call.resolved"
                | "tool_call.timeout"
                | "tool_call.canceled"
        )
    }
}

/// What a client answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Approval {
        allow: bool,
        remember: bool,
    },
    /// Delivered to the turn, never stored.
    UserInput {
        answers: serde_json::Value,
    },
    /// Delivered to the model, never stored (only `success` is).
    ToolResult {
        output: String,
        success: bool,
    },
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Settlement {
    Answered(Answer),
    /// Nobody answered in time: an approval is denied (`no response`).
    TimedOut,
    /// The turn ended first (the reason is recorded).
    Canceled(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingRequest {
    pub id: String,
    pub kind: RequestKind,
    pub thread_id: String,
    pub turn_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettleError {
    #[error("no pending request `{0}`")]
    Unknown(String),
    #[error("request `{0}` is already settled")]
    AlreadySettled(String),
    /// The answer names a thread/turn or kind the request does not have.
    #[error("no pending request `{0}` on this route")]
    WrongRoute(String),
}

#[derive(Debug, Default)]
pub struct PendingTable {
    open: HashMap<String, PendingRequest>,
    settled: HashSet<String>,
}

impl PendingTable {
    /// Make a request pending (a fresh id; a reused one is refused).
    pub fn open(&mut self, req: PendingRequest) -> bool {
        if self.open.contains_key(&req.id) || self.settled.contains(&req.id) {
            return false;
        }
        self.open.insert(req.id.clone(), req);
        true
    }

    /// Take ownership of settling `id`. `route` is what the answer named:
    /// the kind and, when the route carries them, thread and turn.
    pub fn take(
        &mut self,
        id: &str,
        kind: Option<RequestKind>,
        thread: Option<&str>,
        turn: Option<&str>,
    ) -> Result<PendingRequest, SettleError> {
        let Some(req) = self.open.get(id) else {
            return Err(if self.settled.contains(id) {
                SettleError::AlreadySettled(id.into())
            } else {
                SettleError::Unknown(id.into())
            });
        };
        let route_ok = kind.is_none_or(|k| k == req.kind)
            && thread.is_none_or(|t| t == req.thread_id)
            && turn.is_none_or(|t| t == req.turn_id);
        if !route_ok {
            return Err(SettleError::WrongRoute(id.into()));
        }
        self.settled.insert(id.to_string());
        self.open
            .remove(id)
            .ok_or_else(|| SettleError::Unknown(id.into()))
    }

    /// Give a taken request back (its terminal event could not be made
    /// durable, so it is still pending).
    pub fn reopen(&mut self, req: PendingRequest) {
        self.settled.remove(&req.id);
        self.open.insert(req.id.clone(), req);
    }

    /// The open requests of a turn (to cancel when it ends).
    pub fn of_turn(&self, turn: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .open
            .values()
            .filter(|r| r.turn_id == turn)
            .map(|r| r.id.clone())
            .collect();
        v.sort();
        v
    }

    pub fn get(&self, id: &str) -> Option<&PendingRequest> {
        self.open.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &str, kind: RequestKind) -> PendingRequest {
        PendingRequest {
            id: id.into(),
            kind,
            thread_id: "thr_a".into(),
            turn_id: "turn_a".into(),
        }
    }

    #[test]
    fn exactly_one_settlement_wins() {
        let mut t = PendingTable::default();
        assert!(t.open(req("appr_1", RequestKind::Approval)));
        assert!(t.take("appr_1", None, None, None).is_ok());
        assert_eq!(
            t.take("appr_1", None, None, None),
            Err(SettleError::AlreadySettled("appr_1".into()))
        );
        assert_eq!(
            t.take("appr_2", None, None, None),
            Err(SettleError::Unknown("appr_2".into()))
        );
        assert!(
            !t.open(req("appr_1", RequestKind::Approval)),
            "ids are not reused"
        );
    }

    #[test]
    fn a_wrong_route_does_not_take_the_request() {
        let mut t = PendingTable::default();
        t.open(req("call_1", RequestKind::ToolCall));
        assert_eq!(
            t.take("call_1", Some(RequestKind::ToolCall), Some("thr_b"), None),
            Err(SettleError::WrongRoute("call_1".into()))
        );
        assert_eq!(
            t.take("call_1", Some(RequestKind::Approval), None, None),
            Err(SettleError::WrongRoute("call_1".into()))
        );
        // Positive control: the right route takes it.
        let r = t
            .take(
                "call_1",
                Some(RequestKind::ToolCall),
                Some("thr_a"),
                Some("turn_a"),
            )
            .unwrap();
        assert_eq!(r.id, "call_1");
    }

    #[test]
    fn a_failed_commit_reopens_the_request() {
        let mut t = PendingTable::default();
        t.open(req("appr_1", RequestKind::Approval));
        let r = t.take("appr_1", None, None, None).unwrap();
        t.reopen(r);
        assert_eq!(t.of_turn("turn_a"), ["appr_1"]);
        assert!(t.take("appr_1", None, None, None).is_ok());
        assert!(t.of_turn("turn_a").is_empty());
    }

    #[test]
    fn terminal_events_per_family() {
        let a = Settlement::Answered(Answer::Approval {
            allow: true,
            remember: false,
        });
        assert_eq!(RequestKind::Approval.terminal_event(&a), "approval.decided");
        assert_eq!(
            RequestKind::Approval.terminal_event(&Settlement::TimedOut),
            "approval.timeout"
        );
        assert_eq!(
            RequestKind::ToolCall.terminal_event(&Settlement::Canceled("x".into())),
            "tool_call.canceled"
        );
        assert_eq!(
            RequestKind::UserInput.terminal_event(&Settlement::TimedOut),
            "user_input.canceled"
        );
        for e in [
            "approval.decided",
            "approval.timeout",
            "user_input.answered",
            "tool_call.timeout",
        ] {
            assert!(RequestKind::from_terminal_event(e));
            assert!(super::super::event::EVENT_NAMES.contains(&e));
        }
        assert!(!RequestKind::from_terminal_event("approval.required"));
    }
}
