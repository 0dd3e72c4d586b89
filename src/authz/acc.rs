//! What the gates read and write: the [`Context`] they consult and the
//! running state ([`Acc`]) they tighten. Its own module so that the
//! pipeline, which runs the gates, and the gates, which take these, do not
//! import each other.

use super::call::{Admission, SessionGrants, ToolRegistry};
use super::floor::FloorContext;
use super::hooks::HookAnswer;
use super::rules::RuleSet;
use super::verdict::{AskKind, DecidedBy, Decision, Gate, GateOutcome, Question};
use crate::policy::SandboxMode;
use std::path::Path;

/// Everything besides the call and the posture that the gates consult.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub rules: &'a RuleSet,
    pub hooks: &'a [HookAnswer],
    pub grants: &'a SessionGrants,
    pub registry: &'a ToolRegistry,
    pub admission: &'a Admission,
    pub workspace: &'a Path,
    pub floor: &'a FloorContext,
    /// The mode the call runs under if allowed: the sandbox context's
    /// policy mode, handed in as a plain value (gate 9 names it; the gates
    /// never derive it).
    pub sandbox: SandboxMode,
}

/// The running state while the gates are applied.
pub(super) struct Acc {
    pub(super) decision: Decision,
    pub(super) by: DecidedBy,
    pub(super) gate: Gate,
    pub(super) reason: String,
    pub(super) ask_kind: Option<AskKind>,
    pub(super) hard: bool,
    pub(super) to_reviewer: bool,
    pub(super) question: Option<Question>,
    pub(super) trace: Vec<GateOutcome>,
}

impl Acc {
    pub(super) fn new() -> Self {
        Acc {
            decision: Decision::Allow,
            by: DecidedBy::Posture,
            gate: Gate::Baseline,
            reason: "nothing objected".into(),
            ask_kind: None,
            hard: false,
            to_reviewer: false,
            question: None,
            trace: Vec::new(),
        }
    }

    /// A deny something else may still be outranked by (a hard deny wins
    /// over it).
    pub(super) fn deny(&mut self, gate: Gate, by: DecidedBy, reason: &str) {
        self.tighten(gate, Decision::Deny, by, None, false, reason);
    }

    /// A deny nothing may override (rules-file deny, hook exit 2, floor
    /// reject, repository block).
    pub(super) fn deny_hard(&mut self, gate: Gate, by: DecidedBy, reason: &str) {
        self.tighten(gate, Decision::Deny, by, None, true, reason);
    }

    /// A question, released as its `kind` allows.
    pub(super) fn ask(&mut self, gate: Gate, by: DecidedBy, kind: AskKind, reason: &str) {
        self.tighten(gate, Decision::Ask, by, Some(kind), false, reason);
    }

    /// A question only an explicit human `y` releases.
    pub(super) fn hold(&mut self, gate: Gate, by: DecidedBy, reason: &str) {
        self.ask(gate, by, AskKind::Hold, reason);
    }

    /// The gate allows the call (it explains an allowed call; it never
    /// loosens an earlier ask or deny).
    pub(super) fn allowed(&mut self, gate: Gate, by: DecidedBy, reason: &str) {
        self.note(gate, Some(Decision::Allow), Some(by), reason);
    }

    /// Replace the outcome with an allow: only where the spec permits a
    /// loosening (gate 5's allow over an ordinary ask, gate 8's answers).
    pub(super) fn waive(&mut self, gate: Gate, by: DecidedBy, reason: &str) {
        self.set(gate, Decision::Allow, by, reason);
    }

    /// The gate has nothing to say.
    pub(super) fn pass(&mut self, gate: Gate, note: &str) {
        self.note(gate, None, None, note);
    }

    /// The gate has nothing to decide, but `by` is who it speaks for (the
    /// posture at gate 1, the sandbox at gate 9).
    pub(super) fn pass_by(&mut self, gate: Gate, by: DecidedBy, note: &str) {
        self.note(gate, None, Some(by), note);
    }

    /// A question the gate would raise but the posture does not (a rule's
    /// ask in Full Access; one routed to the model reviewer): traced only.
    pub(super) fn would_ask(&mut self, gate: Gate, by: DecidedBy, note: &str) {
        self.note(gate, Some(Decision::Ask), Some(by), note);
    }

    /// The question stays open for the human at gate 8.
    pub(super) fn waiting(&mut self, gate: Gate, note: &str) {
        self.note(gate, Some(Decision::Ask), None, note);
    }

    /// Strictest wins: adopt `d` when it is stricter (or, for two asks, when
    /// it is less releasable).
    fn tighten(
        &mut self,
        gate: Gate,
        d: Decision,
        by: DecidedBy,
        kind: Option<AskKind>,
        hard: bool,
        reason: &str,
    ) {
        let adopt = d > self.decision
            || (d == Decision::Ask && self.decision == Decision::Ask && kind > self.ask_kind)
            || (d == Decision::Deny && self.decision == Decision::Deny && hard && !self.hard);
        if adopt {
            self.decision = d;
            self.by = by;
            self.gate = gate;
            self.reason = reason.to_string();
            self.ask_kind = if d == Decision::Ask { kind } else { None };
            self.hard = hard && d == Decision::Deny;
        }
        self.note(gate, Some(d), Some(by), reason);
    }

    /// Replace the outcome (see [`Acc::waive`]).
    fn set(&mut self, gate: Gate, d: Decision, by: DecidedBy, reason: &str) {
        self.decision = d;
        self.by = by;
        self.gate = gate;
        self.reason = reason.to_string();
        if d != Decision::Ask {
            self.ask_kind = None;
            self.to_reviewer = false;
        }
        self.note(gate, Some(d), Some(by), reason);
    }

    fn note(&mut self, gate: Gate, produced: Option<Decision>, by: Option<DecidedBy>, note: &str) {
        if produced == Some(Decision::Allow) && self.decision == Decision::Allow && by.is_some() {
            // The latest explicit allow explains an allowed call.
            self.reason = note.to_string();
            self.gate = gate;
            self.by = by.unwrap_or(self.by);
        }
        self.trace.push(GateOutcome {
            gate,
            produced,
            running: self.decision,
            by,
            note: note.to_string(),
        });
    }

    pub(super) fn denied(&self) -> bool {
        self.decision == Decision::Deny
    }
}
