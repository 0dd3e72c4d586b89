//! Automations: durable records (`<state home>/automations/`), their runs
//! (`<state home>/automation-runs/`), and the scheduler thread that turns
//! due slots into tasks every `--scheduler-tick-ms`.
//!
//! Exactly once per slot: a run's id is derived from (automation, slot)
//! and its record — naming its task's id, also derived — is written and
//! fsynced *before* the task is created. A slot whose run record exists is
//! never fired again; a run record whose task was never created (the
//! process died in between) gets that task, under the same id, when the
//! process starts again.
//!
//! Missed slots (older than the grace of two ticks, at least a minute, when
//! they are seen): `missed_run_policy` decides (`run_once`: the newest
//! missed slot runs, the others are `skipped_missed`; `catch_up`: all run;
//! `skip`: none). A paused automation's slots wait for `resume`, which
//! therefore applies the same policy to them. A record whose schedule or
//! zone no longer parses is paused with its `error`; the others run.

use super::automation::{
    AutomationRecord, AutomationView, CreateAutomation, MissedRunPolicy, Overlap, PatchAutomation,
    RunRecord, RunStatus,
};
use super::clock::Clock;
use super::durable::{Dir, StoreError};
use super::planner::{zone, Schedule};
use super::queue::{TaskError, Tasks};
use super::task::{CreateTask, Origin, TaskStatus};
use crate::runtime::model::{new_id, now_rfc3339};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// At most this many slots are handled per automation and tick; more
/// missed slots than that are all skipped (and the next tick goes on).
const MAX_BATCH: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum AutomationError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("no automation `{0}`")]
    NotFound(String),
    #[error("{0}")]
    Running(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Task(#[from] TaskError),
}

fn invalid(field: &'static str, message: impl Into<String>) -> AutomationError {
    AutomationError::Invalid {
        field,
        message: message.into(),
    }
}

struct State {
    autos: BTreeMap<String, AutomationRecord>,
    runs: BTreeMap<String, RunRecord>,
}

struct Inner {
    dir: Dir,
    runs_dir: Dir,
    state: Mutex<State>,
    tasks: Tasks,
    clock: Clock,
    tick: Duration,
}

#[derive(Clone)]
pub struct Automations {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn rfc(t: Timestamp) -> String {
    t.to_string()
}

/// The schedule and zone of a record, or why they do not parse.
fn plan(a: &AutomationRecord) -> Result<(Schedule, TimeZone, Timestamp), String> {
    let s = Schedule::parse(&a.schedule).map_err(|e| format!("schedule: {e}"))?;
    let (_, tz) = zone(Some(&a.timezone)).map_err(|e| format!("timezone: {e}"))?;
    let cursor: Timestamp = a
        .cursor
        .parse()
        .map_err(|e| format!("cursor: `{}` ({e})", a.cursor))?;
    Ok((s, tz, cursor))
}

/// A run's id: the automation's and the slot's (seconds since the epoch).
fn run_id(automation: &str, slot: Timestamp) -> String {
    let a = automation.strip_prefix("aut_").unwrap_or(automation);
    format!("run_{a}_{}", slot.as_second())
}

/// The task id of a run: derived from the run's, so it is created once.
fn task_id(run: &str) -> String {
    format!("tsk_{}", run.strip_prefix("run_").unwrap_or(run))
}

impl Automations {
    /// Load the records (pausing the ones that no longer parse, creating
    /// the tasks of runs whose process died before it could) and start the
    /// scheduler thread ticking every `tick`.
    pub fn open(
        home: &Path,
        tasks: Tasks,
        clock: Clock,
        tick: Duration,
    ) -> Result<Automations, AutomationError> {
        let me = Automations::load(home, tasks, clock, tick)?;
        let m = me.clone();
        std::thread::Builder::new()
            .name("scheduler".into())
            .spawn(move || loop {
                m.tick();
                std::thread::sleep(m.inner.tick);
            })
            .map_err(|e| StoreError::io("cannot start the scheduler", Path::new(""), e))?;
        Ok(me)
    }

    /// [`Automations::open`] without the scheduler thread.
    fn load(
        home: &Path,
        tasks: Tasks,
        clock: Clock,
        tick: Duration,
    ) -> Result<Automations, AutomationError> {
        let dir = Dir::open(home.join("automations"))?;
        let runs_dir = Dir::open(home.join("automation-runs"))?;
        let mut autos = BTreeMap::new();
        for mut a in dir.load_all::<AutomationRecord>("automation") {
            if let Err(why) = plan(&a) {
                if !a.paused || a.error.is_none() {
                    eprintln!("codewhale: automation {} paused: {why}", a.id);
                    a.paused = true;
                    a.error = Some(why);
                    dir.save(&a.id, &a)?;
                }
            }
            autos.insert(a.id.clone(), a);
        }
        let mut runs = BTreeMap::new();
        for r in runs_dir.load_all::<RunRecord>("automation run") {
            runs.insert(r.id.clone(), r);
        }
        let me = Automations {
            inner: Arc::new(Inner {
                dir,
                runs_dir,
                state: Mutex::new(State { autos, runs }),
                tasks,
                clock,
                tick,
            }),
        };
        me.recover()?;
        Ok(me)
    }

    /// Runs recorded with a task that does not exist: the process ended
    /// between the two writes. The task is created now, under its id.
    fn recover(&self) -> Result<(), AutomationError> {
        let st = lock(&self.inner.state);
        for r in st.runs.values() {
            let Some(tid) = &r.task_id else { continue };
            if r.status != RunStatus::Queued || self.inner.tasks.has(tid) {
                continue;
            }
            let Some(a) = st.autos.get(&r.automation_id) else {
                continue;
            };
            eprintln!(
                "codewhale: automation {} run {}: creating its task {tid} (the process ended before it did)",
                a.id, r.id
            );
            self.create_task(a, &r.id, tid)?;
        }
        Ok(())
    }

    fn create_task(
        &self,
        a: &AutomationRecord,
        run: &str,
        tid: &str,
    ) -> Result<(), AutomationError> {
        self.inner.tasks.create(
            CreateTask {
                prompt: a.prompt.clone(),
                workspace: a.workspace.clone(),
                model: a.model.clone(),
                auto_approve: a.auto_approve,
            },
            Origin {
                id: Some(tid.to_string()),
                automation_id: Some(a.id.clone()),
                run_id: Some(run.to_string()),
            },
        )?;
        Ok(())
    }

    fn view(&self, a: &AutomationRecord) -> AutomationView {
        let next = if a.paused {
            None
        } else {
            plan(a)
                .ok()
                .and_then(|(s, tz, cursor)| s.next_after(&tz, cursor))
                .map(rfc)
        };
        AutomationView {
            record: a.clone(),
            next_run_at: next,
        }
    }

    /// A run as clients see it: a run with a task has the task's status
    /// and times.
    fn run_view(&self, r: &RunRecord) -> RunRecord {
        let mut r = r.clone();
        if let Some(t) = r
            .task_id
            .as_ref()
            .and_then(|t| self.inner.tasks.get(t).ok())
        {
            r.status = match t.status {
                TaskStatus::Queued => RunStatus::Queued,
                TaskStatus::Running => RunStatus::Running,
                TaskStatus::Completed => RunStatus::Completed,
                TaskStatus::Failed => RunStatus::Failed,
                TaskStatus::Canceled => RunStatus::Canceled,
            };
            r.started_at = t.started_at;
            r.finished_at = t.finished_at;
        }
        r
    }

    fn active(&self, st: &State, automation: &str) -> bool {
        st.runs
            .values()
            .filter(|r| r.automation_id == automation)
            .any(|r| {
                matches!(
                    self.run_view(r).status,
                    RunStatus::Queued | RunStatus::Running
                )
            })
    }

    pub fn create(&self, b: CreateAutomation) -> Result<AutomationView, AutomationError> {
        if b.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty"));
        }
        if b.prompt.trim().is_empty() {
            return Err(invalid("prompt", "must not be empty"));
        }
        let schedule = Schedule::parse(&b.schedule).map_err(|e| invalid("schedule", e.0))?;
        let (tz_name, _) = zone(b.timezone.as_deref()).map_err(|e| invalid("timezone", e.0))?;
        let now = self.inner.clock.now();
        if let Schedule::Once(at) = &schedule {
            if *at <= now {
                return Err(invalid("schedule", format!("AT {at} is not in the future")));
            }
        }
        check_workspace(b.workspace.as_deref())?;
        let stamp = now_rfc3339();
        let a = AutomationRecord {
            id: new_id("aut"),
            name: b.name,
            prompt: b.prompt,
            schedule: schedule.to_string(),
            timezone: tz_name,
            missed_run_policy: b.missed_run_policy,
            overlap: b.overlap,
            auto_approve: b.auto_approve,
            paused: b.paused,
            workspace: b.workspace,
            model: b.model.filter(|m| !m.is_empty()),
            created_at: stamp.clone(),
            updated_at: stamp,
            cursor: rfc(now),
            error: None,
        };
        let mut st = lock(&self.inner.state);
        self.inner.dir.save(&a.id, &a)?;
        st.autos.insert(a.id.clone(), a.clone());
        Ok(self.view(&a))
    }

    pub fn list(&self) -> Vec<AutomationView> {
        let st = lock(&self.inner.state);
        let mut v: Vec<&AutomationRecord> = st.autos.values().collect();
        v.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        v.into_iter().map(|a| self.view(a)).collect()
    }

    pub fn get(&self, id: &str) -> Result<AutomationView, AutomationError> {
        let st = lock(&self.inner.state);
        st.autos
            .get(id)
            .map(|a| self.view(a))
            .ok_or_else(|| AutomationError::NotFound(id.into()))
    }

    fn change(
        &self,
        id: &str,
        f: impl FnOnce(&mut AutomationRecord, Timestamp) -> Result<(), AutomationError>,
    ) -> Result<AutomationView, AutomationError> {
        let mut st = lock(&self.inner.state);
        let Some(mut a) = st.autos.get(id).cloned() else {
            return Err(AutomationError::NotFound(id.into()));
        };
        f(&mut a, self.inner.clock.now())?;
        a.updated_at = now_rfc3339();
        self.inner.dir.save(&a.id, &a)?;
        st.autos.insert(a.id.clone(), a.clone());
        Ok(self.view(&a))
    }

    /// Change the fields given. A new schedule or zone starts from now
    /// (slots of the old one are not "missed").
    pub fn patch(&self, id: &str, p: PatchAutomation) -> Result<AutomationView, AutomationError> {
        self.change(id, |a, now| {
            if let Some(n) = p.name {
                if n.trim().is_empty() {
                    return Err(invalid("name", "must not be empty"));
                }
                a.name = n;
            }
            if let Some(pr) = p.prompt {
                if pr.trim().is_empty() {
                    return Err(invalid("prompt", "must not be empty"));
                }
                a.prompt = pr;
            }
            let mut replanned = false;
            if let Some(s) = p.schedule {
                let s = Schedule::parse(&s).map_err(|e| invalid("schedule", e.0))?;
                if let Schedule::Once(at) = &s {
                    if *at <= now {
                        return Err(invalid("schedule", format!("AT {at} is not in the future")));
                    }
                }
                a.schedule = s.to_string();
                replanned = true;
            }
            if let Some(tz) = p.timezone {
                a.timezone = zone(Some(&tz)).map_err(|e| invalid("timezone", e.0))?.0;
                replanned = true;
            }
            if replanned {
                a.cursor = rfc(now);
                a.error = None;
            }
            if let Some(v) = p.missed_run_policy {
                a.missed_run_policy = v;
            }
            if let Some(v) = p.overlap {
                a.overlap = v;
            }
            if let Some(v) = p.auto_approve {
                a.auto_approve = v;
            }
            if let Some(ws) = p.workspace {
                check_workspace(Some(&ws))?;
                a.workspace = Some(ws);
            }
            if let Some(m) = p.model {
                a.model = Some(m).filter(|m| !m.is_empty());
            }
            if let Some(paused) = p.paused {
                set_paused(a, paused)?;
            }
            Ok(())
        })
    }

    pub fn pause(&self, id: &str) -> Result<AutomationView, AutomationError> {
        self.change(id, |a, _| set_paused(a, true))
    }

    /// Unpause; the slots missed meanwhile are due at the next tick, under
    /// `missed_run_policy`.
    pub fn resume(&self, id: &str) -> Result<AutomationView, AutomationError> {
        let v = self.change(id, |a, _| set_paused(a, false))?;
        self.tick();
        self.get(&v.record.id)
    }

    pub fn delete(&self, id: &str) -> Result<(), AutomationError> {
        let mut st = lock(&self.inner.state);
        if st.autos.remove(id).is_none() {
            return Err(AutomationError::NotFound(id.into()));
        }
        self.inner.dir.remove(id)?;
        let runs: Vec<String> = st
            .runs
            .values()
            .filter(|r| r.automation_id == id)
            .map(|r| r.id.clone())
            .collect();
        for r in runs {
            st.runs.remove(&r);
            self.inner.runs_dir.remove(&r)?;
        }
        Ok(())
    }

    /// Run now (also while paused), as a manual run with the current time
    /// as its slot. Under `skip_if_running` a run still queued or running
    /// makes this [`AutomationError::Running`].
    pub fn run_now(&self, id: &str) -> Result<RunRecord, AutomationError> {
        let mut st = lock(&self.inner.state);
        let Some(a) = st.autos.get(id).cloned() else {
            return Err(AutomationError::NotFound(id.into()));
        };
        if a.overlap == Overlap::SkipIfRunning && self.active(&st, id) {
            return Err(AutomationError::Running(format!(
                "automation `{id}` has a run queued or running (overlap: skip_if_running)"
            )));
        }
        let now = self.inner.clock.now();
        let base = run_id(id, now);
        let mut rid = format!("{base}_manual");
        let mut n = 1;
        while st.runs.contains_key(&rid) {
            n += 1;
            rid = format!("{base}_manual{n}");
        }
        let r = self.fire(&mut st, &a, &rid, now, true)?;
        Ok(self.run_view(&r))
    }

    /// The automation's runs, newest slot first.
    pub fn runs(&self, id: &str, limit: usize) -> Result<Vec<RunRecord>, AutomationError> {
        let st = lock(&self.inner.state);
        if !st.autos.contains_key(id) {
            return Err(AutomationError::NotFound(id.into()));
        }
        let mut v: Vec<&RunRecord> = st.runs.values().filter(|r| r.automation_id == id).collect();
        v.sort_by(|a, b| b.slot.cmp(&a.slot).then(b.id.cmp(&a.id)));
        Ok(v.into_iter()
            .take(limit)
            .map(|r| self.run_view(r))
            .collect())
    }

    /// Record run `rid` for `slot` and create its task — in that order.
    fn fire(
        &self,
        st: &mut State,
        a: &AutomationRecord,
        rid: &str,
        slot: Timestamp,
        manual: bool,
    ) -> Result<RunRecord, AutomationError> {
        let tid = task_id(rid);
        let r = RunRecord {
            id: rid.to_string(),
            automation_id: a.id.clone(),
            slot: rfc(slot),
            task_id: Some(tid.clone()),
            status: RunStatus::Queued,
            started_at: None,
            finished_at: None,
            manual,
        };
        self.inner.runs_dir.save(&r.id, &r)?;
        st.runs.insert(r.id.clone(), r.clone());
        if crate::seams::scheduler_crash_after_run_record() {
            eprintln!("codewhale: test seam: ending the process after run record {rid}");
            std::process::abort();
        }
        self.create_task(a, rid, &tid)?;
        Ok(r)
    }

    fn skip(
        &self,
        st: &mut State,
        a: &AutomationRecord,
        slot: Timestamp,
        status: RunStatus,
    ) -> Result<(), AutomationError> {
        let stamp = now_rfc3339();
        let r = RunRecord {
            id: run_id(&a.id, slot),
            automation_id: a.id.clone(),
            slot: rfc(slot),
            task_id: None,
            status,
            started_at: None,
            finished_at: Some(stamp),
            manual: false,
        };
        self.inner.runs_dir.save(&r.id, &r)?;
        st.runs.insert(r.id.clone(), r);
        Ok(())
    }

    /// Handle every due slot of every running automation.
    pub fn tick(&self) {
        self.tick_at(self.inner.clock.now());
    }

    fn tick_at(&self, now: Timestamp) {
        let mut st = lock(&self.inner.state);
        let ids: Vec<String> = st.autos.keys().cloned().collect();
        for id in ids {
            if let Err(e) = self.tick_one(&mut st, &id, now) {
                eprintln!("codewhale: automation {id}: {e}");
            }
        }
    }

    fn grace(&self) -> SignedDuration {
        let two_ticks =
            SignedDuration::try_from(self.inner.tick * 2).unwrap_or(SignedDuration::ZERO);
        two_ticks.max(SignedDuration::from_secs(60))
    }

    fn tick_one(&self, st: &mut State, id: &str, now: Timestamp) -> Result<(), AutomationError> {
        let Some(a) = st.autos.get(id).cloned() else {
            return Ok(());
        };
        if a.paused {
            return Ok(());
        }
        let (schedule, tz, cursor) = match plan(&a) {
            Ok(p) => p,
            Err(why) => {
                // A bad record pauses only itself.
                let mut a = a;
                eprintln!("codewhale: automation {} paused: {why}", a.id);
                a.paused = true;
                a.error = Some(why);
                self.inner.dir.save(&a.id, &a)?;
                st.autos.insert(a.id.clone(), a);
                return Ok(());
            }
        };
        let due = schedule.slots_between(&tz, cursor, now, MAX_BATCH);
        let Some(&last) = due.last() else {
            return Ok(());
        };
        let capped = due.len() == MAX_BATCH;
        let grace = self.grace();
        let missed = |slot: Timestamp| capped || now.duration_since(slot) > grace;
        let any_on_time = due.iter().any(|s| !missed(*s));
        let newest_missed = due.iter().rev().find(|s| missed(**s)).copied();
        // Overlap is judged against runs from before this tick (a catch-up
        // batch runs all its slots).
        let busy = a.overlap == Overlap::SkipIfRunning && self.active(st, id);
        for slot in due {
            let rid = run_id(&a.id, slot);
            if st.runs.contains_key(&rid) {
                continue;
            }
            let runs = if !missed(slot) {
                true
            } else {
                match a.missed_run_policy {
                    MissedRunPolicy::CatchUp => true,
                    MissedRunPolicy::Skip => false,
                    MissedRunPolicy::RunOnce => {
                        !capped && !any_on_time && Some(slot) == newest_missed
                    }
                }
            };
            if !runs {
                self.skip(st, &a, slot, RunStatus::SkippedMissed)?;
            } else if busy {
                self.skip(st, &a, slot, RunStatus::SkippedOverlap)?;
            } else {
                self.fire(st, &a, &rid, slot, false)?;
            }
        }
        let mut a = a;
        a.cursor = rfc(last);
        self.inner.dir.save(&a.id, &a)?;
        st.autos.insert(a.id.clone(), a);
        Ok(())
    }
}

fn set_paused(a: &mut AutomationRecord, paused: bool) -> Result<(), AutomationError> {
    if !paused {
        if let Err(why) = plan(a) {
            return Err(invalid("schedule", format!("cannot resume: {why}")));
        }
        a.error = None;
    }
    a.paused = paused;
    Ok(())
}

fn check_workspace(ws: Option<&Path>) -> Result<(), AutomationError> {
    match ws {
        Some(w) if !w.is_dir() => Err(invalid(
            "workspace",
            format!("`{}` is not a directory", w.display()),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
