//! The agent loop's events as runtime items: the loop reports through its
//! [`EventTap`] seam and this turns each report into thread/turn/item
//! events of one runtime turn. Streamed text is coalesced
//! ([`super::coalesce`]) before it is sequenced; a ticker publishes what
//! waits when the age bound passes without another fragment.
//!
//! The tap cannot fail the loop (the session file stays the loop's own
//! durable record): the first error is kept and reported by the caller.

use super::coalesce::Coalescer;
use super::item_meta::{
    CompactionMeta, EnforcedBrief, ItemApproval, ToolItemResult, ToolItemStart,
};
use super::model::{
    ItemKind, ItemStatus, ModelUsage, RouteChoice, TurnItemRecord, TurnRecord, TurnUsage,
};
use super::store::{Runtime, RuntimeError};
use super::NewEvent;
use crate::agent::event::{self as ev, Event};
use crate::agent::EventTap;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct TapState {
    rt: Runtime,
    turn: TurnRecord,
    coalescer: Coalescer,
    /// The agent message being streamed.
    message: Option<TurnItemRecord>,
    /// Tool call id → item id (open items).
    calls: HashMap<String, String>,
    /// Approval facts waiting for the call's result.
    approvals: HashMap<String, ItemApproval>,
    usage: TurnUsage,
    /// Sum of the model requests' costs; unknown once any one is.
    cost: Option<f64>,
    by_model: Vec<ModelUsage>,
    routing: Vec<RouteChoice>,
    error: Option<String>,
    failure: Option<RuntimeError>,
    /// The loop's stop signal: once it is set, the message being streamed
    /// is cut, so it is closed by [`TapHandle::close`] as the turn ended
    /// (`interrupted`), never as `completed` by the loop's closing events.
    interrupt: Option<crate::agent::Interrupt>,
}

/// Shared between the loop's tap and the ticker.
#[derive(Clone)]
pub struct TapHandle(Arc<Mutex<TapState>>);

/// What the turn added up to.
#[derive(Debug, Default)]
pub struct TapSummary {
    pub usage: TurnUsage,
    /// The loop's `error` event, if it sent one.
    pub error: Option<String>,
    /// The first runtime write that failed.
    pub failure: Option<RuntimeError>,
}

fn tool_kind(tool: &str) -> ItemKind {
    match tool {
        "shell" => ItemKind::CommandExecution,
        crate::agent::subagent::AGENT_TOOL => ItemKind::ToolCall,
        t if crate::mcp::client_names::is_mcp(t) => ItemKind::McpToolCall,
        t if crate::agent::snapshots::changes_files(t) => ItemKind::FileChange,
        _ => ItemKind::ToolCall,
    }
}

impl TapHandle {
    pub fn new(rt: Runtime, turn: TurnRecord) -> Self {
        TapHandle(Arc::new(Mutex::new(TapState {
            rt,
            turn,
            coalescer: Coalescer::default(),
            message: None,
            calls: HashMap::new(),
            approvals: HashMap::new(),
            usage: TurnUsage::default(),
            cost: Some(0.0),
            by_model: Vec::new(),
            routing: Vec::new(),
            error: None,
            failure: None,
            interrupt: None,
        })))
    }

    /// Watch the loop's stop signal (the receiver the loop gets).
    pub fn watch_interrupt(&self, rx: crate::agent::Interrupt) {
        self.with(|s| s.interrupt = Some(rx));
    }

    fn with<R>(&self, f: impl FnOnce(&mut TapState) -> R) -> R {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut s)
    }

    /// The tap to give the loop's emitter.
    pub fn tap(&self) -> Box<dyn EventTap> {
        Box::new(RuntimeTap(self.clone()))
    }

    /// The item of a tool call the loop reported (for approvals).
    pub fn item_of_call(&self, call_id: &str) -> Option<String> {
        self.with(|s| s.calls.get(call_id).cloned())
    }

    /// Publish waiting text whose age bound has passed.
    pub fn tick(&self) {
        self.with(|s| {
            if let Some(text) = s.coalescer.tick(Instant::now()) {
                s.publish_delta(&text);
            }
        });
    }

    /// Run [`TapHandle::tick`] every few milliseconds until dropped.
    pub fn spawn_ticker(&self) -> tokio::task::JoinHandle<()> {
        let h = self.clone();
        tokio::spawn(async move {
            let mut iv = tokio::time::interval(Duration::from_millis(8));
            loop {
                iv.tick().await;
                h.tick();
            }
        })
    }

    /// Close what is open and hand back the totals. The message being
    /// streamed ends `interrupted` when the turn was (its text is what
    /// arrived before the stop), else `completed`; calls without a result
    /// are left to the turn's close, which gives them the turn's status.
    pub fn close(&self, interrupted: bool) -> TapSummary {
        self.with(|s| {
            s.close_message(if interrupted {
                ItemStatus::Interrupted
            } else {
                ItemStatus::Completed
            });
            TapSummary {
                usage: s.usage,
                error: s.error.take(),
                failure: s.failure.take(),
            }
        })
    }
}

impl TapState {
    fn keep(&mut self, r: Result<(), RuntimeError>) {
        if let Err(e) = r {
            self.failure.get_or_insert(e);
        }
    }

    fn publish_delta(&mut self, text: &str) {
        let Some(item) = self.message.clone() else {
            return;
        };
        let r = self.rt.item_delta(&self.turn, &item, text);
        self.keep(r);
    }

    fn stop_requested(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|rx| rx.borrow().is_some())
    }

    fn close_message(&mut self, status: ItemStatus) {
        if let Some(text) = self.coalescer.take() {
            self.publish_delta(&text);
        }
        if let Some(item) = self.message.take() {
            let r = self
                .rt
                .finish_item(&self.turn, &item.id, status, json!({}))
                .map(drop);
            self.keep(r);
        }
    }

    fn content(&mut self, text: &str) {
        if self.message.is_none() {
            match self
                .rt
                .start_item(&self.turn, ItemKind::AgentMessage, json!({"text": ""}))
            {
                Ok(i) => self.message = Some(i),
                Err(e) => {
                    self.failure.get_or_insert(e);
                    return;
                }
            }
        }
        if let Some(t) = self.coalescer.push(text, Instant::now()) {
            self.publish_delta(&t);
        }
    }

    fn event(&mut self, ev: &Event) {
        match ev {
            Event::Content { .. } => return,
            Event::Metadata(_) | Event::Done(_) => {}
            // After a stop request the loop only closes the turn: the cut
            // message waits for `close`, which knows how the turn ended.
            _ if self.stop_requested() => {}
            _ => self.close_message(ItemStatus::Completed),
        }
        match ev {
            Event::ToolUse(t) => self.tool_use(t),
            Event::Approval(a) => {
                self.approvals.insert(
                    a.call_id.clone(),
                    ItemApproval {
                        verdict: a.verdict.clone(),
                        hold: a.hold,
                    },
                );
            }
            Event::SandboxDenied(e) => self.sandbox("sandbox.denied", e),
            Event::SandboxAllowed(e) => self.sandbox("sandbox.allowed", e),
            Event::ToolResult(r) => self.tool_result(r),
            Event::TurnUsage(u) => self.turn_usage(u),
            Event::ModelChoice(c) => self.model_choice(c),
            Event::Error(e) => self.error = Some(e.message.clone()),
            Event::Reasoning { chars, text, .. } => self.reasoning(*chars, text),
            Event::Compaction(c) => self.compaction(c),
            Event::AutoReviewRequested(r) => {
                self.auto_review("auto_review.requested", &r.call_id, ev, None)
            }
            Event::AutoReviewDecided(d) => {
                self.auto_review("auto_review.decided", &d.call_id, ev, None)
            }
            Event::AutoReviewPaused(p) => {
                self.auto_review("auto_review.paused", &p.call_id, ev, None)
            }
            Event::SubagentStarted(e) => {
                self.thread_event("subagent.started", serde_json::to_value(e))
            }
            Event::SubagentCompleted(e) => {
                self.thread_event("subagent.completed", serde_json::to_value(e))
            }
            Event::Subagent { agent_id, event } => self.child(agent_id, event),
            Event::TodoUpdated(e) => self.thread_event("todo.updated", serde_json::to_value(e)),
            Event::Content { .. } | Event::Metadata(_) | Event::Steered { .. } | Event::Done(_) => {
            }
        }
    }

    /// The model's reasoning as its own item (the TUI's collapsed cell).
    fn reasoning(&mut self, chars: usize, text: &str) {
        let r = self
            .rt
            .start_item(
                &self.turn,
                ItemKind::Reasoning,
                json!({"chars": chars, "text": text}),
            )
            .and_then(|i| {
                self.rt
                    .finish_item(&self.turn, &i.id, ItemStatus::Completed, json!({}))
                    .map(drop)
            });
        self.keep(r);
    }

    /// An automatic compaction inside the turn: the manual route's item,
    /// marked `auto` (the summary is on it, as on the manual one; the
    /// thread history replays the session file instead).
    fn compaction(&mut self, c: &ev::Compaction) {
        let started = self.rt.start_item(
            &self.turn,
            ItemKind::ContextCompaction,
            CompactionMeta {
                auto: c.auto,
                reason: Some(c.reason.clone()),
                window: Some(c.window),
                threshold: Some(c.threshold),
                tokens_before: Some(c.tokens_before),
                summarised: Some(c.summarised),
                ..Default::default()
            }
            .to_value(),
        );
        let r = started.and_then(|i| {
            self.rt
                .finish_item(
                    &self.turn,
                    &i.id,
                    ItemStatus::Completed,
                    CompactionMeta {
                        summary: Some(c.summary.clone()),
                        tokens_after: Some(c.tokens_after),
                        kept: Some(c.kept),
                        provider: Some(c.provider.clone()),
                        model: Some(c.model.clone()),
                        ..Default::default()
                    }
                    .to_value(),
                )
                .map(drop)
        });
        self.keep(r);
    }

    /// A runtime event of the turn (no item): `subagent.started` /
    /// `subagent.completed`, whose payload is the typed event's serde form.
    fn thread_event(&mut self, name: &'static str, payload: serde_json::Result<Value>) {
        let ev = NewEvent {
            event: name,
            thread_id: Some(self.turn.thread_id.clone()),
            turn_id: Some(self.turn.id.clone()),
            item_id: None,
            payload: payload.unwrap_or(Value::Null),
        };
        let r = self.rt.append(vec![ev]).map(drop);
        self.keep(r);
    }

    /// A sub-agent's step: its calls become items of this turn carrying
    /// its `agent_id` (its call ids are its own, so they are keyed by the
    /// agent), its usage counts in the turn's; a grandchild's steps arrive
    /// wrapped once more and are handled the same way.
    fn child(&mut self, agent_id: &str, event: &Event) {
        let key = |call: &str| format!("{agent_id}/{call}");
        match event {
            Event::ToolUse(t) => self.start_call(t, key(&t.call_id), Some(agent_id)),
            Event::Approval(a) => {
                self.approvals.insert(
                    key(&a.call_id),
                    ItemApproval {
                        verdict: a.verdict.clone(),
                        hold: a.hold,
                    },
                );
            }
            Event::ToolResult(r) => {
                let mut r = (**r).clone();
                r.call_id = key(&r.call_id);
                self.tool_result(&r);
            }
            Event::SandboxDenied(e) | Event::SandboxAllowed(e) => {
                let name = if matches!(event, Event::SandboxDenied(_)) {
                    "sandbox.denied"
                } else {
                    "sandbox.allowed"
                };
                let mut e = e.clone();
                e.call_id = key(&e.call_id);
                self.sandbox(name, &e);
            }
            Event::TurnUsage(u) => self.turn_usage(u),
            // The child's own reviewer: on the child's call item, marked
            // with its agent (a child's pause is the child's, not the
            // thread's).
            Event::AutoReviewRequested(r) => self.auto_review(
                "auto_review.requested",
                &key(&r.call_id),
                event,
                Some(agent_id),
            ),
            Event::AutoReviewDecided(d) => self.auto_review(
                "auto_review.decided",
                &key(&d.call_id),
                event,
                Some(agent_id),
            ),
            Event::AutoReviewPaused(p) => self.auto_review(
                "auto_review.paused",
                &key(&p.call_id),
                event,
                Some(agent_id),
            ),
            Event::Subagent { .. } | Event::SubagentStarted(_) | Event::SubagentCompleted(_) => {
                self.event(event)
            }
            _ => {}
        }
    }

    fn tool_use(&mut self, t: &ev::ToolUse) {
        self.start_call(t, t.call_id.clone(), None);
    }

    fn start_call(&mut self, t: &ev::ToolUse, key: String, agent_id: Option<&str>) {
        let meta = ToolItemStart {
            call_id: t.call_id.clone(),
            tool: t.tool.clone(),
            args: t.args.clone(),
            mcp: t.mcp.clone(),
            agent_id: agent_id.map(str::to_string),
        };
        let meta = serde_json::to_value(meta).unwrap_or(Value::Null);
        match self.rt.start_item(&self.turn, tool_kind(&t.tool), meta) {
            Ok(i) => {
                self.calls.insert(key, i.id);
            }
            Err(e) => {
                self.failure.get_or_insert(e);
            }
        }
    }

    /// A sandbox event on the call's item: the path refused, or the
    /// connection the egress proxy handled (name, port, rule, decision and
    /// the bytes relayed each way).
    fn sandbox(&mut self, name: &'static str, e: &ev::SandboxEvent) {
        let item = self.calls.get(&e.call_id).cloned();
        // The event's own serde form (stream-json's fields, documented in
        // docs/EXEC.md and RUNTIME_API.md): no second spelling of them.
        let payload = serde_json::to_value(e).unwrap_or(Value::Null);
        let ev = NewEvent {
            event: name,
            thread_id: Some(self.turn.thread_id.clone()),
            turn_id: Some(self.turn.id.clone()),
            item_id: item,
            payload,
        };
        let r = self.rt.append(vec![ev]).map(drop);
        self.keep(r);
    }

    /// An Auto-Review event on the reviewed call's item: the loop's event
    /// in its own serde form (stream-json's fields, without `type`), with
    /// the sub-agent whose reviewer it was, if any.
    fn auto_review(
        &mut self,
        name: &'static str,
        call_key: &str,
        e: &Event,
        agent_id: Option<&str>,
    ) {
        let item = self.calls.get(call_key).cloned();
        let mut payload = serde_json::to_value(e).unwrap_or(Value::Null);
        if let Some(o) = payload.as_object_mut() {
            o.remove("type");
            if let Some(a) = agent_id {
                o.insert("agent_id".into(), Value::String(a.to_string()));
            }
        }
        let ev = NewEvent {
            event: name,
            thread_id: Some(self.turn.thread_id.clone()),
            turn_id: Some(self.turn.id.clone()),
            item_id: item,
            payload,
        };
        let r = self.rt.append(vec![ev]).map(drop);
        self.keep(r);
    }

    fn tool_result(&mut self, r: &ev::ToolResult) {
        let Some(item_id) = self.calls.remove(&r.call_id) else {
            return;
        };
        let status = match r.status.as_str() {
            "ok" => ItemStatus::Completed,
            _ => ItemStatus::Failed,
        };
        // The full output stays in the session file (it can hold anything
        // a command printed); the item keeps the facts and, for the
        // built-in and MCP tools, a bounded head and tail (what a client
        // draws; the TUI's tool cells come from it, so nothing has to read
        // the session file back). A client tool's result and `ask_user`'s
        // answers are never copied.
        let shown = crate::agent::tools::ALL_TOOLS.contains(&r.tool.as_str())
            || crate::mcp::client_names::is_mcp(&r.tool);
        let meta = ToolItemResult {
            status: r.status.clone(),
            exit_code: r.exit_code,
            duration_ms: Some(r.duration_ms),
            files_touched: r.files_touched.clone(),
            error_category: r.error_category.map(str::to_string),
            enforcement: r.enforcement.as_ref().map(|e| e.joined()),
            truncated: r.truncated,
            output_bytes: r.output.len(),
            approval: self.approvals.remove(&r.call_id),
            // A file edit's real unified diff (what a client draws).
            diff: r.diff.as_deref().map(super::preview::bounded_diff),
            // What the command really ran under (backend and level; the
            // shortfalls stay in the session file and the receipt).
            enforced: r.enforced.as_ref().map(|e| EnforcedBrief {
                backend: e.backend,
                level: e.level,
                partial_items: e.partial.len(),
            }),
            output_preview: (shown && !r.output.is_empty())
                .then(|| super::preview::output_preview(&r.output)),
        };
        let meta = serde_json::to_value(meta).unwrap_or(Value::Null);
        let res = self
            .rt
            .finish_item(&self.turn, &item_id, status, meta)
            .map(drop);
        self.keep(res);
    }

    fn turn_usage(&mut self, e: &ev::TurnUsage) {
        let u = TurnUsage {
            input_tokens: e.input_tokens,
            output_tokens: e.output_tokens,
            cached_tokens: e.cached_input_tokens,
            cache_write_tokens: e.cache_write_tokens,
            reasoning_tokens: e.reasoning_tokens.unwrap_or(0),
        };
        add_usage(&mut self.usage, &u);
        self.cost = add_cost(self.cost, e.cost_usd);
        let (provider, model) = (e.provider.clone(), e.model.clone());
        let i = match self
            .by_model
            .iter()
            .position(|m| m.provider == provider && m.model == model)
        {
            Some(i) => i,
            None => {
                self.by_model.push(ModelUsage {
                    provider: provider.clone(),
                    model: model.clone(),
                    cost_usd: Some(0.0),
                    ..ModelUsage::default()
                });
                self.by_model.len() - 1
            }
        };
        let m = &mut self.by_model[i];
        add_usage(&mut m.usage, &u);
        m.cost_usd = add_cost(m.cost_usd, e.cost_usd);
        m.requests += 1;
        let (usage, cost, by) = (self.usage, self.cost, self.by_model.clone());
        // The context in use is this request's, not the turn's sum; a
        // reviewer's request is neither the turn's context nor its model.
        let context = (e.usage_reported && !e.reviewer).then(|| u.input_tokens + u.output_tokens);
        let provider = if e.reviewer { String::new() } else { provider };
        let r = self.rt.update_turn(&self.turn.id, |t| {
            t.usage = usage;
            if context.is_some() {
                t.context_tokens = context;
            }
            t.cost_usd = cost;
            t.by_model = by;
            if !provider.is_empty() {
                t.effective_provider = Some(provider);
                t.effective_model = Some(model);
            }
        });
        self.keep(r);
    }

    fn model_choice(&mut self, c: &ev::ModelChoice) {
        let choice = RouteChoice {
            request: u64::from(c.turn),
            kind: c.kind.clone(),
            provider: c.provider.clone(),
            model: c.model.clone(),
            reason: c.reason.clone(),
            used_provider: c.used_provider.clone(),
            used_model: c.used_model.clone(),
            failed: json!(c.failed),
        };
        let (p, m) = (choice.used_provider.clone(), choice.used_model.clone());
        self.routing.push(choice);
        let routing = self.routing.clone();
        let r = self.rt.update_turn(&self.turn.id, |t| {
            t.routing = routing;
            t.effective_provider = Some(p);
            t.effective_model = Some(m);
        });
        self.keep(r);
    }
}

fn add_usage(to: &mut TurnUsage, u: &TurnUsage) {
    to.input_tokens += u.input_tokens;
    to.output_tokens += u.output_tokens;
    to.cached_tokens += u.cached_tokens;
    to.cache_write_tokens += u.cache_write_tokens;
    to.reasoning_tokens += u.reasoning_tokens;
}

/// A sum of costs is known only while every part is.
fn add_cost(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    }
}

struct RuntimeTap(TapHandle);

impl EventTap for RuntimeTap {
    fn content(&mut self, text: &str) {
        self.0.with(|s| s.content(text));
    }

    fn event(&mut self, ev: &Event) {
        self.0.with(|s| s.event(ev));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::host::enforcement::{EnforcementLevel, EnforcementSummary, PartialItem};
    use crate::runtime::NewThread;

    fn tool_use(call: &str, tool: &str, args: Value) -> Event {
        Event::ToolUse(ev::ToolUse {
            call_id: call.into(),
            tool: tool.into(),
            args,
            mcp: None,
        })
    }

    fn tool_result(call: &str, tool: &str, output: &str) -> ev::ToolResult {
        ev::ToolResult {
            call_id: call.into(),
            tool: tool.into(),
            status: "ok".into(),
            duration_ms: 1,
            truncated: false,
            error_category: None,
            exit_code: None,
            enforcement: None,
            enforced: None,
            files_touched: vec![],
            output: output.into(),
            diff: None,
        }
    }

    fn error(message: &str, category: &str) -> Event {
        Event::Error(ev::ErrorEvent {
            message: message.into(),
            category: category.into(),
            exit_code: 1,
        })
    }

    fn usage(input: u64, output: u64, reported: bool) -> Event {
        Event::TurnUsage(ev::TurnUsage {
            turn: 1,
            provider: String::new(),
            model: String::new(),
            input_tokens: input,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: output,
            reasoning_tokens: None,
            usage_reported: reported,
            price: None,
            cost_usd: None,
            cost: "unknown".into(),
            reviewer: false,
        })
    }

    fn setup() -> (tempfile::TempDir, Runtime, TurnRecord) {
        let dir = tempfile::tempdir().unwrap();
        let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
        let t = rt
            .create_thread(NewThread {
                model: "m".into(),
                workspace: std::env::temp_dir(),
                mode: crate::runtime::ThreadMode::Agent,
                allow_shell: true,
                ..Default::default()
            })
            .unwrap();
        let turn = rt.start_turn(&t.id, Some("p"), Some("m"), None).unwrap();
        (dir, rt, turn)
    }

    fn item(rt: &Runtime, kind: ItemKind) -> TurnItemRecord {
        rt.read(|s| s.items.values().find(|i| i.kind == kind).cloned())
            .unwrap()
    }

    /// The item of a finished call carries the head and tail of its output
    /// from the loop's `tool_result` event alone (no session file exists
    /// here), so a client never depends on the order of the session
    /// record and the event; a client tool's result is never copied.
    #[test]
    fn a_calls_item_carries_its_output_preview() {
        let (_d, rt, turn) = setup();
        let mut tap = TapHandle::new(rt.clone(), turn).tap();
        let out: String = (1..=9).map(|i| format!("out {i}\n")).collect();
        tap.event(&tool_use("c1", "shell", json!({"command": "seq 9"})));
        let mut r = tool_result("c1", "shell", &out);
        r.exit_code = Some(0);
        r.enforced = Some(EnforcementSummary {
            backend: crate::host::BackendKind::Bwrap,
            level: EnforcementLevel::Partial,
            partial: vec![PartialItem::at(
                crate::host::enforcement::Shortfall::WriteProtect,
                "/w/.git/hooks",
                "x",
            )],
        });
        tap.event(&Event::ToolResult(Box::new(r)));
        let i = item(&rt, ItemKind::CommandExecution);
        assert_eq!(i.status, ItemStatus::Completed);
        let p: crate::runtime::preview::OutputPreview =
            serde_json::from_value(i.metadata["output_preview"].clone()).unwrap();
        assert_eq!(p.head, ["out 1", "out 2", "out 3"]);
        assert_eq!(p.tail, ["out 7", "out 8", "out 9"]);
        assert_eq!(p.hidden_lines, 3);
        assert_eq!(
            i.metadata["enforced"],
            json!({"backend": "bwrap", "level": "partial", "partial_items": 1})
        );
        tap.event(&tool_use("c2", "open_in_editor", json!({})));
        tap.event(&Event::ToolResult(Box::new(tool_result(
            "c2",
            "open_in_editor",
            "the client's own result",
        ))));
        let i = item(&rt, ItemKind::ToolCall);
        assert!(i.metadata.get("output_preview").is_none(), "{i:?}");
    }

    /// A message cut by an interrupt is closed `interrupted` by `close`,
    /// not `completed` by the loop's closing events (its error, snapshots);
    /// without a stop request the same events complete it.
    #[test]
    fn an_interrupted_message_is_closed_as_interrupted() {
        let (_d, rt, turn) = setup();
        let h = TapHandle::new(rt.clone(), turn);
        let (tx, rx) = tokio::sync::watch::channel(None);
        h.watch_interrupt(rx);
        let mut tap = h.tap();
        tap.content("half an ans");
        tx.send(Some(crate::agent::InterruptCause::Esc)).unwrap();
        tap.event(&error("interrupted (Esc)", "interrupted"));
        assert_eq!(
            item(&rt, ItemKind::AgentMessage).status,
            ItemStatus::InProgress
        );
        let sum = h.close(true);
        assert_eq!(sum.error.as_deref(), Some("interrupted (Esc)"));
        assert_eq!(
            item(&rt, ItemKind::AgentMessage).status,
            ItemStatus::Interrupted
        );

        let (_d, rt, turn) = setup();
        let mut tap = TapHandle::new(rt.clone(), turn).tap();
        tap.content("a whole answer");
        tap.event(&error("boom", "provider"));
        assert_eq!(
            item(&rt, ItemKind::AgentMessage).status,
            ItemStatus::Completed
        );
    }

    /// The turn's `context_tokens` is the latest request's prompt plus
    /// answer, not the turn's sum; a request that reported no usage
    /// leaves the last known figure.
    #[test]
    fn context_tokens_follow_the_latest_request() {
        let (_d, rt, turn) = setup();
        let id = turn.id.clone();
        let mut tap = TapHandle::new(rt.clone(), turn).tap();
        let ctx = |rt: &Runtime| rt.read(|s| s.turns.get(&id).and_then(|t| t.context_tokens));
        assert_eq!(ctx(&rt), None);
        tap.event(&usage(1000, 50, true));
        assert_eq!(ctx(&rt), Some(1050));
        tap.event(&usage(1200, 30, true));
        assert_eq!(ctx(&rt), Some(1230));
        tap.event(&usage(0, 0, false));
        assert_eq!(ctx(&rt), Some(1230));
        let usage = rt.read(|s| s.turns.get(&id).map(|t| t.usage)).unwrap();
        assert_eq!(usage.input_tokens, 2200);
    }
}
