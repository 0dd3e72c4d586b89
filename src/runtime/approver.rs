//! Gate 8 with a person behind it: a question the pipeline leaves open
//! (the runtime's posture is not headless) becomes a pending approval that
//! a runtime client answers (`POST /v1/approvals/{id}`, JSON-RPC
//! `approval/decide`). Verdicts that are already final pass through
//! unchanged; nothing here can turn a deny into an allow. With the
//! thread's `auto_approve`, ordinary questions are approved as `exec
//! --auto` does (never a hold; the sandbox stays) — holds still go to the
//! person.
//!
//! `remember` is "always for this kind": the answer becomes a session
//! grant of the thread (the same grant an interactive `a` makes), so later
//! calls of the same kind pass gate 8 "by session rule" without a
//! question. A hold is never granted for the session (it is released one
//! call at a time), and the grant lasts while this server runs.

use super::pending::{Answer, RequestKind, Settlement};
use super::store::Runtime;
use super::tap::TapHandle;
use super::TurnRecord;
use crate::agent::authorizer::{ToolCallRequest, TurnContext};
use crate::agent::{Approver, DecidedBy, Verdict};
use crate::authz::call::SessionGrants;
use crate::authz::pipeline::HumanAnswer;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct RuntimeApprover {
    pub rt: Runtime,
    pub turn: TurnRecord,
    pub tap: TapHandle,
    pub auto_approve: bool,
    /// How long a question waits before it is denied as `no response`.
    pub timeout: Duration,
    /// The thread's session grants (shared with the authorizer).
    pub grants: Arc<Mutex<SessionGrants>>,
}

impl Approver for RuntimeApprover {
    fn settle<'a>(
        &'a self,
        call: &'a ToolCallRequest,
        v: Verdict,
        ctx: &'a TurnContext,
    ) -> Pin<Box<dyn Future<Output = Verdict> + Send + 'a>> {
        Box::pin(async move {
            if !v.needs_answer() {
                return v;
            }
            if self.auto_approve && !v.is_hold() {
                return v.answer_headless(true);
            }
            // A sub-agent's question is asked on the parent's thread, as
            // `agent:<id>` with its role (docs/SUBAGENTS.md).
            let asked_by = match &ctx.agent {
                Some(a) => Some(a.asked_by()),
                None => v.asked_by().map(|b| b.as_str().to_string()),
            };
            let ask = super::item_meta::ApprovalAsk {
                approval_id: String::new(),
                tool: call.tool.clone(),
                tool_call_id: call.call_id.clone(),
                command: call.command.clone(),
                reason: v.reason.clone(),
                asked_by,
                agent_role: ctx.agent.as_ref().map(|a| a.role.as_str().to_string()),
                gate: v.reported_gate().number(),
                hold: v.is_hold(),
                // A rule caused the question: say so (explanatory only).
                matched_rule: (v.asked_by() == Some(DecidedBy::Rule)).then(|| v.reason.clone()),
                timeout_ms: self.timeout.as_millis() as u64,
            };
            let payload = serde_json::to_value(&ask).unwrap_or(Value::Null);
            // A sub-agent's call is keyed by its agent in the tap (its
            // call ids are its own); null until the tap has seen it.
            let item = match &ctx.agent {
                Some(a) => self.tap.item_of_call(&format!("{}/{}", a.id, call.call_id)),
                None => self.tap.item_of_call(&call.call_id),
            };
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
            let mut grants = self.grants.lock().unwrap_or_else(|e| e.into_inner());
            match res {
                Ok((
                    _,
                    Settlement::Answered(Answer::Approval {
                        allow: true,
                        remember,
                    }),
                )) => {
                    let how = if remember {
                        HumanAnswer::Session
                    } else {
                        HumanAnswer::Once
                    };
                    v.answer(how, &mut grants)
                }
                Ok((_, Settlement::Answered(_))) => v.answer(HumanAnswer::Deny, &mut grants),
                // Timed out, withdrawn with the turn, or not recordable:
                // nobody answered.
                _ => v.answer_headless(false),
            }
        })
    }
}
