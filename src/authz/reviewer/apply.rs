//! Gate 8 answered by the reviewer: the verdict after a review.

use super::answer::ReviewVerdict;
use crate::authz::verdict::{AskKind, DecidedBy, Decision, Gate, Question, Verdict};

impl Verdict {
    /// Apply the reviewer's answer to an open question that went to it
    /// ([`Verdict::to_reviewer`]); any other verdict is returned as it is
    /// (the reviewer never answers a hold, a rule question or a deny).
    /// An allow runs this one call (no session grant; identical calls are
    /// reviewed again) and never skips gate 9; a deny and an unavailable
    /// review do not run it, decided `by reviewer` / `by reviewer
    /// unavailable` with the risk and reason.
    pub fn answer_review(mut self, r: &ReviewVerdict) -> Verdict {
        if self.decision != Decision::Ask
            || !self.to_reviewer
            || self.ask_kind != Some(AskKind::Ordinary)
        {
            return self;
        }
        let question = Question {
            asked_by: self.decided_by,
            gate: self.gate,
            kind: AskKind::Ordinary,
            reason: self.reason.clone(),
        };
        let (d, by) = match r {
            ReviewVerdict::Allow { .. } => (Decision::Allow, DecidedBy::Reviewer),
            ReviewVerdict::Deny { .. } => (Decision::Deny, DecidedBy::Reviewer),
            ReviewVerdict::Unavailable { .. } => (Decision::Deny, DecidedBy::ReviewerUnavailable),
        };
        let note = match r {
            ReviewVerdict::Allow { risk, reason } | ReviewVerdict::Deny { risk, reason } => {
                format!("({risk}) {reason}")
            }
            ReviewVerdict::Unavailable { reason } => reason.clone(),
        };
        self.question = Some(question);
        self.decision = d;
        self.decided_by = by;
        self.gate = Gate::Human;
        self.reason = note.clone();
        self.ask_kind = None;
        self.to_reviewer = false;
        if let Some(g) = self.trace.iter_mut().find(|g| g.gate == Gate::Human) {
            g.produced = Some(d);
            g.running = d;
            g.by = Some(by);
            g.note = note;
        }
        self
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::answer::Risk;
    use super::*;

    fn open() -> Verdict {
        let mut v = Verdict::decided(Decision::Ask, DecidedBy::Posture, Gate::Baseline, "q");
        v.to_reviewer = true;
        v
    }

    #[test]
    fn allow_runs_deny_and_unavailable_do_not() {
        let a = open().answer_review(&ReviewVerdict::Allow {
            risk: Risk::Low,
            reason: "builds".into(),
        });
        assert!(a.is_allowed());
        assert_eq!(a.decided_by, DecidedBy::Reviewer);
        assert_eq!(a.reason, "(low) builds");
        assert_eq!(a.asked_by(), Some(DecidedBy::Posture));
        let d = open().answer_review(&ReviewVerdict::Deny {
            risk: Risk::High,
            reason: "uploads".into(),
        });
        assert!(!d.is_allowed());
        assert_eq!(d.outcome(), "deny");
        assert_eq!(d.decided_by.as_str(), "reviewer");
        let u = open().answer_review(&ReviewVerdict::unavailable("timeout"));
        assert!(!u.is_allowed());
        assert_eq!(u.decided_by.as_str(), "reviewer unavailable");
        assert_eq!(u.reason, "timeout");
    }

    #[test]
    fn only_a_question_for_the_reviewer_is_answered() {
        let allow = ReviewVerdict::Allow {
            risk: Risk::Low,
            reason: "x".into(),
        };
        let mut hold = open();
        hold.ask_kind = Some(AskKind::Hold);
        assert!(!hold.answer_review(&allow).is_allowed());
        let mut human = open();
        human.to_reviewer = false;
        assert!(!human.answer_review(&allow).is_allowed());
        let deny = Verdict::decided(Decision::Deny, DecidedBy::Rule, Gate::Rules, "r");
        assert!(!deny.answer_review(&allow).is_allowed());
        // Positive control.
        assert!(open().answer_review(&allow).is_allowed());
    }
}
