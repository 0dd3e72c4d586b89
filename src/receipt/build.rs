//! Session records → receipt (pure: no model, no tools, no file writes;
//! the same records always give the same receipt).

use super::model::*;
use super::sanitize::{
    clip, first_line, COMMAND_LIMIT, ERROR_LIMIT, PARTIAL_LIMIT, PATH_LIMIT, QUERY_LIMIT,
    TITLE_LIMIT,
};
use super::ReceiptError;
use crate::host::EnforcementSummary;
use crate::session::{ChangedFile, Event, Record, Verdict};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

use crate::catalogue;

/// Everything recorded about one tool call.
#[derive(Default)]
struct Call {
    turn: u32,
    tool: String,
    args: Value,
    mcp: Option<crate::session::record::McpCall>,
    verdict: Option<Verdict>,
    result: Option<Result_>,
    changes: Option<Vec<ChangedFile>>,
}

struct Result_ {
    status: String,
    exit_code: Option<i32>,
    duration_ms: u64,
    files_touched: Vec<std::path::PathBuf>,
    error_category: Option<String>,
    enforcement: Option<String>,
    network: Option<String>,
    enforced: Option<EnforcementSummary>,
    output: String,
}

/// One listed item, in record order.
enum Item {
    Call(String),
    FailedTurn { turn: u32, reason: String },
}

/// Build the receipt of `records` (one session file, oldest first).
/// `turn`: only that turn's actions and totals.
pub fn build(
    records: &[Record],
    session_file: &Path,
    turn: Option<u32>,
) -> Result<Receipt, ReceiptError> {
    let first = records.first().ok_or_else(|| ReceiptError::Empty {
        path: session_file.to_path_buf(),
    })?;
    let last = records.last().unwrap_or(first);
    check_turn(records, session_file, turn)?;
    let (started_at, ended_at) = times(records, turn);
    let mut f = Fold::new(
        Source {
            session_id: first.thread.clone(),
            session_file: session_file.display().to_string(),
            session_schema: format!("{}/v{}", first.schema, first.v),
            workspace: String::new(),
            provider: String::new(),
            model: String::new(),
            codewhale_version: String::new(),
            started_at,
            ended_at,
            status: None,
            turn,
            last_seq: last.seq,
        },
        turn,
    );
    for r in records {
        f.add(r);
    }
    let workspace = records.iter().find_map(|r| match &r.event {
        Event::ThreadStarted { cwd, .. } => Some(cwd.clone()),
        _ => None,
    });
    let tree = Tree {
        calls: &f.calls,
        agents: &f.agents,
        child_items: &f.child_items,
        workspace: workspace.as_deref(),
    };
    let (mut actions, mut totals) = list_actions(&f.items, &tree, &mut f.postures);
    files_changed(&f, &actions, &mut totals);
    let omitted = actions.len().saturating_sub(MAX_ACTIONS) as u64;
    actions.truncate(MAX_ACTIONS);
    let not_recorded = not_recorded(&f);
    let Fold {
        source,
        postures,
        title,
        mut usage,
        instructions,
        compactions,
        ..
    } = f;
    Ok(Receipt {
        schema: RECEIPT_SCHEMA,
        title: if title.is_empty() {
            "(no prompt recorded)".into()
        } else {
            title
        },
        source,
        postures,
        totals,
        usage: {
            // No usage record in scope: nothing is known, not "free".
            if usage.turns_reported + usage.turns_unreported == 0 {
                usage.cost_usd = None;
                usage.reasoning_tokens = None;
            }
            UsageTotals {
                cost: crate::session::cost_label(usage.cost_usd),
                ..usage
            }
        },
        instructions,
        actions,
        omitted_actions: omitted,
        compactions,
        not_recorded,
        claim_ceiling: CLAIM_CEILING,
    })
}

/// `--turn N` must name a turn the session has.
fn check_turn(
    records: &[Record],
    session_file: &Path,
    turn: Option<u32>,
) -> Result<(), ReceiptError> {
    if let Some(t) = turn {
        let max = records.iter().map(|r| r.turn).max().unwrap_or(0);
        if t == 0 || t > max {
            return Err(ReceiptError::NoSuchTurn {
                path: session_file.to_path_buf(),
                turn: t,
                turns: max,
            });
        }
    }
    Ok(())
}

/// The receipt's start and end: the session's, or with `--turn` the
/// turn's own.
fn times(records: &[Record], turn: Option<u32>) -> (String, String) {
    let (Some(first), Some(last)) = (records.first(), records.last()) else {
        return (String::new(), String::new());
    };
    match turn {
        None => (first.ts.clone(), last.ts.clone()),
        Some(t) => {
            let mut ts = records.iter().filter(|r| r.turn == t).map(|r| r.ts.clone());
            let start = ts.next().unwrap_or_else(|| first.ts.clone());
            let end = ts.next_back().unwrap_or_else(|| start.clone());
            (start, end)
        }
    }
}

/// What the records add up to, one record at a time.
struct Fold {
    /// `--turn`: only that turn's actions and totals.
    turn: Option<u32>,
    source: Source,
    postures: Postures,
    title: String,
    calls: BTreeMap<String, Call>,
    items: Vec<Item>,
    turn_changes: Vec<ChangedFile>,
    snapshot_errors: u64,
    saw_file_changes: bool,
    usage: UsageTotals,
    instructions: Vec<InstructionFile>,
    compactions: Vec<CompactionEntry>,
    /// The sub-agents: the `agent` call's key → (agent id, role).
    agents: BTreeMap<String, (String, String)>,
    /// Each sub-agent's own listed items (its calls keyed `agent/call`).
    child_items: BTreeMap<String, Vec<Item>>,
}

impl Fold {
    fn new(source: Source, turn: Option<u32>) -> Self {
        Fold {
            turn,
            source,
            postures: Postures {
                approval: String::new(),
                sandbox: String::new(),
                enforcement: Vec::new(),
                snapshots: SnapshotsPosture {
                    enabled: None,
                    reason: None,
                },
            },
            title: String::new(),
            calls: BTreeMap::new(),
            items: Vec::new(),
            turn_changes: Vec::new(),
            snapshot_errors: 0,
            saw_file_changes: false,
            usage: UsageTotals {
                cost_usd: Some(0.0),
                reasoning_tokens: Some(0),
                ..UsageTotals::default()
            },
            instructions: Vec::new(),
            compactions: Vec::new(),
            agents: BTreeMap::new(),
            child_items: BTreeMap::new(),
        }
    }

    /// A record of sub-agent `agent`'s own run (unwrapped down to the
    /// agent that made it): its calls are keyed `agent/call`, listed under
    /// the agent, and its tokens count in the usage.
    fn add_child(&mut self, turn: u32, agent: &str, ev: &Event) {
        match ev {
            Event::Subagent {
                agent_id, record, ..
            } => self.add_child(turn, agent_id, record),
            Event::SubagentStarted {
                agent_id,
                parent_call_id,
                role,
                ..
            } => {
                self.agents.insert(
                    format!("{agent}/{parent_call_id}"),
                    (clip(agent_id, PATH_LIMIT), clip(role, PATH_LIMIT)),
                );
            }
            Event::ToolCall { call_id, .. } => {
                let key = format!("{agent}/{call_id}");
                self.call_event(&key, turn, ev);
                self.child_items
                    .entry(agent.to_string())
                    .or_default()
                    .push(Item::Call(key));
            }
            Event::Approval { call_id, .. }
            | Event::ToolResult { call_id, .. }
            | Event::FileChanges {
                call_id: Some(call_id),
                ..
            } => self.call_event(&format!("{agent}/{call_id}"), turn, ev),
            Event::TurnUsage { .. } => self.usage_event(ev),
            _ => {}
        }
    }

    /// A call's own record (its start, verdict, result or file changes)
    /// under the key `key`.
    fn call_event(&mut self, key: &str, turn: u32, ev: &Event) {
        match ev {
            Event::ToolCall {
                tool, args, mcp, ..
            } => {
                self.calls.insert(
                    key.to_string(),
                    Call {
                        turn,
                        tool: tool.clone(),
                        args: args.clone(),
                        mcp: mcp.clone(),
                        ..Default::default()
                    },
                );
            }
            Event::Approval { verdict, .. } => {
                if let Some(c) = self.calls.get_mut(key) {
                    c.verdict = Some(verdict.clone());
                }
            }
            Event::ToolResult {
                status,
                exit_code,
                duration_ms,
                files_touched,
                error_category,
                enforcement,
                network,
                enforced,
                output,
                ..
            } => {
                if let Some(c) = self.calls.get_mut(key) {
                    c.result = Some(Result_ {
                        status: status.clone(),
                        exit_code: *exit_code,
                        duration_ms: *duration_ms,
                        files_touched: files_touched.clone(),
                        error_category: error_category.clone(),
                        enforcement: enforcement.clone(),
                        network: network.clone(),
                        enforced: enforced.clone(),
                        output: output.clone(),
                    });
                }
            }
            Event::FileChanges { changes, .. } => {
                self.saw_file_changes = true;
                if let Some(c) = self.calls.get_mut(key) {
                    c.changes = Some(changes.clone());
                }
            }
            _ => {}
        }
    }

    /// A model request's usage.
    fn usage_event(&mut self, ev: &Event) {
        let Event::TurnUsage {
            input_tokens,
            output_tokens,
            cost_usd,
            cached_input_tokens,
            reasoning_tokens,
            usage_reported,
            provider,
            model,
            ..
        } = ev
        else {
            return;
        };
        if *usage_reported == Some(false) {
            self.usage.turns_unreported += 1;
        } else {
            self.usage.turns_reported += 1;
        }
        self.usage.input_tokens += input_tokens;
        self.usage.output_tokens += output_tokens;
        self.usage.cached_input_tokens += cached_input_tokens.unwrap_or(0);
        self.usage.reasoning_tokens = self
            .usage
            .reasoning_tokens
            .zip(*reasoning_tokens)
            .map(|(a, b)| a + b);
        self.usage.cost_usd = self.usage.cost_usd.zip(*cost_usd).map(|(a, b)| a + b);
        if let (Some(p), Some(m)) = (provider, model) {
            let pm = clip(&format!("{p}/{m}"), PATH_LIMIT);
            if !self.usage.models.contains(&pm) {
                self.usage.models.push(pm);
            }
        }
    }

    fn in_scope(&self, r: &Record) -> bool {
        self.turn.is_none_or(|t| r.turn == t)
    }

    /// One record. The thread's own records (start, posture, snapshots,
    /// instructions, completion) count whatever the scope; the rest only
    /// within it.
    fn add(&mut self, r: &Record) {
        match &r.event {
            Event::Compaction {
                auto,
                reason,
                window,
                tokens_before,
                tokens_after,
                ..
            } if self.in_scope(r) => self.compactions.push(CompactionEntry {
                turn: r.turn,
                auto: *auto,
                reason: clip(reason, PATH_LIMIT),
                window: *window,
                tokens_before: *tokens_before,
                tokens_after: *tokens_after,
            }),
            Event::ThreadStarted {
                cwd,
                provider,
                model,
                approval,
                sandbox,
                codewhale_version,
            } => {
                self.source.workspace = clip(&cwd.display().to_string(), PATH_LIMIT);
                self.source.provider = clip(provider, PATH_LIMIT);
                self.source.model = clip(model, PATH_LIMIT);
                self.source.codewhale_version = clip(codewhale_version, PATH_LIMIT);
                self.postures.approval = clip(approval, PATH_LIMIT);
                self.postures.sandbox = clip(sandbox, PATH_LIMIT);
            }
            Event::UserMessage { text } if self.title.is_empty() => {
                self.title = first_line(text, TITLE_LIMIT);
            }
            Event::ThreadCompleted { status } => {
                self.source.status = Some(clip(status, PATH_LIMIT))
            }
            Event::Snapshots {
                enabled, reason, ..
            } => {
                self.postures.snapshots = SnapshotsPosture {
                    enabled: Some(*enabled),
                    reason: reason.as_deref().map(|r| first_line(r, ERROR_LIMIT)),
                };
            }
            Event::Instructions { files, .. } => {
                self.instructions = files
                    .iter()
                    .map(|f| InstructionFile {
                        path: clip(f["path"].as_str().unwrap_or(""), PATH_LIMIT),
                        kind: clip(f["kind"].as_str().unwrap_or(""), PATH_LIMIT),
                        bytes: f["bytes"].as_u64().unwrap_or(0),
                        truncated: f["truncated"].as_bool().unwrap_or(false),
                    })
                    .collect();
            }
            _ if !self.in_scope(r) => {}
            Event::Subagent {
                agent_id, record, ..
            } => self.add_child(r.turn, agent_id, record),
            Event::SubagentStarted {
                agent_id,
                parent_call_id,
                role,
                ..
            } => {
                self.agents.insert(
                    parent_call_id.clone(),
                    (clip(agent_id, PATH_LIMIT), clip(role, PATH_LIMIT)),
                );
            }
            Event::TurnUsage { .. } => self.usage_event(&r.event),
            Event::ToolCall { call_id, .. } => {
                self.call_event(call_id, r.turn, &r.event);
                self.items.push(Item::Call(call_id.clone()));
            }
            Event::Approval { call_id, .. } | Event::ToolResult { call_id, .. } => {
                self.call_event(call_id, r.turn, &r.event)
            }
            Event::FileChanges {
                call_id, changes, ..
            } => {
                self.saw_file_changes = true;
                match call_id {
                    Some(id) => {
                        if let Some(c) = self.calls.get_mut(id) {
                            c.changes = Some(changes.clone());
                        }
                    }
                    None => self.turn_changes.extend(changes.iter().cloned()),
                }
            }
            Event::Snapshot { error: Some(_), .. } => self.snapshot_errors += 1,
            Event::TurnInterrupted { reason } => self.items.push(Item::FailedTurn {
                turn: r.turn,
                reason: first_line(reason, ERROR_LIMIT),
            }),
            _ => {}
        }
    }
}

/// The listed actions in record order, numbered, and the totals they add
/// up to (a command's enforcement label joins the postures).
fn list_actions(items: &[Item], tree: &Tree<'_>, postures: &mut Postures) -> (Vec<Action>, Totals) {
    let mut totals = Totals::default();
    let mut actions = Vec::new();
    let mut n = 0;
    for item in items {
        let a = match item {
            Item::FailedTurn { turn, reason } => {
                totals.failed_turns += 1;
                Some(failed_turn(*turn, reason))
            }
            Item::Call(id) => match tree.calls.get(id) {
                Some(c) => call_action(id, c, tree.workspace, &mut totals, postures),
                None => None,
            },
        };
        if let Some(mut a) = a {
            totals.actions += 1;
            n += 1;
            a.n = n;
            if let (ActionKind::SubAgent, Item::Call(id)) = (a.kind, item) {
                totals.sub_agents += 1;
                if let Some((agent_id, role)) = tree.agents.get(id) {
                    a.agent = Some(AgentEntry {
                        agent_id: agent_id.clone(),
                        role: role.clone(),
                    });
                    let kids = tree.child_items.get(agent_id).map(Vec::as_slice);
                    let (children, t) = list_actions(kids.unwrap_or(&[]), tree, postures);
                    a.children = children;
                    add_totals(&mut totals, &t);
                }
            }
            actions.push(a);
        }
    }
    (actions, totals)
}

/// What the actions are listed from: every call (a sub-agent's keyed
/// `agent/call`), the sub-agents by their `agent` call, and their items.
struct Tree<'a> {
    calls: &'a BTreeMap<String, Call>,
    agents: &'a BTreeMap<String, (String, String)>,
    child_items: &'a BTreeMap<String, Vec<Item>>,
    workspace: Option<&'a Path>,
}

/// A sub-agent's counts added to its parent's (files are counted once,
/// from the snapshots, afterwards).
fn add_totals(t: &mut Totals, c: &Totals) {
    t.commands_run += c.commands_run;
    t.commands_not_run += c.commands_not_run;
    t.network_calls += c.network_calls;
    t.mcp_calls += c.mcp_calls;
    t.sub_agents += c.sub_agents;
    t.reads += c.reads;
    t.approvals.asked += c.approvals.asked;
    t.approvals.approved += c.approvals.approved;
    t.approvals.denied += c.approvals.denied;
    t.approvals.no_response += c.approvals.no_response;
    t.failed_turns += c.failed_turns;
    t.actions += c.actions;
}

/// A turn that did not finish, as an action.
fn failed_turn(turn: u32, reason: &str) -> Action {
    Action {
        n: 0,
        turn,
        kind: ActionKind::FailedTurn,
        status: ActionStatus::Interrupted,
        decided_by: None,
        call_id: None,
        tool: None,
        command: None,
        target: None,
        cwd: None,
        exit_code: None,
        duration_ms: None,
        files: Vec::new(),
        reason: Some(reason.to_string()),
        enforcement: None,
        network: None,
        enforced: None,
        mcp: None,
        agent: None,
        children: Vec::new(),
    }
}

/// Files changed: the turns' snapshot diffs are the truth (they include
/// what commands wrote); without snapshots, what the edit tools reported.
fn files_changed(f: &Fold, actions: &[Action], totals: &mut Totals) {
    let mut per_path: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut lines_known = true;
    if f.saw_file_changes {
        for ch in &f.turn_changes {
            let e = per_path.entry(ch.path.clone()).or_default();
            e.0 += ch.added_lines;
            e.1 += ch.removed_lines;
        }
    }
    if f.postures.snapshots.enabled != Some(true) {
        for a in actions {
            for file in &a.files {
                per_path.entry(file.path.clone()).or_default();
                lines_known &= file.added_lines.is_some();
            }
        }
    }
    totals.files_changed = per_path.len() as u64;
    if lines_known {
        totals.lines_added = Some(per_path.values().map(|v| v.0).sum());
        totals.lines_removed = Some(per_path.values().map(|v| v.1).sum());
    }
}

/// What the receipt cannot say, in words: always the same three limits,
/// then what this session's records leave out.
fn not_recorded(f: &Fold) -> Vec<String> {
    let mut not_recorded = vec![
        "raw tool output and model reasoning are never exported into a receipt".to_string(),
        "read-only tool calls that ran (read_file, list_dir, search) are counted in totals.reads, not listed".to_string(),
        "network use by commands themselves is tracked only under network = allowlist (each command's network line, from the egress proxy), otherwise only the sandbox's network posture applies; network_calls count dedicated network tools, which exec does not offer; mcp_calls count calls of mcp__ tools (MCP servers), and what a server did inside its own sandbox is not listed".to_string(),
    ];
    match f.postures.snapshots.enabled {
        Some(true) => {}
        Some(false) => not_recorded.push(format!(
            "files changed by shell commands: snapshots were off ({}); only files the edit tools reported are listed, without line counts",
            f.postures.snapshots.reason.as_deref().unwrap_or("no reason recorded")
        )),
        None => not_recorded.push(
            "files changed by shell commands: this session has no snapshot records; only files the edit tools reported are listed, without line counts".to_string(),
        ),
    }
    if f.snapshot_errors > 0 {
        not_recorded.push(format!(
            "{} snapshot(s) failed during the run; changes around them may be missing",
            f.snapshot_errors
        ));
    }
    if f.source.status.is_none() {
        not_recorded.push(
            "the session never closed (still running, or the process died before recovery); the receipt covers the committed records only".to_string(),
        );
    }
    not_recorded
}

fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// The action of one tool call; `None` for a read that ran (counted only).
fn call_action(
    id: &str,
    c: &Call,
    workspace: Option<&Path>,
    totals: &mut Totals,
    postures: &mut Postures,
) -> Option<Action> {
    let tool = c.tool.as_str();
    let is_shell = tool == catalogue::SHELL;
    let is_write = catalogue::is_write(tool);
    let is_read = catalogue::is_read(tool);
    let verdict = c.verdict.as_ref();
    let outcome = verdict.map(|v| v.outcome.as_str());
    let asked = verdict.is_some_and(|v| v.decision == "ask");
    if asked {
        totals.approvals.asked += 1;
        match outcome {
            Some("allow") => totals.approvals.approved += 1,
            Some("no_response") => totals.approvals.no_response += 1,
            _ => totals.approvals.denied += 1,
        }
    }
    let ran = c.result.as_ref().is_some_and(|r| r.status != "not_run");
    let who = verdict.and_then(|v| {
        if v.outcome == "no_response" {
            Some(Decider::NoResponse)
        } else {
            Decider::from_session(&v.decided_by)
        }
    });
    let (status, decided_by, reason) = match (&c.result, outcome) {
        (None, Some("allow")) | (None, None) => (ActionStatus::Interrupted, None, None),
        (Some(r), Some("allow")) if r.status == "ok" => (
            ActionStatus::Succeeded,
            asked.then_some(who).flatten(),
            None,
        ),
        (Some(r), Some("allow")) if r.status == "denied" => (
            if is_shell {
                ActionStatus::Failed
            } else {
                ActionStatus::BlockedBeforeStart
            },
            Some(Decider::Sandbox),
            Some(first_line(&r.output, ERROR_LIMIT)),
        ),
        (Some(r), Some("allow")) => (
            ActionStatus::Failed,
            asked.then_some(who).flatten(),
            Some(first_line(&r.output, ERROR_LIMIT)),
        ),
        (_, Some(o)) => (
            if asked || o == "no_response" {
                ActionStatus::StoppedAtApproval
            } else {
                ActionStatus::BlockedBeforeStart
            },
            who,
            verdict.map(|v| first_line(&v.reason, ERROR_LIMIT)),
        ),
        (Some(r), None) => (
            ActionStatus::Failed,
            None,
            Some(first_line(&r.output, ERROR_LIMIT)),
        ),
    };
    if is_read && ran && status == ActionStatus::Succeeded {
        totals.reads += 1;
        return None;
    }
    let kind = if is_shell {
        ActionKind::Command
    } else if is_write {
        ActionKind::FileChange
    } else if tool.starts_with("mcp__") {
        ActionKind::Mcp
    } else if catalogue::kind(tool) == Some(catalogue::ToolKind::Subagent) {
        ActionKind::SubAgent
    } else {
        ActionKind::Approval
    };
    match kind {
        ActionKind::Command if ran => totals.commands_run += 1,
        ActionKind::Command => totals.commands_not_run += 1,
        ActionKind::Mcp => totals.mcp_calls += 1,
        _ => {}
    }
    if is_read && status == ActionStatus::Failed && decided_by != Some(Decider::Sandbox) {
        totals.reads += 1;
    }
    let enforcement = c.result.as_ref().and_then(|r| r.enforcement.clone());
    let network = c.result.as_ref().and_then(|r| r.network.clone());
    if let Some(e) = &enforcement {
        let e = clip(e, ERROR_LIMIT);
        if is_shell && ran && !postures.enforcement.contains(&e) {
            postures.enforcement.push(e);
        }
    }
    let files = match (&c.changes, &c.result) {
        (Some(ch), _) => ch
            .iter()
            .map(|f| FileEntry {
                path: clip(&f.path, PATH_LIMIT),
                change: f.kind.clone(),
                added_lines: Some(f.added_lines),
                removed_lines: Some(f.removed_lines),
                binary: f.binary,
            })
            .collect(),
        (None, Some(r)) if ran => r
            .files_touched
            .iter()
            .map(|p| FileEntry {
                path: clip(&relative(p, workspace), PATH_LIMIT),
                change: "unknown".into(),
                added_lines: None,
                removed_lines: None,
                binary: false,
            })
            .collect(),
        _ => Vec::new(),
    };
    let target = if tool == "search" {
        arg_str(&c.args, "pattern").map(|q| clip(q, QUERY_LIMIT))
    } else {
        arg_str(&c.args, "path").map(|p| clip(p, PATH_LIMIT))
    };
    let command = if is_shell {
        catalogue::shell_command_line(&c.args)
            .or_else(|| arg_str(&c.args, "_raw").map(str::to_string))
            .map(|s| clip(&s, COMMAND_LIMIT))
    } else {
        None
    };
    let cwd = is_shell.then(|| {
        arg_str(&c.args, "cwd")
            .or_else(|| arg_str(&c.args, "workdir"))
            .map(str::to_string)
            .or_else(|| workspace.map(|w| w.display().to_string()))
            .map(|s| clip(&s, PATH_LIMIT))
    });
    Some(Action {
        n: 0,
        turn: c.turn,
        kind,
        status,
        decided_by,
        call_id: Some(clip(id, PATH_LIMIT)),
        tool: Some(clip(tool, PATH_LIMIT)),
        command,
        target,
        cwd: cwd.flatten(),
        exit_code: c.result.as_ref().and_then(|r| r.exit_code),
        duration_ms: c.result.as_ref().filter(|_| ran).map(|r| r.duration_ms),
        files,
        reason: reason.or_else(|| {
            c.result
                .as_ref()
                .and_then(|r| r.error_category.clone())
                .filter(|_| status == ActionStatus::Failed)
        }),
        enforcement: enforcement.map(|e| clip(&e, ERROR_LIMIT)),
        network: network.map(|n| clip(&n, PARTIAL_LIMIT)),
        enforced: c
            .result
            .as_ref()
            .filter(|_| ran)
            .and_then(|r| r.enforced.as_ref())
            .map(enforced),
        mcp: c.mcp.as_ref().filter(|_| kind == ActionKind::Mcp).map(|m| {
            crate::session::record::McpCall {
                server: clip(&m.server, PATH_LIMIT),
                tool: clip(&m.tool, PATH_LIMIT),
            }
        }),
        agent: None,
        children: Vec::new(),
    })
}

/// The host's report for the receipt: every path and reason masked,
/// escaped and clipped like the rest of the recorded text.
fn enforced(e: &EnforcementSummary) -> Enforced {
    Enforced {
        backend: e.backend,
        level: e.level,
        partial: e
            .partial
            .iter()
            .map(|p| PartialEntry {
                item: p.item,
                path: p
                    .path
                    .as_ref()
                    .map(|p| clip(&p.display().to_string(), PATH_LIMIT)),
                reason: clip(&p.reason, PARTIAL_LIMIT),
            })
            .collect(),
    }
}

fn relative(p: &Path, workspace: Option<&Path>) -> String {
    workspace
        .and_then(|w| p.strip_prefix(w).ok())
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}
