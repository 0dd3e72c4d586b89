//! The turn loop of `codewhale exec`.

mod subagents;
pub use subagents::Spawner;

use super::authorizer::{
    Authorizer, DecidedBy, Decision, Gate, ToolCallRequest, TurnContext, Verdict,
};
use super::compaction::{self, estimate};
use super::event as ev;
use super::output::Emitter;
use super::snapshots::{changes_files, RunSnapshots};
use super::tools::{self, ToolContext, ToolOutput, ToolStatus, ALL_TOOLS};
use crate::policy::SandboxMode;
use crate::provider::cost::Price;
use crate::provider::router::{self, Routed, Router};
use crate::provider::{
    ChatRequest, Completion, Message, Provider, ProviderError, ToolCall, ToolSpec, Usage,
};
use crate::session::{Event, SessionError, SessionLog};
use serde_json::{json, Value};
use std::time::Instant;
use tokio::sync::watch;

/// What the CLI resolved for one run.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    pub prompt: String,
    /// `--auto`: approve what the gates ask about; the sandbox stays.
    pub auto: bool,
    /// `--allowed-tools` (None = not given).
    pub allowed_tools: Option<Vec<String>>,
    /// `--disallowed-tools` (wins over allowed).
    pub disallowed_tools: Vec<String>,
    pub max_turns: u32,
    /// What the configuration layers did (files read, keys ignored,
    /// warnings), echoed in the `metadata` event.
    pub config: Value,
    /// `project_instruction_imports` from the user config: the other
    /// tools' instruction files also read (`CLAUDE.md`, …; empty: none).
    pub instruction_imports: Vec<String>,
    /// A person answers gate-8 questions (the TUI, a runtime client): the
    /// posture in the words of docs/TUI.md, e.g. `Work + Ask`. Recorded as
    /// the run's approval posture (`Work + Ask (interactive)`) instead of
    /// exec's `headless`/`auto`. `None`: headless `exec`.
    pub interactive: Option<String>,
    /// Automatic compaction: the threshold and what the thread learned of
    /// its models' windows ([`super::compaction`]).
    pub compaction: super::compaction::CompactionOptions,
}

/// Where a run's model answers come from: one provider, or the router.
#[derive(Clone, Copy)]
pub enum Models<'a> {
    Single(&'a Provider),
    Routed(&'a Router),
}

/// How the run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecReport {
    /// `completed`, `max_turns`, `interrupted`, `limit` (a sub-agent's
    /// token budget), `error`.
    pub status: String,
    pub exit_code: i32,
    pub summary: Value,
    /// The model's last answer.
    pub answer: String,
    /// Tokens of every model request of the run (a sub-agent's included).
    pub usage: Usage,
    /// Files the run's file tools wrote, in order, once each.
    pub files_changed: Vec<std::path::PathBuf>,
}

/// Exit code for Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: i32 = 130;

/// What stopped a turn: recorded as the reason of the session's
/// `turn_interrupted`, the turn's error in the runtime log and the
/// receipt, so "interrupted" always says by what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterruptCause {
    /// Ctrl-C (exec's SIGINT, the TUI's Ctrl-C).
    CtrlC,
    /// The TUI's Esc key (or Esc on an approval card).
    Esc,
    /// A runtime client asked (`POST …/interrupt`, JSON-RPC `turn/interrupt`).
    Client,
    /// SIGTERM to the process running the turn.
    Sigterm,
}

impl InterruptCause {
    /// The short name in `turn.interrupt_requested` (`cause`).
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptCause::CtrlC => "ctrl_c",
            InterruptCause::Esc => "esc",
            InterruptCause::Client => "client",
            InterruptCause::Sigterm => "sigterm",
        }
    }

    /// The sentence recorded as the turn's reason.
    pub fn reason(self) -> &'static str {
        match self {
            InterruptCause::CtrlC => "interrupted (Ctrl-C)",
            InterruptCause::Esc => "interrupted (Esc)",
            InterruptCause::Client => "interrupted by a runtime client (interrupt request)",
            InterruptCause::Sigterm => "interrupted (SIGTERM)",
        }
    }
}

/// The loop's stop signal: `None` until someone interrupts, then why.
pub type Interrupt = watch::Receiver<Option<InterruptCause>>;

/// The tools offered to the model: none in plain `exec` (it answers without
/// tools), all with `--auto`, or exactly `--allowed-tools`; minus
/// `--disallowed-tools` (deny wins).
pub fn offered_tools(
    auto: bool,
    allowed: Option<&[String]>,
    disallowed: &[String],
) -> Vec<&'static str> {
    ALL_TOOLS
        .iter()
        .copied()
        .filter(|t| match allowed {
            Some(list) => list.iter().any(|a| a == t),
            None => auto,
        })
        .filter(|t| !disallowed.iter().any(|d| d == t))
        .collect()
}

/// The tool that loads a skill (docs/SKILLS.md).
pub const SKILL_TOOL: &str = "skill";

/// Whether the `skill` tool is offered: the run has usable skills and the
/// flags admit it as they would any built-in tool (`--auto`, or named by
/// `--allowed-tools`; never when `--disallowed-tools` names it).
fn offer_skill(opts: &ExecOptions, ctx: &ToolContext) -> bool {
    let has = ctx
        .skills
        .as_ref()
        .is_some_and(|s| s.usable().next().is_some());
    has && admitted(opts, SKILL_TOOL)
}

/// The tool that appends to the memory file (docs/MEMORY.md).
pub const REMEMBER_TOOL: &str = "remember";

/// Built-in tools offered only when the run has what they work on
/// (skills; memory switched on), named by `--allowed-tools` like any other.
pub const CONDITIONAL_TOOLS: &[&str] = &[
    SKILL_TOOL,
    REMEMBER_TOOL,
    tools::todo::TODO_TOOL,
    tools::jobs::JOB_OUTPUT_TOOL,
    tools::jobs::JOB_KILL_TOOL,
];

/// Operate's tools, offered in Work and Operate (never Plan) when the flags
/// admit them: the to-do list, and reading/stopping background jobs where
/// `shell` (which starts them) is offered.
fn operate_tools(
    opts: &ExecOptions,
    mode: Option<crate::authz::Mode>,
    offered: &[&'static str],
) -> Vec<&'static str> {
    if !matches!(
        mode,
        Some(crate::authz::Mode::Work | crate::authz::Mode::Operate)
    ) {
        return Vec::new();
    }
    let shell = offered.contains(&crate::catalogue::SHELL);
    [
        (tools::todo::TODO_TOOL, true),
        (tools::jobs::JOB_OUTPUT_TOOL, shell),
        (tools::jobs::JOB_KILL_TOOL, shell),
    ]
    .into_iter()
    .filter(|(t, ok)| *ok && admitted(opts, t))
    .map(|(t, _)| t)
    .collect()
}

/// Whether the flags admit the built-in `tool` (as [`offered_tools`] does).
fn admitted(opts: &ExecOptions, tool: &str) -> bool {
    let allowed = match opts.allowed_tools.as_deref() {
        Some(list) => list.iter().any(|a| a == tool),
        None => opts.auto,
    };
    allowed && !opts.disallowed_tools.iter().any(|d| d == tool)
}

/// Whether the MCP tool `name` is offered: with `--auto`, or when an
/// `--allowed-tools` entry names it (exactly or as `prefix*`); never when a
/// `--disallowed-tools` entry does (deny wins).
pub fn offer_mcp(
    auto: bool,
    allowed: Option<&[String]>,
    disallowed: &[String],
    name: &str,
) -> bool {
    use crate::mcp::client_names::matches;
    let allowed_ok = match allowed {
        Some(list) => list.iter().any(|a| matches(a, name)),
        None => auto,
    };
    allowed_ok && !disallowed.iter().any(|d| matches(d, name))
}

/// The approval posture a run records (session, metadata, summary):
/// exec's `auto` or `headless`; an interactive run's posture, marked so,
/// with `auto-approve` when the thread approves ordinary questions itself.
fn approval_label(opts: &ExecOptions) -> String {
    match (&opts.interactive, opts.auto) {
        (Some(p), false) => format!("{p} (interactive)"),
        (Some(p), true) => format!("{p} (interactive, auto-approve)"),
        (None, true) => "auto".into(),
        (None, false) => "headless".into(),
    }
}

/// Who answers a question gate 8 left open. `exec` has nobody: its
/// posture is headless, so the pipeline already answered ([`Headless`]
/// passes the verdict through); the runtime asks its clients and waits.
pub trait Approver: Send + Sync {
    fn settle<'a>(
        &'a self,
        call: &'a ToolCallRequest,
        verdict: Verdict,
        ctx: &'a TurnContext,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send + 'a>>;
}

/// The verdict stays as the gates left it.
pub struct Headless;

impl Approver for Headless {
    fn settle<'a>(
        &'a self,
        _call: &'a ToolCallRequest,
        verdict: Verdict,
        _ctx: &'a TurnContext,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send + 'a>> {
        Box::pin(async move { verdict })
    }
}

/// What a tool outside the built-ins returned: what goes to the model,
/// and (when it must not be stored) what the session file and the output
/// stream record instead.
pub struct ExtraOutput {
    pub output: ToolOutput,
    /// Recorded in place of `output.content` (e.g. a user's answers, which
    /// reach the model but are never stored).
    pub record_as: Option<String>,
}

/// Tools a runtime-driven run offers beyond the built-ins: `ask_user`
/// and client-executed tools. They pass admission and the gates like any
/// other call; only their execution is here.
pub trait ExtraTools: Send + Sync {
    /// The specs offered to the model.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Run `name` (one of [`ExtraTools::specs`]).
    fn call<'a>(
        &'a self,
        call_id: &'a str,
        name: &'a str,
        args: &'a Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ExtraOutput> + Send + 'a>>;
}

/// What a runtime-driven run adds to an `exec` run.
pub struct RunHooks<'a> {
    /// Who answers open questions (exec: [`Headless`]).
    pub approver: &'a dyn Approver,
    /// Earlier messages of the conversation, sent before the prompt.
    pub history: Vec<Message>,
    /// A thread's own instructions, added to the loop's system prompt.
    pub system_prompt: Option<String>,
    /// User input steered into the running turn: each message is sent to
    /// the model before its next request (a final answer with steered
    /// input waiting is followed by another request).
    pub steer: Option<std::sync::mpsc::Receiver<String>>,
    /// Tools beyond the built-ins.
    pub extra_tools: Option<&'a dyn ExtraTools>,
    /// Auto-Review's model reviewer: an ordinary question the gates send
    /// to it ([`Verdict::to_reviewer`]) is answered by it instead of the
    /// approver (never in `exec`: its posture is headless).
    pub auto_review: Option<&'a super::review::AutoReview>,
    /// The request's tree of sub-agents: with it (and an authorizer that
    /// can clamp a child) the run offers `agent` above the depth limit.
    pub spawner: Option<Spawner>,
}

impl<'a> RunHooks<'a> {
    /// Only an approver (no history, no steering, no extra tools).
    pub fn new(approver: &'a dyn Approver) -> Self {
        RunHooks {
            approver,
            history: Vec::new(),
            system_prompt: None,
            steer: None,
            extra_tools: None,
            auto_review: None,
            spawner: None,
        }
    }
}

struct Loop<'a> {
    opts: &'a ExecOptions,
    ctx: &'a ToolContext,
    models: Models<'a>,
    /// The provider and model of the latest turn (the first one before any).
    current: (String, String),
    authz: &'a dyn Authorizer,
    approver: &'a dyn Approver,
    history: Vec<Message>,
    system_extra: Option<String>,
    steer: Option<std::sync::mpsc::Receiver<String>>,
    steered: Vec<String>,
    extra: Option<&'a dyn ExtraTools>,
    extra_specs: Vec<ToolSpec>,
    auto_review: Option<&'a super::review::AutoReview>,
    out: &'a mut Emitter,
    log: &'a mut SessionLog,
    snaps: &'a mut RunSnapshots,
    interrupt: Interrupt,
    offered: Vec<&'static str>,
    /// The MCP tools offered in the current turn (ready servers only).
    mcp_offered: Vec<String>,
    calls: Vec<Value>,
    /// Files the file tools wrote (the report's `files_changed`).
    files: Vec<std::path::PathBuf>,
    total: Usage,
    total_cost: Option<f64>,
    answer: String,
    turns: u32,
    instructions: Vec<super::prompt::LoadedInstruction>,
    /// The tree this run belongs to (`None`: no sub-agents).
    spawner: Option<Spawner>,
    /// The tools a loaded skill's `allowed-tools` narrowed the run to
    /// (with the skill's name); `None`: not narrowed. Only ever narrows.
    skill_narrow: Option<(String, Vec<String>)>,
    /// Operate (the request's agent, with `agent` offered): the files
    /// changed since the last reviewer verdict (`None`: not Operate).
    operate: Option<super::operate::ReviewGate>,
}

/// What the gates made of a call.
enum Gated {
    /// Allowed: run it with these arguments (`is_extra`: a tool of the
    /// runtime's, not a built-in).
    Run { args: Value, is_extra: bool },
    /// Not run (bad arguments, denied, no answer): its recorded result.
    Done((String, bool)),
}

enum Stop {
    Session(SessionError),
    Provider(crate::provider::ProviderError),
    Interrupted,
    /// Auto-Review's breaker tripped (the reason names the counts).
    Paused(String),
}

impl From<SessionError> for Stop {
    fn from(e: SessionError) -> Self {
        Stop::Session(e)
    }
}

/// One run of the loop, set up step by step: what to run (options, tools'
/// context, models, authorizer), then optionally the hooks of a runtime
/// client and the undo snapshots, then [`ExecRun::run`]. The one entry
/// point for `exec`, the runtime's turns and tests.
pub struct ExecRun<'a> {
    opts: &'a ExecOptions,
    ctx: &'a ToolContext,
    models: Models<'a>,
    authz: &'a dyn Authorizer,
    hooks: RunHooks<'a>,
    snaps: Option<&'a mut RunSnapshots>,
}

impl<'a> ExecRun<'a> {
    /// A headless run (no hooks) without snapshots until
    /// [`ExecRun::snapshots`] gives it a store.
    pub fn new(
        opts: &'a ExecOptions,
        ctx: &'a ToolContext,
        models: Models<'a>,
        authz: &'a dyn Authorizer,
    ) -> Self {
        ExecRun {
            opts,
            ctx,
            models,
            authz,
            hooks: RunHooks::new(&Headless),
            snaps: None,
        }
    }

    /// A runtime client's hooks: its approver answers open questions, the
    /// thread's earlier messages go in front of the prompt.
    pub fn hooks(mut self, hooks: RunHooks<'a>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Snapshot turns that can change files through `snaps`.
    pub fn snapshots(mut self, snaps: &'a mut RunSnapshots) -> Self {
        self.snaps = Some(snaps);
        self
    }

    /// Run the loop to the end. Every outcome is reported on `out` and
    /// closed in the session file (if the session file itself fails, that
    /// is the error).
    pub async fn run(
        self,
        out: &mut Emitter,
        log: &mut SessionLog,
        interrupt: Interrupt,
    ) -> ExecReport {
        let mut off;
        let snaps = match self.snaps {
            Some(s) => s,
            None => {
                off = RunSnapshots::off("snapshots are off: the caller opened no snapshot store");
                &mut off
            }
        };
        drive_run(
            self.opts,
            self.ctx,
            self.models,
            self.authz,
            self.hooks,
            out,
            log,
            snaps,
            interrupt,
        )
        .await
    }
}

#[allow(clippy::too_many_arguments)]
async fn drive_run(
    opts: &ExecOptions,
    ctx: &ToolContext,
    models: Models<'_>,
    authz: &dyn Authorizer,
    hooks: RunHooks<'_>,
    out: &mut Emitter,
    log: &mut SessionLog,
    snaps: &mut RunSnapshots,
    interrupt: Interrupt,
) -> ExecReport {
    let mut offered = offered_tools(
        opts.auto,
        opts.allowed_tools.as_deref(),
        &opts.disallowed_tools,
    );
    if offer_skill(opts, ctx) {
        offered.push(SKILL_TOOL);
    }
    if ctx.memory.is_some() && admitted(opts, REMEMBER_TOOL) {
        offered.push(REMEMBER_TOOL);
    }
    let more = operate_tools(opts, authz.posture().map(|p| p.mode), &offered);
    offered.extend(more);
    if hooks
        .spawner
        .as_ref()
        .is_some_and(|s| s.offers(opts, &offered))
        && authz.posture().is_some()
    {
        offered.push(super::subagent::AGENT_TOOL);
    }
    // Operate's goal behaviour is the request's agent's (a child runs its
    // role's prompt), and needs `agent` to ask for a review.
    let operate = (authz.posture().map(|p| p.mode) == Some(crate::authz::Mode::Operate)
        && hooks.spawner.as_ref().is_some_and(|s| s.depth == 0)
        && offered.contains(&super::subagent::AGENT_TOOL))
    .then(|| super::operate::ReviewGate::for_workspace(ctx.guard.workspace()));
    let current = match models {
        Models::Single(p) => (p.settings.id.clone(), p.settings.model.clone()),
        Models::Routed(r) => r
            .first(router::TurnKind::Plan)
            .map(|p| (p.settings.id.clone(), p.settings.model.clone()))
            .unwrap_or_else(|| ("router".into(), "auto".into())),
    };
    let mut l = Loop {
        opts,
        ctx,
        models,
        current,
        authz,
        approver: hooks.approver,
        history: hooks.history,
        system_extra: hooks.system_prompt.filter(|s| !s.trim().is_empty()),
        steer: hooks.steer,
        steered: Vec::new(),
        extra_specs: hooks.extra_tools.map(|e| e.specs()).unwrap_or_default(),
        extra: hooks.extra_tools,
        auto_review: hooks.auto_review,
        out,
        log,
        snaps,
        interrupt,
        offered,
        mcp_offered: Vec::new(),
        calls: Vec::new(),
        files: Vec::new(),
        total: Usage::default(),
        total_cost: Some(0.0),
        answer: String::new(),
        turns: 0,
        instructions: Vec::new(),
        spawner: hooks.spawner,
        skill_narrow: None,
        operate,
    };
    let result = l.drive().await;
    l.finish(result)
}

impl Loop<'_> {
    fn turn_ctx(&self) -> TurnContext {
        TurnContext {
            workspace: self.ctx.guard.workspace().to_path_buf(),
            auto: self.opts.auto,
            headless: self.opts.interactive.is_none(),
            agent: self.spawner.as_ref().and_then(|s| s.agent.clone()),
        }
    }

    /// The MCP tools to offer now: the ready servers' tools that the
    /// flags admit.
    fn mcp_tools(&self) -> Vec<crate::mcp::McpTool> {
        let Some(m) = &self.ctx.mcp else {
            return Vec::new();
        };
        m.tools()
            .into_iter()
            .filter(|t| {
                offer_mcp(
                    self.opts.auto,
                    self.opts.allowed_tools.as_deref(),
                    &self.opts.disallowed_tools,
                    &t.name,
                )
            })
            .collect()
    }

    /// The server and tool an MCP tool name stands for (the server's
    /// current tools; `None` for other tools or a tool no server offers).
    fn mcp_call_of(&self, name: &str) -> Option<crate::session::record::McpCall> {
        if !crate::mcp::client_names::is_mcp(name) {
            return None;
        }
        let m = self.ctx.mcp.as_ref()?;
        m.tools()
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| crate::session::record::McpCall {
                server: t.server,
                tool: t.tool,
            })
    }

    async fn drive(&mut self) -> Result<&'static str, Stop> {
        let first_mcp: Vec<String> = self.mcp_tools().into_iter().map(|t| t.name).collect();
        let mut names: Vec<&str> = self.offered.clone();
        names.extend(self.extra_specs.iter().map(|s| s.name.as_str()));
        names.extend(first_mcp.iter().map(String::as_str));
        let (mut system, instructions, skipped) =
            super::prompt::system_prompt(&self.ctx.guard, &names, &self.opts.instruction_imports);
        if self.operate.is_some() {
            system.push_str(super::operate::PROMPT);
        }
        // Skills: names and descriptions only, bounded; only when the
        // model can load them.
        let skills_listing = match (&self.ctx.skills, self.offered.contains(&SKILL_TOOL)) {
            (Some(sk), true) => {
                let (text, info) = crate::skills::listing::section(sk.usable());
                system.push_str(&text);
                if info.truncated {
                    self.out.note(&format!(
                        "skills: {} listed, {} left out by the {} KiB cap",
                        info.listed.len(),
                        info.omitted,
                        crate::skills::listing::LISTING_CAP / 1024
                    ));
                }
                Some(info)
            }
            _ => None,
        };
        // Memory: the file's text, bounded, when `[memory] enabled`.
        let memory = match &self.ctx.memory {
            Some(home) => match crate::memory::load(home) {
                Ok((info, text)) => {
                    system.push_str(&crate::memory::section(&info, &text));
                    if info.truncated {
                        self.out.note(&format!(
                            "memory: {} truncated ({} of {} bytes in the prompt)",
                            info.path.display(),
                            info.bytes,
                            info.file_bytes
                        ));
                    }
                    Some(info)
                }
                Err(e) => {
                    self.out.note(&format!("memory: not read: {e}"));
                    None
                }
            },
            None => None,
        };
        if let Some(extra) = &self.system_extra {
            // The thread's own instructions (a runtime client set them):
            // text for the model like the project's, never configuration.
            system.push_str("\n\n# Thread instructions\n\n");
            system.push_str(extra);
        }
        let (provider_id, model_id) = self.current.clone();
        let wire = match self.models {
            Models::Single(p) => Some(p.settings.wire),
            Models::Routed(r) => r.first(router::TurnKind::Plan).map(|p| p.settings.wire),
        };
        self.log.append(
            0,
            Event::ThreadStarted {
                cwd: self.ctx.guard.workspace().to_path_buf(),
                provider: provider_id.clone(),
                model: model_id.clone(),
                approval: approval_label(self.opts),
                sandbox: self.ctx.policy.mode.as_str().into(),
                codewhale_version: env!("CARGO_PKG_VERSION").into(),
            },
        )?;
        self.snaps.announce(self.log, self.out)?;
        for (path, why) in &skipped {
            self.out
                .note(&format!("instructions: {} not read: {why}", path.display()));
        }
        for f in &instructions {
            self.out.note(&format!(
                "instructions: {} ({} bytes{})",
                f.path.display(),
                f.bytes,
                if f.truncated {
                    format!(", truncated from {}", f.file_bytes)
                } else {
                    String::new()
                }
            ));
        }
        let files: Vec<Value> = instructions
            .iter()
            .map(|f| serde_json::to_value(f).unwrap_or(Value::Null))
            .collect();
        self.log.append(
            0,
            Event::Instructions {
                event_v: 1,
                files: files.clone(),
                imports: !self.opts.instruction_imports.is_empty(),
            },
        )?;
        let agents_md = instructions
            .iter()
            .rev()
            .find(|f| f.kind == "agents_md")
            .map(|f| f.path.clone());
        self.instructions = instructions;
        let enforcement = match self.ctx.policy.mode {
            m if m.is_sandboxed() => {
                format!("os-sandbox ({m}); each tool_result names the backend")
            }
            SandboxMode::ExternalSandbox => "external-sandbox (no local OS sandbox)".into(),
            _ => "unsandboxed (danger-full-access)".into(),
        };
        self.out.emit(ev::Event::Metadata(Box::new(ev::Metadata {
            provider: provider_id,
            model: model_id,
            wire,
            routing: matches!(self.models, Models::Routed(_)),
            instructions: files,
            approval: approval_label(self.opts),
            sandbox: self.ctx.policy.mode.as_str().into(),
            enforcement,
            tools: self.offered.clone(),
            mcp_tools: first_mcp,
            mcp_servers: json!(self.ctx.mcp.as_ref().map(|m| m.status())),
            skills: skills_listing,
            memory,
            agents_md,
            thread: self.log.thread().to_string(),
            session_file: self.log.path().to_path_buf(),
            snapshots: self.snaps.metadata(),
            config: self.opts.config.clone(),
        })));
        self.log.append(
            0,
            Event::UserMessage {
                text: self.opts.prompt.clone(),
            },
        )?;
        let mut specs: Vec<_> = self.offered.iter().filter_map(|t| tools::spec(t)).collect();
        specs.extend(self.extra_specs.iter().cloned());
        let mut messages = std::mem::take(&mut self.history);
        messages.push(Message::User {
            text: self.opts.prompt.clone(),
        });
        for turn in 1..=self.opts.max_turns {
            if self.budget_spent() {
                return Ok("limit");
            }
            self.turns = turn;
            self.poll_steers();
            for text in std::mem::take(&mut self.steered) {
                self.log
                    .append(turn, Event::UserMessage { text: text.clone() })?;
                self.out.emit(ev::Event::Steered {
                    turn,
                    chars: text.chars().count(),
                });
                messages.push(Message::User { text });
            }
            self.log.append(turn, Event::TurnStarted)?;
            // MCP tools come and go with their servers: offered per turn.
            let mcp_tools = self.mcp_tools();
            self.mcp_offered = mcp_tools.iter().map(|t| t.name.clone()).collect();
            let mut turn_specs = specs.clone();
            turn_specs.extend(mcp_tools.iter().map(tools::mcp_spec));
            // A loaded skill's `allowed-tools` removes the rest.
            turn_specs.retain(|s| self.skill_permits(&s.name));
            let narrowed: Vec<String> = self
                .mcp_offered
                .iter()
                .filter(|n| self.skill_permits(n))
                .cloned()
                .collect();
            self.mcp_offered = narrowed;
            self.compact_if_needed(turn, &system, &mut messages, &turn_specs, None)
                .await?;
            let (mut result, mut routed, mut price) =
                self.request(turn, &system, &messages, &turn_specs).await?;
            // A window nobody knew (or a provider counting more than the
            // estimate): compact on the provider's refusal, retry once.
            if let Err(ProviderError::ContextLength { window, .. }) = &result {
                let failed = self.scaled(estimate(&system, &messages, &turn_specs));
                if let Some(key) = self.window_key() {
                    self.opts
                        .compaction
                        .memory
                        .learn_window(&key, window.unwrap_or(failed));
                }
                if self
                    .compact_if_needed(turn, &system, &mut messages, &turn_specs, Some(failed))
                    .await?
                {
                    (result, routed, price) =
                        self.request(turn, &system, &messages, &turn_specs).await?;
                }
            }
            if let Some(r) = &routed {
                self.record_choice(turn, r)?;
            }
            let completion = result.map_err(Stop::Provider)?;
            if let (Some(u), Some(key)) = (completion.usage, self.window_key()) {
                let raw = estimate(&system, &messages, &turn_specs);
                self.opts
                    .compaction
                    .memory
                    .calibrate(&key, raw, u.input_tokens);
            }
            self.usage(turn, completion.usage, price.as_ref())?;
            if !completion.reasoning.is_empty() {
                let text = crate::provider::reasoning::readable(&completion.reasoning);
                self.out.emit(ev::Event::Reasoning {
                    turn,
                    chars: text.chars().count(),
                    text,
                });
                self.log.append(
                    turn,
                    Event::Reasoning {
                        event_v: 1,
                        parts: completion.reasoning.clone(),
                    },
                )?;
            }
            if !completion.text.is_empty() {
                self.answer = completion.text.clone();
                self.log.append(
                    turn,
                    Event::AssistantMessage {
                        text: completion.text.clone(),
                    },
                )?;
            }
            if completion.tool_calls.is_empty() {
                self.log.append(turn, Event::TurnCompleted)?;
                self.poll_steers();
                if self.steered.is_empty() {
                    // Operate: a multi-file change not yet reviewed gets
                    // one message asking for a reviewer before ending.
                    self.review_changes();
                    match self.operate.as_mut().and_then(|g| g.nudge()) {
                        Some(m) if turn < self.opts.max_turns => {
                            self.out.note(&m);
                            self.steered.push(m);
                        }
                        _ => return Ok("completed"),
                    }
                }
                // Input was steered in while the model answered: it gets
                // another request with that input after its answer.
                messages.push(Message::Assistant {
                    text: completion.text.clone(),
                    tool_calls: Vec::new(),
                    reasoning: completion.reasoning.clone(),
                });
                continue;
            }
            messages.push(Message::Assistant {
                text: completion.text.clone(),
                tool_calls: completion.tool_calls.clone(),
                reasoning: completion.reasoning.clone(),
            });
            // Calls run in order; consecutive `agent` calls run together.
            let mut i = 0;
            while i < completion.tool_calls.len() {
                let call = &completion.tool_calls[i];
                let n = completion.tool_calls[i..]
                    .iter()
                    .take_while(|c| c.name == super::subagent::AGENT_TOOL)
                    .count();
                let results = if n > 0 {
                    self.agent_batch(turn, &completion.tool_calls[i..i + n])
                        .await?
                } else {
                    vec![self.tool_call(turn, call).await?]
                };
                let batch = &completion.tool_calls[i..i + n.max(1)];
                for (call, (content, is_error)) in batch.iter().zip(results) {
                    messages.push(Message::ToolResult {
                        call_id: call.id.clone(),
                        content,
                        is_error,
                    });
                }
                i += n.max(1);
            }
            let thread = self.log.thread().to_string();
            self.snaps.end_turn(self.log, self.out, turn, &thread)?;
            self.log.append(turn, Event::TurnCompleted)?;
        }
        Ok("max_turns")
    }

    /// One step: its session record (when it has one), then the event to
    /// the output and the tap. The record comes first so a client that
    /// sees the event finds the step in the session file.
    fn emit(&mut self, turn: u32, e: ev::Event) -> Result<(), Stop> {
        // The calls' snapshot diffs known so far come first: a reviewer
        // that completes now reviewed them.
        self.review_changes();
        if let Some(g) = &mut self.operate {
            g.observe(&e);
        }
        if let Some(r) = e.record() {
            self.log.append(turn, r)?;
        }
        self.out.emit(e);
        Ok(())
    }

    /// Hand the files the calls' snapshots saw changed (commands,
    /// children, MCP calls included) to Operate's reviewer rule.
    fn review_changes(&mut self) {
        let changed = self.snaps.take_call_changes();
        if let Some(g) = &mut self.operate {
            g.observe_changed(&changed);
        }
    }

    /// One model request (the router's, or the single provider's), with
    /// Ctrl-C still stopping the turn.
    async fn request(
        &mut self,
        turn: u32,
        system: &str,
        messages: &[Message],
        specs: &[ToolSpec],
    ) -> Result<Answer, Stop> {
        let req = ChatRequest {
            system,
            messages,
            tools: specs,
        };
        let models = self.models;
        let stall = self.stall_limit();
        let (provider, model) = self.current.clone();
        let out = &mut *self.out;
        let mut on_text = |t: &str| out.content(t);
        let mut intr = self.interrupt.clone();
        let fut = complete_turn(models, turn, system, messages, req, &mut on_text);
        // A sub-agent whose model does not answer within its stall limit
        // is stopped (its slot freed); the request's own agent waits.
        let stalled = async {
            match stall {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = fut => Ok(r),
            _ = intr.wait_for(|v| v.is_some()) => Err(Stop::Interrupted),
            _ = stalled => Err(Stop::Provider(ProviderError::Transient {
                provider,
                model,
                detail: format!(
                    "the sub-agent stalled: no answer from the model in {} s (its stall limit, [subagents] stall_secs)",
                    stall.map_or(0, |d| d.as_secs())
                ),
                mid_stream: false,
            })),
        }
    }

    /// The estimate of a request scaled to the provider's count.
    fn scaled(&self, raw: u64) -> u64 {
        let scale = self
            .window_key()
            .map_or(1.0, |k| self.opts.compaction.memory.scale(&k));
        (raw as f64 * scale).ceil() as u64
    }

    /// Compact `messages` when the request they make would pass the
    /// threshold of the model's window, or (`failed`: the provider refused
    /// a request of that many tokens as too long) in any case. Returns
    /// whether it compacted.
    async fn compact_if_needed(
        &mut self,
        turn: u32,
        system: &str,
        messages: &mut Vec<Message>,
        specs: &[ToolSpec],
        failed: Option<u64>,
    ) -> Result<bool, Stop> {
        let (Some(p), Some(key)) = (self.main_provider(), self.window_key()) else {
            return Ok(false);
        };
        let memory = self.opts.compaction.memory.clone();
        let Some(window) = p.settings.context_window.or_else(|| memory.window(&key)) else {
            return Ok(false);
        };
        let scale = memory.scale(&key);
        let before = self.scaled(estimate(system, messages, specs));
        let limit = (window as f64 * self.opts.compaction.threshold) as u64;
        if failed.is_none() && before <= limit {
            return Ok(false);
        }
        let compaction::Split { older, kept } = compaction::split(messages);
        if older.is_empty() {
            return Ok(false);
        }
        let sent = compaction::fit(older.clone(), (limit as f64 / scale) as u64);
        let c = {
            let mut intr = self.interrupt.clone();
            tokio::select! {
                r = compaction::summarise(p, &sent) => r,
                _ = intr.wait_for(|v| v.is_some()) => return Err(Stop::Interrupted),
            }
        }
        .map_err(Stop::Provider)?;
        if c.text.trim().is_empty() {
            return Err(Stop::Provider(ProviderError::Protocol {
                provider: p.settings.id.clone(),
                model: p.settings.model.clone(),
                detail: "the model returned an empty summary when asked to compact".into(),
            }));
        }
        self.usage(turn, c.usage, p.settings.price.as_ref())?;
        let kept_n = kept.len() as u64;
        *messages = compaction::compacted(&c.text, kept);
        let after = self.scaled(estimate(system, messages, specs));
        let reason = if failed.is_some() {
            "context_length"
        } else {
            "threshold"
        };
        self.emit(
            turn,
            ev::Event::Compaction(Box::new(ev::Compaction {
                turn,
                auto: true,
                reason: reason.into(),
                window,
                threshold: self.opts.compaction.threshold,
                tokens_before: failed.unwrap_or(before),
                tokens_after: after,
                summarised: older.len() as u64,
                kept: kept_n,
                summary_chars: c.text.chars().count(),
                summary: c.text,
                provider: p.settings.id.clone(),
                model: p.settings.model.clone(),
            })),
        )?;
        Ok(true)
    }

    /// Move steered input that arrived into `steered` (sent before the next
    /// request).
    fn poll_steers(&mut self) {
        if let Some(rx) = &self.steer {
            while let Ok(t) = rx.try_recv() {
                self.steered.push(t);
            }
        }
    }

    /// The router's choice for this turn, in the stream and the record.
    fn record_choice(&mut self, turn: u32, r: &Routed) -> Result<(), Stop> {
        self.current = (r.used.provider.clone(), r.used.model.clone());
        let failed: Vec<Value> = r
            .failed
            .iter()
            .map(|f| serde_json::to_value(f).unwrap_or(Value::Null))
            .collect();
        self.emit(
            turn,
            ev::Event::ModelChoice(ev::ModelChoice {
                turn,
                kind: r.choice.kind.as_str().into(),
                provider: r.choice.target.provider.clone(),
                model: r.choice.target.model.clone(),
                reason: r.choice.reason.clone(),
                used_provider: r.used.provider.clone(),
                used_model: r.used.model.clone(),
                failed,
            }),
        )
    }

    fn usage(
        &mut self,
        turn: u32,
        usage: Option<Usage>,
        price: Option<&Price>,
    ) -> Result<(), Stop> {
        let current = self.current.clone();
        self.usage_of(turn, usage, price, current, false)
    }

    /// [`Loop::usage`] of a request to `(provider, model)` (the reviewer's
    /// is reported under its own model).
    fn usage_of(
        &mut self,
        turn: u32,
        usage: Option<Usage>,
        price: Option<&Price>,
        (provider, model): (String, String),
        reviewer: bool,
    ) -> Result<(), Stop> {
        let u = usage.unwrap_or_default();
        self.total.add(&u);
        self.charge_tree(&u);
        // No usage reported, or no price: unknown, never 0.
        let cost = match (usage, price) {
            (Some(u), Some(p)) => p.cost(&u),
            _ => None,
        };
        self.total_cost = match (self.total_cost, cost) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.emit(
            turn,
            ev::Event::TurnUsage(ev::TurnUsage {
                turn,
                provider,
                model,
                input_tokens: u.input_tokens,
                cached_input_tokens: u.cached_input_tokens,
                cache_write_tokens: u.cache_write_tokens,
                output_tokens: u.output_tokens,
                reasoning_tokens: u.reasoning_tokens,
                usage_reported: usage.is_some(),
                price: price.cloned(),
                cost_usd: cost,
                cost: crate::session::cost_label(cost),
                reviewer,
            }),
        )
    }

    /// One call: parse, admit, authorize, run, record. Returns what goes
    /// back to the model.
    async fn tool_call(&mut self, turn: u32, call: &ToolCall) -> Result<(String, bool), Stop> {
        let (args, is_extra) = match self.gate(turn, call).await? {
            Gated::Run { args, is_extra } => (args, is_extra),
            Gated::Done(r) => return Ok(r),
        };
        self.run_call(turn, call, args, is_extra).await
    }

    /// Parse, admit and authorize a call (its `tool_use` and `approval`
    /// events): what runs, or the recorded result of a call that does not.
    async fn gate(&mut self, turn: u32, call: &ToolCall) -> Result<Gated, Stop> {
        let parsed: Result<Value, _> = serde_json::from_str(&call.arguments);
        let args = match &parsed {
            Ok(v @ Value::Object(_)) => v.clone(),
            _ => json!({"_raw": call.arguments}),
        };
        let mcp = self.mcp_call_of(&call.name);
        self.emit(
            turn,
            ev::Event::ToolUse(ev::ToolUse {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                args: args.clone(),
                mcp,
            }),
        )?;
        if !matches!(parsed, Ok(Value::Object(_))) {
            let why = match parsed {
                Err(e) => format!("invalid JSON: {e}"),
                Ok(_) => "not a JSON object".into(),
            };
            let o = ToolOutput::error(
                "bad_arguments",
                format!("the arguments of {} could not be used ({why}); nothing ran. Send a JSON object matching the tool's schema.", call.name),
            );
            return self
                .record_result(turn, call, "not_run", o, 0)
                .map(Gated::Done);
        }
        let command = (call.name == "shell")
            .then(|| crate::catalogue::shell_command_line(&args))
            .flatten();
        let tctx = self.turn_ctx();
        let request = ToolCallRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args: args.clone(),
            command,
        };
        let is_extra = self.extra_specs.iter().any(|s| s.name == call.name);
        let v = if !self.skill_permits(&call.name) {
            Verdict::decided(
                Decision::Deny,
                DecidedBy::Posture,
                Gate::Admission,
                &format!(
                    "tool `{}` is outside the `allowed-tools` of the loaded skill `{}`",
                    call.name,
                    self.skill_narrow.as_ref().map_or("", |(n, _)| n.as_str())
                ),
            )
        } else if self.offered.contains(&call.name.as_str())
            || is_extra
            || self.mcp_offered.contains(&call.name)
        {
            self.authz.authorize(&request, &tctx).await
        } else {
            Verdict::decided(
                Decision::Deny,
                DecidedBy::Posture,
                Gate::Admission,
                &format!("tool `{}` is not available in this run", call.name),
            )
        };
        // Gate 9's mode is the policy's: the gates were handed it, so
        // nothing here can disagree with the tools' sandbox. The verdict
        // is final (gate 8 answered any question the headless way).
        // A question gate 8 left open (not in exec: its posture is
        // headless) waits for the approver; Ctrl-C still stops the turn.
        // Auto-Review: the model reviewer answers an ordinary question
        // the gates sent to it; a tripped breaker stops the turn after
        // this call is recorded as not run.
        let mut paused = None;
        let v = match self.auto_review {
            Some(ar) if v.to_reviewer && v.needs_answer() => {
                let (v, trip) = self.review(turn, ar, &request, v).await?;
                paused = trip;
                v
            }
            _ => v,
        };
        let v = if v.needs_answer() {
            let mut intr = self.interrupt.clone();
            tokio::select! {
                v = self.approver.settle(&request, v, &tctx) => v,
                _ = intr.wait_for(|v| v.is_some()) => return Err(Stop::Interrupted),
            }
        } else {
            v
        };
        self.emit(
            turn,
            ev::Event::Approval(Box::new(ev::Approval {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                verdict: crate::session::Verdict::from(&v),
                hold: v.held(),
                trace: v.trace_lines(),
            })),
        )?;
        if !v.is_allowed() {
            let msg = match v.outcome() {
                "no_response" => format!(
                    "not run: {} (asked for approval; no response in a headless run)",
                    v.reason
                ),
                _ => format!(
                    "not run: denied by {} (gate {}): {}",
                    v.decided_by.as_str(),
                    v.reported_gate().number(),
                    v.reason
                ),
            };
            let o = ToolOutput {
                status: ToolStatus::Denied,
                ..ToolOutput::error("not_approved", msg)
            };
            let r = self.record_result(turn, call, "not_run", o, 0)?;
            if let Some(reason) = paused {
                return Err(Stop::Paused(reason));
            }
            return Ok(Gated::Done(r));
        }
        Ok(Gated::Run { args, is_extra })
    }

    /// Run a call the gates allowed, and record its result.
    async fn run_call(
        &mut self,
        turn: u32,
        call: &ToolCall,
        args: Value,
        is_extra: bool,
    ) -> Result<(String, bool), Stop> {
        if let (true, Some(extra)) = (is_extra, self.extra) {
            let started = Instant::now();
            let mut intr = self.interrupt.clone();
            let r = tokio::select! {
                r = extra.call(&call.id, &call.name, &args) => r,
                _ = intr.wait_for(|v| v.is_some()) => return Err(Stop::Interrupted),
            };
            let ms = started.elapsed().as_millis() as u64;
            let status = r.output.status.as_str();
            let for_model = r.output.content.clone();
            let mut o = r.output;
            if let Some(rec) = r.record_as {
                o.content = rec;
            }
            let (_, is_error) = self.record_result(turn, call, status, o, ms)?;
            return Ok((for_model, is_error));
        }
        if call.name == tools::todo::TODO_TOOL {
            return self.todo(turn, call, &args);
        }
        if changes_files(&call.name) {
            let thread = self.log.thread().to_string();
            // A first snapshot waits for its look at the workspace, which
            // leaves a core idle at times: the command's `.env` scan is
            // brought up to date meanwhile (its watch set up); the host's
            // own scan right before the command still decides.
            let policy = &self.ctx.policy;
            let snaps = &mut self.snaps;
            let (log, out) = (&mut *self.log, &mut *self.out);
            std::thread::scope(|s| {
                let warming = snaps.will_wait().then(|| {
                    std::thread::Builder::new()
                        .name("env-scan-warm".into())
                        .spawn_scoped(s, || crate::policy::resolve::warm_env_scan(policy))
                });
                let taken = snaps.before_call(log, out, turn, &thread, &call.id);
                // A warm-up that failed or panicked leaves the work to
                // the command's own scan.
                if let Some(Ok(h)) = warming {
                    let _ = h.join();
                }
                taken
            })?;
        }
        let started = Instant::now();
        let output = {
            let mut intr = self.interrupt.clone();
            let fut = tools::execute(&call.name, &args, self.ctx);
            tokio::pin!(fut);
            tokio::select! {
                o = &mut fut => o,
                _ = intr.wait_for(|v| v.is_some()) => {
                    // Kill the running command, then wait for the host to
                    // finish (its after-run integrity check) so the
                    // post-turn snapshot sees the workspace as it is.
                    self.ctx.cancel.cancel();
                    let _ = fut.await;
                    return Err(Stop::Interrupted);
                }
            }
        };
        let ms = started.elapsed().as_millis() as u64;
        let mut output = output;
        if call.name == SKILL_TOOL && output.status == ToolStatus::Ok {
            self.narrow_by_skill(&args, &mut output);
        }
        let status = output.status.as_str();
        self.record_result(turn, call, status, output, ms)
    }

    /// `todo`: the list replaces the last one and is reported
    /// (`todo_updated`); a bad list is a tool error and replaces nothing.
    fn todo(&mut self, turn: u32, call: &ToolCall, args: &Value) -> Result<(String, bool), Stop> {
        match tools::todo::parse(args) {
            Ok(items) => {
                let o = ToolOutput::ok(tools::todo::summary(&items));
                self.emit(
                    turn,
                    ev::Event::TodoUpdated(ev::TodoUpdated {
                        call_id: call.id.clone(),
                        items,
                    }),
                )?;
                self.record_result(turn, call, "ok", o, 0)
            }
            Err(o) => self.record_result(turn, call, "error", o, 0),
        }
    }

    /// One review by Auto-Review's model reviewer: the document (the
    /// call and the gates' observations only), the request, its usage
    /// under the reviewer's model, the events; the verdict it answers and,
    /// when the breaker tripped, the turn's failure reason.
    async fn review(
        &mut self,
        turn: u32,
        ar: &super::review::AutoReview,
        req: &ToolCallRequest,
        v: Verdict,
    ) -> Result<(Verdict, Option<String>), Stop> {
        use crate::authz::reviewer::{ReviewDocument, ReviewInputs};
        let workspace = self.ctx.guard.workspace().to_path_buf();
        let mut call = crate::authz::ToolCall::new(req.tool.clone(), req.args.clone(), &workspace);
        if req.tool == crate::authz::SHELL_TOOL {
            call.command = req.command.clone();
        }
        let posture = self.authz.posture().unwrap_or(crate::authz::Posture::new(
            crate::authz::Mode::Work,
            crate::authz::Approval::AutoReview,
        ));
        let doc = ReviewDocument::build(&ReviewInputs {
            call: &call,
            verdict: &v,
            posture: &posture,
            network: ar.network,
            workspace: &workspace,
            workspace_trusted: ar.workspace_trusted,
        });
        let s = ar.reviewer.settings();
        self.emit(
            turn,
            ev::Event::AutoReviewRequested(ev::AutoReviewRequested {
                call_id: req.call_id.clone(),
                tool: req.tool.clone(),
                provider: s.id.clone(),
                model: s.model.clone(),
                document_bytes: doc.encode().map(|t| t.len()).unwrap_or(0),
            }),
        )?;
        let outcome = {
            let mut intr = self.interrupt.clone();
            tokio::select! {
                o = ar.reviewer.review(&doc) => o,
                _ = intr.wait_for(|v| v.is_some()) => return Err(Stop::Interrupted),
            }
        };
        if outcome.requests > 0 {
            self.usage_of(
                turn,
                outcome.usage,
                outcome.price.as_ref(),
                (outcome.provider.clone(), outcome.model.clone()),
                true,
            )?;
        }
        let u = outcome.usage.unwrap_or_default();
        self.emit(
            turn,
            ev::Event::AutoReviewDecided(Box::new(ev::AutoReviewDecided {
                call_id: req.call_id.clone(),
                tool: req.tool.clone(),
                decision: outcome.verdict.decision(),
                risk: outcome.verdict.risk(),
                reason: outcome.verdict.reason().to_string(),
                latency_ms: outcome.latency_ms,
                provider: outcome.provider.clone(),
                model: outcome.model.clone(),
                requests: outcome.requests,
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
            })),
        )?;
        let trip = ar.record(&outcome.verdict);
        let reason = trip.as_ref().map(|t| t.reason());
        if let Some(t) = trip {
            self.emit(
                turn,
                ev::Event::AutoReviewPaused(ev::AutoReviewPaused {
                    call_id: req.call_id.clone(),
                    reason: t.reason(),
                    trip: t,
                }),
            )?;
        }
        Ok((v.answer_review(&outcome.verdict), reason))
    }

    /// Whether a loaded skill's `allowed-tools` lets `name` through.
    fn skill_permits(&self, name: &str) -> bool {
        match &self.skill_narrow {
            None => true,
            Some((_, allowed)) => {
                name == SKILL_TOOL
                    || allowed.iter().any(|a| {
                        a == name || a.strip_suffix('*').is_some_and(|p| name.starts_with(p))
                    })
            }
        }
    }

    /// After a skill loaded: narrow the run's tools to its `allowed-tools`
    /// (intersected with any earlier skill's), and say so in its result.
    fn narrow_by_skill(&mut self, args: &Value, output: &mut ToolOutput) {
        let Some(name) = args.get("name").and_then(Value::as_str) else {
            return;
        };
        let Some(allowed) = self
            .ctx
            .skills
            .as_ref()
            .and_then(|s| s.get(name))
            .and_then(|s| s.allowed_tools.clone())
        else {
            return;
        };
        let mapped = crate::skills::tool_names(&allowed);
        let kept: Vec<String> = mapped
            .into_iter()
            .filter(|t| self.skill_permits(t))
            .collect();
        self.skill_narrow = Some((name.to_string(), kept.clone()));
        let mut now: Vec<String> = self
            .offered
            .iter()
            .map(|s| s.to_string())
            .chain(self.mcp_offered.iter().cloned())
            .filter(|t| self.skill_permits(t))
            .collect();
        now.dedup();
        output.content.push_str(&format!(
            "\n[codewhale: from now on this run offers only: {}]",
            if now.is_empty() {
                "none".to_string()
            } else {
                now.join(", ")
            }
        ));
        self.out.note(&format!(
            "skill `{name}`: tools narrowed to its allowed-tools ({})",
            now.join(", ")
        ));
    }

    fn record_result(
        &mut self,
        turn: u32,
        call: &ToolCall,
        status: &str,
        o: ToolOutput,
        ms: u64,
    ) -> Result<(String, bool), Stop> {
        if let Some(d) = &o.sandbox_denied {
            self.out.emit(ev::Event::SandboxDenied(ev::SandboxEvent {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                reason: d.reason.clone(),
                subject: ev::SandboxSubject::Path {
                    path: d.path.clone(),
                    inferred: d.inferred,
                },
            }));
        }
        // Every connection the egress proxy handled, in order: refusals
        // as sandbox_denied, allowed ones as sandbox_allowed.
        for c in o.enforced.iter().flat_map(|e| e.connections.iter()) {
            let e = ev::SandboxEvent {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                reason: c.reason(),
                subject: ev::SandboxSubject::network(c),
            };
            self.out.emit(if c.refused() {
                ev::Event::SandboxDenied(e)
            } else {
                ev::Event::SandboxAllowed(e)
            });
        }
        self.emit(
            turn,
            ev::Event::ToolResult(Box::new(ev::ToolResult {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                status: status.into(),
                duration_ms: ms,
                truncated: o.truncated,
                error_category: o.error_category,
                exit_code: o.exit_code,
                enforcement: o.enforcement.as_deref().cloned(),
                enforced: o.enforced.as_ref().map(|e| e.summary.clone()),
                files_touched: o.files_touched.clone(),
                output: o.content.clone(),
                diff: o.diff.as_deref().cloned(),
            })),
        )?;
        self.calls.push(
            json!({"call_id": call.id, "tool": call.name, "status": status,
                               "exit_code": o.exit_code, "files_touched": o.files_touched}),
        );
        if o.status == ToolStatus::Ok && crate::catalogue::is_write(&call.name) {
            self.files.extend(o.files_touched.iter().cloned());
        }
        Ok((o.content, o.status != ToolStatus::Ok))
    }

    /// Why the turn was interrupted (Ctrl-C when the sender did not say).
    fn interrupt_reason(&self) -> &'static str {
        self.interrupt
            .borrow()
            .unwrap_or(InterruptCause::CtrlC)
            .reason()
    }

    /// Close the thread in the log and on the output.
    fn finish(mut self, result: Result<&'static str, Stop>) -> ExecReport {
        let (status, code, error) = match result {
            Ok("completed") => ("completed", crate::exit::OK, None),
            Ok("limit") => (
                "limit",
                crate::exit::FAILURE,
                Some((
                    "the sub-agents' token budget ([subagents] token_budget) is spent".into(),
                    "limit",
                )),
            ),
            Ok(other) => (
                other,
                crate::exit::FAILURE,
                Some((
                    format!("stopped after --max-turns {}", self.opts.max_turns),
                    "max_turns",
                )),
            ),
            Err(Stop::Interrupted) => {
                // The turn's background jobs go with it (their trees are
                // killed by the host when it sees their tokens).
                self.ctx.jobs.kill_owned_by(&self.ctx.cancel);
                (
                    "interrupted",
                    INTERRUPTED,
                    Some((self.interrupt_reason().into(), "interrupted")),
                )
            }
            Err(Stop::Provider(e)) => ("error", e.exit_code(), Some((e.to_string(), e.category()))),
            Err(Stop::Paused(reason)) => (
                "failed",
                crate::exit::FAILURE,
                Some((reason, "auto_review_paused")),
            ),
            Err(Stop::Session(e)) => (
                "error",
                crate::exit::FAILURE,
                Some((e.to_string(), "session")),
            ),
        };
        let session_ok = !matches!(error, Some((_, "session")));
        if session_ok {
            if !matches!(status, "completed" | "max_turns" | "limit") && self.turns > 0 {
                let reason = error.as_ref().map(|e| e.0.clone()).unwrap_or_default();
                // What the unfinished turn changed still belongs in the record.
                let thread = self.log.thread().to_string();
                let _ = self.snaps.end_turn(self.log, self.out, self.turns, &thread);
                let _ = self
                    .log
                    .append(self.turns, Event::TurnInterrupted { reason });
            }
            let _ = self.log.append(
                0,
                Event::ThreadCompleted {
                    status: status.into(),
                },
            );
        }
        if let Some((msg, cat)) = &error {
            self.out.emit(ev::Event::Error(ev::ErrorEvent {
                message: msg.clone(),
                category: cat.to_string(),
                exit_code: code,
            }));
        }
        let summary = json!({
            "status": status, "exit_code": code, "answer": self.answer,
            "provider": self.current.0, "model": self.current.1,
            "approval": approval_label(self.opts), "sandbox": self.ctx.policy.mode.as_str(),
            "turns": self.turns,
            "usage": {"input_tokens": self.total.input_tokens,
                      "cached_input_tokens": self.total.cached_input_tokens,
                      "cache_write_tokens": self.total.cache_write_tokens,
                      "output_tokens": self.total.output_tokens,
                      "reasoning_tokens": self.total.reasoning_tokens},
            "cost_usd": self.total_cost, "cost": crate::session::cost_label(self.total_cost),
            "instructions": self.instructions,
            "tool_calls": self.calls,
            "session_file": self.log.path(),
            "snapshots": self.snaps.metadata(),
            "error": error.as_ref().map(|(m, c)| json!({"message": m, "category": c})),
        });
        self.out.emit(ev::Event::Done(ev::Done {
            status: status.into(),
            exit_code: code,
            turns: self.turns,
            session_file: self.log.path().to_path_buf(),
            cost: crate::session::cost_label(self.total_cost),
            input_tokens: self.total.input_tokens,
            cached_input_tokens: self.total.cached_input_tokens,
            cache_write_tokens: self.total.cache_write_tokens,
            output_tokens: self.total.output_tokens,
            reasoning_tokens: self.total.reasoning_tokens,
        }));
        self.out.summary(summary.clone());
        let mut files_changed: Vec<std::path::PathBuf> = Vec::new();
        for f in self.files.drain(..) {
            if !files_changed.contains(&f) {
                files_changed.push(f);
            }
        }
        ExecReport {
            status: status.into(),
            exit_code: code,
            summary,
            answer: self.answer.clone(),
            usage: self.total,
            files_changed,
        }
    }
}

/// What one request gave: the completion or error, the router's record,
/// the price of the model that answered.
type Answer = (
    Result<Completion, ProviderError>,
    Option<Routed>,
    Option<Price>,
);

impl<'a> Loop<'a> {
    /// The model that writes summaries and whose window counts: the single
    /// provider, or the router's long-context (else plan) model.
    fn main_provider(&self) -> Option<&'a Provider> {
        match self.models {
            Models::Single(p) => Some(p),
            Models::Routed(r) => r
                .first(router::TurnKind::LongContext)
                .or_else(|| r.first(router::TurnKind::Plan)),
        }
    }

    /// `provider/model` of [`Loop::main_provider`] (the window memory's key).
    fn window_key(&self) -> Option<String> {
        self.main_provider()
            .map(|p| format!("{}/{}", p.settings.id, p.settings.model))
    }
}

/// One turn's completion from a single provider or the router, with the
/// router's record and the price of the model that answered.
async fn complete_turn(
    models: Models<'_>,
    turn: u32,
    system: &str,
    messages: &[Message],
    req: ChatRequest<'_>,
    on_text: &mut dyn FnMut(&str),
) -> Answer {
    match models {
        Models::Single(p) => (
            p.complete(req, on_text).await,
            None,
            p.settings.price.clone(),
        ),
        Models::Routed(r) => {
            let est = router::estimate_tokens(system, messages);
            let kind = router::classify(turn, est, r.plan.long_context_tokens, messages);
            let Some(choice) = r.plan.choose(kind) else {
                let e = ProviderError::Setup {
                    provider: "router".into(),
                    message: format!("no model for turn kind {}", kind.as_str()),
                };
                return (Err(e), None, None);
            };
            match r.complete(choice, req, on_text).await {
                Ok((c, routed)) => {
                    let price = r
                        .provider(&routed.used)
                        .and_then(|p| p.settings.price.clone());
                    (Ok(c), Some(routed), price)
                }
                Err((e, routed)) => (Err(e), Some(routed), None),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    /// Operate's tools: Work and Operate only, as the flags admit them;
    /// the job tools only where `shell` is offered.
    #[test]
    fn operate_tools_follow_mode_flags_and_shell() {
        use crate::authz::Mode;
        let opts = |auto: bool, allowed: Option<&[&str]>, denied: &[&str]| ExecOptions {
            prompt: String::new(),
            auto,
            allowed_tools: allowed.map(v),
            disallowed_tools: v(denied),
            max_turns: 1,
            config: Value::Null,
            instruction_imports: Vec::new(),
            interactive: None,
            compaction: Default::default(),
        };
        let all = ["read_file", "shell"];
        let auto = opts(true, None, &[]);
        for m in [Mode::Work, Mode::Operate] {
            assert_eq!(
                operate_tools(&auto, Some(m), &all),
                ["todo", "job_output", "job_kill"]
            );
        }
        assert!(operate_tools(&auto, Some(Mode::Plan), &all).is_empty());
        assert!(operate_tools(&auto, None, &all).is_empty());
        assert_eq!(
            operate_tools(&auto, Some(Mode::Work), &["read_file"]),
            ["todo"]
        );
        assert!(operate_tools(&opts(false, None, &[]), Some(Mode::Work), &all).is_empty());
        assert_eq!(
            operate_tools(
                &opts(false, Some(&["shell", "job_output"]), &[]),
                Some(Mode::Work),
                &all
            ),
            ["job_output"]
        );
        assert_eq!(
            operate_tools(&opts(true, None, &["todo"]), Some(Mode::Operate), &all),
            ["job_output", "job_kill"]
        );
    }

    #[test]
    fn plain_exec_offers_no_tools() {
        assert!(offered_tools(false, None, &[]).is_empty());
    }

    #[test]
    fn auto_offers_all_minus_disallowed_and_deny_wins() {
        assert_eq!(offered_tools(true, None, &[]).len(), ALL_TOOLS.len());
        let t = offered_tools(true, Some(&v(&["shell", "read_file"])), &v(&["shell"]));
        assert_eq!(t, vec!["read_file"]);
        let t = offered_tools(false, Some(&v(&["read_file"])), &[]);
        assert_eq!(t, vec!["read_file"]);
    }

    #[test]
    fn unknown_cost_is_never_zero() {
        assert_eq!(crate::session::cost_label(None), "unknown");
        assert_eq!(crate::session::cost_label(Some(0.0)), "0.000000 USD");
    }
}
