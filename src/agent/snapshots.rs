//! Undo snapshots taken by the turn loop.
//!
//! A turn "can change files" once it is about to run a file-writing tool or
//! a shell command; only such turns are snapshotted. The first such call of
//! turn N takes `pre-turn:N` (nothing changed files since the model was
//! called, so this is the state before the turn), every such call takes
//! `tool:<call id>` just before it runs, and the end of the turn takes
//! `post-turn:N`. Every snapshot names the session, the request (an `exec`
//! run is one request, however many lines its prompt has) and the turn, so
//! `codewhale undo --last` reverts the whole run.
//!
//! The diffs a receipt needs are saved into the session as they become
//! known (`file_changes`: per tool call and per turn), so a receipt never
//! needs the snapshot store to still exist. A snapshot that fails is
//! recorded with its error and the run goes on: snapshots are a safety net,
//! not a precondition for the tools.

use super::output::Emitter;
use crate::session::{ChangedFile, Event, SessionError, SessionLog, SNAPSHOT_EVENTS_VERSION};
use crate::snapshot::{
    Label, OpenedAhead, Opening, SnapshotError, SnapshotId, SnapshotMeta, SnapshotStore,
};
use serde_json::{json, Value};

/// The request number of an `exec` run: one prompt is one request.
pub const EXEC_REQUEST: u64 = 1;

/// Tools whose calls can change files (and so are snapshotted first).
pub fn changes_files(tool: &str) -> bool {
    // An MCP server runs with the workspace writable: its calls may change files.
    // A sub-agent's changes are its parent's call's: the parent snapshots
    // before it, so `undo` reverts every child's changes with the request.
    crate::catalogue::is_write(tool)
        || tool == crate::catalogue::SHELL
        || tool == super::subagent::AGENT_TOOL
        || crate::mcp::client_names::is_mcp(tool)
}

/// The store of this run, or why there is none.
enum State {
    Ready(Box<SnapshotStore>),
    /// Being built on a thread ([`SnapshotStore::open_ahead`]).
    Opening(Opening),
    /// Being built (when it was not yet) and taking the run's first full
    /// look ([`SnapshotStore::look_ahead`]), on a thread while the model
    /// answers; the store comes back when the thread is joined, before
    /// its first use — or why it could not be built.
    LookingAhead {
        dir: std::path::PathBuf,
        thread: std::thread::JoinHandle<Result<Box<SnapshotStore>, String>>,
    },
    Off(String),
}

/// Snapshot bookkeeping for one run.
pub struct RunSnapshots {
    state: State,
    /// The `pre-turn` snapshot of the open turn, once taken.
    pre: Option<SnapshotId>,
    /// The latest `tool:` snapshot of the open turn, whose changes are
    /// known when the next snapshot is taken.
    pending_call: Option<(String, SnapshotId)>,
    /// Why snapshots turned off when a store built ahead could not be
    /// built (the run announced them on): said at the next snapshot.
    turned_off: Option<String>,
    /// Workspace-relative paths the calls' diffs changed, since the loop
    /// last took them ([`Self::take_call_changes`]): what commands,
    /// children and MCP calls changed, which no tool result lists.
    call_changes: Vec<String>,
}

impl RunSnapshots {
    /// From the result of [`SnapshotStore::open_ahead`]: the store is
    /// built on its thread while the run goes on.
    pub fn from_open_ahead(opened: Result<OpenedAhead, SnapshotError>) -> Self {
        Self::with_state(match opened {
            Ok(OpenedAhead::Opening(o)) => State::Opening(o),
            Ok(OpenedAhead::Disabled(d)) => State::Off(d.to_string()),
            Err(e) => State::Off(format!("snapshots are off: {e}")),
        })
    }

    fn with_state(state: State) -> Self {
        RunSnapshots {
            state,
            turned_off: None,
            pre: None,
            pending_call: None,
            call_changes: Vec::new(),
        }
    }

    /// Take the run's first full look now, on a thread, rather than when
    /// the first file-changing call arrives ([`SnapshotStore::look_ahead`]):
    /// at 100,000 files it is most of a first run's cost, and the model's
    /// first answer takes longer. For a run with tools (one without never
    /// snapshots, and would only wait for the look at its end). A failure
    /// is not reported here: the first snapshot then looks again and says
    /// why.
    pub fn look_ahead(&mut self) {
        let state = std::mem::replace(&mut self.state, State::Off(String::new()));
        let (dir, store) = match state {
            State::Ready(store) => (store.dir().to_path_buf(), ToLook::Built(store)),
            State::Opening(o) => (o.dir().to_path_buf(), ToLook::Building(o)),
            other => {
                self.state = other;
                return;
            }
        };
        let thread = std::thread::Builder::new()
            .name("snapshot-look-ahead".into())
            .spawn(move || {
                let mut store = match store {
                    ToLook::Built(s) => s,
                    ToLook::Building(o) => built(o)?,
                };
                let _ = store.look_ahead();
                Ok(store)
            });
        self.state = match thread {
            Ok(thread) => State::LookingAhead { dir, thread },
            // The store went with the closure: off, and said why.
            Err(e) => State::Off(format!("snapshots are off: no thread to look with: {e}")),
        };
    }

    /// Snapshots switched off for a stated reason.
    pub fn off(reason: impl Into<String>) -> Self {
        Self::with_state(State::Off(format!("snapshots are off: {}", reason.into())))
    }

    /// Why snapshots are off, if they are.
    pub fn disabled_reason(&self) -> Option<&str> {
        match &self.state {
            State::Ready(_) | State::Opening(_) | State::LookingAhead { .. } => None,
            State::Off(r) => Some(r),
        }
    }

    /// Whether the next snapshot waits for the store's build or its look
    /// ahead (a run's first) still running: time the caller can use
    /// beside it. (With a model slower than the look, it is over by the
    /// first call: nothing to overlap.)
    pub fn will_wait(&self) -> bool {
        match &self.state {
            State::Opening(o) => !o.is_finished(),
            State::LookingAhead { thread, .. } => !thread.is_finished(),
            State::Ready(_) | State::Off(_) => false,
        }
    }

    /// The store directory, while snapshots are on (known without waiting
    /// for a look ahead).
    fn dir(&self) -> Option<&std::path::Path> {
        match &self.state {
            State::Ready(s) => Some(s.dir()),
            State::Opening(o) => Some(o.dir()),
            State::LookingAhead { dir, .. } => Some(dir),
            State::Off(_) => None,
        }
    }

    /// The store, once it is built and its look ahead (if any) is over.
    /// A store that could not be built turns snapshots off, and the next
    /// snapshot says why ([`Self::turned_off`]).
    fn store(&mut self) -> Option<&mut SnapshotStore> {
        let joined = match std::mem::replace(&mut self.state, State::Off(String::new())) {
            State::Opening(o) => built(o).map(State::Ready),
            State::LookingAhead { thread, .. } => match thread.join() {
                Ok(r) => r.map(State::Ready),
                Err(_) => Err("snapshots are off: the first look at the workspace panicked".into()),
            },
            other => Ok(other),
        };
        self.state = match joined {
            Ok(state) => state,
            Err(why) => {
                self.turned_off = Some(why.clone());
                State::Off(why)
            }
        };
        match &mut self.state {
            State::Ready(s) => Some(s),
            _ => None,
        }
    }

    /// The `snapshots` field of the stream-json `metadata` event.
    pub fn metadata(&self) -> Value {
        match (&self.state, self.dir()) {
            (State::Off(r), _) => json!({"enabled": false, "reason": r}),
            (_, dir) => json!({"enabled": true, "store": dir}),
        }
    }

    /// Announce the state: a session record always, a stderr note when off.
    pub fn announce(&self, log: &mut SessionLog, out: &mut Emitter) -> Result<(), SessionError> {
        let (enabled, reason, store) = match &self.state {
            State::Ready(_) | State::Opening(_) | State::LookingAhead { .. } => {
                (true, None, self.dir().map(std::path::Path::to_path_buf))
            }
            State::Off(r) => {
                out.note(r);
                (false, Some(r.clone()), None)
            }
        };
        log.append(
            0,
            Event::Snapshots {
                event_v: SNAPSHOT_EVENTS_VERSION,
                enabled,
                reason,
                store,
            },
        )?;
        Ok(())
    }

    /// Before a file-changing call of `turn` runs.
    pub fn before_call(
        &mut self,
        log: &mut SessionLog,
        out: &mut Emitter,
        turn: u32,
        thread: &str,
        call_id: &str,
    ) -> Result<(), SessionError> {
        if matches!(self.state, State::Off(_)) {
            return Ok(());
        }
        // The turn's first such call: `pre-turn:N` now, and the call's own
        // snapshot is the same state (nothing ran between the two), so it
        // is recorded without asking git again.
        let mut same_as = None;
        if self.pre.is_none() {
            self.pre = self.take(log, out, turn, thread, Label::PreTurn(turn.into()), None)?;
            same_as = self.pre;
        }
        let id = self.take_as(
            log,
            out,
            turn,
            thread,
            Label::Tool(call_id.to_string()),
            Some(call_id),
            same_as,
        )?;
        self.close_pending(log, out, turn, id)?;
        self.pending_call = id.map(|id| (call_id.to_string(), id));
        Ok(())
    }

    /// At the end of `turn` (also an interrupted one): `post-turn:N` and
    /// the turn's diff, if the turn took a `pre-turn` snapshot.
    pub fn end_turn(
        &mut self,
        log: &mut SessionLog,
        out: &mut Emitter,
        turn: u32,
        thread: &str,
    ) -> Result<(), SessionError> {
        let Some(pre) = self.pre.take() else {
            self.pending_call = None;
            return Ok(());
        };
        let post = self.take(log, out, turn, thread, Label::PostTurn(turn.into()), None)?;
        self.close_pending(log, out, turn, post)?;
        if let Some(post) = post {
            self.record_diff(log, out, turn, None, pre, post)?;
        }
        Ok(())
    }

    /// The workspace-relative paths the file-changing calls changed (as
    /// their snapshots saw them) since the last take; empty when snapshots
    /// are off. Operate's reviewer rule counts them
    /// ([`super::operate::ReviewGate::observe_changed`]).
    pub fn take_call_changes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.call_changes)
    }

    /// Save the changes of the pending tool call (its snapshot → `to`).
    fn close_pending(
        &mut self,
        log: &mut SessionLog,
        out: &mut Emitter,
        turn: u32,
        to: Option<SnapshotId>,
    ) -> Result<(), SessionError> {
        if let (Some((call, from)), Some(to)) = (self.pending_call.take(), to) {
            self.record_diff(log, out, turn, Some(call), from, to)?;
        }
        Ok(())
    }

    fn record_diff(
        &mut self,
        log: &mut SessionLog,
        out: &mut Emitter,
        turn: u32,
        call_id: Option<String>,
        from: SnapshotId,
        to: SnapshotId,
    ) -> Result<(), SessionError> {
        let diff = match self.store() {
            Some(store) => store.diff(from, to),
            None => return Ok(()),
        };
        match diff {
            Ok(changes) => {
                if call_id.is_some() {
                    self.call_changes
                        .extend(changes.iter().map(|c| c.path.clone()));
                }
                log.append(
                    turn,
                    Event::FileChanges {
                        event_v: SNAPSHOT_EVENTS_VERSION,
                        call_id,
                        from,
                        to,
                        changes: changes.iter().map(ChangedFile::from).collect(),
                    },
                )?;
            }
            Err(e) => out.note(&format!(
                "could not diff snapshots {from} → {to} (the receipt will miss these changes): {e}"
            )),
        }
        Ok(())
    }

    /// Take one snapshot and record it (or its error).
    fn take(
        &mut self,
        log: &mut SessionLog,
        out: &mut Emitter,
        turn: u32,
        thread: &str,
        label: Label,
        call_id: Option<&str>,
    ) -> Result<Option<SnapshotId>, SessionError> {
        self.take_as(log, out, turn, thread, label, call_id, None)
    }

    /// [`Self::take`]; with `same_as`, the state of that snapshot, taken
    /// a moment ago with nothing run since, is recorded under `label`.
    #[allow(clippy::too_many_arguments)]
    fn take_as(
        &mut self,
        log: &mut SessionLog,
        out: &mut Emitter,
        turn: u32,
        thread: &str,
        label: Label,
        call_id: Option<&str>,
        same_as: Option<SnapshotId>,
    ) -> Result<Option<SnapshotId>, SessionError> {
        if self.store().is_none() {
            if let Some(why) = self.turned_off.take() {
                // Announced on at the start: off from here, said once.
                out.note(&why);
                log.append(
                    turn,
                    Event::Snapshots {
                        event_v: SNAPSHOT_EVENTS_VERSION,
                        enabled: false,
                        reason: Some(why),
                        store: None,
                    },
                )?;
            }
            return Ok(None);
        }
        let Some(store) = self.store() else {
            return Ok(None);
        };
        let meta = SnapshotMeta {
            session_id: Some(thread.to_string()),
            request: Some(EXEC_REQUEST),
            turn: Some(turn.into()),
            tool_call_id: call_id.map(str::to_string),
            undoes: None,
        };
        let label_text = label.to_string();
        let taken = match same_as {
            Some(of) => store.snapshot_unchanged_since(of, label, meta),
            None => store.snapshot(label, meta),
        };
        let (id, error) = match taken {
            Ok(id) => (Some(id), None),
            Err(e) => {
                out.note(&format!("snapshot {label_text} failed: {e}"));
                (None, Some(e.to_string()))
            }
        };
        log.append(
            turn,
            Event::Snapshot {
                event_v: SNAPSHOT_EVENTS_VERSION,
                label: label_text,
                id,
                request: EXEC_REQUEST,
                call_id: call_id.map(str::to_string),
                error,
            },
        )?;
        Ok(id)
    }
}

/// The store a look ahead takes its look with.
enum ToLook {
    Built(Box<SnapshotStore>),
    /// Built first, on the look's thread.
    Building(Opening),
}

/// A store built ahead, with its journal on (a run takes several
/// snapshots: after its first, full one, the rest add only what changed),
/// or why snapshots are off.
fn built(o: Opening) -> Result<Box<SnapshotStore>, String> {
    let mut s = o.wait().map_err(|e| format!("snapshots are off: {e}"))?;
    s.enable_journal();
    Ok(s)
}

impl Drop for RunSnapshots {
    /// A run never exits while its look ahead is still writing the store:
    /// the process would end with the thread, mid-look.
    fn drop(&mut self) {
        let _ = self.store();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::agent::output::tests::Buf;
    use crate::agent::output::OutputFormat;
    use crate::snapshot::SnapshotOptions;

    fn snapshots_events(log: &SessionLog) -> Vec<(bool, Option<String>)> {
        crate::session::read_records(log.path())
            .unwrap()
            .into_iter()
            .filter_map(|r| match r.event {
                Event::Snapshots {
                    enabled, reason, ..
                } => Some((enabled, reason)),
                _ => None,
            })
            .collect()
    }

    /// Announced on (the refusals passed), the store then fails to build:
    /// the first snapshot says so once — a note and a `Snapshots` record
    /// turning them off, which the receipt takes as the last word — and
    /// the run goes on without snapshots. Control: with the way clear the
    /// same run takes its snapshot.
    #[test]
    fn a_store_that_fails_to_build_ahead_turns_snapshots_off_and_says_so_once() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        for blocked in [true, false] {
            let home = t.path().join(format!("home-{blocked}"));
            let mut opts = SnapshotOptions::new(&home);
            // Git's user files from a home of the test's own.
            opts.user_dirs = crate::snapshot::UserDirs::at_home(t.path().join("user"));
            let dir = crate::snapshot::layout::store_dir(&home, &ws);
            std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
            if blocked {
                std::fs::write(&dir, "in the way\n").unwrap();
            }
            let mut snaps = RunSnapshots::from_open_ahead(SnapshotStore::open_ahead(&ws, opts));
            let mut log = SessionLog::create(&t.path().join(format!("s-{blocked}"))).unwrap();
            let err = Buf::default();
            let mut out = Emitter::new(
                OutputFormat::Text,
                Box::new(Buf::default()),
                Box::new(err.clone()),
            );
            snaps.announce(&mut log, &mut out).unwrap();
            snaps.look_ahead();
            snaps.before_call(&mut log, &mut out, 1, "t", "c1").unwrap();
            snaps.before_call(&mut log, &mut out, 1, "t", "c2").unwrap();
            snaps.end_turn(&mut log, &mut out, 1, "t").unwrap();
            let said = err.text();
            let events = snapshots_events(&log);
            if blocked {
                assert_eq!(events.len(), 2, "{events:?}");
                assert!(events[0].0, "announced on: {events:?}");
                let (enabled, reason) = &events[1];
                assert!(!enabled);
                let reason = reason.as_deref().unwrap();
                assert!(reason.contains("cannot create snapshot store"), "{reason}");
                assert_eq!(
                    said.matches("cannot create snapshot store").count(),
                    1,
                    "{said}"
                );
                assert!(snaps.disabled_reason().is_some());
            } else {
                assert_eq!(events, vec![(true, None)]);
                assert!(snaps.disabled_reason().is_none(), "{said}");
                assert!(dir.join(".git").is_dir(), "the store was built");
            }
        }
    }
}
