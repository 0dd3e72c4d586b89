//! Decisions, who made them, and the per-gate trace every verdict carries.
//!
//! [`Decision`] is ordered `Allow < Ask < Deny`, so "strictest wins" is
//! `max` everywhere. A [`Verdict`] keeps every gate's outcome so receipts can
//! say what ran, what did not, and who answered.

use crate::policy::SandboxMode;
use serde::{Deserialize, Serialize};

/// What happens to a tool call. The derive order *is* the strictness order.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Run it (still through gate 9, the sandbox).
    #[default]
    Allow,
    /// Hold it for a question (the human, or the model reviewer in Auto-Review).
    Ask,
    /// Do not run it.
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who produced the deciding answer (the spec's `decided_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// The human at gate 8.
    You,
    /// An earlier `a` ("this kind for the session") answer.
    SessionRule,
    /// The posture (mode × approval) or a tool's own baseline.
    Posture,
    /// A `permissions.toml` rule (user, agent or built-in layer).
    Rule,
    /// A `tool_call_before` hook.
    Hook,
    /// The safety floor (gate 6).
    Floor,
    /// Repository rules (gate 7).
    Repository,
    /// The OS or external sandbox (gate 9).
    Sandbox,
    /// A question nobody answered (headless without `--auto`: no human at
    /// gate 8).
    NoResponse,
    /// Auto-Review's model reviewer answered an ordinary question.
    Reviewer,
    /// Auto-Review's model reviewer gave no usable answer (timeout, HTTP
    /// error, cut stream, malformed answer, oversized input): not run.
    ReviewerUnavailable,
}

impl DecidedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::You => "you",
            DecidedBy::SessionRule => "session rule",
            DecidedBy::Posture => "posture",
            DecidedBy::Rule => "rule",
            DecidedBy::Hook => "hook",
            DecidedBy::Floor => "floor",
            DecidedBy::Repository => "repository",
            DecidedBy::Sandbox => "sandbox",
            DecidedBy::NoResponse => "no response",
            DecidedBy::Reviewer => "reviewer",
            DecidedBy::ReviewerUnavailable => "reviewer unavailable",
        }
    }
}

impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The nine gates, in their fixed order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    Settings = 1,
    Admission = 2,
    Hooks = 3,
    Baseline = 4,
    Rules = 5,
    Floor = 6,
    Repository = 7,
    Human = 8,
    Sandbox = 9,
}

impl Gate {
    pub const ALL: [Gate; 9] = [
        Gate::Settings,
        Gate::Admission,
        Gate::Hooks,
        Gate::Baseline,
        Gate::Rules,
        Gate::Floor,
        Gate::Repository,
        Gate::Human,
        Gate::Sandbox,
    ];

    pub fn number(self) -> u8 {
        self as u8
    }

    pub fn name(self) -> &'static str {
        match self {
            Gate::Settings => "settings and posture",
            Gate::Admission => "mode and tool admission",
            Gate::Hooks => "tool_call_before hooks",
            Gate::Baseline => "tool baseline",
            Gate::Rules => "rules file",
            Gate::Floor => "auto-review + safety floor",
            Gate::Repository => "repository rules",
            Gate::Human => "human approval",
            Gate::Sandbox => "tool permissions + sandbox",
        }
    }
}

/// How a question (an `Ask`) may be answered without the human saying `y`.
///
/// Ordered from most to least releasable; combining two asks keeps the
/// *least* releasable one (`max`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "kebab-case")]
pub enum AskKind {
    /// The ordinary approval a tool needs (gate 4): a rules-file allow waives
    /// it, a session grant answers it, Auto-Review may route it to the reviewer.
    #[default]
    Ordinary,
    /// A rules-file `ask`: a session grant answers it; no rule allow waives it.
    Rule,
    /// A hold (hook ask, safety floor, repository question, unparseable
    /// command): only an explicit human `y` releases it; never a rule, never a
    /// session grant. Full Access auto-approves it (a *releasable* hold).
    Hold,
}

/// One gate's contribution, as recorded in the trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateOutcome {
    pub gate: Gate,
    /// What the gate produced (`None`: nothing to say / not applicable).
    pub produced: Option<Decision>,
    /// The running decision after this gate.
    pub running: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<DecidedBy>,
    pub note: String,
}

/// The result of the pipeline for one tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub decision: Decision,
    pub decided_by: DecidedBy,
    /// The gate whose answer decided.
    pub gate: Gate,
    pub reason: String,
    /// For an `Ask`: how it may be released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_kind: Option<AskKind>,
    /// A deny nothing may override (rules-file deny, hook exit 2, floor
    /// reject, repository block, fatal headless hold).
    pub hard: bool,
    /// In Auto-Review: the question goes to the model reviewer, not the human.
    pub to_reviewer: bool,
    /// The session-grant key this call would be covered by after an `a`.
    pub grant_key: String,
    /// The sandbox mode the call runs under at gate 9 (`None` when denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// The question gate 8 answered — with no person there (approved by
    /// `--auto`, held, or left without a response), by the person (`y`,
    /// `a`, `n`), or by an earlier `a` (a session rule): who asked, at
    /// which gate, how it may be released. The verdict's own fields say
    /// how it was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
    pub trace: Vec<GateOutcome>,
}

/// A question as it stood before gate 8 (see [`Verdict::question`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub asked_by: DecidedBy,
    pub gate: Gate,
    pub kind: AskKind,
    pub reason: String,
}

/// How gate 8 answers `q` when no person is there (headless): `--auto`
/// (`auto`) approves an ordinary or rule question — the sandbox `sandbox`
/// stays — and never a hold, which stays the asker's deny; without `--auto`
/// nobody answers (`no response`). The pipeline's gate 8 and
/// [`Verdict::answer_headless`] both use this, so there is one rule.
pub fn headless_answer(
    q: &Question,
    auto: bool,
    sandbox: Option<SandboxMode>,
) -> (Decision, DecidedBy, String) {
    match (auto, q.kind) {
        (true, AskKind::Hold) => (
            Decision::Deny,
            q.asked_by,
            format!(
                "{} — held by {}; --auto never releases a hold (only a person can)",
                q.reason, q.asked_by
            ),
        ),
        (true, _) => (
            Decision::Allow,
            DecidedBy::Posture,
            match sandbox {
                Some(m) => format!("{} — approved by --auto (sandbox {m} kept)", q.reason),
                None => format!("{} — approved by --auto", q.reason),
            },
        ),
        (false, _) => (
            Decision::Deny,
            DecidedBy::NoResponse,
            format!(
                "{} (asked by {}) — nobody can answer in a headless run (no response); rerun with --auto to approve",
                q.reason, q.asked_by
            ),
        ),
    }
}

impl Verdict {
    /// A verdict decided at `gate` with nothing else to say (no question
    /// kind, no sandbox, no trace): for callers that decide before the
    /// pipeline (a tool the run does not offer) and for tests.
    pub fn decided(decision: Decision, decided_by: DecidedBy, gate: Gate, reason: &str) -> Self {
        Verdict {
            decision,
            decided_by,
            gate,
            reason: reason.to_string(),
            ask_kind: (decision == Decision::Ask).then_some(AskKind::Ordinary),
            hard: false,
            to_reviewer: false,
            grant_key: String::new(),
            sandbox: None,
            question: None,
            trace: Vec::new(),
        }
    }

    /// Answer a pending question the headless way ([`headless_answer`]);
    /// any other verdict is returned as it is.
    pub fn answer_headless(mut self, auto: bool) -> Verdict {
        if self.decision != Decision::Ask {
            return self;
        }
        let q = Question {
            asked_by: self.decided_by,
            gate: self.gate,
            kind: self.ask_kind.unwrap_or(AskKind::Hold),
            reason: self.reason.clone(),
        };
        let (d, by, reason) = headless_answer(&q, auto, self.sandbox);
        self.decision = d;
        self.decided_by = by;
        self.gate = Gate::Human;
        self.reason = reason.clone();
        self.ask_kind = None;
        self.to_reviewer = false;
        self.question = Some(q);
        if let Some(g) = self.trace.iter_mut().find(|g| g.gate == Gate::Human) {
            g.produced = Some(d);
            g.running = d;
            g.by = Some(by);
            g.note = reason;
        }
        self
    }

    /// What the gates said before a headless gate 8 answered: `Ask` when
    /// it answered a question, else the decision itself.
    pub fn gates_said(&self) -> Decision {
        if self.question.is_some() {
            Decision::Ask
        } else {
            self.decision
        }
    }

    /// What happened: `allow` (it runs), `no_response` (a question nobody
    /// answered) or `deny`.
    pub fn outcome(&self) -> &'static str {
        match (self.decision, self.decided_by) {
            (Decision::Allow, _) => "allow",
            (_, DecidedBy::NoResponse) => "no_response",
            _ => "deny",
        }
    }

    /// For a question: who asked.
    pub fn asked_by(&self) -> Option<DecidedBy> {
        match (&self.question, self.decision) {
            (Some(q), _) => Some(q.asked_by),
            (None, Decision::Ask) => Some(self.decided_by),
            _ => None,
        }
    }

    /// Whether the question (answered headless, or still pending) is a hold.
    pub fn held(&self) -> bool {
        match &self.question {
            Some(q) => q.kind == AskKind::Hold,
            None => self.is_hold(),
        }
    }

    /// The gate to report: the one that asked, for a question gate 8
    /// answered headless; else the deciding gate.
    pub fn reported_gate(&self) -> Gate {
        self.question.as_ref().map_or(self.gate, |q| q.gate)
    }

    /// One line per gate, as `codewhale permissions check` prints them.
    pub fn trace_lines(&self) -> Vec<String> {
        self.trace
            .iter()
            .map(|g| {
                format!(
                    "{}. {}: {} → {}{} {}",
                    g.gate.number(),
                    g.gate.name(),
                    g.produced.map(Decision::as_str).unwrap_or("-"),
                    g.running.as_str(),
                    g.by.map(|b| format!(" [{b}]")).unwrap_or_default(),
                    g.note
                )
            })
            .collect()
    }

    /// Whether the tool call may run now (gate 9 still applies).
    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }

    /// Whether the call waits for an answer at gate 8.
    pub fn needs_answer(&self) -> bool {
        self.decision == Decision::Ask
    }

    /// Whether the outcome is a hold (a question only a human `y` releases).
    pub fn is_hold(&self) -> bool {
        self.decision == Decision::Ask && self.ask_kind == Some(AskKind::Hold)
    }

    /// The sandbox mode gate 9 must apply, if the call runs.
    pub fn sandbox_mode(&self) -> Option<SandboxMode> {
        if self.decision == Decision::Deny {
            None
        } else {
            self.sandbox
        }
    }

    /// The trace entry of one gate.
    pub fn at(&self, gate: Gate) -> Option<&GateOutcome> {
        self.trace.iter().find(|g| g.gate == gate)
    }

    /// Gate 9 reported a denial (the sandbox refused): it stays a denial.
    pub fn record_sandbox_denial(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        self.decision = Decision::Deny;
        self.decided_by = DecidedBy::Sandbox;
        self.gate = Gate::Sandbox;
        self.hard = true;
        self.ask_kind = None;
        self.reason = reason.clone();
        if let Some(g) = self.trace.iter_mut().find(|g| g.gate == Gate::Sandbox) {
            g.produced = Some(Decision::Deny);
            g.running = Decision::Deny;
            g.by = Some(DecidedBy::Sandbox);
            g.note = reason;
        }
    }

    /// A human-readable, multi-line rendering with the gate-by-gate trace.
    pub fn render(&self) -> String {
        let mut s = format!(
            "verdict: {} (decided by {} at gate {} — {})\nreason: {}\n",
            self.decision,
            self.decided_by,
            self.gate.number(),
            self.gate.name(),
            self.reason
        );
        if let Some(k) = self.ask_kind {
            let kind = match k {
                AskKind::Ordinary => "ordinary approval",
                AskKind::Rule => "rule question",
                AskKind::Hold => "hold (only an explicit `y` releases it)",
            };
            s.push_str(&format!("question: {kind}\n"));
        }
        match self.sandbox_mode() {
            Some(m) => s.push_str(&format!("sandbox: {m}\n")),
            None => s.push_str("sandbox: (not run)\n"),
        }
        s.push_str("trace:\n");
        for g in &self.trace {
            let produced = g.produced.map(Decision::as_str).unwrap_or("-");
            let by = g.by.map(|b| format!(" [{b}]")).unwrap_or_default();
            s.push_str(&format!(
                "  {}. {:<28} {:<5} → {:<5}{} {}\n",
                g.gate.number(),
                g.gate.name(),
                produced,
                g.running.as_str(),
                by,
                g.note
            ));
        }
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn strictest_wins_is_max() {
        assert_eq!(Decision::Allow.max(Decision::Ask), Decision::Ask);
        assert_eq!(Decision::Deny.max(Decision::Ask), Decision::Deny);
        assert!(AskKind::Hold > AskKind::Rule && AskKind::Rule > AskKind::Ordinary);
    }

    #[test]
    fn gates_are_numbered_in_order() {
        for (i, g) in Gate::ALL.iter().enumerate() {
            assert_eq!(g.number() as usize, i + 1);
        }
    }
}
