//! The `agent` tool inside the loop: a child is another run of this same
//! loop ([`super::ExecRun`]), set up from its parent's live run and
//! clamped ([`crate::agent::subagent::clamp`]).
//!
//! A response's consecutive `agent` calls pass the gates one by one (each
//! its own `tool_use` and `approval`), are admitted by the request's
//! [`Tree`] (depth, spawns, budget, write scopes), then run concurrently;
//! the parent gives its running slot back while it waits. Each child
//! runs with:
//! - the prompt as its only user message, and a system prompt naming its
//!   role and limits;
//! - the clamped posture: the parent's authorizer under the child's
//!   posture (rules, hooks and session grants shared), the parent's policy
//!   narrowed (a role without writes: a read-only OS sandbox; a scoped
//!   writer: its `write_scope` the only writable part of the workspace,
//!   for its commands in the kernel and its file tools in the guard), the
//!   tools the clamp admits, `agent` only above the depth limit;
//! - the parent's approver: its questions are asked on the parent's thread
//!   as `agent:<id>`; a headless run denies them "no response";
//! - under Auto-Review, a reviewer and breaker of its own (the parent's
//!   reviewer model): its ordinary questions are reviewed, its counts are
//!   its own, and a pause stops only it;
//! - the parent's interrupt: stopping the parent stops every descendant,
//!   and each kills its own commands (its own cancel token);
//! - no undo snapshots of its own (the parent snapshots before the call
//!   and after the turn, so `undo` reverts the children with the request)
//!   and a session file under `sessions/subagents/`, which `receipts
//!   --last` and `undo` never pick.
//!
//! A `worktree: true` child runs in its own checkout under codewhale's
//! home ([`crate::agent::subagent::worktree`]): its workspace and only
//! writable root is the checkout, it holds no write scope, and its result
//! carries its change as a diff the parent applies (or not) with its own
//! `apply_patch`; the checkout is removed when it ends.
//!
//! Its events reach the parent's stream as [`ev::Event::Subagent`], with
//! `subagent_started` / `subagent_completed` around them.

use super::{
    ExecOptions, ExecRun, Gated, Interrupt, Loop, Models, RunHooks, Stop, ToolOutput, ToolStatus,
};
use crate::agent::authorizer::Authorizer;
use crate::agent::event as ev;
use crate::agent::output::{Emitter, EventTap, OutputFormat};
use crate::agent::subagent::clamp::clamp_scoped;
use crate::agent::subagent::limits::{Slot, WriteScope};
use crate::agent::subagent::worktree::{Checkout, ChildDiff};
use crate::agent::subagent::{
    clamp, AgentRef, EffectivePosture, Role, Tree, AGENT_TOOL, MAX_DEPTH,
};
use crate::agent::tools::{guard::FsGuard, ToolContext, ALL_TOOLS, MODEL_OUTPUT_CAP};
use crate::agent::Approver;
use crate::provider::{ToolCall, Usage};
use crate::session::SessionLog;
use serde_json::{json, Value};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// What a worktree child's result tells its parent about the diff.
const WORKTREE_NOTE: &str = "The workspace is unchanged: this child worked in its own checkout. \
To keep its change, apply `diff` with apply_patch (your edit, checked like any other); \
`omitted` lists changed paths the diff cannot carry.";

/// A run's place in its request's tree of agents.
pub struct Spawner {
    pub tree: Arc<Tree>,
    /// The request's agent is depth 0.
    pub depth: u32,
    /// This agent's running slot (the request's agent holds none).
    slot: Arc<Slot>,
    /// This agent, for a child (`None`: the request's agent).
    pub agent: Option<AgentRef>,
    /// The write-scope registrations of this agent and its ancestors
    /// (its own children work inside them).
    scopes: Vec<u64>,
    /// codewhale's home: `worktree: true` children's checkouts go under
    /// its `worktrees/`.
    home: PathBuf,
}

impl Spawner {
    /// The request's agent: a fresh tree with the settings' limits
    /// (`max_subagents`, default 8; `[subagents] token_budget` and
    /// `stall_secs`, default 300).
    pub fn root(settings: &crate::config::Settings) -> Self {
        use crate::agent::subagent::limits::{DEFAULT_MAX_SUBAGENTS, DEFAULT_STALL};
        let s = &settings.user.subagents;
        Spawner {
            tree: Tree::with_stall(
                settings.max_subagents.unwrap_or(DEFAULT_MAX_SUBAGENTS),
                s.token_budget,
                s.stall_secs
                    .map(std::time::Duration::from_secs)
                    .unwrap_or(DEFAULT_STALL),
            ),
            depth: 0,
            slot: Arc::new(Slot::default()),
            agent: None,
            scopes: Vec::new(),
            home: settings.paths.codewhale_home.clone(),
        }
    }

    /// Whether a run with these options offers `agent`: above the depth
    /// limit; when an allow list is given, only if it names `agent`
    /// (`exec --allowed-tools …,agent`, a runtime agent thread's tools),
    /// else whenever the run offers tools (`exec --auto`); never when
    /// `agent` is disallowed.
    pub(super) fn offers(&self, opts: &ExecOptions, offered: &[&str]) -> bool {
        let allowed = match &opts.allowed_tools {
            Some(list) => list.iter().any(|t| t == AGENT_TOOL),
            None => !offered.is_empty(),
        };
        self.depth < MAX_DEPTH && allowed && !opts.disallowed_tools.iter().any(|d| d == AGENT_TOOL)
    }
}

/// What the model asked a child to do.
struct SpawnArgs {
    role: Role,
    prompt: String,
    scope: Option<WriteScope>,
    /// Work in an own checkout under codewhale's home and return a diff
    /// (no write scope held: the workspace is not written).
    worktree: bool,
}

fn parse_args(args: &Value) -> Result<SpawnArgs, String> {
    let role = args
        .get("role")
        .and_then(Value::as_str)
        .ok_or("missing or non-string argument `role`")?;
    let role = Role::parse(role)?;
    let prompt = args
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|p| !p.trim().is_empty())
        .ok_or("missing or empty argument `prompt`")?
        .to_string();
    let worktree = match args.get("worktree") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`worktree` must be a boolean".into()),
    };
    if worktree && !matches!(args.get("write_scope"), None | Some(Value::Null)) {
        return Err("`write_scope` does not apply with `worktree: true`: the child writes only its own checkout".into());
    }
    let scope = match args.get("write_scope") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => {
            let paths: Option<Vec<PathBuf>> =
                a.iter().map(|v| v.as_str().map(PathBuf::from)).collect();
            let paths = paths.ok_or("`write_scope` must be an array of paths")?;
            if paths
                .iter()
                .any(|p| p.is_absolute() || p.components().any(|c| c.as_os_str() == ".."))
            {
                return Err(
                    "`write_scope` paths are relative to the workspace, without `..`".into(),
                );
            }
            Some(paths)
        }
        Some(_) => return Err("`write_scope` must be an array of paths".into()),
    };
    // Only writers hold a scope; a writer without one owns the workspace.
    let scope = match scope {
        Some(p) if !p.is_empty() => WriteScope::Paths(p),
        _ => WriteScope::Whole,
    };
    // A worktree child never writes the workspace: it holds no scope.
    let scope = (role.writes() && !worktree).then_some(scope);
    Ok(SpawnArgs {
        role,
        prompt,
        scope,
        worktree,
    })
}

/// The child's own system prompt: its role and its limits (`unmade`:
/// scope directories that could not be created, and why; `worktree`: it
/// works in its own checkout).
fn child_instructions(
    a: &AgentRef,
    scope: Option<&WriteScope>,
    unmade: &[String],
    worktree: bool,
) -> String {
    let mut scope = match scope {
        Some(WriteScope::Paths(p)) => format!(
            " You may change only these paths (your write scope): {}. This holds for your \
             file tools and your commands alike: the sandbox lets commands write nowhere \
             else in the workspace, and a scope that is one file can be rewritten in place \
             but not replaced or removed.",
            p.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => String::new(),
    };
    if !unmade.is_empty() {
        scope.push_str(&format!(
            " Not writable (could not be created): {}.",
            unmade.join("; ")
        ));
    }
    let worktree = if worktree {
        " You work in your own checkout of the repository, not in your parent's \
         workspace: what you change comes back to your parent as a diff, which it \
         applies or not."
    } else {
        ""
    };
    format!(
        "You are a sub-agent (id {}, role `{}`, depth {} of at most {MAX_DEPTH}). {} \
         Your parent gave you one task, the user message; you see nothing else of its \
         conversation. Do the task, then end with a short final report: what you did, \
         what you found, and which files you changed.{scope}{worktree}",
        a.id,
        a.role.as_str(),
        a.depth,
        a.role.limits_line()
    )
}

/// A writer's `write_scope` on its file tools: a write the scope does not
/// contain is denied at admission (gate 2), before the gates are asked,
/// with a message naming the scope; everything else is the clamped gates'
/// decision. Its children get the same scope (and their own inside it).
/// The OS sandbox and the file tools' guard enforce the same scope below
/// the gates ([`clamp_scoped`] puts it in the child's policy).
struct Scoped {
    inner: Box<dyn Authorizer>,
    scope: Vec<PathBuf>,
    workspace: PathBuf,
}

impl Scoped {
    /// The workspace-relative paths a file-writing call names.
    fn targets(&self, req: &crate::agent::authorizer::ToolCallRequest) -> Vec<PathBuf> {
        let rel = |p: &str| {
            let p = Path::new(p);
            match p.strip_prefix(&self.workspace) {
                Ok(r) => r.to_path_buf(),
                Err(_) => p.to_path_buf(),
            }
        };
        match req.tool.as_str() {
            "apply_patch" => req
                .args
                .get("patch")
                .and_then(Value::as_str)
                .unwrap_or("")
                .lines()
                .filter_map(|l| l.strip_prefix("+++ ").or_else(|| l.strip_prefix("--- ")))
                .map(|p| p.split('\t').next().unwrap_or(p).trim())
                .filter(|p| *p != "/dev/null")
                .map(|p| {
                    rel(p
                        .strip_prefix("a/")
                        .or_else(|| p.strip_prefix("b/"))
                        .unwrap_or(p))
                })
                .collect(),
            _ => req
                .args
                .get("path")
                .and_then(Value::as_str)
                .map(rel)
                .into_iter()
                .collect(),
        }
    }
}

impl Authorizer for Scoped {
    fn authorize<'a>(
        &'a self,
        req: &'a crate::agent::authorizer::ToolCallRequest,
        ctx: &'a crate::agent::authorizer::TurnContext,
    ) -> crate::agent::authorizer::AuthFuture<'a> {
        if crate::catalogue::is_write(&req.tool) {
            let targets = self.targets(req);
            let outside = targets
                .iter()
                .find(|p| !crate::agent::subagent::limits::within_scope(p, &self.scope));
            if targets.is_empty() || outside.is_some() {
                let what = outside.map_or("no path".to_string(), |p| format!("`{}`", p.display()));
                let scope: Vec<String> =
                    self.scope.iter().map(|p| p.display().to_string()).collect();
                let v = crate::agent::authorizer::Verdict::decided(
                    crate::agent::authorizer::Decision::Deny,
                    crate::agent::authorizer::DecidedBy::Posture,
                    crate::agent::authorizer::Gate::Admission,
                    &format!(
                        "{what} is outside this sub-agent's write scope ({})",
                        scope.join(", ")
                    ),
                );
                return Box::pin(async move { v });
            }
        }
        self.inner.authorize(req, ctx)
    }

    fn posture(&self) -> Option<crate::authz::Posture> {
        self.inner.posture()
    }

    fn for_child(
        &self,
        posture: crate::authz::Posture,
        sandbox: crate::policy::SandboxMode,
    ) -> Option<Box<dyn Authorizer>> {
        Some(Box::new(Scoped {
            inner: self.inner.for_child(posture, sandbox)?,
            scope: self.scope.clone(),
            workspace: self.workspace.clone(),
        }))
    }
}

/// A child admitted to run.
struct ChildRun<'c> {
    index: usize,
    call: &'c ToolCall,
    agent: AgentRef,
    posture: EffectivePosture,
    prompt: String,
    scope: Option<crate::agent::subagent::limits::ScopeGuard>,
    /// What the writer asked to own (`None`: not a writer).
    write_scope: Option<WriteScope>,
    /// The parent's `scopes`.
    ancestors: Vec<u64>,
    /// In its own checkout ([`crate::agent::subagent::worktree`]).
    worktree: bool,
}

/// How a child ended.
struct Outcome {
    status: &'static str,
    answer: String,
    usage: Usage,
    files: Vec<PathBuf>,
    ms: u64,
    reason: Option<String>,
    /// A worktree child's change, for the parent to apply.
    diff: Option<ChildDiff>,
}

impl Outcome {
    fn failed(status: &'static str, reason: String, started: Instant) -> Self {
        Outcome {
            status,
            answer: String::new(),
            usage: Usage::default(),
            files: Vec::new(),
            ms: started.elapsed().as_millis() as u64,
            reason: Some(reason),
            diff: None,
        }
    }
}

/// What every child of one batch shares of its parent.
struct Parent<'p> {
    models: Models<'p>,
    ctx: &'p ToolContext,
    authz: &'p dyn Authorizer,
    approver: &'p dyn Approver,
    /// The parent's Auto-Review: each child gets its own from it.
    auto_review: Option<&'p crate::agent::review::AutoReview>,
    opts: &'p ExecOptions,
    interrupt: Interrupt,
    tree: Arc<Tree>,
    log_dir: PathBuf,
    /// codewhale's home (worktree children's checkouts).
    home: PathBuf,
}

/// Hands a child's events to its parent's stream, tagged with its id.
struct Forward {
    agent_id: String,
    tx: mpsc::UnboundedSender<ev::Event>,
}

impl EventTap for Forward {
    fn content(&mut self, _text: &str) {}

    fn event(&mut self, e: &ev::Event) {
        let _ = self.tx.send(ev::Event::Subagent {
            agent_id: self.agent_id.clone(),
            event: Box::new(e.clone()),
        });
    }
}

/// Create the scoped writer's `write_scope` paths that do not exist yet,
/// as directories, through the parent's guard (so only where the parent
/// itself could write), before the child starts: a scope becomes a
/// writable root of the child's OS sandbox only if it exists, and a
/// missing one is never widened to its parent. Only under
/// `workspace-write` (the other modes have no writable roots to narrow).
/// Returns what could not be made, each with why (the child is told; the
/// scope then stays unwritable).
fn make_scope_dirs(ctx: &ToolContext, posture: &EffectivePosture) -> Vec<String> {
    let Some(scope) = &posture.write_scope else {
        return Vec::new();
    };
    if posture.sandbox != crate::policy::SandboxMode::WorkspaceWrite {
        return Vec::new();
    }
    let mut unmade = Vec::new();
    for rel in scope {
        let abs = ctx.policy.workspace.join(rel);
        if std::fs::symlink_metadata(&abs).is_ok() {
            continue;
        }
        if let Err(e) = ctx.guard.make_dir(&abs.to_string_lossy()) {
            unmade.push(format!("{}: {e}", rel.display()));
        }
    }
    unmade
}

/// Not `Send`: a turn's loop runs on its own single-threaded runtime.
type ChildFuture<'f> = Pin<Box<dyn Future<Output = Outcome> + 'f>>;

/// Run one child to its end (boxed: the child's loop may spawn again).
fn run_child<'f>(
    p: &'f Parent<'f>,
    r: &'f ChildRun<'f>,
    tx: mpsc::UnboundedSender<ev::Event>,
) -> ChildFuture<'f> {
    Box::pin(async move {
        let started = Instant::now();
        // A running slot; an interrupt stops the wait.
        let mut intr = p.interrupt.clone();
        let permit = tokio::select! {
            s = p.tree.slot() => s,
            _ = intr.wait_for(|v| v.is_some()) => {
                return Outcome::failed("interrupted", "interrupted before it started".into(), started);
            }
        };
        if let Err(e) = p.tree.check_budget() {
            return Outcome::failed("limit", e.to_string(), started);
        }
        let unmade = make_scope_dirs(p.ctx, &r.posture);
        let (posture, mut policy) = r.posture.apply(&p.ctx.policy);
        let checkout = if r.worktree {
            match make_checkout(p).await {
                Ok(c) => {
                    // Its workspace is its checkout, the only writable
                    // root (the parent's others are not); the rest of
                    // the clamp is unchanged.
                    policy.workspace = c.workspace().to_path_buf();
                    policy.writable_roots.clear();
                    Some(c)
                }
                Err(e) => return Outcome::failed("failed", e, started),
            }
        } else {
            None
        };
        let resolved = match crate::policy::resolve(&policy, &crate::policy::HostFacts::detect()) {
            Ok(x) => x,
            Err(e) => return Outcome::failed("failed", e.to_string(), started),
        };
        let mut host = p.ctx.host.clone();
        host.allow_unsandboxed &= !policy.mode.is_sandboxed();
        let sandbox = policy.mode;
        let ctx = ToolContext {
            guard: FsGuard::new(&resolved),
            policy,
            host,
            cancel: crate::host::CancelToken::new(),
            mcp: None,
            // Neither skills nor the memory file reach a child (narrower
            // than its parent, never wider).
            skills: None,
            memory: None,
            // The session's jobs: a child's count against it too, and
            // belong to the request's turn (interrupting it kills them).
            jobs: p.ctx.jobs.for_child(&p.ctx.cancel),
        };
        let Some(mut authz) = p.authz.for_child(posture, sandbox) else {
            return Outcome::failed(
                "failed",
                "this run cannot clamp a child's gates".into(),
                started,
            );
        };
        if let Some(WriteScope::Paths(scope)) = &r.write_scope {
            authz = Box::new(Scoped {
                inner: authz,
                scope: scope.clone(),
                workspace: p.ctx.policy.workspace.clone(),
            });
        }
        let mut tools: Vec<String> = r
            .posture
            .admit(ALL_TOOLS)
            .into_iter()
            .map(str::to_string)
            .collect();
        if r.posture.tools.contains(AGENT_TOOL) {
            tools.push(AGENT_TOOL.into());
        }
        let opts = ExecOptions {
            prompt: r.prompt.clone(),
            auto: p.opts.auto,
            allowed_tools: Some(tools),
            disallowed_tools: p.opts.disallowed_tools.clone(),
            max_turns: p.opts.max_turns,
            config: Value::Null,
            instruction_imports: p.opts.instruction_imports.clone(),
            interactive: p.opts.interactive.clone(),
            compaction: p.opts.compaction.clone(),
        };
        let spawner = Spawner {
            tree: p.tree.clone(),
            depth: r.agent.depth,
            slot: Arc::new(Slot::hold(permit)),
            agent: Some(r.agent.clone()),
            scopes: r
                .ancestors
                .iter()
                .copied()
                .chain(r.scope.as_ref().map(|g| g.id()))
                .collect(),
            home: p.home.clone(),
        };
        // Its own reviewer and breaker when the parent has one and the
        // child's clamped approval is still Auto-Review (a stricter one
        // asks a person through the parent's approver).
        let auto_review = p
            .auto_review
            .filter(|_| r.posture.approval == crate::authz::Approval::AutoReview)
            .and_then(|ar| ar.for_child(ctx.policy.network_mode()));
        let hooks = RunHooks {
            approver: p.approver,
            history: Vec::new(),
            system_prompt: Some(child_instructions(
                &r.agent,
                r.write_scope.as_ref(),
                &unmade,
                r.worktree,
            )),
            steer: None,
            extra_tools: None,
            auto_review: auto_review.as_ref(),
            spawner: r.posture.tools.contains(AGENT_TOOL).then_some(spawner),
        };
        let mut log = match SessionLog::create(&p.log_dir) {
            Ok(l) => l,
            Err(e) => return Outcome::failed("failed", e.to_string(), started),
        };
        let mut out = Emitter::new(
            OutputFormat::Json,
            Box::new(std::io::sink()),
            Box::new(std::io::sink()),
        )
        .with_tap(Box::new(Forward {
            agent_id: r.agent.id.clone(),
            tx,
        }));
        let report = ExecRun::new(&opts, &ctx, p.models, &*authz)
            .hooks(hooks)
            .run(&mut out, &mut log, p.interrupt.clone())
            .await;
        let status = match report.status.as_str() {
            "completed" => "completed",
            "interrupted" => "interrupted",
            "limit" => "limit",
            _ => "failed",
        };
        let reason = (status != "completed").then(|| {
            report
                .summary
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or(report.status.as_str())
                .to_string()
        });
        let mut o = Outcome {
            status,
            answer: report.answer,
            usage: report.usage,
            files: report.files_changed,
            ms: started.elapsed().as_millis() as u64,
            reason,
            diff: None,
        };
        if let Some(c) = checkout {
            // Taken whatever the status (a child that failed halfway may
            // still have useful changes); the checkout goes with it.
            let d = tokio::task::spawn_blocking(move || c.diff()).await;
            match d {
                Ok(Ok(d)) => {
                    o.files = d.files.clone();
                    o.diff = Some(d);
                }
                Ok(Err(e)) => {
                    o.files = Vec::new();
                    o.status = "failed";
                    o.reason = Some(e.to_string());
                }
                Err(e) => {
                    o.files = Vec::new();
                    o.status = "failed";
                    o.reason = Some(format!("taking the child's diff: {e}"));
                }
            }
            o.ms = started.elapsed().as_millis() as u64;
        }
        o
    })
}

/// The `agent` call's result for the model. A worktree child's result
/// that would not fit what a tool result carries back
/// ([`MODEL_OUTPUT_CAP`]: it would reach the model cut) becomes an error
/// naming its size, without the diff.
fn result_content(r: &ChildRun<'_>, o: &mut Outcome) -> String {
    let build = |o: &Outcome| {
        let mut content = json!({
            "agent_id": r.agent.id, "role": r.agent.role, "status": o.status,
            "answer": o.answer, "files_changed": o.files, "error": o.reason,
        });
        if r.worktree {
            content["worktree"] = json!(true);
        }
        if let Some(d) = &o.diff {
            content["diff"] = json!(d.diff);
            content["omitted"] = json!(d.omitted);
            content["note"] = json!(WORKTREE_NOTE);
        }
        content.to_string()
    };
    let content = build(o);
    if o.diff.is_none() || content.len() <= MODEL_OUTPUT_CAP {
        return content;
    }
    o.status = "failed";
    o.reason = Some(format!(
        "the child's result with its diff is {} bytes, above the {MODEL_OUTPUT_CAP}-byte bound of a tool result; its checkout was removed (ask for smaller steps)",
        content.len()
    ));
    o.diff = None;
    build(o)
}

/// A worktree child's checkout of the parent's workspace, without the
/// parent's deny-read files (off the loop's thread: git clones and copies).
async fn make_checkout(p: &Parent<'_>) -> Result<Checkout, String> {
    let mut deny: Vec<PathBuf> =
        crate::policy::resolve(&p.ctx.policy, &crate::policy::HostFacts::detect())
            .map_err(|e| e.to_string())?
            .existing_deny_read()
            .map(|e| e.path.clone())
            .collect();
    deny.sort();
    let home = p.home.clone();
    let ws = p.ctx.policy.workspace.clone();
    tokio::task::spawn_blocking(move || Checkout::create(&home, &ws, &deny))
        .await
        .map_err(|e| format!("creating the child's checkout: {e}"))?
        .map_err(|e| e.to_string())
}

impl Loop<'_> {
    /// Charge a child's model request to its tree's token budget.
    pub(super) fn charge_tree(&self, u: &Usage) {
        if let Some(s) = self.spawner.as_ref().filter(|s| s.depth > 0) {
            s.tree.charge(u.input_tokens + u.output_tokens);
        }
    }

    /// A child's stall limit for one model request (`None`: the
    /// request's own agent, which has none).
    pub(super) fn stall_limit(&self) -> Option<std::time::Duration> {
        self.spawner
            .as_ref()
            .filter(|s| s.depth > 0)
            .map(|s| s.tree.stall())
    }

    /// Whether this child's tree spent its token budget (the request's
    /// own agent is never stopped by it).
    pub(super) fn budget_spent(&self) -> bool {
        self.spawner
            .as_ref()
            .is_some_and(|s| s.depth > 0 && s.tree.check_budget().is_err())
    }

    /// Where this run's children keep their session files: beside the
    /// parent's, in `subagents/` (never picked by `--last`).
    fn children_dir(&self) -> PathBuf {
        let dir = self.log.path().parent().unwrap_or(Path::new("."));
        // A child's own children go beside it, not one level deeper.
        if dir.file_name().is_some_and(|n| n == "subagents") {
            dir.to_path_buf()
        } else {
            dir.join("subagents")
        }
    }

    /// A response's consecutive `agent` calls: gated one by one, admitted,
    /// run together; results in the calls' order.
    pub(super) async fn agent_batch(
        &mut self,
        turn: u32,
        calls: &[ToolCall],
    ) -> Result<Vec<(String, bool)>, Stop> {
        let mut results: Vec<Option<(String, bool)>> = vec![None; calls.len()];
        let mut wanted = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            match self.gate(turn, call).await? {
                Gated::Done(r) => results[i] = Some(r),
                Gated::Run { args, .. } => match parse_args(&args) {
                    Ok(a) => wanted.push((i, call, a)),
                    Err(msg) => {
                        let o = ToolOutput::error("bad_arguments", msg);
                        results[i] = Some(self.record_result(turn, call, "error", o, 0)?);
                    }
                },
            }
        }
        let (Some(spawner), Some(parent_posture)) = (&self.spawner, self.authz.posture()) else {
            // Not offered here (admission refuses it first; kept total).
            for (i, call, _) in wanted {
                let o = ToolOutput::error("unknown_tool", "no sub-agents in this run".into());
                results[i] = Some(self.record_result(turn, call, "error", o, 0)?);
            }
            return Ok(results
                .into_iter()
                .map(|r| r.unwrap_or_else(|| (String::new(), true)))
                .collect());
        };
        let tree = spawner.tree.clone();
        let depth = spawner.depth;
        let slot = spawner.slot.clone();
        let ancestors = spawner.scopes.clone();
        let home = spawner.home.clone();
        let parent = EffectivePosture::of(&parent_posture, &self.ctx.policy, &self.offered);
        if let Some((_, first, _)) = wanted.first() {
            let thread = self.log.thread().to_string();
            self.snaps
                .before_call(self.log, self.out, turn, &thread, &first.id)?;
        }
        let mut runs = Vec::new();
        for (index, call, a) in wanted {
            match tree.admit(depth, a.scope.clone(), &ancestors) {
                Err(refused) => {
                    let o = ToolOutput {
                        status: ToolStatus::Denied,
                        ..ToolOutput::error(
                            "subagent_refused",
                            json!({"status": refused.status(), "error": refused.to_string()})
                                .to_string(),
                        )
                    };
                    results[index] = Some(self.record_result(turn, call, "denied", o, 0)?);
                }
                Ok((n, scope)) => {
                    let agent = AgentRef {
                        id: format!("a{n}"),
                        role: a.role,
                        depth: depth + 1,
                    };
                    let posture = match &a.scope {
                        Some(WriteScope::Paths(s)) => clamp_scoped(&parent, a.role, s),
                        _ => clamp(&parent, a.role),
                    };
                    self.emit(
                        turn,
                        ev::Event::SubagentStarted(Box::new(ev::SubagentStarted {
                            agent_id: agent.id.clone(),
                            parent_call_id: call.id.clone(),
                            role: a.role,
                            depth: agent.depth,
                            posture: posture.clone(),
                        })),
                    )?;
                    runs.push(ChildRun {
                        index,
                        call,
                        agent,
                        posture,
                        prompt: a.prompt,
                        scope,
                        write_scope: a.scope,
                        ancestors: ancestors.clone(),
                        worktree: a.worktree,
                    });
                }
            }
        }
        if !runs.is_empty() {
            let p = Parent {
                models: self.models,
                ctx: self.ctx,
                authz: self.authz,
                approver: self.approver,
                auto_review: self.auto_review,
                opts: self.opts,
                interrupt: self.interrupt.clone(),
                tree: tree.clone(),
                log_dir: self.children_dir(),
                home,
            };
            // The cap counts running agents: give this one's slot back
            // while it waits.
            let held = slot.release();
            let (tx, mut rx) = mpsc::unbounded_channel();
            let futs: Vec<ChildFuture<'_>> =
                runs.iter().map(|r| run_child(&p, r, tx.clone())).collect();
            drop(tx);
            let mut all = futures_util::future::join_all(futs);
            // The children's steps go to this run's stream and session
            // (wrapped, so the session tells the whole tree).
            let outcomes = loop {
                tokio::select! {
                    o = &mut all => break o,
                    Some(e) = rx.recv() => self.emit(turn, e)?,
                }
            };
            while let Ok(e) = rx.try_recv() {
                self.emit(turn, e)?;
            }
            let stopped = self.interrupt.borrow().is_some();
            if held && !stopped {
                slot.put(tree.slot().await);
            }
            for (r, mut o) in runs.iter().zip(outcomes) {
                // The children's tokens count in this run's totals.
                self.total.add(&o.usage);
                let content = result_content(r, &mut o);
                self.emit(
                    turn,
                    ev::Event::SubagentCompleted(Box::new(ev::SubagentCompleted {
                        agent_id: r.agent.id.clone(),
                        parent_call_id: r.call.id.clone(),
                        role: r.agent.role,
                        status: o.status.into(),
                        duration_ms: o.ms,
                        input_tokens: o.usage.input_tokens,
                        output_tokens: o.usage.output_tokens,
                        files_changed: o.files.clone(),
                        reason: o.reason.clone(),
                    })),
                )?;
                let mut out = if o.status == "completed" {
                    ToolOutput::ok(content)
                } else {
                    ToolOutput::error("subagent", content)
                };
                // A worktree child did not touch the workspace (its diff
                // is applied, or not, by this agent's own edit tool).
                if !r.worktree {
                    out.files_touched = o.files;
                }
                let status = if o.status == "completed" {
                    "ok"
                } else {
                    "error"
                };
                results[r.index] = Some(self.record_result(turn, r.call, status, out, o.ms)?);
            }
        }
        let stopped = self.interrupt.borrow().is_some();
        if stopped {
            return Err(Stop::Interrupted);
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| (String::new(), true)))
            .collect())
    }
}
