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

use super::call::{grant_key, Admission, SessionGrants, ToolCall, ToolKind, ToolRegistry};
use super::floor::{self, FloorContext};
use super::hooks::HookAnswer;
use super::posture::{Approval, Mode, Posture};
use super::readonly;
use super::repo::{self, RepoFinding};
use super::rules::{RuleQuery, RuleSet};
use super::shell::{self, Analysis};
use super::unicode;
use super::verdict::{AskKind, DecidedBy, Decision, Gate, GateOutcome, Verdict};
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
}

/// The running state while the gates are applied.
struct Acc {
    decision: Decision,
    by: DecidedBy,
    gate: Gate,
    reason: String,
    ask_kind: Option<AskKind>,
    hard: bool,
    to_reviewer: bool,
    trace: Vec<GateOutcome>,
}

impl Acc {
    fn new() -> Self {
        Acc {
            decision: Decision::Allow,
            by: DecidedBy::Posture,
            gate: Gate::Baseline,
            reason: "nothing objected".into(),
            ask_kind: None,
            hard: false,
            to_reviewer: false,
            trace: Vec::new(),
        }
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

    /// Replace the outcome (only used where the spec permits a loosening:
    /// gate 5's allow over an ordinary ask, gate 8's answers).
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

    fn denied(&self) -> bool {
        self.decision == Decision::Deny
    }
}

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
    let analysis: Option<Analysis> = command.as_deref().map(shell::analyze);
    let paths = call.target_paths();
    let full = posture.approval == Approval::FullAccess;

    // Gate 1: settings and posture.
    acc.note(
        Gate::Settings,
        None,
        Some(DecidedBy::Posture),
        &posture.describe(),
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
            None => acc.note(Gate::Rules, None, None, "no rule matches"),
            Some(Decision::Deny) => acc.tighten(
                Gate::Rules,
                Decision::Deny,
                DecidedBy::Rule,
                None,
                out.hard,
                &out.because,
            ),
            Some(Decision::Ask) => {
                if full {
                    acc.note(
                        Gate::Rules,
                        Some(Decision::Ask),
                        Some(DecidedBy::Rule),
                        &format!("{} — does not prompt in Full Access", out.because),
                    );
                } else {
                    acc.tighten(
                        Gate::Rules,
                        Decision::Ask,
                        DecidedBy::Rule,
                        Some(AskKind::Rule),
                        false,
                        &out.because,
                    )
                }
            }
            Some(Decision::Allow) => {
                let certain = analysis.as_ref().is_none_or(Analysis::is_certain);
                if acc.decision == Decision::Ask
                    && acc.ask_kind == Some(AskKind::Ordinary)
                    && certain
                {
                    acc.set(
                        Gate::Rules,
                        Decision::Allow,
                        DecidedBy::Rule,
                        &format!("{} waives the ordinary approval", out.because),
                    );
                } else {
                    acc.note(
                        Gate::Rules,
                        Some(Decision::Allow),
                        Some(DecidedBy::Rule),
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
            Some(RepoFinding::Block(r)) => acc.tighten(
                Gate::Repository,
                Decision::Deny,
                DecidedBy::Repository,
                None,
                true,
                &r,
            ),
            Some(RepoFinding::Question(r)) if full => acc.tighten(
                Gate::Repository,
                Decision::Deny,
                DecidedBy::Repository,
                None,
                true,
                &format!("{r} (a repository question is a block in Full Access)"),
            ),
            Some(RepoFinding::Question(r)) => acc.tighten(
                Gate::Repository,
                Decision::Ask,
                DecidedBy::Repository,
                Some(AskKind::Hold),
                false,
                &r,
            ),
            None => acc.note(Gate::Repository, None, None, "no protected path written"),
        }
    }

    // Gate 8: human approval — what can be answered without asking.
    let key = grant_key(call, analysis.as_ref());
    gate_human(&mut acc, posture, ctx.grants, &key);

    // Gate 9: worker permissions + sandbox (enforced when the host runs it).
    let sandbox = posture.sandbox_mode();
    if acc.denied() {
        acc.note(Gate::Sandbox, None, None, "not reached");
    } else {
        acc.note(
            Gate::Sandbox,
            None,
            Some(DecidedBy::Sandbox),
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
        trace: acc.trace,
    }
}

fn gate_admission(
    acc: &mut Acc,
    call: &ToolCall,
    posture: &Posture,
    ctx: &Context<'_>,
    kind: Option<ToolKind>,
    executable: bool,
) {
    let name = call.tool.as_str();
    let deny = |acc: &mut Acc, why: &str| {
        acc.tighten(
            Gate::Admission,
            Decision::Deny,
            DecidedBy::Posture,
            None,
            false,
            why,
        )
    };
    let listed = |l: &[String]| l.iter().any(|t| t == name);
    let Some(kind) = kind else {
        return deny(acc, &format!("unknown tool `{name}`"));
    };
    if !executable {
        return deny(acc, &format!("tool `{name}` has no execution registration"));
    }
    if listed(&ctx.admission.allow) && listed(&ctx.admission.deny) {
        return deny(
            acc,
            &format!("tool `{name}` is in both the allow and the deny list"),
        );
    }
    if listed(&ctx.admission.deny) {
        return deny(acc, &format!("tool `{name}` is in the deny list"));
    }
    if !ctx.admission.allow.is_empty() && !listed(&ctx.admission.allow) {
        return deny(acc, &format!("tool `{name}` is not in the allow list"));
    }
    if kind == ToolKind::Shell && posture.shell_disabled {
        return deny(acc, "shell is disabled (allow_shell = false)");
    }
    if kind == ToolKind::Shell && call.command_line().is_none() {
        return deny(acc, "shell call without a command");
    }
    if posture.mode == Mode::Plan
        && matches!(kind, ToolKind::Write | ToolKind::Mcp | ToolKind::Subagent)
    {
        return deny(
            acc,
            &format!("Plan mode reads and searches only: `{name}` is not admitted"),
        );
    }
    acc.note(Gate::Admission, None, None, &format!("`{name}` admitted"));
}

fn gate_hooks(acc: &mut Acc, hooks: &[HookAnswer]) {
    if hooks.is_empty() {
        acc.note(Gate::Hooks, None, None, "no hook ran");
        return;
    }
    // Fold deny > ask > allow; a hard deny (exit 2) outranks a soft one.
    let worst = hooks.iter().max_by_key(|h| (h.decision, h.hard)).cloned();
    if let Some(h) = worst {
        let note = format!("{} (hook `{}`)", h.reason, h.hook);
        match h.decision {
            Decision::Deny => acc.tighten(
                Gate::Hooks,
                Decision::Deny,
                DecidedBy::Hook,
                None,
                true,
                &note,
            ),
            Decision::Ask => acc.tighten(
                Gate::Hooks,
                Decision::Ask,
                DecidedBy::Hook,
                Some(AskKind::Hold),
                false,
                &note,
            ),
            Decision::Allow => acc.note(
                Gate::Hooks,
                Some(Decision::Allow),
                Some(DecidedBy::Hook),
                &format!("{} hook(s): no objection", hooks.len()),
            ),
        }
    }
}

fn inside(path: &str, cwd: &Path, ws: &Path) -> bool {
    if path.starts_with('~') || path.starts_with('$') {
        return false;
    }
    let mut out = std::path::PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out.starts_with(ws)
}

#[allow(clippy::too_many_arguments)]
fn gate_baseline(
    acc: &mut Acc,
    posture: &Posture,
    kind: Option<ToolKind>,
    analysis: Option<&Analysis>,
    paths: &[String],
    call: &ToolCall,
    ctx: &Context<'_>,
) {
    let full = posture.approval == Approval::FullAccess;
    let auto = posture.approval == Approval::AutoReview;
    let ordinary = |acc: &mut Acc, why: &str| {
        acc.tighten(
            Gate::Baseline,
            Decision::Ask,
            DecidedBy::Posture,
            Some(AskKind::Ordinary),
            false,
            why,
        );
        if auto {
            acc.to_reviewer = true;
        }
    };
    match kind {
        Some(ToolKind::Read | ToolKind::Web) => acc.note(
            Gate::Baseline,
            Some(Decision::Allow),
            Some(DecidedBy::Posture),
            "reads only",
        ),
        Some(ToolKind::Write) => {
            let cwd = if call.cwd.as_os_str().is_empty() {
                ctx.workspace
            } else {
                call.cwd.as_path()
            };
            if full {
                acc.note(
                    Gate::Baseline,
                    Some(Decision::Allow),
                    Some(DecidedBy::Posture),
                    "Full Access",
                );
            } else if paths.is_empty() {
                ordinary(acc, "file write with no recognisable target path");
            } else if let Some(out) = paths.iter().find(|p| !inside(p, cwd, ctx.workspace)) {
                ordinary(acc, &format!("writes `{out}` outside the workspace"));
            } else {
                acc.note(
                    Gate::Baseline,
                    Some(Decision::Allow),
                    Some(DecidedBy::Posture),
                    "edits inside the workspace apply without asking",
                );
            }
        }
        Some(ToolKind::Shell) => {
            let Some(a) = analysis else { return };
            let ro = readonly::is_read_only(a);
            if posture.mode == Mode::Plan && !ro {
                acc.tighten(
                    Gate::Baseline,
                    Decision::Deny,
                    DecidedBy::Posture,
                    None,
                    false,
                    "Plan mode: only read-only shell commands run",
                );
            } else if full {
                acc.note(
                    Gate::Baseline,
                    Some(Decision::Allow),
                    Some(DecidedBy::Posture),
                    "Full Access",
                );
            } else if let Some(f) = &a.failure {
                acc.tighten(
                    Gate::Baseline,
                    Decision::Ask,
                    DecidedBy::Posture,
                    Some(AskKind::Hold),
                    false,
                    &format!("the command could not be fully analysed ({f}); held"),
                );
            } else if let Some(u) = a.pieces.iter().find_map(|p| p.uncertain.clone()) {
                acc.tighten(
                    Gate::Baseline,
                    Decision::Ask,
                    DecidedBy::Posture,
                    Some(AskKind::Hold),
                    false,
                    &format!("{u}; held"),
                );
            } else if ro {
                acc.note(
                    Gate::Baseline,
                    Some(Decision::Allow),
                    Some(DecidedBy::Posture),
                    "read-only command",
                );
            } else if auto
                && posture.sandbox_mode().is_sandboxed()
                && a.pieces.iter().all(|p| {
                    readonly::piece_is_read_only(p) || readonly::piece_is_sandboxed_build(p)
                })
            {
                acc.note(
                    Gate::Baseline,
                    Some(Decision::Allow),
                    Some(DecidedBy::Posture),
                    "auto-review (deterministic): build/test command inside the sandbox",
                );
            } else {
                let first = a
                    .pieces
                    .iter()
                    .find(|p| !readonly::piece_is_read_only(p))
                    .map(|p| p.display())
                    .unwrap_or_default();
                ordinary(acc, &format!("`{first}` is not read-only"));
            }
        }
        Some(ToolKind::Mcp | ToolKind::Subagent) => {
            if full {
                acc.note(
                    Gate::Baseline,
                    Some(Decision::Allow),
                    Some(DecidedBy::Posture),
                    "Full Access",
                );
            } else {
                ordinary(acc, "this tool needs approval");
            }
        }
        None => {}
    }
}

fn gate_floor(
    acc: &mut Acc,
    posture: &Posture,
    command: Option<&str>,
    analysis: Option<&Analysis>,
    ctx: &Context<'_>,
) {
    let (Some(cmd), Some(a)) = (command, analysis) else {
        acc.note(Gate::Floor, None, None, "not a shell command");
        return;
    };
    let destructive = a
        .pieces
        .iter()
        .find_map(|p| floor::destructive(p).filter(|_| p.background || posture.no_human()));
    if posture.approval == Approval::FullAccess {
        match destructive {
            Some(d) => acc.tighten(
                Gate::Floor,
                Decision::Deny,
                DecidedBy::Floor,
                None,
                true,
                &format!("{d} in a background/headless run (fatal even in Full Access)"),
            ),
            None => acc.note(
                Gate::Floor,
                None,
                None,
                "safety floor skipped (Full Access)",
            ),
        }
        return;
    }
    if let Some(msg) = unicode::rejection(cmd) {
        acc.tighten(
            Gate::Floor,
            Decision::Deny,
            DecidedBy::Floor,
            None,
            true,
            &msg,
        );
        return;
    }
    let mut any = false;
    if let Some(r) = floor::credential_upload(a, ctx.floor) {
        acc.tighten(
            Gate::Floor,
            Decision::Ask,
            DecidedBy::Floor,
            Some(AskKind::Hold),
            false,
            &r,
        );
        any = true;
    }
    if let Some(r) = floor::publishing(a) {
        acc.tighten(
            Gate::Floor,
            Decision::Ask,
            DecidedBy::Floor,
            Some(AskKind::Hold),
            false,
            &r,
        );
        any = true;
    }
    if let Some(r) = a.pieces.iter().find_map(floor::destructive_unknown_target) {
        acc.tighten(
            Gate::Floor,
            Decision::Ask,
            DecidedBy::Floor,
            Some(AskKind::Hold),
            false,
            &r,
        );
        any = true;
    }
    if let Some(d) = destructive {
        acc.tighten(
            Gate::Floor,
            Decision::Ask,
            DecidedBy::Floor,
            Some(AskKind::Hold),
            false,
            &format!("{d} in a background/headless run"),
        );
        any = true;
    }
    if posture.approval == Approval::AutoReview {
        if let Some(r) = high_risk(a) {
            acc.tighten(
                Gate::Floor,
                Decision::Deny,
                DecidedBy::Floor,
                None,
                false,
                &format!("auto-review (deterministic): high risk — {r}"),
            );
            any = true;
        }
    }
    if !any {
        acc.note(Gate::Floor, None, None, "nothing on the safety floor");
    }
}

/// What the deterministic Auto-Review layer blocks outright.
fn high_risk(a: &Analysis) -> Option<String> {
    const NET: &[&str] = &["curl", "wget", "fetch", "nc", "ncat"];
    const SHELLS: &[&str] = &[
        "sh", "bash", "zsh", "dash", "ksh", "python", "python3", "perl", "ruby", "node",
    ];
    for p in &a.pieces {
        if matches!(p.program(), "sudo" | "su" | "doas" | "pkexec")
            || p.via.iter().any(|v| v == "sudo" || v == "doas")
        {
            return Some(format!("privilege escalation `{}`", p.display()));
        }
        if p.pipe_index > 0
            && SHELLS.contains(&p.program())
            && p.args().iter().all(|x| x.starts_with('-'))
        {
            let feeds = a.pieces.iter().any(|q| {
                q.pipeline == p.pipeline
                    && q.pipe_index < p.pipe_index
                    && NET.contains(&q.program())
            });
            if feeds {
                return Some(format!("downloaded code piped into `{}`", p.program()));
            }
        }
    }
    None
}

fn gate_human(acc: &mut Acc, posture: &Posture, grants: &SessionGrants, key: &str) {
    if acc.decision != Decision::Ask {
        let note = if acc.denied() {
            "not reached"
        } else {
            "no question"
        };
        acc.note(Gate::Human, None, None, note);
        return;
    }
    let kind = acc.ask_kind.unwrap_or(AskKind::Hold);
    if posture.approval == Approval::NeverRun {
        acc.tighten(
            Gate::Human,
            Decision::Deny,
            DecidedBy::Posture,
            None,
            false,
            &format!("approval policy never-run: {}", acc.reason.clone()),
        );
    } else if posture.approval == Approval::FullAccess {
        let r = format!("Full Access auto-approves: {}", acc.reason);
        acc.set(Gate::Human, Decision::Allow, DecidedBy::Posture, &r);
    } else if kind != AskKind::Hold && grants.covers(key) {
        acc.set(
            Gate::Human,
            Decision::Allow,
            DecidedBy::SessionRule,
            &format!("approved for the session (`{key}`)"),
        );
    } else if acc.to_reviewer && kind == AskKind::Ordinary && !posture.headless {
        acc.note(
            Gate::Human,
            Some(Decision::Ask),
            Some(DecidedBy::Posture),
            "goes to the model reviewer",
        );
    } else if posture.no_human() {
        let r = format!("no one can answer (headless): {}", acc.reason);
        acc.tighten(
            Gate::Human,
            Decision::Deny,
            DecidedBy::Posture,
            None,
            false,
            &r,
        );
    } else {
        acc.note(
            Gate::Human,
            Some(Decision::Ask),
            None,
            "waiting for you (y once / a this kind / n deny)",
        );
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
