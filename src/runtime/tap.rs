//! The agent loop's events as runtime items: the loop reports through its
//! [`EventTap`] seam and this turns each report into thread/turn/item
//! events of one runtime turn. Streamed text is coalesced
//! ([`super::coalesce`]) before it is sequenced; a ticker publishes what
//! waits when the age bound passes without another fragment.
//!
//! The tap cannot fail the loop (the session file stays the loop's own
//! durable record): the first error is kept and reported by the caller.

use super::coalesce::Coalescer;
use super::model::{
    ItemKind, ItemStatus, ModelUsage, RouteChoice, TurnItemRecord, TurnRecord, TurnUsage,
};
use super::store::{Runtime, RuntimeError};
use super::NewEvent;
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
    approvals: HashMap<String, Value>,
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

    fn event(&mut self, ty: &str, f: &Value) {
        let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match ty {
            "content" => return,
            "metadata" | "done" => {}
            // After a stop request the loop only closes the turn: the cut
            // message waits for `close`, which knows how the turn ended.
            _ if self.stop_requested() => {}
            _ => self.close_message(ItemStatus::Completed),
        }
        match ty {
            "tool_use" => {
                let tool = s("tool");
                let mut meta =
                    json!({"call_id": s("call_id"), "tool": tool, "args": f.get("args")});
                if let Some(m) = f.get("mcp") {
                    meta["mcp"] = m.clone();
                }
                match self.rt.start_item(&self.turn, tool_kind(&tool), meta) {
                    Ok(i) => {
                        self.calls.insert(s("call_id"), i.id);
                    }
                    Err(e) => {
                        self.failure.get_or_insert(e);
                    }
                }
            }
            "approval" => {
                let keep = [
                    "decision",
                    "outcome",
                    "decided_by",
                    "asked_by",
                    "gate",
                    "reason",
                    "hold",
                ];
                let v: serde_json::Map<String, Value> = keep
                    .iter()
                    .filter_map(|k| f.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect();
                self.approvals.insert(s("call_id"), Value::Object(v));
            }
            "sandbox_denied" | "sandbox_allowed" => {
                let item = self.calls.get(&s("call_id")).cloned();
                let ev = NewEvent {
                    event: if ty == "sandbox_denied" {
                        "sandbox.denied"
                    } else {
                        "sandbox.allowed"
                    },
                    thread_id: Some(self.turn.thread_id.clone()),
                    turn_id: Some(self.turn.id.clone()),
                    item_id: item,
                    payload: {
                        let mut p = json!({"call_id": s("call_id"), "tool": s("tool"), "reason": s("reason")});
                        if ty == "sandbox_denied" {
                            p["path"] = f.get("path").cloned().unwrap_or(Value::Null);
                            p["inferred"] = f.get("inferred").cloned().unwrap_or(Value::Null);
                        }
                        // An egress connection: which name, port, rule,
                        // decision and the bytes relayed each way.
                        if f.get("kind").and_then(Value::as_str) == Some("network") {
                            for k in [
                                "kind",
                                "host",
                                "port",
                                "decision",
                                "rule",
                                "protocol",
                                "bytes_up",
                                "bytes_down",
                                "addr",
                                "error",
                            ] {
                                if let Some(v) = f.get(k) {
                                    p[k] = v.clone();
                                }
                            }
                        }
                        p
                    },
                };
                let r = self.rt.append(vec![ev]).map(drop);
                self.keep(r);
            }
            "tool_result" => {
                let call = s("call_id");
                let Some(item_id) = self.calls.remove(&call) else {
                    return;
                };
                let status = match s("status").as_str() {
                    "ok" => ItemStatus::Completed,
                    _ => ItemStatus::Failed,
                };
                // The full output stays in the session file (it can hold
                // anything a command printed); the item keeps the facts and,
                // for the built-in and MCP tools, a bounded head and tail
                // (what a client draws; the TUI's tool cells come from it,
                // so nothing has to read the session file back). A client
                // tool's result and `ask_user`'s answers are never copied.
                let mut meta = json!({
                    "status": s("status"), "exit_code": f.get("exit_code"),
                    "duration_ms": f.get("duration_ms"), "files_touched": f.get("files_touched"),
                    "error_category": f.get("error_category"), "enforcement": f.get("enforcement"),
                    "truncated": f.get("truncated"),
                    "output_bytes": f.get("output").and_then(Value::as_str).map_or(0, str::len),
                });
                if let Some(a) = self.approvals.remove(&call) {
                    meta["approval"] = a;
                }
                // A file edit's real unified diff (what a client draws).
                if let Some(d) = f.get("diff").and_then(Value::as_str) {
                    meta["diff"] = json!(super::preview::bounded_diff(d));
                }
                // What the command really ran under (backend and level;
                // the shortfalls stay in the session file and the receipt).
                if let Some(e) = f.get("enforced").filter(|e| e.is_object()) {
                    meta["enforced"] = json!({"backend": e.get("backend"), "level": e.get("level"),
                                              "partial_items": e.get("partial").and_then(Value::as_array).map_or(0, Vec::len)});
                }
                let tool = s("tool");
                let shown = crate::agent::tools::ALL_TOOLS.contains(&tool.as_str())
                    || crate::mcp::client_names::is_mcp(&tool);
                match f.get("output").and_then(Value::as_str) {
                    Some(out) if shown && !out.is_empty() => {
                        meta["output_preview"] = json!(super::preview::output_preview(out));
                    }
                    _ => {}
                }
                let r = self
                    .rt
                    .finish_item(&self.turn, &item_id, status, meta)
                    .map(drop);
                self.keep(r);
            }
            "turn_usage" => {
                let n = |k: &str| f.get(k).and_then(Value::as_u64).unwrap_or(0);
                let u = TurnUsage {
                    input_tokens: n("input_tokens"),
                    output_tokens: n("output_tokens"),
                    cached_tokens: n("cached_input_tokens"),
                    cache_write_tokens: n("cache_write_tokens"),
                    reasoning_tokens: n("reasoning_tokens"),
                };
                add_usage(&mut self.usage, &u);
                let c = f.get("cost_usd").and_then(Value::as_f64);
                self.cost = add_cost(self.cost, c);
                let (provider, model) = (s("provider"), s("model"));
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
                m.cost_usd = add_cost(m.cost_usd, c);
                m.requests += 1;
                let (usage, cost, by) = (self.usage, self.cost, self.by_model.clone());
                // The context in use is this request's, not the turn's sum.
                let reported = f.get("usage_reported").and_then(Value::as_bool) != Some(false);
                let context = reported.then(|| u.input_tokens + u.output_tokens);
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
            // An automatic compaction inside the turn: the manual route's
            // item, marked `auto` (the summary is on it, as on the manual
            // one; the thread history replays the session file instead).
            "reasoning" => {
                let r = self
                    .rt
                    .start_item(
                        &self.turn,
                        ItemKind::Reasoning,
                        json!({"chars": f.get("chars"), "text": f.get("text")}),
                    )
                    .and_then(|i| {
                        self.rt
                            .finish_item(&self.turn, &i.id, ItemStatus::Completed, json!({}))
                            .map(drop)
                    });
                self.keep(r);
            }
            "compaction" => {
                let keep = |keys: &[&str]| {
                    let m: serde_json::Map<String, Value> = keys
                        .iter()
                        .filter_map(|k| f.get(*k).map(|v| (k.to_string(), v.clone())))
                        .collect();
                    Value::Object(m)
                };
                let started = self.rt.start_item(
                    &self.turn,
                    ItemKind::ContextCompaction,
                    keep(&[
                        "auto",
                        "reason",
                        "window",
                        "threshold",
                        "tokens_before",
                        "summarised",
                    ]),
                );
                let r = started.and_then(|i| {
                    self.rt
                        .finish_item(
                            &self.turn,
                            &i.id,
                            ItemStatus::Completed,
                            keep(&["summary", "tokens_after", "kept", "provider", "model"]),
                        )
                        .map(drop)
                });
                self.keep(r);
            }
            "model_choice" => {
                let choice = RouteChoice {
                    request: f.get("turn").and_then(Value::as_u64).unwrap_or(0),
                    kind: s("kind"),
                    provider: s("provider"),
                    model: s("model"),
                    reason: s("reason"),
                    used_provider: s("used_provider"),
                    used_model: s("used_model"),
                    failed: f.get("failed").cloned().unwrap_or(Value::Null),
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
            "error" => self.error = Some(s("message")),
            _ => {}
        }
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

    fn event(&mut self, ty: &str, fields: &Value) {
        self.0.with(|s| s.event(ty, fields));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::runtime::NewThread;

    fn setup() -> (tempfile::TempDir, Runtime, TurnRecord) {
        let dir = tempfile::tempdir().unwrap();
        let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
        let t = rt
            .create_thread(NewThread {
                model: "m".into(),
                workspace: "/w".into(),
                mode: "agent".into(),
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
        tap.event(
            "tool_use",
            &json!({"call_id": "c1", "tool": "shell", "args": {"command": "seq 9"}}),
        );
        tap.event(
            "tool_result",
            &json!({"call_id": "c1", "tool": "shell", "status": "ok", "exit_code": 0,
                    "output": out,
                    "enforced": {"backend": "bwrap", "level": "partial",
                                 "partial": [{"item": "write-protect", "path": "/w/.git/hooks"}]}}),
        );
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
        tap.event(
            "tool_use",
            &json!({"call_id": "c2", "tool": "open_in_editor", "args": {}}),
        );
        tap.event(
            "tool_result",
            &json!({"call_id": "c2", "tool": "open_in_editor", "status": "ok",
                    "output": "the client's own result"}),
        );
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
        tap.event(
            "error",
            &json!({"message": "interrupted (Esc)", "category": "interrupted"}),
        );
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
        tap.event("error", &json!({"message": "boom", "category": "provider"}));
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
        tap.event(
            "turn_usage",
            &json!({"input_tokens": 1000, "output_tokens": 50, "usage_reported": true}),
        );
        assert_eq!(ctx(&rt), Some(1050));
        tap.event(
            "turn_usage",
            &json!({"input_tokens": 1200, "output_tokens": 30, "usage_reported": true}),
        );
        assert_eq!(ctx(&rt), Some(1230));
        tap.event(
            "turn_usage",
            &json!({"input_tokens": 0, "output_tokens": 0, "usage_reported": false}),
        );
        assert_eq!(ctx(&rt), Some(1230));
        let usage = rt.read(|s| s.turns.get(&id).map(|t| t.usage)).unwrap();
        assert_eq!(usage.input_tokens, 2200);
    }
}
