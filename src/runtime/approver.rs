//! Gate 8 with a person behind it: a question the gates ask becomes a
//! pending approval that a runtime client answers (`POST
//! /v1/approvals/{id}`, JSON-RPC `approval/decide`). Allows and denies of
//! the gates pass through unchanged; nothing here can turn a deny into an
//! allow. With the thread's `auto_approve`, ordinary questions are approved
//! as `exec --auto` does (never a hold; the sandbox stays) — holds still go
//! to the person.
//!
//! `remember` is recorded with the decision but grants nothing yet (there
//! is no session-rule store in the runtime).

use super::pending::{Answer, RequestKind, Settlement};
use super::store::Runtime;
use super::tap::TapHandle;
use super::TurnRecord;
use crate::agent::authorizer::{resolve_headless, Resolution, ToolCallRequest, TurnContext};
use crate::agent::{Approver, AuthDecision, DecidedBy, Decision};
use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub struct RuntimeApprover {
    pub rt: Runtime,
    pub turn: TurnRecord,
    pub tap: TapHandle,
    pub auto_approve: bool,
    /// How long a question waits before it is denied as `no response`.
    pub timeout: Duration,
}

impl Approver for RuntimeApprover {
    fn resolve<'a>(
        &'a self,
        call: &'a ToolCallRequest,
        d: &'a AuthDecision,
        ctx: &'a TurnContext,
    ) -> Pin<Box<dyn Future<Output = Resolution> + Send + 'a>> {
        Box::pin(async move {
            if d.decision != Decision::Ask || (self.auto_approve && !d.hold) {
                let mut c = ctx.clone();
                c.auto = self.auto_approve;
                return resolve_headless(d, &c);
            }
            let payload = json!({
                "tool": call.tool,
                "tool_call_id": call.call_id,
                "command": call.command,
                "reason": d.reason,
                "asked_by": d.decided_by.as_str(),
                "gate": d.gate,
                "hold": d.hold,
                // A rule caused the question: say which (explanatory only).
                "matched_rule": (d.decided_by == DecidedBy::Rule).then(|| d.reason.clone()),
                "timeout_ms": self.timeout.as_millis() as u64,
            });
            let item = self.tap.item_of_call(&call.call_id);
            let res = self
                .rt
                .request(
                    RequestKind::Approval,
                    &self.turn,
                    item.as_deref(),
                    payload,
                    self.timeout,
                )
                .await;
            let r = |run, outcome, decided_by, reason: String| Resolution {
                run,
                outcome,
                decided_by,
                reason,
            };
            match res {
                Ok((_, Settlement::Answered(Answer::Approval { allow: true, .. }))) => r(
                    true,
                    "allow",
                    DecidedBy::You,
                    format!("{} — approved by the runtime client", d.reason),
                ),
                Ok((_, Settlement::Answered(_))) => r(
                    false,
                    "deny",
                    DecidedBy::You,
                    format!("{} — denied by the runtime client", d.reason),
                ),
                Ok((_, Settlement::TimedOut)) => r(
                    false,
                    "no_response",
                    DecidedBy::NoResponse,
                    format!(
                        "{} (asked by {}) — no response within {} s",
                        d.reason,
                        d.decided_by.as_str(),
                        self.timeout.as_secs()
                    ),
                ),
                Ok((_, Settlement::Canceled(why))) => r(
                    false,
                    "no_response",
                    DecidedBy::NoResponse,
                    format!("{} — the question was withdrawn ({why})", d.reason),
                ),
                Err(e) => r(
                    false,
                    "deny",
                    DecidedBy::NoResponse,
                    format!(
                        "{} — the question could not be recorded ({e}); not run",
                        d.reason
                    ),
                ),
            }
        })
    }
}
