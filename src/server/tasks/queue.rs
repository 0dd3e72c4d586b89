//! The task queue: durable records (one file each under
//! `<state home>/tasks/`), a fixed pool of worker threads (`--task-workers`)
//! and cancellation. Each task runs as its own runtime thread through the
//! same driver as the API's turns ([`super::runner`]), so its approvals
//! and events are the runtime's.
//!
//! Restart: a task that was `running` when the process ended is `failed`
//! with [`RESTART_ERROR`]; `queued` ones are queued again, oldest first.

use super::durable::{Dir, StoreError};
use super::task::{CreateTask, Origin, TaskRecord, TaskStatus, RESTART_ERROR};
use crate::runtime::driver::Driver;
use crate::runtime::model::{new_id, now_rfc3339};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Why a task operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("no task `{0}`")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where new tasks run and with what, when they name nothing.
#[derive(Clone, Debug)]
pub struct Defaults {
    pub workspace: PathBuf,
    pub model: String,
}

struct State {
    tasks: BTreeMap<String, TaskRecord>,
    queue: VecDeque<String>,
    /// Running tasks a client asked to cancel (their turn is interrupted).
    cancel: HashSet<String>,
}

struct Inner {
    dir: Dir,
    state: Mutex<State>,
    wake: Condvar,
    pub(super) driver: Driver,
    pub(super) defaults: Defaults,
}

/// The queue and its workers; cheap to clone.
#[derive(Clone)]
pub struct Tasks {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The directory of task records under the state home.
pub fn tasks_dir(home: &Path) -> PathBuf {
    home.join("tasks")
}

impl Tasks {
    /// Load the records (recovering what a dead process left running); the
    /// workers are started by [`super::runner::start_workers`].
    pub fn open(home: &Path, driver: Driver, defaults: Defaults) -> Result<Tasks, TaskError> {
        let dir = Dir::open(tasks_dir(home))?;
        let mut loaded: Vec<TaskRecord> = dir.load_all("task");
        loaded.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        let mut state = State {
            tasks: BTreeMap::new(),
            queue: VecDeque::new(),
            cancel: HashSet::new(),
        };
        for mut t in loaded {
            match t.status {
                TaskStatus::Running => {
                    t.status = TaskStatus::Failed;
                    t.error = Some(RESTART_ERROR.into());
                    t.finished_at = Some(now_rfc3339());
                    dir.save(&t.id, &t)?;
                    eprintln!("codewhale: task {} marked failed ({RESTART_ERROR})", t.id);
                }
                TaskStatus::Queued => state.queue.push_back(t.id.clone()),
                _ => {}
            }
            state.tasks.insert(t.id.clone(), t);
        }
        let tasks = Tasks {
            inner: Arc::new(Inner {
                dir,
                state: Mutex::new(state),
                wake: Condvar::new(),
                driver,
                defaults,
            }),
        };
        Ok(tasks)
    }

    pub(super) fn driver(&self) -> &Driver {
        &self.inner.driver
    }

    pub(super) fn defaults(&self) -> &Defaults {
        &self.inner.defaults
    }

    /// Queue a new task. With `origin.id` set and a task of that id already
    /// there, that task is returned unchanged (an automation's run creates
    /// its task at most once).
    pub fn create(&self, body: CreateTask, origin: Origin) -> Result<TaskRecord, TaskError> {
        if body.prompt.trim().is_empty() {
            return Err(TaskError::Invalid {
                field: "prompt",
                message: "must not be empty".into(),
            });
        }
        if let Some(ws) = &body.workspace {
            if !ws.is_dir() {
                return Err(TaskError::Invalid {
                    field: "workspace",
                    message: format!("`{}` is not a directory", ws.display()),
                });
            }
        }
        let mut st = lock(&self.inner.state);
        if let Some(id) = &origin.id {
            if let Some(t) = st.tasks.get(id) {
                return Ok(t.clone());
            }
        }
        let t = TaskRecord {
            id: origin.id.unwrap_or_else(|| new_id("tsk")),
            prompt: body.prompt,
            status: TaskStatus::Queued,
            thread_id: None,
            turn_id: None,
            created_at: now_rfc3339(),
            started_at: None,
            finished_at: None,
            summary: None,
            error: None,
            workspace: body.workspace,
            model: body.model.filter(|m| !m.is_empty()),
            auto_approve: body.auto_approve,
            automation_id: origin.automation_id,
            run_id: origin.run_id,
        };
        self.inner.dir.save(&t.id, &t)?;
        st.tasks.insert(t.id.clone(), t.clone());
        st.queue.push_back(t.id.clone());
        self.inner.wake.notify_one();
        Ok(t)
    }

    pub fn get(&self, id: &str) -> Result<TaskRecord, TaskError> {
        lock(&self.inner.state)
            .tasks
            .get(id)
            .cloned()
            .ok_or_else(|| TaskError::NotFound(id.into()))
    }

    /// Whether task `id` exists.
    pub fn has(&self, id: &str) -> bool {
        lock(&self.inner.state).tasks.contains_key(id)
    }

    /// Every task, newest first.
    pub fn list(&self) -> Vec<TaskRecord> {
        let mut v: Vec<TaskRecord> = lock(&self.inner.state).tasks.values().cloned().collect();
        v.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        v
    }

    /// Cancel: a queued task is `canceled` at once; a running one is
    /// `canceled` and its turn interrupted (a running command is killed);
    /// a finished one stays as it is. Idempotent.
    pub fn cancel(&self, id: &str) -> Result<TaskRecord, TaskError> {
        let (t, interrupt) = {
            let mut st = lock(&self.inner.state);
            let Some(t) = st.tasks.get(id).cloned() else {
                return Err(TaskError::NotFound(id.into()));
            };
            if t.status.is_done() {
                return Ok(t);
            }
            let was_running = t.status == TaskStatus::Running;
            let mut t = t;
            t.status = TaskStatus::Canceled;
            if !was_running {
                t.finished_at = Some(now_rfc3339());
            }
            self.inner.dir.save(&t.id, &t)?;
            st.tasks.insert(t.id.clone(), t.clone());
            if was_running {
                st.cancel.insert(t.id.clone());
            }
            let turn = t.thread_id.clone().zip(t.turn_id.clone());
            (t, turn.filter(|_| was_running))
        };
        if let Some((thread, turn)) = interrupt {
            // The turn may have ended meanwhile: nothing left to stop.
            let _ = self.inner.driver.interrupt(&thread, &turn);
        }
        Ok(t)
    }

    /// Whether a client asked to cancel running task `id`.
    pub(super) fn cancel_requested(&self, id: &str) -> bool {
        lock(&self.inner.state).cancel.contains(id)
    }

    /// Change a task's record (kept in memory and on disk); a canceled
    /// task's status is never overwritten.
    pub(super) fn update(
        &self,
        id: &str,
        f: impl FnOnce(&mut TaskRecord),
    ) -> Result<TaskRecord, TaskError> {
        let mut st = lock(&self.inner.state);
        let Some(mut t) = st.tasks.get(id).cloned() else {
            return Err(TaskError::NotFound(id.into()));
        };
        let canceled = t.status == TaskStatus::Canceled;
        f(&mut t);
        if canceled {
            t.status = TaskStatus::Canceled;
        }
        self.inner.dir.save(&t.id, &t)?;
        st.tasks.insert(t.id.clone(), t.clone());
        Ok(t)
    }

    /// The next queued id (waits for one).
    pub(super) fn next(&self) -> String {
        let mut st = lock(&self.inner.state);
        loop {
            if let Some(id) = st.queue.pop_front() {
                return id;
            }
            st = self.inner.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Forget a cancel request (its task has ended).
    pub(super) fn cancel_handled(&self, id: &str) {
        lock(&self.inner.state).cancel.remove(id);
    }
}
