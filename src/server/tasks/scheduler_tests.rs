//! The scheduler's policies on a real store (temporary state home), with
//! no workers: tasks stay `queued`, so a run stays "running" for overlap.

use super::*;
use crate::runtime::driver::Driver;
use crate::runtime::Runtime;
use crate::server::tasks::queue::Defaults;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn setup(dir: &Path) -> (Automations, Tasks) {
    let (rt, _) = Runtime::open(dir).unwrap();
    let driver = Driver::new(rt, dir, Duration::from_secs(1));
    let defaults = Defaults {
        workspace: dir.to_path_buf(),
        model: "m".into(),
    };
    let tasks = Tasks::open(dir, driver, defaults).unwrap();
    let clock = Clock::starting_at(ts("2026-05-01T12:00:00Z"));
    let a = Automations::load(dir, tasks.clone(), clock, Duration::from_secs(15)).unwrap();
    (a, tasks)
}

fn hourly(a: &Automations, policy: MissedRunPolicy, overlap: Overlap, paused: bool) -> String {
    a.create(CreateAutomation {
        name: "h".into(),
        prompt: "p".into(),
        schedule: "RRULE:FREQ=HOURLY;BYMINUTE=0".into(),
        timezone: Some("UTC".into()),
        missed_run_policy: policy,
        overlap,
        auto_approve: false,
        paused,
        workspace: None,
        model: None,
    })
    .unwrap()
    .record
    .id
}

fn statuses(a: &Automations, id: &str) -> Vec<(String, RunStatus)> {
    a.runs(id, 500)
        .unwrap()
        .into_iter()
        .map(|r| (r.slot, r.status))
        .collect()
}

fn s(slot: &str, st: RunStatus) -> (String, RunStatus) {
    (format!("2026-05-01T{slot}:00Z"), st)
}

use RunStatus::{Queued, SkippedMissed, SkippedOverlap};

#[test]
fn run_once_runs_the_newest_missed_slot_and_skips_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let (a, tasks) = setup(d.path());
    let id = hourly(&a, MissedRunPolicy::RunOnce, Overlap::SkipIfRunning, false);
    a.tick_at(ts("2026-05-01T15:30:00Z"));
    assert_eq!(
        statuses(&a, &id),
        vec![
            s("15:00", Queued),
            s("14:00", SkippedMissed),
            s("13:00", SkippedMissed)
        ]
    );
    assert_eq!(tasks.list().len(), 1);
    // The same tick again changes nothing.
    a.tick_at(ts("2026-05-01T15:30:05Z"));
    assert_eq!(statuses(&a, &id).len(), 3);
    assert_eq!(tasks.list().len(), 1);
}

#[test]
fn catch_up_runs_every_missed_slot() {
    let d = tempfile::tempdir().unwrap();
    let (a, tasks) = setup(d.path());
    let id = hourly(&a, MissedRunPolicy::CatchUp, Overlap::SkipIfRunning, false);
    a.tick_at(ts("2026-05-01T15:30:00Z"));
    assert_eq!(
        statuses(&a, &id),
        vec![s("15:00", Queued), s("14:00", Queued), s("13:00", Queued)]
    );
    assert_eq!(tasks.list().len(), 3);
}

#[test]
fn skip_runs_no_missed_slot_but_an_on_time_one() {
    let d = tempfile::tempdir().unwrap();
    let (a, tasks) = setup(d.path());
    let id = hourly(&a, MissedRunPolicy::Skip, Overlap::SkipIfRunning, false);
    a.tick_at(ts("2026-05-01T14:30:00Z"));
    assert_eq!(
        statuses(&a, &id),
        vec![s("14:00", SkippedMissed), s("13:00", SkippedMissed)]
    );
    assert!(tasks.list().is_empty());
    // Within the grace of its slot: on time, it runs.
    a.tick_at(ts("2026-05-01T15:00:20Z"));
    assert_eq!(statuses(&a, &id)[0], s("15:00", Queued));
    assert_eq!(tasks.list().len(), 1);
}

#[test]
fn a_slot_while_a_run_is_unfinished_is_skipped_overlap_and_a_manual_run_refused() {
    let d = tempfile::tempdir().unwrap();
    let (a, _tasks) = setup(d.path());
    let id = hourly(&a, MissedRunPolicy::RunOnce, Overlap::SkipIfRunning, false);
    a.tick_at(ts("2026-05-01T13:00:10Z"));
    a.tick_at(ts("2026-05-01T14:00:10Z"));
    assert_eq!(
        statuses(&a, &id),
        vec![s("14:00", SkippedOverlap), s("13:00", Queued)]
    );
    assert!(matches!(a.run_now(&id), Err(AutomationError::Running(_))));
    // Positive control: `allow` queues both, and a manual run.
    let other = hourly(&a, MissedRunPolicy::RunOnce, Overlap::Allow, false);
    a.tick_at(ts("2026-05-01T15:00:10Z"));
    a.tick_at(ts("2026-05-01T16:00:10Z"));
    // (Created at 12:00: 13:00 and 14:00 were missed by 15:00:10, and
    // under run_once an on-time slot is the one that runs.)
    assert_eq!(
        statuses(&a, &other),
        vec![
            s("16:00", Queued),
            s("15:00", Queued),
            s("14:00", SkippedMissed),
            s("13:00", SkippedMissed)
        ]
    );
    let r = a.run_now(&other).unwrap();
    assert!(r.manual && r.task_id.is_some());
}

#[test]
fn resume_applies_the_missed_run_policy_to_the_slots_missed_while_paused() {
    let d = tempfile::tempdir().unwrap();
    let (a, _tasks) = setup(d.path());
    let id = hourly(&a, MissedRunPolicy::RunOnce, Overlap::SkipIfRunning, true);
    assert_eq!(a.get(&id).unwrap().next_run_at, None, "paused");
    a.tick_at(ts("2026-05-01T15:30:00Z"));
    assert!(statuses(&a, &id).is_empty());
    let v = a.change(&id, |r, _| set_paused(r, false)).unwrap();
    assert_eq!(v.next_run_at.as_deref(), Some("2026-05-01T13:00:00Z"));
    a.tick_at(ts("2026-05-01T15:30:00Z"));
    assert_eq!(
        statuses(&a, &id),
        vec![
            s("15:00", Queued),
            s("14:00", SkippedMissed),
            s("13:00", SkippedMissed)
        ]
    );
    // A manual run works while paused (the overlap rule aside).
    let other = hourly(&a, MissedRunPolicy::RunOnce, Overlap::SkipIfRunning, true);
    assert!(a.run_now(&other).is_ok());
}

#[test]
fn a_bad_record_pauses_only_itself() {
    let d = tempfile::tempdir().unwrap();
    let (a, tasks) = setup(d.path());
    let bad = hourly(&a, MissedRunPolicy::RunOnce, Overlap::SkipIfRunning, false);
    let good = hourly(&a, MissedRunPolicy::RunOnce, Overlap::SkipIfRunning, false);
    // The record on disk names a zone that does not exist (edited by hand,
    // or a zone gone from the database).
    let path = d.path().join("automations").join(format!("{bad}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"UTC\"", "\"Mars/Olympus\"")).unwrap();
    drop(a);
    let clock = Clock::starting_at(ts("2026-05-01T12:00:00Z"));
    let a = Automations::load(d.path(), tasks.clone(), clock, Duration::from_secs(15)).unwrap();
    a.tick_at(ts("2026-05-01T13:00:10Z"));
    let b = a.get(&bad).unwrap();
    assert!(b.record.paused && b.next_run_at.is_none());
    assert!(
        b.record.error.as_deref().unwrap().contains("timezone"),
        "{b:?}"
    );
    assert!(statuses(&a, &bad).is_empty());
    assert_eq!(statuses(&a, &good), vec![s("13:00", Queued)]);
    // It cannot be resumed until it is fixed.
    assert!(matches!(
        a.resume(&bad),
        Err(AutomationError::Invalid { .. })
    ));
}

#[test]
fn a_once_slot_runs_once_and_then_has_no_next_run() {
    let d = tempfile::tempdir().unwrap();
    let (a, tasks) = setup(d.path());
    let v = a
        .create(CreateAutomation {
            name: "o".into(),
            prompt: "p".into(),
            schedule: "RRULE:FREQ=ONCE;AT=2026-05-01T13:00:00+00:00".into(),
            timezone: None,
            missed_run_policy: MissedRunPolicy::CatchUp,
            overlap: Overlap::Allow,
            auto_approve: false,
            paused: false,
            workspace: None,
            model: None,
        })
        .unwrap();
    assert_eq!(v.next_run_at.as_deref(), Some("2026-05-01T13:00:00Z"));
    assert_eq!(v.record.schedule, "RRULE:FREQ=ONCE;AT=2026-05-01T13:00:00Z");
    for t in ["13:00:05", "14:00:05", "20:00:00"] {
        a.tick_at(ts(&format!("2026-05-01T{t}Z")));
    }
    assert_eq!(statuses(&a, &v.record.id), vec![s("13:00", Queued)]);
    assert_eq!(a.get(&v.record.id).unwrap().next_run_at, None);
    assert_eq!(tasks.list().len(), 1);
    // A ONCE time already past is refused.
    let e = a
        .create(CreateAutomation {
            name: "o".into(),
            prompt: "p".into(),
            schedule: "RRULE:FREQ=ONCE;AT=2026-01-01T00:00:00Z".into(),
            timezone: None,
            missed_run_policy: MissedRunPolicy::RunOnce,
            overlap: Overlap::SkipIfRunning,
            auto_approve: false,
            paused: false,
            workspace: None,
            model: None,
        })
        .unwrap_err();
    assert!(e.to_string().starts_with("schedule: AT"), "{e}");
}
