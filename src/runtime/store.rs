//! [`Runtime`]: the event log, the projection, live subscribers and the
//! pending-request settlement owner, behind one handle that every client
//! shares.
//!
//! Locking: `core` (log + pending table + waiters) serializes appends; the
//! projection sits behind its own `RwLock`, updated while `core` is held, so
//! a reader never sees a record the log has not committed, and readers do
//! not wait for an fsync.

pub use super::error::RuntimeError;
use super::event::{LogRecord, NewEvent};
use super::log::{EventLog, TornTail};
use super::model::{
    new_id, now_rfc3339, ItemKind, ItemStatus, ThreadMode, ThreadRecord, TurnItemRecord,
    TurnRecord, TurnStatus, TurnUsage,
};
use super::owner::OwnerLock;
use super::pending::{Answer, PendingRequest, PendingTable, RequestKind, Settlement};
use super::projection::State;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, oneshot};

/// What opening the runtime repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    pub torn: Option<TornTail>,
    /// Turns a dead process left open, now `interrupted`.
    pub interrupted_turns: Vec<String>,
}

/// How a thread starts.
#[derive(Clone, Debug, Default)]
pub struct NewThread {
    /// A caller-chosen id (`exec` uses its session id); else a fresh one.
    pub id: Option<String>,
    pub model: String,
    /// A provider id for the thread's turns (`None`: the configured one).
    pub provider: Option<String>,
    /// Checked by [`Runtime::create_thread`]: an existing directory, not a
    /// system path; recorded canonical.
    pub workspace: PathBuf,
    pub mode: ThreadMode,
    pub system_prompt: Option<String>,
    pub title: Option<String>,
    pub allow_shell: bool,
    pub trust_mode: bool,
    pub auto_approve: bool,
    pub client_tools: Vec<super::model::ClientTool>,
    /// The background task that creates this thread (`None` otherwise).
    pub task_id: Option<String>,
}

/// A change to a thread: `None` = unchanged; an empty `title` or
/// `system_prompt` clears it.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadPatch {
    pub archived: Option<bool>,
    pub allow_shell: Option<bool>,
    pub trust_mode: Option<bool>,
    pub auto_approve: Option<bool>,
    pub model: Option<String>,
    /// A provider id; an empty string goes back to the configured one.
    /// Changing it without a `model` clears the thread's model (the new
    /// provider's default is used), since a model belongs to its provider.
    pub provider: Option<String>,
    pub mode: Option<String>,
    pub title: Option<String>,
    pub system_prompt: Option<String>,
}

impl ThreadPatch {
    pub fn is_empty(&self) -> bool {
        *self == ThreadPatch::default()
    }
}

/// System directories a thread may not take as its workspace: a turn
/// could edit (or, under Full Access, run commands against) the machine
/// itself. Each also refuses everything under it for the pseudo
/// filesystems.
const SYSTEM_DIRS: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
    "/System",
    "/Library",
    "/private/etc",
];
/// Trees refused whole (kernel and device interfaces).
const SYSTEM_TREES: &[&str] = &["/proc", "/sys", "/dev"];

/// A new thread's workspace: canonical, an existing directory, not a
/// system path. One check for every client (HTTP, stdio, ACP, the TUI,
/// `exec`), so none can create a thread the others would refuse.
pub fn checked_workspace(ws: &std::path::Path) -> Result<PathBuf, RuntimeError> {
    let shown = ws.display().to_string();
    let canon = std::fs::canonicalize(ws)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            RuntimeError::invalid("workspace", format!("`{shown}` is not a directory"))
        })?;
    let system = SYSTEM_DIRS.iter().any(|d| canon == std::path::Path::new(d))
        || SYSTEM_TREES.iter().any(|d| canon.starts_with(d));
    if system {
        return Err(RuntimeError::invalid(
            "workspace",
            format!(
                "`{}` is a system directory; open a project directory instead",
                canon.display()
            ),
        ));
    }
    Ok(canon)
}

struct Core {
    log: EventLog,
    pending: PendingTable,
    waiters: HashMap<String, oneshot::Sender<Settlement>>,
    owned: HashMap<String, OwnerLock>,
}

struct Inner {
    dir: PathBuf,
    core: Mutex<Core>,
    state: RwLock<State>,
    tx: broadcast::Sender<Arc<LogRecord>>,
}

/// The shared handle (cheap to clone).
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

fn poisoned<T>(e: std::sync::PoisonError<T>) -> T {
    // A panic while holding a lock cannot leave a half-appended record (the
    // log cuts one back); the projection is only ever replaced whole per
    // record, so continuing with it is safe.
    e.into_inner()
}

/// `<codewhale home>/runtime`.
pub fn runtime_dir(home: &Path) -> PathBuf {
    home.join("runtime")
}

impl Runtime {
    /// Open the runtime store of `home`, repair a torn tail and interrupt
    /// what a dead process left open.
    pub fn open(home: &Path) -> Result<(Runtime, OpenReport), RuntimeError> {
        Runtime::open_dir(&runtime_dir(home))
    }

    pub fn open_dir(dir: &Path) -> Result<(Runtime, OpenReport), RuntimeError> {
        let (log, records, torn) = EventLog::open(dir)?;
        let mut state = State::default();
        for r in records {
            state.apply(Arc::new(r))?;
        }
        let (tx, _) = broadcast::channel(1024);
        let rt = Runtime {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                core: Mutex::new(Core {
                    log,
                    pending: PendingTable::default(),
                    waiters: HashMap::new(),
                    owned: HashMap::new(),
                }),
                state: RwLock::new(state),
                tx,
            }),
        };
        let dir = rt.inner.dir.clone();
        let plan = rt.read(|s| s.restart_plan(&|t| OwnerLock::held_elsewhere(&dir, t)));
        let interrupted_turns = plan
            .iter()
            .filter(|e| e.event == "turn.completed")
            .filter_map(|e| e.turn_id.clone())
            .collect();
        if !plan.is_empty() {
            rt.append(plan)?;
        }
        Ok((
            rt,
            OpenReport {
                torn,
                interrupted_turns,
            },
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Read the projection.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        let s = self.inner.state.read().unwrap_or_else(poisoned);
        f(&s)
    }

    /// Append durably, then apply and publish (others' records first).
    pub fn append(&self, events: Vec<NewEvent>) -> Result<Vec<Arc<LogRecord>>, RuntimeError> {
        let mut core = self.inner.core.lock().unwrap_or_else(poisoned);
        self.commit(&mut core, events)
    }

    fn commit(
        &self,
        core: &mut Core,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Arc<LogRecord>>, RuntimeError> {
        let (foreign, mine) = core.log.append(events)?;
        let foreign: Vec<_> = foreign.into_iter().map(Arc::new).collect();
        let mine: Vec<_> = mine.into_iter().map(Arc::new).collect();
        self.publish(foreign.iter().chain(&mine))?;
        Ok(mine)
    }

    fn publish<'a>(
        &self,
        recs: impl Iterator<Item = &'a Arc<LogRecord>>,
    ) -> Result<(), RuntimeError> {
        let recs: Vec<_> = recs.cloned().collect();
        {
            let mut s = self.inner.state.write().unwrap_or_else(poisoned);
            for r in &recs {
                s.apply(r.clone())?;
            }
        }
        for r in recs {
            // No receiver is fine: subscribers replay from the projection.
            let _ = self.inner.tx.send(r);
        }
        Ok(())
    }

    /// Pick up what other processes committed (`exec` runs, another
    /// server); returns how many records were new.
    pub fn refresh(&self) -> Result<usize, RuntimeError> {
        let mut core = self.inner.core.lock().unwrap_or_else(poisoned);
        let recs: Vec<_> = core.log.poll()?.into_iter().map(Arc::new).collect();
        let n = recs.len();
        self.publish(recs.iter())?;
        Ok(n)
    }

    /// Follow one thread's events from `since` (exclusive).
    pub fn subscribe(&self, thread: &str, since: u64, replay_limit: Option<usize>) -> Subscription {
        Subscription {
            rt: self.clone(),
            rx: self.inner.tx.subscribe(),
            thread: thread.to_string(),
            cursor: since,
            replay_limit,
        }
    }

    // ---- threads ----

    pub fn thread(&self, id: &str) -> Result<ThreadRecord, RuntimeError> {
        self.read(|s| s.threads.get(id).cloned())
            .ok_or_else(|| RuntimeError::NotFound {
                what: "thread",
                id: id.to_string(),
            })
    }

    pub fn create_thread(&self, t: NewThread) -> Result<ThreadRecord, RuntimeError> {
        let workspace = checked_workspace(&t.workspace)?;
        check_client_tools(&t.client_tools)?;
        if let Some(p) = &t.provider {
            check_id("provider", p)?;
        }
        let id = match t.id {
            Some(id) => {
                check_id("id", &id)?;
                if self.read(|s| s.threads.contains_key(&id)) {
                    return Err(RuntimeError::invalid("id", format!("thread `{id}` exists")));
                }
                id
            }
            None => new_id("thr"),
        };
        let now = now_rfc3339();
        let rec = ThreadRecord {
            id: id.clone(),
            created_at: now.clone(),
            updated_at: now,
            model: t.model,
            provider: t.provider,
            workspace,
            mode: t.mode,
            system_prompt: t.system_prompt.filter(|s| !s.is_empty()),
            latest_turn_id: None,
            archived: false,
            title: t.title.filter(|s| !s.is_empty()),
            allow_shell: t.allow_shell,
            trust_mode: t.trust_mode,
            auto_approve: t.auto_approve,
            client_tools: t.client_tools,
            task_id: t.task_id,
        };
        self.append(vec![NewEvent::thread(
            "thread.started",
            &id,
            json!({ "thread": rec }),
        )])?;
        Ok(rec)
    }

    pub fn update_thread(&self, id: &str, p: ThreadPatch) -> Result<ThreadRecord, RuntimeError> {
        if p.is_empty() {
            return Err(RuntimeError::invalid(
                "body",
                "at least one field is required (archived, allow_shell, trust_mode, auto_approve, model, provider, mode, title, system_prompt)",
            ));
        }
        let mode = p
            .mode
            .as_deref()
            .map(|m| ThreadMode::parse("mode", m))
            .transpose()?;
        if p.model.as_deref() == Some("") {
            return Err(RuntimeError::invalid("model", "must not be empty"));
        }
        if let Some(pv) = p.provider.as_deref().filter(|v| !v.is_empty()) {
            check_id("provider", pv)?;
        }
        let mut t = self.thread(id)?;
        if let Some(v) = p.provider {
            let v = (!v.is_empty()).then_some(v);
            if v != t.provider && p.model.is_none() {
                t.model = String::new();
            }
            t.provider = v;
        }
        if let Some(v) = p.archived {
            t.archived = v;
        }
        if let Some(v) = p.allow_shell {
            t.allow_shell = v;
        }
        if let Some(v) = p.trust_mode {
            t.trust_mode = v;
        }
        if let Some(v) = p.auto_approve {
            t.auto_approve = v;
        }
        if let Some(v) = p.model {
            t.model = v;
        }
        if let Some(v) = mode {
            t.mode = v;
        }
        if let Some(v) = p.title {
            t.title = (!v.is_empty()).then_some(v);
        }
        if let Some(v) = p.system_prompt {
            t.system_prompt = (!v.is_empty()).then_some(v);
        }
        t.updated_at = now_rfc3339();
        self.append(vec![NewEvent::thread(
            "thread.updated",
            id,
            json!({ "thread": t }),
        )])?;
        Ok(t)
    }

    /// A sibling thread with the source's settings (no turns).
    pub fn fork_thread(&self, id: &str) -> Result<ThreadRecord, RuntimeError> {
        let src = self.thread(id)?;
        let now = now_rfc3339();
        let t = ThreadRecord {
            id: new_id("thr"),
            created_at: now.clone(),
            updated_at: now,
            latest_turn_id: None,
            archived: false,
            // A fork is not the task's run.
            task_id: None,
            ..src
        };
        self.append(vec![NewEvent::thread(
            "thread.forked",
            &t.id,
            json!({ "thread": t, "source_thread_id": id }),
        )])?;
        Ok(t)
    }

    // ---- ownership ----

    /// Mark this process as the one running `thread`'s turns (an `flock`
    /// other starts test before interrupting open turns).
    pub fn claim(&self, thread: &str) -> Result<(), RuntimeError> {
        check_id("thread_id", thread)?;
        let mut core = self.inner.core.lock().unwrap_or_else(poisoned);
        if core.owned.contains_key(thread) {
            return Ok(());
        }
        let lock = OwnerLock::acquire(&self.inner.dir, thread)?;
        core.owned.insert(thread.to_string(), lock);
        Ok(())
    }

    pub fn release(&self, thread: &str) {
        let mut core = self.inner.core.lock().unwrap_or_else(poisoned);
        core.owned.remove(thread);
    }

    // ---- turns and items ----

    /// Start a turn (`in_progress`), unless one is open in the thread.
    pub fn start_turn(
        &self,
        thread: &str,
        provider: Option<&str>,
        model: Option<&str>,
        session_id: Option<&str>,
    ) -> Result<TurnRecord, RuntimeError> {
        self.thread(thread)?;
        let busy = self.read(|s| {
            s.thread_turns
                .get(thread)
                .into_iter()
                .flatten()
                .any(|t| s.turns.get(t).is_some_and(|t| t.status.is_open()))
        });
        if busy {
            return Err(RuntimeError::Busy(thread.to_string()));
        }
        let now = now_rfc3339();
        let turn = TurnRecord {
            id: new_id("turn"),
            thread_id: thread.to_string(),
            status: TurnStatus::InProgress,
            effective_provider: provider.map(str::to_string),
            effective_model: model.map(str::to_string),
            created_at: now.clone(),
            started_at: Some(now),
            completed_at: None,
            duration_ms: None,
            usage: TurnUsage::default(),
            error: None,
            session_id: session_id.map(str::to_string),
            cost_usd: None,
            by_model: Vec::new(),
            routing: Vec::new(),
            context_tokens: None,
        };
        self.append(vec![NewEvent::turn(
            "turn.started",
            thread,
            &turn.id,
            json!({ "turn": turn }),
        )])?;
        Ok(turn)
    }

    pub fn turn(&self, id: &str) -> Result<TurnRecord, RuntimeError> {
        self.read(|s| s.turns.get(id).cloned())
            .ok_or_else(|| RuntimeError::NotFound {
                what: "turn",
                id: id.to_string(),
            })
    }

    /// Change an open turn's record (usage, routing) with one
    /// `turn.lifecycle` event; a closed turn is left as it is.
    pub fn update_turn(
        &self,
        id: &str,
        f: impl FnOnce(&mut TurnRecord),
    ) -> Result<(), RuntimeError> {
        let mut t = self.turn(id)?;
        if !t.status.is_open() {
            return Ok(());
        }
        f(&mut t);
        self.append(vec![NewEvent::turn(
            "turn.lifecycle",
            &t.thread_id.clone(),
            id,
            json!({ "turn": t }),
        )])?;
        Ok(())
    }

    /// Record usage so far on an open turn (`turn.lifecycle`).
    pub fn turn_usage(
        &self,
        id: &str,
        usage: TurnUsage,
        cost_usd: Option<f64>,
    ) -> Result<(), RuntimeError> {
        let mut t = self.turn(id)?;
        if !t.status.is_open() {
            return Ok(());
        }
        t.usage = usage;
        t.cost_usd = cost_usd;
        self.append(vec![NewEvent::turn(
            "turn.lifecycle",
            &t.thread_id.clone(),
            id,
            json!({ "turn": t }),
        )])?;
        Ok(())
    }

    /// Close a turn: its open requests are canceled first (each with its
    /// one terminal event), its open items get the turn's status, then
    /// `turn.completed`. A closed turn is left as it is.
    pub fn finish_turn(
        &self,
        id: &str,
        status: TurnStatus,
        error: Option<String>,
    ) -> Result<TurnRecord, RuntimeError> {
        let reason = error
            .clone()
            .unwrap_or_else(|| format!("turn {}", status.as_str()));
        self.cancel_requests_of(id, &reason);
        let mut t = self.turn(id)?;
        if !t.status.is_open() {
            return Ok(t);
        }
        let item_status = match status {
            TurnStatus::Completed => ItemStatus::Completed,
            TurnStatus::Failed => ItemStatus::Failed,
            TurnStatus::Canceled => ItemStatus::Canceled,
            _ => ItemStatus::Interrupted,
        };
        let open_items: Vec<TurnItemRecord> = self.read(|s| {
            s.turn_items
                .get(id)
                .into_iter()
                .flatten()
                .filter_map(|i| s.items.get(i))
                .filter(|i| i.status.is_open())
                .cloned()
                .collect()
        });
        let mut events = Vec::new();
        for mut item in open_items {
            item.status = item_status;
            let ev = match item_status {
                ItemStatus::Completed => "item.completed",
                ItemStatus::Failed => "item.failed",
                _ => "item.interrupted",
            };
            events.push(NewEvent::item(
                ev,
                &t.thread_id,
                id,
                &item.id.clone(),
                json!({ "item": item }),
            ));
        }
        let now = time::OffsetDateTime::now_utc();
        t.status = status;
        t.error = error;
        t.completed_at = Some(now_rfc3339());
        t.duration_ms = t
            .started_at
            .as_deref()
            .and_then(|s| {
                time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
            })
            .map(|s| (now - s).whole_milliseconds().max(0) as u64);
        events.push(NewEvent::turn(
            "turn.completed",
            &t.thread_id,
            id,
            json!({ "turn": t }),
        ));
        self.append(events)?;
        Ok(t)
    }

    pub fn start_item(
        &self,
        turn: &TurnRecord,
        kind: ItemKind,
        metadata: Value,
    ) -> Result<TurnItemRecord, RuntimeError> {
        let item = TurnItemRecord {
            id: new_id("item"),
            turn_id: turn.id.clone(),
            kind,
            status: ItemStatus::InProgress,
            metadata,
        };
        self.append(vec![NewEvent::item(
            "item.started",
            &turn.thread_id,
            &turn.id,
            &item.id,
            json!({ "item": item }),
        )])?;
        Ok(item)
    }

    /// Publish one (already coalesced) piece of an item's text.
    pub fn item_delta(
        &self,
        turn: &TurnRecord,
        item: &TurnItemRecord,
        delta: &str,
    ) -> Result<(), RuntimeError> {
        self.append(vec![NewEvent::item(
            "item.delta",
            &turn.thread_id,
            &turn.id,
            &item.id,
            json!({ "delta": delta, "kind": item.kind }),
        )])?;
        Ok(())
    }

    /// Close an item with `status`, merging `metadata` into what it has
    /// (its materialized text stays).
    pub fn finish_item(
        &self,
        turn: &TurnRecord,
        item_id: &str,
        status: ItemStatus,
        metadata: Value,
    ) -> Result<TurnItemRecord, RuntimeError> {
        let mut item = self
            .read(|s| s.items.get(item_id).cloned())
            .ok_or_else(|| RuntimeError::NotFound {
                what: "item",
                id: item_id.to_string(),
            })?;
        item.status = status;
        if let (Some(dst), Value::Object(src)) = (item.metadata.as_object_mut(), metadata) {
            dst.extend(src);
        }
        let ev = match status {
            ItemStatus::Completed => "item.completed",
            ItemStatus::Failed => "item.failed",
            _ => "item.interrupted",
        };
        self.append(vec![NewEvent::item(
            ev,
            &turn.thread_id,
            &turn.id,
            item_id,
            json!({ "item": item }),
        )])?;
        Ok(item)
    }

    // ---- pending requests ----

    /// Open a request and wait for its one settlement: an answer, the
    /// timeout (which settles it as `TimedOut`), or the turn's end.
    pub async fn request(
        &self,
        kind: RequestKind,
        turn: &TurnRecord,
        item_id: Option<&str>,
        mut payload: Value,
        timeout: Duration,
    ) -> Result<(String, Settlement), RuntimeError> {
        let (prefix, key) = match kind {
            RequestKind::Approval => ("appr", "approval_id"),
            RequestKind::UserInput => ("input", "input_id"),
            RequestKind::ToolCall => ("call", "call_id"),
        };
        let id = payload
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| new_id(prefix));
        payload["request_id"] = id.clone().into();
        payload[key] = id.clone().into();
        let mut rx = {
            let mut core = self.inner.core.lock().unwrap_or_else(poisoned);
            let req = PendingRequest {
                id: id.clone(),
                kind,
                thread_id: turn.thread_id.clone(),
                turn_id: turn.id.clone(),
            };
            if !core.pending.open(req) {
                return Err(RuntimeError::invalid(
                    key,
                    format!("`{id}` was already used"),
                ));
            }
            let (tx, rx) = oneshot::channel();
            core.waiters.insert(id.clone(), tx);
            let ev = NewEvent {
                event: kind.opened_event(),
                thread_id: Some(turn.thread_id.clone()),
                turn_id: Some(turn.id.clone()),
                item_id: item_id.map(str::to_string),
                payload,
            };
            if let Err(e) = self.commit(&mut core, vec![ev]) {
                core.waiters.remove(&id);
                let _ = core.pending.take(&id, None, None, None);
                return Err(e);
            }
            rx
        };
        let settled = tokio::select! {
            r = &mut rx => r.unwrap_or_else(|_| Settlement::Canceled("runtime closed".into())),
            _ = tokio::time::sleep(timeout) => {
                match self.settle(&id, None, None, None, Settlement::TimedOut) {
                    Ok(()) => Settlement::TimedOut,
                    // Someone else settled first: theirs is the answer.
                    Err(_) => rx.await.unwrap_or_else(|_| Settlement::Canceled("runtime closed".into())),
                }
            }
        };
        Ok((id, settled))
    }

    /// Settle a pending request. The terminal event is durable before the
    /// waiting engine is told; an unknown, already settled or wrongly
    /// routed id is an error and reaches nobody.
    pub fn settle(
        &self,
        id: &str,
        kind: Option<RequestKind>,
        thread: Option<&str>,
        turn: Option<&str>,
        how: Settlement,
    ) -> Result<(), RuntimeError> {
        let mut core = self.inner.core.lock().unwrap_or_else(poisoned);
        let req = core.pending.take(id, kind, thread, turn)?;
        let ev = NewEvent {
            event: req.kind.terminal_event(&how),
            thread_id: Some(req.thread_id.clone()),
            turn_id: Some(req.turn_id.clone()),
            item_id: self.read(|s| s.open_requests.get(id).and_then(|r| r.item_id.clone())),
            payload: terminal_payload(&req, &how),
        };
        if let Err(e) = self.commit(&mut core, vec![ev]) {
            core.pending.reopen(req);
            return Err(e);
        }
        if let Some(tx) = core.waiters.remove(id) {
            let _ = tx.send(how);
        }
        Ok(())
    }

    /// Cancel every open request of a turn (each gets its terminal event).
    pub fn cancel_requests_of(&self, turn: &str, reason: &str) {
        let ids = {
            let core = self.inner.core.lock().unwrap_or_else(poisoned);
            core.pending.of_turn(turn)
        };
        for id in ids {
            // Lost races (answered meanwhile) are fine: that one settled it.
            let _ = self.settle(&id, None, None, None, Settlement::Canceled(reason.into()));
        }
    }

    /// Whether `id` is pending in this process (others' requests cannot be
    /// answered here).
    pub fn is_pending(&self, id: &str) -> bool {
        let core = self.inner.core.lock().unwrap_or_else(poisoned);
        core.pending.get(id).is_some()
    }
}

/// The terminal event's payload: identifiers and the outcome, never an
/// answer's content.
fn terminal_payload(req: &PendingRequest, how: &Settlement) -> Value {
    let key = match req.kind {
        RequestKind::Approval => "approval_id",
        RequestKind::UserInput => "input_id",
        RequestKind::ToolCall => "call_id",
    };
    let mut p = match how {
        Settlement::Answered(Answer::Approval { allow, remember }) => json!({
            "decision": if *allow { "allow" } else { "deny" },
            "remember": remember,
            "decided_by": "client",
        }),
        Settlement::Answered(Answer::UserInput { answers }) => json!({
            "response_redacted": true,
            "answer_count": answers.as_array().map_or(0, Vec::len),
        }),
        Settlement::Answered(Answer::ToolResult { success, .. }) => json!({
            "result_accepted": true,
            "success": success,
        }),
        Settlement::TimedOut => match req.kind {
            RequestKind::Approval => json!({
                "decision": "deny", "outcome": "no_response", "decided_by": "no response",
            }),
            _ => json!({ "reason": "no response" }),
        },
        Settlement::Canceled(reason) => json!({ "reason": reason }),
    };
    p["request_id"] = req.id.clone().into();
    p[key] = req.id.clone().into();
    p
}

/// The name of the runtime's question tool (a client answers it).
pub const ASK_USER: &str = "ask_user";

/// Client tool names are plain, unique, and never a built-in's.
fn check_client_tools(tools: &[super::model::ClientTool]) -> Result<(), RuntimeError> {
    for (i, t) in tools.iter().enumerate() {
        let field = format!("client_tools[{i}].name");
        let plain = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !plain {
            return Err(RuntimeError::invalid(
                &field,
                format!("`{}` is not a tool name (1-64 of A-Z a-z 0-9 _ -)", t.name),
            ));
        }
        if crate::catalogue::get(&t.name).is_some() || t.name == ASK_USER {
            return Err(RuntimeError::invalid(
                &field,
                format!("`{}` is a built-in tool", t.name),
            ));
        }
        if tools[..i].iter().any(|o| o.name == t.name) {
            return Err(RuntimeError::invalid(
                &field,
                format!("`{}` is listed twice", t.name),
            ));
        }
        if !t.parameters.is_object() {
            return Err(RuntimeError::invalid(
                &format!("client_tools[{i}].parameters"),
                "must be a JSON Schema object",
            ));
        }
    }
    Ok(())
}

/// Ids become file names (owner locks) and URL segments: keep them plain.
pub fn check_id(field: &str, id: &str) -> Result<(), RuntimeError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::invalid(
            field,
            format!("`{id}` is not an id (1-128 of A-Z a-z 0-9 _ -)"),
        ))
    }
}

/// One subscriber's cursor on one thread.
pub struct Subscription {
    rt: Runtime,
    rx: broadcast::Receiver<Arc<LogRecord>>,
    thread: String,
    cursor: u64,
    replay_limit: Option<usize>,
}

/// Events are delivered in batches of at most this many.
pub const BATCH: usize = 256;

impl Subscription {
    /// The next batch of envelopes (each with its `previous_seq`); waits
    /// for new events when caught up. `None` when the runtime is gone.
    pub async fn next(&mut self) -> Option<Vec<Value>> {
        loop {
            let batch = self.durable_batch();
            if !batch.is_empty() {
                return Some(batch);
            }
            match self.rx.recv().await {
                // A wake-up only: the batch comes from the projection.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// What is durable after the cursor, without waiting.
    pub fn durable_batch(&mut self) -> Vec<Value> {
        let limit = self.replay_limit.take();
        let recs: Vec<Arc<LogRecord>> = self.rt.read(|s| {
            let Some(all) = s.thread_events.get(&self.thread) else {
                return Vec::new();
            };
            let start = all.partition_point(|r| r.seq <= self.cursor);
            let rest = &all[start..];
            let rest = match limit {
                Some(n) if rest.len() > n => {
                    // The newest tail: the cursor moves past the omitted part.
                    let skip = rest.len() - n;
                    self.cursor = rest[skip - 1].seq;
                    &rest[skip..]
                }
                _ => rest,
            };
            rest.iter().take(BATCH).cloned().collect()
        });
        recs.iter()
            .map(|r| {
                let e = r.envelope(self.cursor);
                self.cursor = r.seq;
                e
            })
            .collect()
    }

    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
