//! The reviewer's answer: one JSON object, parsed strictly.
//!
//! Accepted: `{"risk": "low|medium|high|critical", "decision":
//! "allow|deny", "reason": "…"}` with surrounding whitespace or inside one
//! fenced block (```` ```json … ``` ````). Everything else — prose around
//! it, extra, missing or repeated keys, other values, an empty reason — is
//! [`ReviewVerdict::Unavailable`]: a deny recorded apart from the
//! reviewer's own denies. `allow` with `high` or `critical` risk is a deny.

use serde::{Deserialize, Serialize};

/// The risk the reviewer assigns. Ordered low → critical.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    Low,
    Medium,
    High,
    Critical,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

impl std::fmt::Display for Risk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision of one review, as events and receipts carry it.
/// `Unavailable` (no answer could be used) is apart from `Deny` (the
/// reviewer's own), and both mean the call does not run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewDecision {
    Allow,
    Deny,
    /// The fail-closed value, also what a record without one reads as.
    #[default]
    Unavailable,
}

impl ReviewDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewDecision::Allow => "allow",
            ReviewDecision::Deny => "deny",
            ReviewDecision::Unavailable => "unavailable",
        }
    }
}

impl std::fmt::Display for ReviewDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one review decided. `Unavailable` is its own value: no reviewer
/// answer could be used (timeout, HTTP error, cut stream, malformed
/// answer, oversized input), and the call does not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ReviewVerdict {
    Allow { risk: Risk, reason: String },
    Deny { risk: Risk, reason: String },
    Unavailable { reason: String },
}

impl ReviewVerdict {
    /// An unavailable verdict with `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        ReviewVerdict::Unavailable {
            reason: reason.into(),
        }
    }

    /// Whether the call runs.
    pub fn is_allow(&self) -> bool {
        matches!(self, ReviewVerdict::Allow { .. })
    }

    /// `allow`, `deny` or `unavailable` (the `decision` of
    /// `auto_review.decided`).
    pub fn decision(&self) -> ReviewDecision {
        match self {
            ReviewVerdict::Allow { .. } => ReviewDecision::Allow,
            ReviewVerdict::Deny { .. } => ReviewDecision::Deny,
            ReviewVerdict::Unavailable { .. } => ReviewDecision::Unavailable,
        }
    }

    pub fn risk(&self) -> Option<Risk> {
        match self {
            ReviewVerdict::Allow { risk, .. } | ReviewVerdict::Deny { risk, .. } => Some(*risk),
            ReviewVerdict::Unavailable { .. } => None,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            ReviewVerdict::Allow { reason, .. }
            | ReviewVerdict::Deny { reason, .. }
            | ReviewVerdict::Unavailable { reason } => reason,
        }
    }

    /// The decider as receipts print it: `reviewer (low): …` or
    /// `reviewer unavailable: timeout`.
    pub fn decider_label(&self) -> String {
        match self {
            ReviewVerdict::Allow { risk, reason } | ReviewVerdict::Deny { risk, reason } => {
                format!("reviewer ({risk}): {reason}")
            }
            ReviewVerdict::Unavailable { reason } => format!("reviewer unavailable: {reason}"),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawDecision {
    Allow,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    risk: Risk,
    decision: RawDecision,
    reason: String,
}

/// The JSON text inside one fenced block, or the whole text; `None` when
/// a fence is opened and not closed, or text surrounds the fence.
fn unfence(text: &str) -> Option<&str> {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return Some(t);
    };
    // The info string (`json`) runs to the end of the opening line.
    let (info, body) = rest.split_once('\n')?;
    if !info.trim().is_empty() && !info.trim().eq_ignore_ascii_case("json") {
        return None;
    }
    let body = body.trim_end().strip_suffix("```")?;
    if body.contains("```") {
        return None;
    }
    Some(body.trim())
}

/// The verdict an answer text stands for (see the module docs).
pub fn parse_answer(text: &str) -> ReviewVerdict {
    let Some(json) = unfence(text) else {
        return ReviewVerdict::unavailable("malformed answer: text around or inside the fence");
    };
    let raw: RawAnswer = match serde_json::from_str(json) {
        Ok(r) => r,
        Err(e) => {
            return ReviewVerdict::unavailable(format!(
                "malformed answer: not the one JSON object asked for ({e})"
            ))
        }
    };
    let reason = raw.reason.trim().to_string();
    if reason.is_empty() {
        return ReviewVerdict::unavailable("malformed answer: empty reason");
    }
    match (raw.decision, raw.risk) {
        (RawDecision::Allow, risk @ (Risk::Low | Risk::Medium)) => {
            ReviewVerdict::Allow { risk, reason }
        }
        (RawDecision::Allow, risk) => ReviewVerdict::Deny {
            risk,
            reason: format!("allowed at {risk} risk, which is a deny: {reason}"),
        },
        (RawDecision::Deny, risk) => ReviewVerdict::Deny { risk, reason },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unavailable(v: &ReviewVerdict) -> bool {
        matches!(v, ReviewVerdict::Unavailable { .. })
    }

    #[test]
    fn the_one_object_is_obeyed() {
        let v = parse_answer(r#"{"risk":"low","decision":"allow","reason":"builds the crate"}"#);
        assert_eq!(
            v,
            ReviewVerdict::Allow {
                risk: Risk::Low,
                reason: "builds the crate".into()
            }
        );
        let v = parse_answer(r#" {"risk":"medium","decision":"deny","reason":"uploads"} "#);
        assert_eq!(v.decision(), ReviewDecision::Deny);
        assert_eq!(v.risk(), Some(Risk::Medium));
    }

    #[test]
    fn a_fenced_block_is_tolerated() {
        for t in [
            "```json\n{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}\n```",
            "\n```\n{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}\n```\n",
        ] {
            assert!(parse_answer(t).is_allow(), "{t}");
        }
    }

    #[test]
    fn anything_else_is_unavailable() {
        for t in [
            "",
            "Sure! It is safe.",
            "The answer: {\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}",
            "{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"} thanks",
            "```json\n{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}\n``` more",
            "```json\n{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}",
            "```python\n{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}\n```",
            "{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\",\"note\":\"x\"}",
            "{\"risk\":\"low\",\"decision\":\"allow\"}",
            "{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"   \"}",
            "{\"risk\":\"none\",\"decision\":\"allow\",\"reason\":\"ok\"}",
            "{\"risk\":\"low\",\"decision\":\"yes\",\"reason\":\"ok\"}",
            "{\"risk\":\"Low\",\"decision\":\"allow\",\"reason\":\"ok\"}",
            "{\"risk\":\"low\",\"decision\":\"deny\",\"decision\":\"allow\",\"reason\":\"ok\"}",
            "[{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}]",
            "{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":7}",
        ] {
            assert!(unavailable(&parse_answer(t)), "{t:?}");
        }
    }

    #[test]
    fn allow_at_high_or_critical_risk_is_a_deny() {
        for r in ["high", "critical"] {
            let t = format!(r#"{{"risk":"{r}","decision":"allow","reason":"fine"}}"#);
            let v = parse_answer(&t);
            assert_eq!(v.decision(), ReviewDecision::Deny, "{t}");
            assert!(v.reason().contains("fine"));
        }
        // Positive control: the same answer at medium is an allow.
        assert!(parse_answer(r#"{"risk":"medium","decision":"allow","reason":"fine"}"#).is_allow());
    }

    #[test]
    fn labels_keep_unavailable_apart() {
        assert_eq!(
            ReviewVerdict::unavailable("timeout").decider_label(),
            "reviewer unavailable: timeout"
        );
        let d = parse_answer(r#"{"risk":"high","decision":"deny","reason":"uploads keys"}"#);
        assert_eq!(d.decider_label(), "reviewer (high): uploads keys");
        let j = serde_json::to_value(ReviewVerdict::unavailable("503")).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"decision": "unavailable", "reason": "503"})
        );
    }

    proptest! {
        /// No input makes the parser panic, and only a well-formed object
        /// with an allowed risk is ever an allow.
        #[test]
        fn only_the_exact_shape_allows(s in ".{0,200}") {
            let v = parse_answer(&s);
            if v.is_allow() {
                let inner = unfence(&s).unwrap();
                let j: serde_json::Value = serde_json::from_str(inner).unwrap();
                prop_assert_eq!(j.as_object().unwrap().len(), 3);
                prop_assert!(matches!(v.risk(), Some(Risk::Low | Risk::Medium)));
            }
        }

        /// Any extra key turns a valid allow into unavailable.
        #[test]
        fn an_extra_key_is_unavailable(key in "[a-z_]{1,12}") {
            prop_assume!(!["risk", "decision", "reason"].contains(&key.as_str()));
            let t = format!(r#"{{"risk":"low","decision":"allow","reason":"ok","{key}":1}}"#);
            prop_assert!(unavailable(&parse_answer(&t)));
        }
    }
}
