//! Runtime-started turns (the server's): resolve the thread's settings the
//! way `exec` resolves its flags — through the same setup function
//! ([`crate::agent::setup::prepare_run`]), so the router, the local-Ollama
//! fallback, the sandbox policy and the snapshots are `exec`'s — then run
//! the same agent loop on a thread of its own, with gate-8 questions going
//! to the runtime's clients ([`super::approver::RuntimeApprover`]), the
//! `ask_user` and client-executed tools answered by them
//! ([`super::client_tools`]), steered input fed to the loop between model
//! requests, and every step recorded through the tap. Each turn also
//! writes its own session file (`receipts`, the receipt route and the
//! history replay read it).
//!
//! Not applied: the thread's `trust_mode` (see docs/RUNTIME_API.md).

use super::approver::RuntimeApprover;
use super::client_tools::RuntimeTools;
use super::history::Replay;
use super::item_meta::CompactionMeta;
use super::model::{ItemKind, ItemStatus, ThreadRecord, TurnRecord, TurnStatus, TurnUsage};
use super::store::{Runtime, RuntimeError, ASK_USER};
use super::tap::TapHandle;
use super::ThreadMode;
use crate::agent::models::Resolved;
use crate::agent::setup::{prepare_run, ModelRequest, RunSetup};
use crate::agent::tools::ALL_TOOLS;
use crate::agent::{Emitter, ExecOptions, ExecRun, InterruptCause, OutputFormat, RunHooks};
use crate::authz::{Approval, Mode, SessionGrants, ToolKind, ToolSpec as AuthzToolSpec};
use crate::config::effort::ReasoningEffort;
use crate::config::{LoadOptions, SandboxContext, TurnAsk};
use crate::provider::Message;
use crate::session::{read_records, sessions_dir, SessionLog};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The thread's settings do not give a runnable turn (no key, a bad
    /// config file, an unresolvable sandbox policy).
    #[error("cannot start a turn: {0}")]
    Setup(String),
}

/// Everything one loop run needs.
struct Prepared {
    opts: ExecOptions,
    setup: RunSetup,
    /// What setting up said for the user (a local model picked, routing).
    notes: Vec<String>,
    grants: Arc<Mutex<SessionGrants>>,
    /// The turn's Auto-Review (posture Auto-Review only).
    auto_review: Option<crate::agent::review::AutoReview>,
    /// The settings the request's tree of sub-agents is limited by.
    subagents: crate::agent::Spawner,
}

/// A turn this process runs.
struct Active {
    interrupt: watch::Sender<Option<InterruptCause>>,
    /// Steered input, read by the loop before its next model request.
    steer: mpsc::Sender<String>,
    /// The steer items not yet known to be delivered.
    steer_items: Vec<String>,
}

/// Whether a thread's Auto-Review is paused and why (the thread detail's
/// `auto_review`; `auto_review.resumed`'s `ended`). The breaker lives in
/// the server process: a restarted server starts every thread unpaused.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AutoReviewState {
    pub paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub trip: Option<crate::authz::reviewer::Trip>,
}

impl AutoReviewState {
    fn of(trip: Option<crate::authz::reviewer::Trip>) -> Self {
        AutoReviewState {
            paused: trip.is_some(),
            reason: trip.as_ref().map(|t| t.reason()),
            trip,
        }
    }
}

#[derive(Clone)]
pub struct Driver {
    rt: Runtime,
    home: PathBuf,
    approval_timeout: Duration,
    /// Turns running in this process.
    active: Arc<Mutex<HashMap<String, Active>>>,
    /// Turns whose loop has ended, taken out of `active` (no steer is
    /// accepted any more) but not yet recorded as closed: still running
    /// for [`Driver::running`], so a caller waiting for none (the TUI on
    /// SIGTERM) does not leave before the turn's record is written.
    closing: Arc<std::sync::atomic::AtomicUsize>,
    /// Serializes starts (the busy check and the session file).
    starting: Arc<Mutex<()>>,
    /// The MCP servers of `mcp.json`, one set per workspace (docs/MCP.md).
    mcp: Arc<crate::mcp::client_pool::McpPool>,
    /// Threads' own MCP servers (an ACP editor's `mcpServers`), started
    /// with the thread's first turn and offered in that thread only.
    thread_mcp: Arc<Mutex<HashMap<String, McpServers>>>,
    /// Each thread's "always for this kind" grants (`remember`), for as
    /// long as this process runs.
    grants: Arc<Mutex<HashMap<String, Arc<Mutex<SessionGrants>>>>>,
    /// What this process learned of its models' context windows (a
    /// context-length error) and token counts, for automatic compaction.
    windows: crate::agent::compaction::WindowMemory,
    /// Threads' own reasoning effort (the TUI's `/model ID EFFORT`),
    /// over the configured `reasoning_effort`, for as long as this
    /// process runs.
    efforts: Arc<Mutex<HashMap<String, ReasoningEffort>>>,
    /// Each thread's Auto-Review breaker (a thread is one agent): while
    /// it is tripped the thread's turns run in Ask instead of Auto-Review,
    /// until [`Driver::resume_auto_review`].
    breakers: Arc<Mutex<HashMap<String, crate::agent::review::SharedBreaker>>>,
    /// Each thread's background jobs (`shell {"background": true}`): they
    /// outlive the turn that started them (until `job_kill`, an interrupt
    /// of that turn, or the driver — the session — going away, which
    /// kills them all).
    jobs: Arc<Mutex<HashMap<String, crate::agent::tools::jobs::Jobs>>>,
}

/// A thread's own MCP servers by name.
pub type McpServers = std::collections::BTreeMap<String, crate::mcp::config::ServerEntry>;

fn setup<E: std::fmt::Display>(e: E) -> DriverError {
    DriverError::Setup(e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A single-threaded async runtime for blocking setup work (model
/// discovery) and for a turn's loop.
fn local_runtime() -> Result<tokio::runtime::Runtime, DriverError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(setup)
}

impl Driver {
    pub fn new(rt: Runtime, home: &Path, approval_timeout: Duration) -> Self {
        Driver {
            rt,
            home: home.to_path_buf(),
            approval_timeout,
            active: Arc::new(Mutex::new(HashMap::new())),
            closing: Arc::default(),
            starting: Arc::new(Mutex::new(())),
            mcp: Arc::default(),
            thread_mcp: Arc::default(),
            grants: Arc::new(Mutex::new(HashMap::new())),
            windows: Default::default(),
            efforts: Arc::default(),
            breakers: Arc::default(),
            jobs: Arc::default(),
        }
    }

    /// `thread_id`'s background jobs (one table for all its turns).
    fn thread_jobs(&self, thread_id: &str) -> crate::agent::tools::jobs::Jobs {
        lock(&self.jobs)
            .entry(thread_id.to_string())
            .or_default()
            .clone()
    }

    fn thread_breaker(&self, thread_id: &str) -> crate::agent::review::SharedBreaker {
        lock(&self.breakers)
            .entry(thread_id.to_string())
            .or_default()
            .clone()
    }

    /// Why Auto-Review is paused on `thread_id`, if it is.
    pub fn auto_review_paused(&self, thread_id: &str) -> Option<crate::authz::reviewer::Trip> {
        lock(&self.thread_breaker(thread_id)).tripped().cloned()
    }

    /// The thread's Auto-Review state as the thread detail shows it.
    pub fn auto_review_state(&self, thread_id: &str) -> AutoReviewState {
        AutoReviewState::of(self.auto_review_paused(thread_id))
    }

    /// The user selected Auto-Review again: `thread_id`'s breaker starts
    /// counting afresh and its turns run in Auto-Review again. A paused
    /// thread gets `auto_review.resumed` (with the trip it ends), so every
    /// client showing the pause clears it; the pause that ended, if any.
    pub fn resume_auto_review(
        &self,
        thread_id: &str,
    ) -> Result<Option<crate::authz::reviewer::Trip>, RuntimeError> {
        let ended = {
            let b = self.thread_breaker(thread_id);
            let mut b = lock(&b);
            let t = b.tripped().cloned();
            b.reset();
            t
        };
        if ended.is_some() {
            let ended = AutoReviewState::of(ended.clone());
            self.rt.append(vec![super::event::NewEvent::thread(
                "auto_review.resumed",
                thread_id,
                json!({ "ended": ended }),
            )])?;
        }
        Ok(ended)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    fn thread_grants(&self, thread_id: &str) -> Arc<Mutex<SessionGrants>> {
        lock(&self.grants)
            .entry(thread_id.to_string())
            .or_default()
            .clone()
    }

    fn check_idle(&self, thread_id: &str) -> Result<(), DriverError> {
        let busy = self.rt.read(|s| {
            s.thread_turns
                .get(thread_id)
                .into_iter()
                .flatten()
                .any(|t| s.turns.get(t).is_some_and(|t| t.status.is_open()))
        });
        if busy {
            return Err(RuntimeError::Busy(thread_id.into()).into());
        }
        Ok(())
    }

    /// Start a turn on `thread_id` in the thread's mode (`plan`, `agent` =
    /// Work, `operate`) and return it (`in_progress`); the loop runs on
    /// its own OS thread until the model stops.
    pub fn start(&self, thread_id: &str, prompt: String) -> Result<TurnRecord, DriverError> {
        self.start_turn(thread_id, prompt, None)
    }

    /// [`Driver::start`] with a per-turn `mode` (`POST …/turns {prompt,
    /// mode}`) instead of the thread's; `chat` is the thread's alone.
    pub fn start_turn(
        &self,
        thread_id: &str,
        prompt: String,
        mode: Option<ThreadMode>,
    ) -> Result<TurnRecord, DriverError> {
        let thread = self.rt.thread(thread_id)?;
        let mode = match mode {
            Some(ThreadMode::Chat) => return Err(RuntimeError::invalid(
                "mode",
                "a turn's mode is plan, work (or agent) or operate; `chat` is set on the thread",
            )
            .into()),
            Some(m) => m,
            None => thread.mode,
        };
        self.start_in_mode(thread_id, prompt, mode.posture_mode().unwrap_or(Mode::Work))
    }

    /// [`Driver::start`] in the posture mode `mode` (Plan: reads only,
    /// read-only sandbox; Work; Operate: Work's permissions run as a goal —
    /// to-do list, parallel children, background jobs, a reviewer's
    /// verdict asked for; docs/OPERATE.md). ACP's `session/set_mode`.
    pub fn start_in_mode(
        &self,
        thread_id: &str,
        prompt: String,
        mode: Mode,
    ) -> Result<TurnRecord, DriverError> {
        self.start_with(thread_id, prompt, mode, None)
    }

    /// [`Driver::start_in_mode`] with the permission an interactive client
    /// chose (the TUI's Shift+Tab) instead of the configured
    /// `approval_policy`. A configured `never-run` stays; Full Access asks
    /// for no sandbox the way `exec --auto --sandbox danger-full-access`
    /// does, so the user's settings can still narrow it.
    pub fn start_with(
        &self,
        thread_id: &str,
        prompt: String,
        mode: Mode,
        approval: Option<Approval>,
    ) -> Result<TurnRecord, DriverError> {
        let _one = lock(&self.starting);
        let thread = self.rt.thread(thread_id)?;
        self.check_idle(thread_id)?;
        let history = self.history(thread_id);
        let grants = self.thread_grants(thread_id);
        let mut p = prepare(
            &thread,
            prompt.clone(),
            grants,
            mode,
            approval,
            Extra {
                windows: self.windows.clone(),
                effort: self.thread_effort(thread_id),
                breaker: self.thread_breaker(thread_id),
            },
        )?;
        self.add_mcp(thread_id, &mut p);
        p.setup.ctx.jobs = self.thread_jobs(thread_id);
        let mut log = SessionLog::create(&sessions_dir(&self.home)).map_err(setup)?;
        self.rt.claim(thread_id)?;
        let turn = self.rt.start_turn(
            thread_id,
            Some(&p.setup.models.provider_label()),
            Some(&p.setup.models.model_label()),
            Some(log.thread()),
        )?;
        let item = self
            .rt
            .start_item(&turn, ItemKind::UserMessage, json!({"text": prompt}))?;
        self.rt
            .finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))?;
        if !p.notes.is_empty() {
            let n = self
                .rt
                .start_item(&turn, ItemKind::Status, json!({"notes": p.notes}))?;
            self.rt
                .finish_item(&turn, &n.id, ItemStatus::Completed, json!({}))?;
        }
        let (tx, rx) = watch::channel(None);
        let (steer_tx, steer_rx) = mpsc::channel();
        lock(&self.active).insert(
            turn.id.clone(),
            Active {
                interrupt: tx,
                steer: steer_tx,
                steer_items: Vec::new(),
            },
        );
        let d = self.clone();
        let t = turn.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("turn-{}", turn.id))
            .spawn(move || d.run(p, t, thread, history, &mut log, rx, steer_rx));
        if let Err(e) = spawned {
            self.forget(&turn.id);
            self.rt.finish_turn(
                &turn.id,
                TurnStatus::Failed,
                Some(format!("could not start: {e}")),
            )?;
            self.rt.release(thread_id);
            return Err(setup(e));
        }
        Ok(turn)
    }

    /// Give thread `thread_id` MCP servers of its own (ACP's `session/new`
    /// and `session/load` `mcpServers`), besides those of `mcp.json`: its
    /// next turn starts them (sandboxed like any MCP server) and only its
    /// turns offer their tools. An empty set goes back to `mcp.json`'s.
    pub fn set_thread_mcp(&self, thread_id: &str, servers: McpServers) {
        let mut m = lock(&self.thread_mcp);
        if servers.is_empty() {
            m.remove(thread_id);
        } else {
            m.insert(thread_id.to_string(), servers);
        }
    }

    /// An agent thread also offers the workspace's MCP tools (asked about
    /// like any MCP call; the servers start in the background), or its
    /// own servers' and `mcp.json`'s when it has servers of its own.
    fn add_mcp(&self, thread_id: &str, p: &mut Prepared) {
        if p.opts.allowed_tools.as_ref().is_none_or(|t| t.is_empty()) {
            return;
        }
        let own = lock(&self.thread_mcp).get(thread_id).cloned();
        let got = match own {
            Some(servers) => self
                .mcp
                .get_thread(
                    thread_id,
                    &servers,
                    &self.home,
                    &p.setup.ctx.policy,
                    &p.setup.ctx.host,
                )
                .map(|(m, note)| {
                    p.notes.extend(note);
                    Some(m)
                }),
            None => self.mcp.get(
                &self.home,
                &p.setup.ctx.policy.workspace,
                &p.setup.ctx.policy,
                &p.setup.ctx.host,
            ),
        };
        match got {
            Ok(Some(m)) => {
                if let Some(t) = p.opts.allowed_tools.as_mut() {
                    t.push("mcp__*".into());
                }
                p.setup.ctx.mcp = Some(m.clone());
                p.setup.authorizer.set_mcp(m);
            }
            Ok(None) => {}
            Err(e) => eprintln!("codewhale: MCP servers not started: {e}"),
        }
    }

    /// `/mcp reload` (TUI): re-read `mcp.json` and restart `workspace`'s
    /// MCP servers, or say that the next turn starts them; one line per
    /// server.
    pub fn mcp_reload(&self, workspace: &Path) -> Result<String, String> {
        match self.mcp.reload(workspace) {
            Some(r) => r.map(|s| mcp_lines(&s)),
            None => Ok(
                "no MCP servers running for this workspace: the next turn starts \
                        the enabled servers of mcp.json"
                    .into(),
            ),
        }
    }

    /// The status of `workspace`'s running MCP servers (`None`: no turn
    /// started them in this process). For `GET /v1/apps/mcp/servers`.
    pub fn mcp_live(&self, workspace: &Path) -> Option<Vec<crate::mcp::client::ServerStatus>> {
        self.mcp.status(workspace)
    }

    /// The tools of `workspace`'s running MCP servers (`None`: not
    /// started). For `GET /v1/apps/mcp/tools`.
    pub fn mcp_live_tools(&self, workspace: &Path) -> Option<Vec<crate::mcp::McpTool>> {
        self.mcp.tools(workspace)
    }

    /// `/mcp` (TUI): the status of `workspace`'s MCP servers.
    pub fn mcp_status(&self, workspace: &Path) -> String {
        match self.mcp.status(workspace) {
            Some(s) => mcp_lines(&s),
            None => "no MCP servers running for this workspace (they start with the first \
                     turn that may call tools; `codewhale mcp list` shows mcp.json)"
                .into(),
        }
    }

    /// Use `effort` as the reasoning effort of `thread_id`'s next turns
    /// (over the configured `reasoning_effort`; a project override's
    /// still applies after it, as after `exec --reasoning-effort`).
    pub fn set_effort(&self, thread_id: &str, effort: ReasoningEffort) {
        lock(&self.efforts).insert(thread_id.to_string(), effort);
    }

    fn thread_effort(&self, thread_id: &str) -> Option<ReasoningEffort> {
        lock(&self.efforts).get(thread_id).copied()
    }

    /// Stop tracking a turn; steered input it never read is marked so.
    /// (A turn's own close counts it in `closing` first: [`Closing`].)
    fn forget(&self, turn: &str) -> Option<Vec<String>> {
        lock(&self.active).remove(turn).map(|a| a.steer_items)
    }

    /// The loop, on its own thread and single-threaded async runtime.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        mut p: Prepared,
        turn: TurnRecord,
        thread: ThreadRecord,
        history: Vec<Message>,
        log: &mut SessionLog,
        rx: crate::agent::Interrupt,
        steer: mpsc::Receiver<String>,
    ) {
        let tap = TapHandle::new(self.rt.clone(), turn.clone());
        tap.watch_interrupt(rx.clone());
        let mut out = Emitter::new(
            OutputFormat::Json,
            Box::new(std::io::sink()),
            Box::new(std::io::sink()),
        )
        .with_tap(tap.tap());
        let approver = RuntimeApprover {
            rt: self.rt.clone(),
            turn: turn.clone(),
            tap: tap.clone(),
            auto_approve: thread.auto_approve,
            timeout: self.approval_timeout,
            grants: p.grants.clone(),
        };
        let tools = RuntimeTools {
            rt: self.rt.clone(),
            turn: turn.clone(),
            tap: tap.clone(),
            client_tools: thread.client_tools.clone(),
            timeout: self.approval_timeout,
        };
        let agent = thread.mode != ThreadMode::Chat;
        let status = match local_runtime() {
            Ok(exec_rt) => exec_rt.block_on(async {
                let ticker = tap.spawn_ticker();
                if let Some(m) = &p.setup.ctx.mcp {
                    // This turn's first model call should see the tools of
                    // servers still starting (bounded by their startup
                    // timeout; only this turn waits, not the server).
                    m.wait_settled(m.startup_bound()).await;
                }
                let hooks = RunHooks {
                    approver: &approver,
                    history,
                    system_prompt: thread.system_prompt.clone(),
                    steer: Some(steer),
                    extra_tools: agent.then_some(&tools as &dyn crate::agent::ExtraTools),
                    auto_review: p.auto_review.as_ref(),
                    // A request's tree of sub-agents (docs/SUBAGENTS.md).
                    spawner: agent.then_some(p.subagents),
                };
                let report = ExecRun::new(
                    &p.opts,
                    &p.setup.ctx,
                    p.setup.models.models(),
                    &p.setup.authorizer,
                )
                .hooks(hooks)
                .snapshots(&mut p.setup.snaps)
                .run(&mut out, log, rx)
                .await;
                ticker.abort();
                Some(report.status)
            }),
            Err(_) => None,
        };
        let summary = tap.close(status.as_deref() == Some("interrupted"));
        let (st, error) = match status.as_deref() {
            Some("completed") => (TurnStatus::Completed, None),
            Some("interrupted") => (
                TurnStatus::Interrupted,
                Some(
                    summary
                        .error
                        .unwrap_or_else(|| InterruptCause::Client.reason().into()),
                ),
            ),
            Some(other) => (
                TurnStatus::Failed,
                Some(summary.error.unwrap_or_else(|| other.to_string())),
            ),
            None => (
                TurnStatus::Failed,
                Some("could not start the async runtime".into()),
            ),
        };
        // Counted as running until the turn is recorded closed and its
        // thread released (the guard ends with this function).
        let _closing = Closing::enter(&self.closing);
        // No steer is accepted after this: what the loop did not read is
        // said on its item before the turn closes.
        let undelivered = self.forget(&turn.id).unwrap_or_default();
        let read = log_user_messages(log.path());
        for item_id in undelivered {
            let text = self.rt.read(|s| {
                s.items
                    .get(&item_id)
                    .and_then(|i| i.metadata.get("text").and_then(|v| v.as_str()))
                    .map(str::to_string)
            });
            let delivered = text.is_some_and(|t| read.contains(&t));
            let _ = self.rt.finish_item(
                &turn,
                &item_id,
                ItemStatus::Completed,
                json!({"delivered": delivered}),
            );
        }
        let _ = self.rt.finish_turn(&turn.id, st, error);
        self.rt.release(&turn.thread_id);
    }

    /// Ask a running turn to stop on a client's request (the API's
    /// interrupt route): [`Driver::interrupt_by`] with
    /// [`InterruptCause::Client`].
    pub fn interrupt(&self, thread_id: &str, turn_id: &str) -> Result<(), RuntimeError> {
        self.interrupt_by(thread_id, turn_id, InterruptCause::Client)
    }

    /// Ask a running turn to stop (Ctrl-C semantics: a running command is
    /// killed), saying why: the cause is in `turn.interrupt_requested`
    /// and becomes the turn's error and the session's reason. Only turns
    /// this process runs can be interrupted here.
    pub fn interrupt_by(
        &self,
        thread_id: &str,
        turn_id: &str,
        cause: InterruptCause,
    ) -> Result<(), RuntimeError> {
        let turn = self.running_turn(thread_id, turn_id)?;
        let active = lock(&self.active);
        let Some(a) = active.get(turn_id) else {
            return Err(not_running(&turn));
        };
        self.rt.append(vec![super::NewEvent::turn(
            "turn.interrupt_requested",
            thread_id,
            turn_id,
            json!({"cause": cause.as_str(), "reason": cause.reason()}),
        )])?;
        // The first cause wins: a second request does not rewrite why.
        a.interrupt.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(cause);
                true
            } else {
                false
            }
        });
        Ok(())
    }

    fn running_turn(&self, thread_id: &str, turn_id: &str) -> Result<TurnRecord, RuntimeError> {
        let turn = self.rt.turn(turn_id)?;
        if turn.thread_id != thread_id {
            return Err(RuntimeError::NotFound {
                what: "turn",
                id: turn_id.into(),
            });
        }
        Ok(turn)
    }

    /// Steer a running turn: `text` is recorded as a user message of the
    /// turn (`turn.steered` names its item), then handed to the loop, which
    /// sends it before its next model request. Only turns this process runs
    /// can be steered.
    pub fn steer(
        &self,
        thread_id: &str,
        turn_id: &str,
        text: String,
    ) -> Result<super::TurnItemRecord, RuntimeError> {
        let turn = self.running_turn(thread_id, turn_id)?;
        // Held until the loop has the text, so a turn that ends meanwhile
        // cannot miss it (its end takes this lock before closing).
        let mut active = lock(&self.active);
        let Some(a) = active.get_mut(turn_id) else {
            return Err(not_running(&turn));
        };
        let item = self.rt.start_item(
            &turn,
            ItemKind::UserMessage,
            json!({"text": text, "steered": true}),
        )?;
        let item = self
            .rt
            .finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))?;
        self.rt.append(vec![super::NewEvent::item(
            "turn.steered",
            thread_id,
            turn_id,
            &item.id,
            json!({"item_id": item.id, "chars": text.chars().count()}),
        )])?;
        let _ = a.steer.send(text);
        a.steer_items.push(item.id.clone());
        Ok(item)
    }

    /// Compact a thread: one turn whose `context_compaction` item holds a
    /// summary of the history so far, written by the thread's model (no
    /// tools). Later turns are sent that summary instead of what it covers.
    pub fn compact(&self, thread_id: &str) -> Result<TurnRecord, DriverError> {
        let _one = lock(&self.starting);
        let thread = self.rt.thread(thread_id)?;
        self.check_idle(thread_id)?;
        let history = self.history(thread_id);
        if history.is_empty() {
            return Err(RuntimeError::invalid(
                "thread",
                "nothing to compact: the thread has no turns",
            )
            .into());
        }
        let p = prepare(
            &thread,
            String::new(),
            self.thread_grants(thread_id),
            Mode::Work,
            None,
            Extra {
                windows: self.windows.clone(),
                effort: self.thread_effort(thread_id),
                breaker: self.thread_breaker(thread_id),
            },
        )?;
        self.rt.claim(thread_id)?;
        let turn = self.rt.start_turn(
            thread_id,
            Some(&p.setup.models.provider_label()),
            Some(&p.setup.models.model_label()),
            None,
        )?;
        let item = self.rt.start_item(
            &turn,
            ItemKind::ContextCompaction,
            CompactionMeta {
                messages: Some(history.len()),
                ..Default::default()
            }
            .to_value(),
        )?;
        let d = self.clone();
        let t = turn.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("compact-{}", turn.id))
            .spawn(move || d.run_compaction(p.setup.models, t, item.id, history));
        if let Err(e) = spawned {
            self.rt.finish_turn(
                &turn.id,
                TurnStatus::Failed,
                Some(format!("could not start: {e}")),
            )?;
            self.rt.release(thread_id);
            return Err(setup(e));
        }
        Ok(turn)
    }

    fn run_compaction(
        &self,
        models: Resolved,
        turn: TurnRecord,
        item_id: String,
        history: Vec<Message>,
    ) {
        let result = match local_runtime() {
            Ok(rt) => rt.block_on(summarise(&models, &history)),
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok((summary, provider, model, usage, cost)) => {
                let _ = self.rt.update_turn(&turn.id, |t| {
                    t.usage = usage;
                    t.cost_usd = cost;
                    t.effective_provider = Some(provider.clone());
                    t.effective_model = Some(model.clone());
                });
                let _ = self.rt.finish_item(
                    &turn,
                    &item_id,
                    ItemStatus::Completed,
                    CompactionMeta {
                        summary: Some(summary),
                        provider: Some(provider),
                        model: Some(model),
                        ..Default::default()
                    }
                    .to_value(),
                );
                let _ = self.rt.finish_turn(&turn.id, TurnStatus::Completed, None);
            }
            Err(e) => {
                let _ =
                    self.rt
                        .finish_item(&turn, &item_id, ItemStatus::Failed, json!({"error": e}));
                let _ = self.rt.finish_turn(&turn.id, TurnStatus::Failed, Some(e));
            }
        }
        self.rt.release(&turn.thread_id);
    }

    /// How many turns are still running (shutdown waits for none): a turn
    /// counts until its close is recorded, not only until its loop ends.
    pub fn running(&self) -> usize {
        // `closing` is raised before a turn leaves `active`: a turn is
        // never in neither (it may briefly count twice).
        lock(&self.active).len() + self.closing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Earlier turns as the model sees them ([`super::history`]): from each
    /// turn's session file; a turn without one (its file is gone) gives
    /// its user and final agent messages; the latest compaction replaces
    /// what came before it.
    fn history(&self, thread_id: &str) -> Vec<Message> {
        struct TurnSource {
            session: Option<String>,
            summary: Option<String>,
            user: Option<String>,
            agent: Option<String>,
        }
        let turns: Vec<TurnSource> = self.rt.read(|s| {
            s.thread_turns
                .get(thread_id)
                .into_iter()
                .flatten()
                .filter_map(|t| s.turns.get(t))
                .map(|t| {
                    let items: Vec<_> = s
                        .turn_items
                        .get(&t.id)
                        .into_iter()
                        .flatten()
                        .filter_map(|i| s.items.get(i))
                        .collect();
                    let text = |i: &&super::TurnItemRecord| {
                        i.metadata
                            .get("text")
                            .and_then(|v| v.as_str())
                            .unwrap_or("")
                            .to_string()
                    };
                    TurnSource {
                        session: t.session_id.clone(),
                        summary: items
                            .iter()
                            .rev()
                            .find(|i| {
                                // An automatic one happened inside a turn:
                                // its session file replays it in place.
                                i.kind == ItemKind::ContextCompaction
                                    && i.status == ItemStatus::Completed
                                    && !CompactionMeta::of(&i.metadata).auto
                            })
                            .and_then(|i| CompactionMeta::of(&i.metadata).summary),
                        user: items
                            .iter()
                            .find(|i| i.kind == ItemKind::UserMessage)
                            .map(text),
                        agent: items
                            .iter()
                            .rev()
                            .find(|i| i.kind == ItemKind::AgentMessage)
                            .map(text),
                    }
                })
                .collect()
        });
        let dir = sessions_dir(&self.home);
        let mut replay = Replay::default();
        for t in turns {
            if let Some(sum) = &t.summary {
                replay.compacted(sum);
                continue;
            }
            let from_file = t
                .session
                .as_deref()
                .and_then(|id| crate::receipt::find_session(&dir, id).ok())
                .and_then(|p| read_records(&p).ok());
            match from_file {
                Some(r) => replay.extend_records(&r),
                None => {
                    if let Some(u) = t.user {
                        replay.extend(vec![
                            Message::User { text: u },
                            Message::Assistant {
                                text: t.agent.unwrap_or_default(),
                                tool_calls: Vec::new(),
                                reasoning: Vec::new(),
                            },
                        ]);
                    }
                }
            }
        }
        replay.messages
    }
}

fn not_running(turn: &TurnRecord) -> RuntimeError {
    RuntimeError::invalid(
        "turn_id",
        format!(
            "turn `{}` is {} (not running in this server)",
            turn.id,
            turn.status.as_str()
        ),
    )
}

/// The user messages a session file recorded (to tell which steered
/// inputs the loop read).
fn log_user_messages(path: &Path) -> Vec<String> {
    read_records(path)
        .map(|recs| {
            recs.into_iter()
                .filter_map(|r| match r.event {
                    crate::session::Event::UserMessage { text } => Some(text),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

pub use crate::agent::compaction::COMPACT_PROMPT;

type Summary = (String, String, String, TurnUsage, Option<f64>);

/// One model request without tools: the summary, who wrote it, and what
/// it cost (unknown when the price or the usage is).
async fn summarise(models: &Resolved, history: &[Message]) -> Result<Summary, String> {
    let provider = match models {
        Resolved::Single(p) => p,
        Resolved::Routed(r) => r
            .first(crate::provider::router::TurnKind::LongContext)
            .or_else(|| r.first(crate::provider::router::TurnKind::Plan))
            .ok_or("the router has no model")?,
    };
    let c = crate::agent::compaction::summarise(provider, history)
        .await
        .map_err(|e| e.to_string())?;
    if c.text.trim().is_empty() {
        return Err("the model returned an empty summary".into());
    }
    let u = c.usage.unwrap_or_default();
    let cost = match (&c.usage, &provider.settings.price) {
        (Some(u), Some(p)) => p.cost(u),
        _ => None,
    };
    Ok((
        c.text,
        provider.settings.id.clone(),
        provider.settings.model.clone(),
        TurnUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_tokens: u.cached_input_tokens,
            cache_write_tokens: u.cache_write_tokens,
            reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
        },
        cost,
    ))
}

/// The tools a thread offers: none in `chat`; all in `agent`, without
/// `shell` unless `allow_shell`.
pub fn thread_tools(t: &ThreadRecord) -> Vec<String> {
    if t.mode == ThreadMode::Chat {
        return Vec::new();
    }
    ALL_TOOLS
        .iter()
        .filter(|n| t.allow_shell || **n != "shell")
        .map(|n| n.to_string())
        .collect()
}

/// What this process keeps per thread beyond its record.
struct Extra {
    windows: crate::agent::compaction::WindowMemory,
    effort: Option<ReasoningEffort>,
    /// The thread's Auto-Review breaker.
    breaker: crate::agent::review::SharedBreaker,
}

/// Resolve a thread's settings like `exec` resolves its flags: the same
/// config layers and posture, then [`prepare_run`] (models with the router
/// and the Ollama fallback, sandbox policy, snapshots, authorizer).
fn prepare(
    t: &ThreadRecord,
    prompt: String,
    grants: Arc<Mutex<SessionGrants>>,
    mode: Mode,
    approval: Option<Approval>,
    extra: Extra,
) -> Result<Prepared, DriverError> {
    let memory = extra.windows;
    let mut o = LoadOptions::new(&t.workspace);
    if !t.model.is_empty() {
        o.overrides.model = Some(t.model.clone());
    }
    o.overrides.reasoning_effort = extra.effort;
    // A person can answer here: gate 8 leaves questions open for the
    // runtime's clients (the approver applies `auto_approve`).
    let (mut posture, sandbox, _notes) = SandboxContext::load_for_turn(
        &mut o,
        &TurnAsk {
            mode,
            permission: approval,
            auto: t.auto_approve,
            headless: false,
            flag: None,
        },
    )
    .map_err(setup)?;
    let mut notes = Vec::new();
    // A tripped breaker: Ask for the rest of the thread (same sandbox:
    // Auto-Review and Ask both run workspace-write).
    let paused = lock(&extra.breaker).tripped().map(|t| t.reason());
    if let (Approval::AutoReview, Some(why)) = (posture.approval, &paused) {
        posture.approval = Approval::Ask;
        notes.push(format!("{why} (questions go to you)"));
    }
    let interactive = Some(posture.label());
    let rt = local_runtime()?;
    let model = (!t.model.is_empty()).then_some(t.model.as_str());
    let mut setup_run = prepare_run(
        &sandbox,
        posture,
        ModelRequest {
            provider: t.provider.as_deref(),
            model,
        },
        grants.clone(),
        &rt,
        &mut |n: &str| notes.push(n.to_string()),
    )
    .map_err(setup)?;
    if t.mode != ThreadMode::Chat {
        // A turn with tools may snapshot: its first full look runs while
        // the model answers. (A chat turn never snapshots.)
        setup_run.snaps.look_ahead();
        setup_run.authorizer.register_tool(AuthzToolSpec {
            name: ASK_USER.into(),
            kind: ToolKind::Read,
            executable: true,
        });
        for c in &t.client_tools {
            // The client runs it: nothing here can see what it touches, so
            // the gates treat it like an external (MCP) tool.
            setup_run.authorizer.register_tool(AuthzToolSpec {
                name: c.name.clone(),
                kind: ToolKind::Mcp,
                executable: true,
            });
        }
    }
    let auto_review = if posture.approval == Approval::AutoReview && t.mode != ThreadMode::Chat {
        Some(
            crate::agent::setup::auto_review(
                &sandbox,
                &setup_run.models,
                extra.breaker.clone(),
                t.trust_mode,
            )
            .map_err(setup)?,
        )
    } else {
        None
    };
    let settings = &sandbox.settings;
    let mut tools = thread_tools(t);
    if t.mode != ThreadMode::Chat {
        // An agent thread may spawn sub-agents (docs/SUBAGENTS.md).
        tools.push(crate::agent::subagent::AGENT_TOOL.into());
        // Operate's tools (the loop offers them in Work and Operate only;
        // the job tools only where `shell` is).
        tools.push(crate::agent::tools::todo::TODO_TOOL.into());
        if t.allow_shell {
            tools.push(crate::agent::tools::jobs::JOB_OUTPUT_TOOL.into());
            tools.push(crate::agent::tools::jobs::JOB_KILL_TOOL.into());
        }
    }
    let opts = ExecOptions {
        prompt,
        auto: t.auto_approve,
        allowed_tools: Some(tools),
        disallowed_tools: Vec::new(),
        max_turns: 20,
        config: json!({"source": "runtime"}),
        instruction_imports: crate::config::imports::files(
            settings.user.project_instruction_imports.as_ref(),
        ),
        interactive,
        compaction: crate::agent::compaction::CompactionOptions {
            threshold: settings.user.compaction.threshold(),
            memory,
        },
    };
    Ok(Prepared {
        opts,
        setup: setup_run,
        notes,
        grants,
        auto_review,
        subagents: crate::agent::Spawner::root(settings),
    })
}

/// One line per MCP server: name, state, tools, last error.
fn mcp_lines(s: &[crate::mcp::client::ServerStatus]) -> String {
    if s.is_empty() {
        return "mcp.json lists no server".into();
    }
    s.iter()
        .map(|x| {
            let err = x
                .last_error
                .as_deref()
                .map(|e| format!(" · {e}"))
                .unwrap_or_default();
            format!("{}: {:?} · {} tools{err}", x.name, x.state, x.tools).to_lowercase()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A turn being closed ([`Driver::running`] counts it): entered before the
/// turn leaves `active`, left when dropped — after its record is written,
/// or on a panic on the way.
struct Closing<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Closing<'a> {
    fn enter(n: &'a std::sync::atomic::AtomicUsize) -> Closing<'a> {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Closing(n)
    }
}

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
