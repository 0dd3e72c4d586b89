//! Gates 2, 3, 4, 6 and 8 of the pipeline (see [`super::pipeline`]).
//!
//! Each function only adds to the running outcome through [`Acc`]; the
//! order and the places where a loosening is allowed live in `authorize`.

use super::acc::{Acc, Context};
use super::call::{SessionGrants, ToolCall, ToolKind};
use super::floor;
use super::hooks::HookAnswer;
use super::posture::{Approval, Mode, Posture};
use super::readonly;
use super::shell::Analysis;
use super::unicode;
use super::verdict::{headless_answer, AskKind, DecidedBy, Decision, Gate, Question};
use crate::policy::SandboxMode;
use std::path::Path;

pub(super) fn gate_admission(
    acc: &mut Acc,
    call: &ToolCall,
    posture: &Posture,
    ctx: &Context<'_>,
    kind: Option<ToolKind>,
    executable: bool,
) {
    let name = call.tool.as_str();
    let deny = |acc: &mut Acc, why: &str| acc.deny(Gate::Admission, DecidedBy::Posture, why);
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
    // A Plan parent may spawn: its children are clamped to Plan too.
    if posture.mode == Mode::Plan && matches!(kind, ToolKind::Write | ToolKind::Mcp) {
        return deny(
            acc,
            &format!("Plan mode reads and searches only: `{name}` is not admitted"),
        );
    }
    acc.pass(Gate::Admission, &format!("`{name}` admitted"));
}

pub(super) fn gate_hooks(acc: &mut Acc, hooks: &[HookAnswer]) {
    if hooks.is_empty() {
        acc.pass(Gate::Hooks, "no hook ran");
        return;
    }
    // Fold deny > ask > allow; a hard deny (exit 2) outranks a soft one.
    let worst = hooks.iter().max_by_key(|h| (h.decision, h.hard)).cloned();
    if let Some(h) = worst {
        let note = format!("{} (hook `{}`)", h.reason, h.hook);
        match h.decision {
            Decision::Deny => acc.deny_hard(Gate::Hooks, DecidedBy::Hook, &note),
            Decision::Ask => acc.hold(Gate::Hooks, DecidedBy::Hook, &note),
            Decision::Allow => acc.allowed(
                Gate::Hooks,
                DecidedBy::Hook,
                &format!("{} hook(s): no objection", hooks.len()),
            ),
        }
    }
}

/// Whether a written path, as the call names it, is inside the workspace
/// (a `~` or `$` path is not known to be). The predicate is the one the
/// file guard uses too.
fn inside(path: &str, cwd: &Path, ws: &Path) -> bool {
    if path.starts_with('~') || path.starts_with('$') {
        return false;
    }
    crate::policy::paths::inside_workspace(&cwd.join(path), ws)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn gate_baseline(
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
        acc.ask(Gate::Baseline, DecidedBy::Posture, AskKind::Ordinary, why);
        if auto {
            acc.to_reviewer = true;
        }
    };
    match kind {
        Some(ToolKind::Read | ToolKind::Web) => {
            acc.allowed(Gate::Baseline, DecidedBy::Posture, "reads only")
        }
        Some(ToolKind::Write) => {
            let cwd = if call.cwd.as_os_str().is_empty() {
                ctx.workspace
            } else {
                call.cwd.as_path()
            };
            if full {
                acc.allowed(Gate::Baseline, DecidedBy::Posture, "Full Access");
            } else if paths.is_empty() {
                ordinary(acc, "file write with no recognisable target path");
            } else if let Some(out) = paths.iter().find(|p| !inside(p, cwd, ctx.workspace)) {
                ordinary(acc, &format!("writes `{out}` outside the workspace"));
            } else {
                acc.allowed(
                    Gate::Baseline,
                    DecidedBy::Posture,
                    "edits inside the workspace apply without asking",
                );
            }
        }
        Some(ToolKind::Shell) => {
            let Some(a) = analysis else { return };
            let ro = readonly::is_read_only(a);
            // Plan runs read-only commands and network reads (whether the
            // network is there is the sandbox's network setting).
            let plan_ok = ro
                || (a.failure.is_none()
                    && !a.pieces.is_empty()
                    && a.pieces.iter().all(|p| {
                        readonly::piece_is_read_only(p) || readonly::piece_is_network_read(p)
                    }));
            if posture.mode == Mode::Plan && !plan_ok {
                acc.deny(
                    Gate::Baseline,
                    DecidedBy::Posture,
                    "Plan mode: only read-only shell commands and network reads run",
                );
            } else if full {
                acc.allowed(Gate::Baseline, DecidedBy::Posture, "Full Access");
            } else if let Some(f) = &a.failure {
                acc.hold(
                    Gate::Baseline,
                    DecidedBy::Posture,
                    &format!("the command could not be fully analysed ({f}); held"),
                );
            } else if let Some(u) = a.pieces.iter().find_map(|p| p.uncertain.clone()) {
                acc.hold(Gate::Baseline, DecidedBy::Posture, &format!("{u}; held"));
            } else if ro {
                acc.allowed(Gate::Baseline, DecidedBy::Posture, "read-only command");
            } else if auto
                && ctx.sandbox.is_sandboxed()
                && a.pieces.iter().all(|p| {
                    readonly::piece_is_read_only(p) || readonly::piece_is_sandboxed_build(p)
                })
            {
                acc.allowed(
                    Gate::Baseline,
                    DecidedBy::Posture,
                    "auto-review (deterministic): build/test command inside the sandbox",
                );
            } else {
                let why = readonly::blame(a).unwrap_or_else(|| "not read-only".into());
                ordinary(acc, &why);
            }
        }
        // Spawning is not itself a question: a child can do nothing its
        // parent could not (the clamp), and each of its calls passes the
        // gates.
        Some(ToolKind::Subagent) => acc.allowed(
            Gate::Baseline,
            DecidedBy::Posture,
            "a sub-agent's own calls pass the gates",
        ),
        Some(ToolKind::Mcp) => {
            if full {
                acc.allowed(Gate::Baseline, DecidedBy::Posture, "Full Access");
            } else {
                ordinary(acc, "this tool needs approval");
            }
        }
        None => {}
    }
}

pub(super) fn gate_floor(
    acc: &mut Acc,
    posture: &Posture,
    command: Option<&str>,
    analysis: Option<&Analysis>,
    ctx: &Context<'_>,
) {
    let (Some(cmd), Some(a)) = (command, analysis) else {
        acc.pass(Gate::Floor, "not a shell command");
        return;
    };
    let destructive = a
        .pieces
        .iter()
        .find_map(|p| floor::destructive(p).filter(|_| p.background || posture.no_human()));
    if posture.approval == Approval::FullAccess {
        match destructive {
            Some(d) => acc.deny_hard(
                Gate::Floor,
                DecidedBy::Floor,
                &format!("{d} in a background/headless run (fatal even in Full Access)"),
            ),
            None => acc.pass(Gate::Floor, "safety floor skipped (Full Access)"),
        }
        return;
    }
    // What the floor refuses before any card or reviewer sees the call:
    // hidden Unicode (what is shown is not what runs) and a credential
    // upload (the kind of call a person approves without reading). Only
    // Full Access, which turns the floor off (above), runs them.
    if let Some(msg) = unicode::rejection(cmd) {
        acc.deny_hard(Gate::Floor, DecidedBy::Floor, &msg);
        return;
    }
    if let Some(msg) = floor::credential_upload(a, ctx.floor) {
        acc.deny_hard(
            Gate::Floor,
            DecidedBy::Floor,
            &format!("{msg} — refused before any approval (only Full Access runs it)"),
        );
        return;
    }
    // Everything on the floor that holds the call for a human, in order.
    let holds = [
        floor::publishing(a),
        a.pieces.iter().find_map(floor::destructive_unknown_target),
        destructive.map(|d| format!("{d} in a background/headless run")),
    ];
    let mut any = false;
    for r in holds.into_iter().flatten() {
        acc.hold(Gate::Floor, DecidedBy::Floor, &r);
        any = true;
    }
    if posture.approval == Approval::AutoReview {
        if let Some(r) = high_risk(a) {
            acc.deny(
                Gate::Floor,
                DecidedBy::Floor,
                &format!("auto-review (deterministic): high risk — {r}"),
            );
            any = true;
        }
    }
    if !any {
        acc.pass(Gate::Floor, "nothing on the safety floor");
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

pub(super) fn gate_human(
    acc: &mut Acc,
    posture: &Posture,
    grants: &SessionGrants,
    key: &str,
    sandbox: SandboxMode,
) {
    if acc.decision != Decision::Ask {
        let note = if acc.denied() {
            "not reached"
        } else {
            "no question"
        };
        acc.pass(Gate::Human, note);
        return;
    }
    let kind = acc.ask_kind.unwrap_or(AskKind::Hold);
    if posture.approval == Approval::NeverRun {
        acc.deny(
            Gate::Human,
            DecidedBy::Posture,
            &format!("approval policy never-run: {}", acc.reason.clone()),
        );
    } else if posture.approval == Approval::FullAccess {
        let r = format!("Full Access auto-approves: {}", acc.reason);
        acc.waive(Gate::Human, DecidedBy::Posture, &r);
    } else if kind != AskKind::Hold && grants.covers(key) {
        // The gates asked; an earlier `a` answered: keep the question so
        // receipts say "approved by a session rule".
        let q = Question {
            asked_by: acc.by,
            gate: acc.gate,
            kind,
            reason: acc.reason.clone(),
        };
        acc.waive(
            Gate::Human,
            DecidedBy::SessionRule,
            &format!("approved for the session (`{key}`)"),
        );
        acc.question = Some(q);
    } else if acc.to_reviewer && kind == AskKind::Ordinary && !posture.headless {
        acc.would_ask(
            Gate::Human,
            DecidedBy::Posture,
            "goes to the model reviewer",
        );
    } else if posture.no_human() {
        let q = Question {
            asked_by: acc.by,
            gate: acc.gate,
            kind,
            reason: acc.reason.clone(),
        };
        match headless_answer(&q, posture.auto_approve, Some(sandbox)) {
            (Decision::Allow, by, r) => acc.waive(Gate::Human, by, &r),
            (_, by, r) => acc.deny(Gate::Human, by, &r),
        }
        acc.question = Some(q);
    } else {
        acc.waiting(
            Gate::Human,
            "waiting for you (y once / a this kind / n deny)",
        );
    }
}
