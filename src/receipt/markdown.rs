//! The Markdown form of a receipt. Every string in a [`Receipt`] is
//! already masked, escaped and clipped by the builder; this module only
//! lays it out (and picks code-span fences that the text cannot break).

use super::model::*;
use crate::host::EnforcementLevel;
use std::fmt::Write;

/// Render `r` as Markdown.
pub fn render(r: &Receipt) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Receipt: {}\n", r.title);
    let _ = writeln!(s, "{}\n", meta_line(r));
    let _ = writeln!(s, "{}\n", totals_line(&r.totals));
    let _ = writeln!(s, "{}\n", usage_line(&r.usage));
    if !r.compactions.is_empty() {
        let _ = writeln!(s, "{}\n", compactions_line(&r.compactions));
    }
    if !r.instructions.is_empty() {
        let files: Vec<String> = r
            .instructions
            .iter()
            .map(|f| {
                format!(
                    "{}{}",
                    code(&f.path),
                    if f.truncated { " (truncated)" } else { "" }
                )
            })
            .collect();
        let _ = writeln!(s, "**Instructions loaded:** {}\n", files.join(", "));
    }
    if r.actions.is_empty() {
        s.push_str("No actions recorded.\n\n");
    }
    // The last command's sandbox report, so an identical one is not
    // listed again item by item.
    let mut last: Option<(u64, &Enforced)> = None;
    for a in &r.actions {
        let _ = writeln!(s, "{}. {}", a.n, action_line(a));
        if a.kind == ActionKind::Command {
            for f in &a.files {
                let _ = writeln!(s, "   - {}", file_phrase(f));
            }
        }
        if let Some(e) = &a.enforced {
            match last {
                Some((n, prev)) if prev == e && !e.partial.is_empty() => {
                    let _ = writeln!(
                        s,
                        "   - {}: the same {} as action {n}",
                        sandbox_phrase(e),
                        plural(e.partial.len() as u64, "item", "items")
                    );
                }
                _ => {
                    for p in &e.partial {
                        let _ = writeln!(s, "   - {}: {}", sandbox_phrase(e), partial_phrase(p));
                    }
                }
            }
            last = Some((a.n, e));
        }
        if let Some(g) = &a.agent {
            let _ = writeln!(s, "   - sub-agent {} ({})", g.agent_id, g.role);
        }
        children(&mut s, &a.children, 1);
    }
    if !r.actions.is_empty() {
        s.push('\n');
    }
    if r.omitted_actions > 0 {
        let _ = writeln!(
            s,
            "…and {} more action(s) not listed (counted in the totals).\n",
            r.omitted_actions
        );
    }
    let snap = match (&r.postures.snapshots.enabled, &r.postures.snapshots.reason) {
        (Some(true), _) => "on (undo with `codewhale undo`)".to_string(),
        (Some(false), Some(why)) => format!("off — {why}"),
        (Some(false), None) => "off".to_string(),
        (None, _) => "not recorded in this session".to_string(),
    };
    let _ = writeln!(s, "**Snapshots:** {snap}\n");
    s.push_str("**Not in this receipt:**\n");
    for n in &r.not_recorded {
        let _ = writeln!(s, "- {n}");
    }
    let _ = writeln!(s, "\n> {}", r.claim_ceiling);
    s
}

/// A sub-agent's own actions under its `agent` call, indented per level.
fn children(s: &mut String, actions: &[Action], depth: usize) {
    let pad = "   ".repeat(depth + 1);
    for a in actions {
        let _ = writeln!(s, "{pad}{}. {}", a.n, action_line(a));
        if let Some(g) = &a.agent {
            let _ = writeln!(s, "{pad}   - sub-agent {} ({})", g.agent_id, g.role);
        }
        children(s, &a.children, depth + 1);
    }
}

fn compactions_line(c: &[CompactionEntry]) -> String {
    let each: Vec<String> = c
        .iter()
        .map(|e| {
            let window = e
                .window
                .map(|w| format!(" of a {w}-token window"))
                .unwrap_or_default();
            format!(
                "turn {} ({}{}, ~{} → ~{} tokens{window})",
                e.turn,
                if e.auto { "auto, " } else { "" },
                e.reason,
                e.tokens_before,
                e.tokens_after
            )
        })
        .collect();
    format!("**Compactions:** {} · {}", c.len(), each.join("; "))
}

fn usage_line(u: &UsageTotals) -> String {
    if u.turns_reported + u.turns_unreported == 0 {
        return "**Model usage:** none recorded · cost unknown".into();
    }
    let reasoning = match u.reasoning_tokens {
        Some(n) => n.to_string(),
        None => "not reported".into(),
    };
    let unreported = if u.turns_unreported > 0 {
        format!(" ({} turn(s) reported no usage)", u.turns_unreported)
    } else {
        String::new()
    };
    format!(
        "**Model usage:** {} turn(s){unreported} · tokens in {} (cached {}) / out {} (reasoning {reasoning}) · cost {}",
        u.turns_reported + u.turns_unreported,
        u.input_tokens,
        u.cached_input_tokens,
        u.output_tokens,
        u.cost
    )
}

fn meta_line(r: &Receipt) -> String {
    let src = &r.source;
    let p = &r.postures;
    let enforcement = if p.enforcement.is_empty() {
        "no command ran".to_string()
    } else {
        p.enforcement.join("; ")
    };
    let turn = src
        .turn
        .map(|t| format!(" · turn {t} only"))
        .unwrap_or_default();
    let status = src.status.as_deref().unwrap_or("not closed");
    format!(
        "thread {} · workspace {} · model {} · posture {} · sandbox {} (enforcement: {enforcement}) · {} → {} ({status}){turn}",
        code(&src.session_id),
        code(&src.workspace),
        code(&format!("{}/{}", src.provider, src.model)),
        code(&p.approval),
        code(&p.sandbox),
        src.started_at,
        src.ended_at,
    )
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn totals_line(t: &Totals) -> String {
    let lines = match (t.lines_added, t.lines_removed) {
        (Some(a), Some(r)) => format!(" (+{a} −{r})"),
        _ => " (line counts unknown)".to_string(),
    };
    let mut commands = plural(t.commands_run, "command run", "commands run");
    if t.commands_not_run > 0 {
        let _ = write!(commands, " ({} not run)", t.commands_not_run);
    }
    let a = &t.approvals;
    format!(
        "**Totals:** {}{lines} · {commands} · {} · {} · {} ({} approved, {} denied, {} no response) · {}",
        plural(t.files_changed, "file changed", "files changed"),
        plural(t.network_calls, "network call", "network calls"),
        plural(t.mcp_calls, "MCP call", "MCP calls"),
        plural(a.asked, "approval asked", "approvals asked"),
        a.approved,
        a.denied,
        a.no_response,
        plural(t.reads, "read", "reads"),
    )
}

/// A Markdown code span that `text` cannot break out of.
pub fn code(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 || text.starts_with(' ') || text.ends_with(' ') {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

fn secs(ms: u64) -> String {
    format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
}

fn counts(added: Option<u64>, removed: Option<u64>, binary: bool) -> String {
    match (binary, added, removed) {
        (true, _, _) => " (binary)".into(),
        (false, Some(a), Some(r)) => format!(" (+{a} −{r})"),
        _ => String::new(),
    }
}

fn file_phrase(f: &FileEntry) -> String {
    let verb = match f.change.as_str() {
        "added" => "created",
        "deleted" => "deleted",
        "modified" => "edited",
        _ => "wrote",
    };
    format!(
        "{verb} {}{}",
        code(&f.path),
        counts(f.added_lines, f.removed_lines, f.binary)
    )
}

/// "denied by you", "held by the safety floor", "no response".
fn stopped_by(d: Option<Decider>) -> String {
    match d {
        Some(Decider::Floor) => "held by the safety floor".into(),
        Some(Decider::NoResponse) => "no response (nobody could answer)".into(),
        Some(Decider::Sandbox) => "blocked by the sandbox".into(),
        Some(Decider::ReviewerUnavailable) => "reviewer unavailable".into(),
        Some(d) => format!("denied by {}", d.label()),
        None => "not run".into(),
    }
}

fn what(a: &Action) -> String {
    let target = a.target.as_deref().map(code).unwrap_or_default();
    match (a.tool.as_deref(), a.kind) {
        (_, ActionKind::Mcp) => match &a.mcp {
            Some(m) => format!(
                "call MCP tool {} of server {}",
                code(&m.tool),
                code(&m.server)
            ),
            None => format!("call MCP tool {}", code(a.tool.as_deref().unwrap_or(""))),
        },
        (_, ActionKind::Command) => format!("run {}", code(a.command.as_deref().unwrap_or(""))),
        (Some("write_file"), _) => format!("write {target}"),
        (Some("edit_file"), _) => format!("edit {target}"),
        (Some("apply_patch"), _) => "apply a patch".into(),
        (Some("read_file"), _) => format!("read {target}"),
        (Some("list_dir"), _) => format!("list {target}"),
        (Some("search"), _) => format!("search for {target}"),
        (Some(t), _) => format!("call {}", code(t)),
        (None, _) => "act".into(),
    }
}

/// How a command was sandboxed: `bwrap full`, `landlock partial`,
/// `opensandbox external`, `unsandboxed`.
fn sandbox_phrase(e: &Enforced) -> String {
    match e.level {
        EnforcementLevel::Unsandboxed => "unsandboxed".into(),
        l => format!("{} {l}", e.backend),
    }
}

/// `write-protect `/ws/.git/hooks`: why`.
fn partial_phrase(p: &PartialEntry) -> String {
    match &p.path {
        Some(path) => format!("{} {}: {}", p.item, code(path), p.reason),
        None => format!("{}: {}", p.item, p.reason),
    }
}

fn tail(a: &Action) -> String {
    let mut s = String::new();
    if let Some(ms) = a.duration_ms {
        let _ = write!(s, " · {}", secs(ms));
    }
    if let Some(d) = a.decided_by {
        if matches!(a.status, ActionStatus::Succeeded | ActionStatus::Failed)
            && d != Decider::Sandbox
        {
            let _ = write!(s, " · approved by {}", d.label());
        }
    }
    if let Some(e) = &a.enforced {
        let _ = write!(s, " · sandbox: {}", sandbox_phrase(e));
    }
    s
}

fn action_line(a: &Action) -> String {
    use ActionStatus::*;
    let reason = a.reason.as_deref().unwrap_or("");
    match (a.kind, a.status) {
        (ActionKind::FailedTurn, _) => format!("turn {} did not finish — {reason}", a.turn),
        (_, StoppedAtApproval | BlockedBeforeStart) if a.decided_by != Some(Decider::Sandbox) => {
            let line = format!("did not {} · {}", what(a), stopped_by(a.decided_by));
            // The posture (Plan mode, a tool not offered) is no one to ask:
            // only its reason says what to change.
            // The reviewer's risk and reason (or why it was unavailable)
            // are its answer: shown with it.
            let says = matches!(
                a.decided_by,
                Some(Decider::Posture | Decider::Reviewer | Decider::ReviewerUnavailable)
            );
            if says && !reason.is_empty() {
                format!("{line}: {reason}")
            } else {
                line
            }
        }
        (_, BlockedBeforeStart | StoppedAtApproval) => {
            format!("did not {} · blocked by the sandbox: {reason}", what(a))
        }
        (ActionKind::Command, Interrupted) => format!(
            "started {} in {} — interrupted before it finished",
            code(a.command.as_deref().unwrap_or("")),
            code(a.cwd.as_deref().unwrap_or(""))
        ),
        (ActionKind::Command, _) => {
            let cmd = code(a.command.as_deref().unwrap_or(""));
            let cwd = code(a.cwd.as_deref().unwrap_or(""));
            let result = match (a.exit_code, a.decided_by) {
                (Some(c), Some(Decider::Sandbox)) => {
                    format!("exit {c}, blocked by the sandbox: {reason}")
                }
                (Some(c), _) => format!("exit {c}"),
                (None, _) => format!("failed: {reason}"),
            };
            let net = a
                .network
                .as_deref()
                .map(|n| format!(" · {n}"))
                .unwrap_or_default();
            format!("ran {cmd} in {cwd} — {result}{net}{}", tail(a))
        }
        (_, Interrupted) => format!("started to {} — interrupted", what(a)),
        (ActionKind::FileChange, Succeeded) if a.files.is_empty() => {
            format!(
                "{} changed nothing{}",
                code(a.tool.as_deref().unwrap_or("")),
                tail(a)
            )
        }
        (ActionKind::FileChange, Succeeded) => {
            let files: Vec<String> = a.files.iter().map(file_phrase).collect();
            format!("{}{}", files.join(", "), tail(a))
        }
        (ActionKind::Mcp, Succeeded) if !a.files.is_empty() => {
            let files: Vec<String> = a.files.iter().map(file_phrase).collect();
            format!("{} — {}{}", what(a), files.join(", "), tail(a))
        }
        (_, Failed) => format!("could not {} — {reason}{}", what(a), tail(a)),
        (_, Succeeded) => format!("{}{}", what(a), tail(a)),
    }
}
