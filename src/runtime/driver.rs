//! Runtime-started turns (the server's): resolve the thread's settings the
//! way `exec` resolves its flags, then run the same agent loop on a thread
//! of its own, with gate-8 questions going to the runtime's clients
//! ([`super::approver::RuntimeApprover`]) and every step recorded through
//! the tap. Each turn also writes its own session file (`receipts` and the
//! receipt route read it).
//!
//! What the loop cannot take yet is refused, not faked: steering a running
//! turn and compaction are not offered; the thread's `system_prompt` is
//! stored but the loop's own system prompt is what the model gets; earlier
//! turns reach the model as their user and agent messages only (not their
//! tool calls).

use super::approver::RuntimeApprover;
use super::model::{ItemKind, ItemStatus, ThreadRecord, TurnRecord, TurnStatus};
use super::store::{Runtime, RuntimeError};
use super::tap::TapHandle;
use crate::agent::tools::{guard::FsGuard, ToolContext, ALL_TOOLS};
use crate::agent::{
    exec_posture, run_exec_hooked, Emitter, ExecOptions, Models, OutputFormat, PipelineAuthorizer,
    RunHooks, RunSnapshots,
};
use crate::authz::{Approval, Mode, SessionGrants};
use crate::config::{LoadOptions, RulesFile, SandboxContext, SandboxFlags};
use crate::policy::{resolve, HostFacts};
use crate::provider::auth::AuthStore;
use crate::provider::config::ExecConfig;
use crate::provider::registry::{self, KeySource};
use crate::provider::{Message, Provider, RetryPolicy};
use crate::session::{sessions_dir, SessionLog};
use crate::snapshot::{SnapshotOptions, SnapshotStore};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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

/// A turn's posture chosen by an interactive client (the TUI's Tab and
/// Shift+Tab) instead of `exec`'s. The user's settings still narrow it:
/// a configured `never-run` stays, the sandbox mode is the posture's
/// implied mode tightened by the configured one, and the safety floor,
/// repository rules and rules-file denies act in every posture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnPosture {
    pub mode: Mode,
    pub approval: Approval,
}

/// Everything one loop run needs.
struct Prepared {
    opts: ExecOptions,
    ctx: ToolContext,
    provider: Provider,
    authorizer: PipelineAuthorizer,
    snaps: RunSnapshots,
    /// The thread's `a` answers, for interactive turns.
    grants: Option<Arc<Mutex<SessionGrants>>>,
}

#[derive(Clone)]
pub struct Driver {
    rt: Runtime,
    home: PathBuf,
    approval_timeout: Duration,
    /// Turns running in this process → their interrupt switch.
    active: Arc<Mutex<HashMap<String, watch::Sender<bool>>>>,
    /// Serializes starts (the busy check and the session file).
    starting: Arc<Mutex<()>>,
    /// Per thread: the `a` answers of interactive turns (kept for the
    /// life of this process, like the conversation on screen).
    grants: Arc<Mutex<HashMap<String, Arc<Mutex<SessionGrants>>>>>,
}

fn setup<E: std::fmt::Display>(e: E) -> DriverError {
    DriverError::Setup(e.to_string())
}

impl Driver {
    pub fn new(rt: Runtime, home: &Path, approval_timeout: Duration) -> Self {
        Driver {
            rt,
            home: home.to_path_buf(),
            approval_timeout,
            active: Arc::new(Mutex::new(HashMap::new())),
            starting: Arc::new(Mutex::new(())),
            grants: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Start a turn on `thread_id` and return it (`in_progress`); the loop
    /// runs on its own OS thread until the model stops.
    pub fn start(&self, thread_id: &str, prompt: String) -> Result<TurnRecord, DriverError> {
        self.start_with(thread_id, prompt, None)
    }

    /// [`Driver::start`] with an interactive client's posture: questions
    /// wait for the client, and an `a` answer (`remember`) grants that kind
    /// of call for the rest of the thread's turns in this process.
    pub fn start_with(
        &self,
        thread_id: &str,
        prompt: String,
        posture: Option<TurnPosture>,
    ) -> Result<TurnRecord, DriverError> {
        let _one = self.starting.lock().unwrap_or_else(|e| e.into_inner());
        let thread = self.rt.thread(thread_id)?;
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
        let history = self.history(thread_id);
        let grants = posture.map(|_| {
            self.grants
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(thread_id.to_string())
                .or_default()
                .clone()
        });
        let p = prepare(&self.home, &thread, prompt.clone(), posture, grants)?;
        let mut log = SessionLog::create(&sessions_dir(&self.home)).map_err(setup)?;
        self.rt.claim(thread_id)?;
        let turn = self.rt.start_turn(
            thread_id,
            Some(&p.provider.settings.id),
            Some(&p.provider.settings.model),
            Some(log.thread()),
        )?;
        let item = self
            .rt
            .start_item(&turn, ItemKind::UserMessage, json!({"text": prompt}))?;
        self.rt
            .finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))?;
        let (tx, rx) = watch::channel(false);
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(turn.id.clone(), tx);
        let d = self.clone();
        let t = turn.clone();
        let auto = thread.auto_approve;
        let spawned = std::thread::Builder::new()
            .name(format!("turn-{}", turn.id))
            .spawn(move || d.run(p, t, auto, history, &mut log, rx));
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

    fn forget(&self, turn: &str) {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(turn);
    }

    /// The loop, on its own thread and single-threaded async runtime.
    fn run(
        &self,
        mut p: Prepared,
        turn: TurnRecord,
        auto: bool,
        history: Vec<Message>,
        log: &mut SessionLog,
        rx: watch::Receiver<bool>,
    ) {
        let tap = TapHandle::new(self.rt.clone(), turn.clone());
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
            auto_approve: auto,
            timeout: self.approval_timeout,
            grants: p.grants.clone(),
        };
        let status = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(exec_rt) => exec_rt.block_on(async {
                let ticker = tap.spawn_ticker();
                let hooks = RunHooks {
                    approver: &approver,
                    history,
                };
                let report = run_exec_hooked(
                    &p.opts,
                    &p.ctx,
                    Models::Single(&p.provider),
                    &p.authorizer,
                    hooks,
                    &mut out,
                    log,
                    &mut p.snaps,
                    rx,
                )
                .await;
                ticker.abort();
                Some(report.status)
            }),
            Err(_) => None,
        };
        let summary = tap.close();
        let (st, error) = match status.as_deref() {
            Some("completed") => (TurnStatus::Completed, None),
            Some("interrupted") => (
                TurnStatus::Interrupted,
                Some(
                    summary
                        .error
                        .unwrap_or_else(|| "interrupted by a client".into()),
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
        let _ = self.rt.finish_turn(&turn.id, st, error);
        self.forget(&turn.id);
        self.rt.release(&turn.thread_id);
    }

    /// Ask a running turn to stop (Ctrl-C semantics: a running command is
    /// killed). Only turns this process runs can be interrupted here.
    pub fn interrupt(&self, thread_id: &str, turn_id: &str) -> Result<(), RuntimeError> {
        let turn = self.rt.turn(turn_id)?;
        if turn.thread_id != thread_id {
            return Err(RuntimeError::NotFound {
                what: "turn",
                id: turn_id.into(),
            });
        }
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = active.get(turn_id) else {
            return Err(RuntimeError::invalid(
                "turn_id",
                format!(
                    "turn `{turn_id}` is {} (not running in this server)",
                    turn.status.as_str()
                ),
            ));
        };
        self.rt.append(vec![super::NewEvent::turn(
            "turn.interrupt_requested",
            thread_id,
            turn_id,
            json!({}),
        )])?;
        let _ = tx.send(true);
        Ok(())
    }

    /// Whether any turn is still running (shutdown waits for none).
    pub fn running(&self) -> usize {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Earlier turns as the model sees them: each user message and the
    /// agent's final message.
    fn history(&self, thread_id: &str) -> Vec<Message> {
        self.rt.read(|s| {
            let mut out = Vec::new();
            for t in s.thread_turns.get(thread_id).into_iter().flatten() {
                let items: Vec<_> = s
                    .turn_items
                    .get(t)
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
                let user = items
                    .iter()
                    .find(|i| i.kind == ItemKind::UserMessage)
                    .map(text);
                let agent = items
                    .iter()
                    .rev()
                    .find(|i| i.kind == ItemKind::AgentMessage)
                    .map(text);
                if let Some(u) = user {
                    out.push(Message::User { text: u });
                    out.push(Message::Assistant {
                        text: agent.unwrap_or_default(),
                        tool_calls: Vec::new(),
                    });
                }
            }
            out
        })
    }
}

/// The tools a thread offers: none in `chat`; all in `agent`, without
/// `shell` unless `allow_shell`.
pub fn thread_tools(t: &ThreadRecord) -> Vec<String> {
    if t.mode == "chat" {
        return Vec::new();
    }
    ALL_TOOLS
        .iter()
        .filter(|n| t.allow_shell || **n != "shell")
        .map(|n| n.to_string())
        .collect()
}

/// Resolve a thread's settings like `exec` resolves its flags (the same
/// config layers, posture, provider registry, sandbox policy and
/// snapshots).
fn prepare(
    home: &Path,
    t: &ThreadRecord,
    prompt: String,
    chosen: Option<TurnPosture>,
    grants: Option<Arc<Mutex<SessionGrants>>>,
) -> Result<Prepared, DriverError> {
    let mut o = LoadOptions::new(&t.workspace);
    if !t.model.is_empty() {
        o.overrides.model = Some(t.model.clone());
    }
    let sandbox = SandboxContext::load_with(&mut o, &SandboxFlags::default(), RulesFile::Load)
        .map_err(setup)?;
    let (mut posture, sandbox) = match chosen {
        None => {
            let (p, s, _notes) = exec_posture(sandbox, t.auto_approve, None);
            (p, s)
        }
        Some(c) => {
            let mut p = sandbox.settings.posture(c.mode);
            if p.approval != Approval::NeverRun {
                p.approval = c.approval;
            }
            let s = sandbox.for_posture(&p);
            (p, s)
        }
    };
    // A person can answer here: gate 8 leaves questions open for the
    // runtime's clients (the approver applies `auto_approve`).
    posture.headless = false;
    let settings = &sandbox.settings;
    let cfg = ExecConfig::from_settings(settings).map_err(setup)?;
    let store = AuthStore::new(home);
    let env = |n: &str| std::env::var(n).ok();
    let model = (!t.model.is_empty()).then_some(t.model.as_str());
    let ps = registry::select(None, model, &cfg, &store, &env).map_err(setup)?;
    if ps.key_source == KeySource::Missing {
        return Err(DriverError::Setup(format!(
            "no API key for provider {} (model {}): run `codewhale auth set --provider {}`",
            ps.id, ps.model, ps.id
        )));
    }
    let provider = Provider::new(ps, RetryPolicy::default()).map_err(setup)?;
    let resolved = resolve(&sandbox.policy, &HostFacts::detect()).map_err(setup)?;
    let snap_opts = SnapshotOptions::from_env()
        .unwrap_or_else(|| SnapshotOptions::new(home))
        .with_resolved_policy(&resolved);
    let snaps = RunSnapshots::from_open(
        SnapshotStore::open(&settings.workspace, snap_opts).map_err(|e| e.to_string()),
    );
    let mut authorizer = PipelineAuthorizer::new(settings, posture, sandbox.mode());
    if let Some(g) = &grants {
        authorizer = authorizer.with_grants(g.clone());
    }
    let ctx = ToolContext {
        guard: FsGuard::new(&resolved),
        policy: sandbox.policy.clone(),
        host: sandbox.host.clone(),
        cancel: crate::host::CancelToken::new(),
    };
    let opts = ExecOptions {
        prompt,
        auto: t.auto_approve,
        allowed_tools: Some(thread_tools(t)),
        disallowed_tools: Vec::new(),
        max_turns: 20,
        config: json!({"source": "runtime"}),
        instruction_imports: settings.user.project_instruction_imports.unwrap_or(false),
    };
    Ok(Prepared {
        opts,
        ctx,
        provider,
        authorizer,
        snaps,
        grants,
    })
}
