//! Run one task: a new runtime thread (in the task's workspace, with its
//! model and `auto_approve`), one turn with the prompt through the
//! driver, then the turn's outcome on the task. A canceled task's turn is
//! interrupted. Approvals are the runtime's: with nobody answering, a
//! question waits the server's `--approval-timeout` and is denied as
//! `no response`; what the safety floor holds is denied as anywhere.

use super::durable::StoreError;
use super::queue::Tasks;
use super::task::{TaskRecord, TaskStatus};
use crate::runtime::model::now_rfc3339;
use crate::runtime::request::CreateThread;
use crate::runtime::{ItemKind, TurnStatus};
use std::time::Duration;

/// How often a worker looks at its turn (and at a cancel request).
const POLL: Duration = Duration::from_millis(100);
/// A summary keeps this many characters of the final agent message.
const SUMMARY_CHARS: usize = 2000;

/// Start `n` worker threads, each taking the next queued task and running
/// it to its end.
pub(super) fn start_workers(tasks: &Tasks, n: usize) -> Result<(), StoreError> {
    for i in 0..n {
        let t = tasks.clone();
        std::thread::Builder::new()
            .name(format!("task-worker-{i}"))
            .spawn(move || work(&t))
            .map_err(|e| {
                StoreError::io("cannot start a task worker", std::path::Path::new(""), e)
            })?;
    }
    Ok(())
}

fn work(tasks: &Tasks) {
    loop {
        let id = tasks.next();
        let started = tasks.update(&id, |t| {
            if t.status == TaskStatus::Queued {
                t.status = TaskStatus::Running;
                t.started_at = Some(now_rfc3339());
            }
        });
        match started {
            // A task canceled while queued is passed over.
            Ok(t) if t.status == TaskStatus::Running => {
                run(tasks, &t);
                tasks.cancel_handled(&id);
            }
            Ok(_) => {}
            Err(e) => eprintln!("codewhale: task {id}: {e}"),
        }
    }
}

/// Run `t` (already `running`) to its end; the record says how it ended.
fn run(tasks: &Tasks, t: &TaskRecord) {
    let outcome = drive(tasks, t);
    let (status, summary, error) = match outcome {
        Ok((TurnStatus::Completed, summary, _)) => (TaskStatus::Completed, summary, None),
        Ok((_, summary, error)) => (
            TaskStatus::Failed,
            summary,
            Some(error.unwrap_or_else(|| "the turn did not complete".into())),
        ),
        Err(e) => (TaskStatus::Failed, None, Some(e)),
    };
    let r = tasks.update(&t.id, |rec| {
        // A canceled task stays canceled (its interrupted turn is not an
        // error of its own).
        if rec.status != TaskStatus::Canceled {
            rec.status = status;
            rec.error = error;
        }
        rec.summary = summary;
        rec.finished_at = Some(now_rfc3339());
    });
    if let Err(e) = r {
        eprintln!("codewhale: task {}: {e}", t.id);
    }
}

type Outcome = (TurnStatus, Option<String>, Option<String>);

fn drive(tasks: &Tasks, t: &TaskRecord) -> Result<Outcome, String> {
    let driver = tasks.driver();
    let rt = driver.runtime();
    let d = tasks.defaults();
    let body = CreateThread {
        model: t.model.clone(),
        workspace: t.workspace.clone(),
        title: Some(format!("task {}", t.id)),
        auto_approve: Some(t.auto_approve),
        ..Default::default()
    };
    let mut nt = body
        .into_new_thread(&d.workspace, &d.model)
        .map_err(|e| e.to_string())?;
    nt.task_id = Some(t.id.clone());
    let thread = rt.create_thread(nt).map_err(|e| e.to_string())?;
    tasks
        .update(&t.id, |r| r.thread_id = Some(thread.id.clone()))
        .map_err(|e| e.to_string())?;
    if tasks.cancel_requested(&t.id) {
        return Ok((TurnStatus::Canceled, None, None));
    }
    let turn = driver
        .start(&thread.id, t.prompt.clone())
        .map_err(|e| e.to_string())?;
    tasks
        .update(&t.id, |r| r.turn_id = Some(turn.id.clone()))
        .map_err(|e| e.to_string())?;
    let mut interrupted = false;
    loop {
        std::thread::sleep(POLL);
        let now = rt.turn(&turn.id).map_err(|e| e.to_string())?;
        if !now.status.is_open() {
            let summary = final_message(tasks, &turn.id);
            return Ok((now.status, summary, now.error));
        }
        if !interrupted && tasks.cancel_requested(&t.id) {
            interrupted = true;
            let _ = driver.interrupt(&thread.id, &turn.id);
        }
    }
}

/// The last agent message of the turn, cut to [`SUMMARY_CHARS`].
fn final_message(tasks: &Tasks, turn_id: &str) -> Option<String> {
    tasks.driver().runtime().read(|st| {
        st.turn_items
            .get(turn_id)
            .into_iter()
            .flatten()
            .filter_map(|i| st.items.get(i))
            .filter(|i| i.kind == ItemKind::AgentMessage)
            .filter_map(|i| i.metadata.get("text").and_then(|v| v.as_str()))
            .rfind(|s| !s.trim().is_empty())
            .map(|s| s.chars().take(SUMMARY_CHARS).collect())
    })
}
