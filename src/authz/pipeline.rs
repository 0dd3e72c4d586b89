//! The nine gates as one pure function: [`authorize`].
//!
//! Inputs: the tool call, the posture (gate 1's output), and a [`Context`]
//! holding the rules, the hooks' answers (run beforehand by
//! [`super::hooks::run_before`]), the session grants, the tool registry and
//! admission lists, and host facts. No I/O happens here, so the same inputs
//! always give the same [`Verdict`].
//!
//! Monotonicity: gates 6 and 7 can only tighten (`max`); gate 5's allow only
//! waives gate 4's *ordinary* ask; gate 8 answers only questions, and only
//! within what their [`AskKind`] permits; a deny is final.

use super::acc::Acc;
pub use super::acc::Context;
use super::call::{grant_key, SessionGrants, ToolCall, ToolKind};
use super::gates::{gate_admission, gate_baseline, gate_floor, gate_hooks, gate_human};
use super::posture::{Approval, Posture};
use super::repo::{self, RepoFinding};
use super::rules::RuleQuery;
use super::shell::{self, Analysis};
use super::verdict::{AskKind, DecidedBy, Decision, Gate, Question, Verdict};

/// Run the nine gates for one call. Gate 8 answers what the session grants
/// and the posture can; a remaining `Ask` waits for [`Verdict::answer`].
pub fn authorize(call: &ToolCall, posture: &Posture, ctx: &Context<'_>) -> Verdict {
    let mut acc = Acc::new();
    let spec = ctx.registry.get(&call.tool);
    let kind = spec.map(|s| s.kind);
    let command = if kind == Some(ToolKind::Shell) {
        call.command_line()
    } else {
        None
    };
    let mut analysis: Option<Analysis> = command.as_deref().map(shell::analyze);
    // `shell {"background": true}` is a background task as a whole: every
    // piece of it runs in the background, so the floor's "destructive
    // background task" hold applies as it does to a trailing `&`.
    if call.runs_in_background() {
        for p in analysis.iter_mut().flat_map(|a| a.pieces.iter_mut()) {
            p.background = true;
        }
    }
    let paths = call.target_paths();
    let full = posture.approval == Approval::FullAccess;

    // Gate 1: settings and posture.
    acc.pass_by(
        Gate::Settings,
        DecidedBy::Posture,
        &posture.describe(ctx.sandbox),
    );

    // Gate 2: mode and tool admission.
    gate_admission(
        &mut acc,
        call,
        posture,
        ctx,
        kind,
        spec.is_some_and(|s| s.executable),
    );

    // Gate 3: hooks (answers computed beforehand).
    if !acc.denied() {
        gate_hooks(&mut acc, ctx.hooks);
    }

    // Gate 4: the tool's baseline approval.
    if !acc.denied() {
        gate_baseline(
            &mut acc,
            posture,
            kind,
            analysis.as_ref(),
            &paths,
            call,
            ctx,
        );
    }

    // Gate 5: the rules file.
    if !acc.denied() {
        let q = RuleQuery {
            tool: &call.tool,
            workspace: ctx.workspace,
            shell: analysis.as_ref(),
            paths: &paths,
        };
        let out = ctx.rules.evaluate(&q);
        match out.decision {
            None => acc.pass(Gate::Rules, "no rule matches"),
            Some(Decision::Deny) if out.hard => {
                acc.deny_hard(Gate::Rules, DecidedBy::Rule, &out.because)
            }
            Some(Decision::Deny) => acc.deny(Gate::Rules, DecidedBy::Rule, &out.because),
            Some(Decision::Ask) => {
                if full {
                    acc.would_ask(
                        Gate::Rules,
                        DecidedBy::Rule,
                        &format!("{} — does not prompt in Full Access", out.because),
                    );
                } else {
                    acc.ask(Gate::Rules, DecidedBy::Rule, AskKind::Rule, &out.because)
                }
            }
            Some(Decision::Allow) => {
                let certain = analysis.as_ref().is_none_or(Analysis::is_certain);
                if acc.decision == Decision::Ask
                    && acc.ask_kind == Some(AskKind::Ordinary)
                    && certain
                {
                    acc.waive(
                        Gate::Rules,
                        DecidedBy::Rule,
                        &format!("{} waives the ordinary approval", out.because),
                    );
                } else {
                    acc.allowed(
                        Gate::Rules,
                        DecidedBy::Rule,
                        &format!("{} (allow waives only an ordinary approval)", out.because),
                    );
                }
            }
        }
    }

    // Gate 6: auto-review (deterministic layer) + safety floor.
    if !acc.denied() {
        gate_floor(
            &mut acc,
            posture,
            command.as_deref(),
            analysis.as_ref(),
            ctx,
        );
    }

    // Gate 7: repository rules.
    if !acc.denied() {
        let mut written = if kind == Some(ToolKind::Write) {
            paths.clone()
        } else {
            Vec::new()
        };
        if let Some(a) = &analysis {
            written.extend(repo::shell_write_targets(a));
        }
        let cwd = if call.cwd.as_os_str().is_empty() {
            ctx.workspace
        } else {
            call.cwd.as_path()
        };
        match repo::check(&written, cwd, ctx.workspace, ctx.floor) {
            Some(RepoFinding::Block(r)) => {
                acc.deny_hard(Gate::Repository, DecidedBy::Repository, &r)
            }
            Some(RepoFinding::Question(r)) if full => acc.deny_hard(
                Gate::Repository,
                DecidedBy::Repository,
                &format!("{r} (a repository question is a block in Full Access)"),
            ),
            Some(RepoFinding::Question(r)) => acc.hold(Gate::Repository, DecidedBy::Repository, &r),
            None => acc.pass(Gate::Repository, "no protected path written"),
        }
    }

    // Gate 8: human approval — what can be answered without asking.
    let key = grant_key(call, analysis.as_ref());
    gate_human(&mut acc, posture, ctx.grants, &key, ctx.sandbox);

    // Gate 9: worker permissions + sandbox (enforced when the host runs it).
    let sandbox = ctx.sandbox;
    if acc.denied() {
        acc.pass(Gate::Sandbox, "not reached");
    } else {
        acc.pass_by(
            Gate::Sandbox,
            DecidedBy::Sandbox,
            &format!("runs under the `{sandbox}` sandbox policy"),
        );
    }

    Verdict {
        decision: acc.decision,
        decided_by: acc.by,
        gate: acc.gate,
        reason: acc.reason,
        ask_kind: acc.ask_kind,
        hard: acc.hard,
        // Only an ordinary question goes to the model reviewer; holds and
        // rule questions are the human's.
        to_reviewer: acc.to_reviewer
            && acc.decision == Decision::Ask
            && acc.ask_kind == Some(AskKind::Ordinary)
            && !posture.headless,
        grant_key: key,
        sandbox: Some(sandbox),
        question: acc.question,
        trace: acc.trace,
    }
}

/// The human's answer at gate 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HumanAnswer {
    /// `y`: this call only.
    Once,
    /// `a`: this kind for the rest of the session.
    Session,
    /// `n`: deny.
    Deny,
}

impl Verdict {
    /// Apply the human's answer to a pending question. An approval covers
    /// this one call and never skips gate 9; `a` records a session grant
    /// unless the question was a hold (holds are released one call at a time).
    pub fn answer(mut self, answer: HumanAnswer, grants: &mut SessionGrants) -> Verdict {
        if self.decision != Decision::Ask {
            return self;
        }
        // Keep the question as it stood (receipts count it as asked and
        // name who answered: "approved by you", "denied by you").
        let question = Question {
            asked_by: self.decided_by,
            gate: self.gate,
            kind: self.ask_kind.unwrap_or(AskKind::Hold),
            reason: self.reason.clone(),
        };
        let (d, note) = match answer {
            HumanAnswer::Deny => (Decision::Deny, "you denied it".to_string()),
            HumanAnswer::Once => (Decision::Allow, "you approved this call".to_string()),
            HumanAnswer::Session => {
                if self.ask_kind == Some(AskKind::Hold) {
                    (
                        Decision::Allow,
                        "you approved this call (a hold is never granted for the session)"
                            .to_string(),
                    )
                } else {
                    grants.grant(self.grant_key.clone());
                    (
                        Decision::Allow,
                        format!("you approved `{}` for the session", self.grant_key),
                    )
                }
            }
        };
        self.question = Some(question);
        self.decision = d;
        self.decided_by = DecidedBy::You;
        self.gate = Gate::Human;
        self.reason = note.clone();
        self.ask_kind = None;
        self.to_reviewer = false;
        if let Some(g) = self.trace.iter_mut().find(|g| g.gate == Gate::Human) {
            g.produced = Some(d);
            g.running = d;
            g.by = Some(DecidedBy::You);
            g.note = note;
        }
        self
    }
}
