//! `codewhale exec` as a client of the runtime: its run is one thread (the
//! session id is the thread id, so `receipts`, the server and the event
//! log name the same thing) with one turn holding the prompt, the streamed
//! answer and each tool call as items. The loop, its flags, its output and
//! its exit codes are the loop's own; this only records.

use super::model::{ItemKind, ItemStatus, TurnRecord, TurnStatus};
use super::store::{NewThread, OpenReport, Runtime, RuntimeError};
use super::tap::TapHandle;
use crate::agent::EventTap;
use serde_json::json;
use std::path::{Path, PathBuf};

/// How `exec` describes its thread.
pub struct ExecThreadSpec {
    pub thread_id: String,
    pub workspace: PathBuf,
    pub provider: String,
    pub model: String,
    /// Tools offered at all (`agent`) or none (`chat`).
    pub agent: bool,
    pub allow_shell: bool,
    pub auto: bool,
    pub prompt: String,
}

pub struct ExecThread {
    rt: Runtime,
    thread: String,
    turn: TurnRecord,
    tap: TapHandle,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

/// Open the runtime store of `home` (repairing what a dead process left).
pub fn open(home: &Path) -> Result<(Runtime, OpenReport), RuntimeError> {
    Runtime::open(home)
}

impl ExecThread {
    /// The thread, its owner lock, the turn and the prompt item.
    pub fn start(rt: Runtime, spec: ExecThreadSpec) -> Result<Self, RuntimeError> {
        let t = rt.create_thread(NewThread {
            id: Some(spec.thread_id),
            model: spec.model.clone(),
            workspace: spec.workspace,
            mode: if spec.agent {
                super::ThreadMode::Agent
            } else {
                super::ThreadMode::Chat
            },
            allow_shell: spec.allow_shell,
            auto_approve: spec.auto,
            ..Default::default()
        })?;
        rt.claim(&t.id)?;
        let turn = rt.start_turn(&t.id, Some(&spec.provider), Some(&spec.model), Some(&t.id))?;
        let item = rt.start_item(&turn, ItemKind::UserMessage, json!({"text": spec.prompt}))?;
        rt.finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))?;
        let tap = TapHandle::new(rt.clone(), turn.clone());
        Ok(ExecThread {
            rt,
            thread: t.id,
            turn,
            tap,
            ticker: None,
        })
    }

    pub fn tap(&self) -> Box<dyn EventTap> {
        self.tap.tap()
    }

    /// Watch the loop's stop signal, so a message cut by Ctrl-C is
    /// recorded `interrupted`.
    pub fn watch_interrupt(&self, rx: crate::agent::Interrupt) {
        self.tap.watch_interrupt(rx);
    }

    /// Publish coalesced text on time (call inside the async runtime).
    pub fn spawn_ticker(&mut self) {
        self.ticker = Some(self.tap.spawn_ticker());
    }

    /// Close the turn as the loop's report says (`completed`, `max_turns`,
    /// `interrupted`, `error`), then give up the thread.
    pub fn finish(mut self, status: &str) -> Result<(), RuntimeError> {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
        let summary = self.tap.close(status == "interrupted");
        let (st, error) = match status {
            "completed" => (TurnStatus::Completed, None),
            "interrupted" => (
                TurnStatus::Interrupted,
                Some(summary.error.unwrap_or_else(|| "interrupted".into())),
            ),
            other => (
                TurnStatus::Failed,
                Some(summary.error.unwrap_or_else(|| other.to_string())),
            ),
        };
        let res = self.rt.finish_turn(&self.turn.id, st, error).map(drop);
        self.rt.release(&self.thread);
        match summary.failure {
            Some(e) => Err(e),
            None => res,
        }
    }
}
