//! Background jobs: `shell {"background": true}` starts a command and
//! returns a job id at once; `job_output {id}` returns the output the job
//! wrote since the last read (and its exit status once it ended);
//! `job_kill {id}` stops it.
//!
//! A job runs through [`crate::host::run`] exactly like a foreground
//! command — same policy, same sandbox, same scrubbed environment; the gates
//! passed the `shell` call first (the floor's "destructive background task"
//! hold included: the pipeline reads `background: true`). Its stdout is a
//! pipe this module reads while it runs (stderr is merged into it), the way
//! [`crate::mcp::client_transport`] keeps an MCP server's stdout.
//!
//! Jobs belong to the session ([`Jobs`] is shared by its turns and
//! sub-agents): at most [`MAX_RUNNING`] run at once; each one's
//! process tree is killed by `job_kill`, when the turn that started it is
//! interrupted ([`Jobs::kill_owned_by`] with the turn's cancel token), or
//! when the session's table is dropped (the session ended).

use super::{ToolContext, ToolOutput};
use crate::host::{CancelToken, ExecOutcome, HostError};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The tool that reads a job's new output.
pub const JOB_OUTPUT_TOOL: &str = "job_output";
/// The tool that stops a job.
pub const JOB_KILL_TOOL: &str = "job_kill";

/// Jobs a session may have running at once.
pub const MAX_RUNNING: usize = 8;
/// Unread output kept per job; older unread bytes are dropped (counted).
const KEEP_UNREAD: usize = 1024 * 1024;
/// stderr the host captures (the wrapper sends it to stdout, so little).
#[cfg(unix)]
const STDERR_CAP: usize = 64 * 1024;
/// How long `shell` waits after starting a job for a start failure (a
/// sandbox that cannot be set up is an error of the call, not of the job).
const START_GRACE: Duration = Duration::from_millis(150);
/// How long the job's thread waits for the pipe's last bytes after the
/// job exited.
#[cfg(unix)]
const DRAIN: Duration = Duration::from_secs(1);
/// How long `job_kill` waits for the host to have killed the tree.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// A session's background jobs (cheap to clone: one shared table), as
/// one agent of a turn sees them.
#[derive(Clone, Default)]
pub struct Jobs {
    table: Arc<Mutex<Table>>,
    /// The cancel token of the request's own agent when this handle is a
    /// sub-agent's: its jobs belong to that turn too, so interrupting the
    /// turn kills them even after the child that started them ended.
    turn: Option<CancelToken>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.lock();
        f.debug_struct("Jobs")
            .field("jobs", &t.jobs.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Default)]
struct Table {
    next: u32,
    jobs: BTreeMap<String, Job>,
}

impl Drop for Table {
    /// The session ended: every job still running is killed (the host
    /// kills its whole sandboxed tree when it sees the token).
    fn drop(&mut self) {
        for j in self.jobs.values() {
            j.cancel.cancel();
        }
    }
}

struct Job {
    command: String,
    started: Instant,
    /// The cancel token of the agent that started it.
    owner: CancelToken,
    /// The request's own agent's token when a sub-agent started it.
    turn: Option<CancelToken>,
    cancel: CancelToken,
    /// What the job's own thread fills in: output, and how it ended.
    out: Arc<Mutex<Buf>>,
    killed: bool,
}

impl Job {
    fn running(&self) -> bool {
        !self.killed && lock(&self.out).ended.is_none()
    }

    /// Holds one of the session's slots: still running, or told to stop
    /// and not yet gone.
    fn occupies(&self) -> bool {
        lock(&self.out).ended.is_none()
    }
}

/// How a job ended (only Unix runs jobs).
#[derive(Clone)]
#[cfg_attr(not(unix), allow(dead_code))]
enum Ended {
    Ran(Box<ExecOutcome>),
    /// The host could not run it (the tool error it would have been).
    NotRun(ToolOutput),
}

/// Output written and not yet read, and (once over) how the job ended.
#[derive(Default)]
struct Buf {
    unread: Vec<u8>,
    dropped: u64,
    ended: Option<Ended>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Jobs {
    fn lock(&self) -> MutexGuard<'_, Table> {
        lock(&self.table)
    }

    /// The same table for a child of the agent whose cancel token is
    /// `parent`: the child's jobs also belong to the request's turn.
    pub fn for_child(&self, parent: &CancelToken) -> Jobs {
        Jobs {
            table: self.table.clone(),
            turn: Some(self.turn.clone().unwrap_or_else(|| parent.clone())),
        }
    }

    /// Jobs still running.
    pub fn running(&self) -> usize {
        self.lock().jobs.values().filter(|j| j.running()).count()
    }

    /// Kill every running job started under `owner` (a turn's cancel
    /// token): the turn was interrupted. Returns how many.
    pub fn kill_owned_by(&self, owner: &CancelToken) -> usize {
        let mut t = self.lock();
        let mut n = 0;
        for j in t.jobs.values_mut() {
            let turns = j.turn.as_ref().is_some_and(|t| t.same(owner));
            if j.running() && (j.owner.same(owner) || turns) {
                j.cancel.cancel();
                j.killed = true;
                n += 1;
            }
        }
        n
    }

    fn ids(&self) -> String {
        let t = self.lock();
        if t.jobs.is_empty() {
            "none".into()
        } else {
            t.jobs.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }
}

/// The argv that runs `argv` with stderr merged into stdout (one stream,
/// in the order written). The gates saw the model's command; this only
/// adds the redirection.
fn merged(argv: Vec<String>) -> Vec<String> {
    match argv.as_slice() {
        [sh, c, line] if sh == "sh" && c == "-c" => {
            vec!["sh".into(), "-c".into(), format!("exec 2>&1\n{line}")]
        }
        _ => {
            let mut v = vec![
                "sh".into(),
                "-c".into(),
                "exec 2>&1; exec \"$@\"".into(),
                "sh".into(),
            ];
            v.extend(argv);
            v
        }
    }
}

/// Wait up to `within` for the job's thread to say how it ended.
async fn ended_within(out: &Mutex<Buf>, within: Duration) -> Option<Ended> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(e) = lock(out).ended.clone() {
            return Some(e);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `shell {"background": true}`: start the job, return its id.
pub async fn start(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let argv = match super::shell::argv(args) {
        Ok(a) => a,
        Err(e) => return ToolOutput::error("bad_arguments", e),
    };
    let command = crate::catalogue::shell_command_line(args).unwrap_or_else(|| argv.join(" "));
    let cancel = CancelToken::new();
    let out = Arc::new(Mutex::new(Buf::default()));
    // The slot is taken (checked and inserted under one lock) before the
    // job starts: sub-agents share the table and start jobs concurrently.
    let id = {
        let mut t = ctx.jobs.lock();
        if t.jobs.values().filter(|j| j.occupies()).count() >= MAX_RUNNING {
            return ToolOutput::error(
                "job_limit",
                format!(
                    "not started: {MAX_RUNNING} background jobs are already running in this session; read one to its end (job_output) or stop one (job_kill) first"
                ),
            );
        }
        t.next += 1;
        let id = format!("job-{}", t.next);
        t.jobs.insert(
            id.clone(),
            Job {
                command: command.clone(),
                started: Instant::now(),
                owner: ctx.cancel.clone(),
                turn: ctx.jobs.turn.clone(),
                cancel: cancel.clone(),
                out: out.clone(),
                killed: false,
            },
        );
        id
    };
    let forget = || {
        ctx.jobs.lock().jobs.remove(&id);
    };
    if let Err(e) = spawn(merged(argv), ctx, cancel, out.clone()) {
        forget();
        return super::shell::host_error(e);
    }
    // A start the host refuses (no usable sandbox) is the call's error; a
    // program that does not exist is the job's exit status (`sh -c`).
    let ended = ended_within(&out, START_GRACE).await;
    if let Some(Ended::NotRun(e)) = ended {
        forget();
        return e;
    }
    let done = ended.is_some();
    let o = ToolOutput::ok(format!(
        "started background job {id}: {command}\n{}Read its new output with job_output {{\"id\": \"{id}\"}}; stop it with job_kill {{\"id\": \"{id}\"}}. It is killed if this turn is interrupted or the session ends.",
        if done { "(it has already finished) " } else { "" }
    ));
    // No enforcement label yet: what the host enforced is known when the
    // job ends, and `job_output` reports it then (a receipt lists only
    // what a run reported, never a description standing in for it).
    o
}

/// Start the job on a thread of its own (with its own small async
/// runtime, so it outlives the turn — and the turn's runtime — that
/// started it): the host run, with its stdout on a pipe read into `out`,
/// then how it ended.
#[cfg(unix)]
fn spawn(
    argv: Vec<String>,
    ctx: &ToolContext,
    cancel: CancelToken,
    out: Arc<Mutex<Buf>>,
) -> Result<(), HostError> {
    use crate::host::{ExecRequest, ServerStdio};
    let pipe = || {
        crate::host::process::os::pipe_cloexec()
            .map_err(|e| HostError::io("creating a background job's pipes", e))
    };
    // stdin: a pipe whose write end is closed at once (the job reads EOF).
    let (child_in, our_in) = pipe()?;
    drop(our_in);
    let (our_out, child_out) = pipe()?;
    let mut req = ExecRequest::new(argv);
    req.cwd = Some(ctx.guard.workspace().to_path_buf());
    req.output_cap = STDERR_CAP;
    req.cancel = Some(cancel);
    req.stdio = Some(ServerStdio {
        stdin: Arc::new(child_in),
        stdout: Arc::new(child_out),
        stderr_log: None,
    });
    let policy = ctx.policy.clone();
    let settings = ctx.host.clone();
    let done = out.clone();
    let finish = move |e: Ended| lock(&done).ended = Some(e);
    std::thread::Builder::new()
        .name("codewhale-job".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    return finish(Ended::NotRun(super::shell::host_error(HostError::io(
                        "a background job's runtime",
                        e,
                    ))))
                }
            };
            rt.block_on(async move {
                let rx = match tokio::net::unix::pipe::Receiver::from_owned_fd(our_out) {
                    Ok(rx) => rx,
                    Err(e) => {
                        return finish(Ended::NotRun(super::shell::host_error(HostError::io(
                            "a background job's output pipe",
                            e,
                        ))))
                    }
                };
                let reader = tokio::spawn(read_into(rx, out));
                // The request (holding the child's pipe ends) is dropped
                // when the run ends, so the reader sees EOF then.
                let r = crate::host::run(&policy, &settings, req).await;
                let _ = tokio::time::timeout(DRAIN, reader).await;
                finish(match r {
                    Ok(o) => Ended::Ran(Box::new(o)),
                    Err(e) => Ended::NotRun(super::shell::host_error(e)),
                });
            });
        })
        .map(drop)
        .map_err(|e| HostError::io("starting a background job's thread", e))
}

#[cfg(not(unix))]
fn spawn(
    _argv: Vec<String>,
    _ctx: &ToolContext,
    _cancel: CancelToken,
    _out: Arc<Mutex<Buf>>,
) -> Result<(), HostError> {
    Err(HostError::Unavailable {
        backend: crate::host::BackendKind::None,
        reason: "background jobs run only on Unix hosts (Linux, macOS)".into(),
        remedy: None,
    })
}

/// Copy the job's output into its buffer until EOF, keeping at most
/// [`KEEP_UNREAD`] unread bytes.
#[cfg_attr(not(unix), allow(dead_code))]
async fn read_into(mut from: impl tokio::io::AsyncRead + Unpin, out: Arc<Mutex<Buf>>) {
    use tokio::io::AsyncReadExt;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut b = lock(&out);
        b.unread.extend_from_slice(&chunk[..n]);
        if b.unread.len() > KEEP_UNREAD {
            let cut = b.unread.len() - KEEP_UNREAD;
            b.unread.drain(..cut);
            b.dropped += cut as u64;
        }
    }
}

/// What a read or a kill needs of one job (copied out of the table).
struct JobView {
    id: String,
    command: String,
    started: Instant,
    killed: bool,
    out: Arc<Mutex<Buf>>,
}

/// The job `id` names, or a tool error naming the jobs there are.
fn job(args: &Value, ctx: &ToolContext) -> Result<JobView, ToolOutput> {
    let id = super::arg_str(args, "id")?;
    let t = ctx.jobs.lock();
    match t.jobs.get(id) {
        Some(j) => Ok(JobView {
            id: id.to_string(),
            command: j.command.clone(),
            started: j.started,
            killed: j.killed,
            out: j.out.clone(),
        }),
        None => {
            drop(t);
            Err(ToolOutput::error(
                "not_found",
                format!(
                    "no background job `{id}` in this session (jobs: {})",
                    ctx.jobs.ids()
                ),
            ))
        }
    }
}

/// `job_output {id}`: what the job wrote since the last read; its exit
/// status once it ended.
pub async fn output(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let JobView {
        id,
        command,
        started,
        killed,
        out,
    } = match job(args, ctx) {
        Ok(j) => j,
        Err(e) => return e,
    };
    let (new, dropped, ended) = {
        let mut b = lock(&out);
        let d = std::mem::take(&mut b.dropped);
        let new = String::from_utf8_lossy(&std::mem::take(&mut b.unread)).into_owned();
        (new, d, b.ended.clone())
    };
    let mut shown = new;
    if dropped > 0 {
        shown = format!("[… {dropped} earlier bytes dropped unread]\n{shown}");
    }
    let head = format!("job {id} ({command})");
    match ended {
        None if killed => ToolOutput::ok(format!("{head}: being killed\n{}", with_output(&shown))),
        None => ToolOutput::ok(format!(
            "{head}: running for {} s\n{}",
            started.elapsed().as_secs(),
            with_output(&shown)
        )),
        Some(Ended::Ran(o)) => {
            let mut out = super::shell::report(&o, ctx, None, &[("output", &shown)]);
            let how = if killed {
                "was killed (job_kill, or the turn that started it was interrupted); its process tree is gone"
            } else {
                "finished"
            };
            out.content = format!("{head} {how}\n{}", out.content);
            if shown.is_empty() {
                out.content.push_str("\n(no new output)");
            }
            out
        }
        Some(Ended::NotRun(e)) => {
            let mut out = e.clone();
            out.content = format!("{head}: {}\n{}", e.content, with_output(&shown));
            out
        }
    }
}

fn with_output(s: &str) -> String {
    if s.is_empty() {
        "(no new output)".into()
    } else {
        format!("new output:\n{s}")
    }
}

/// `job_kill {id}`: stop the job and wait until its tree is gone.
pub async fn kill(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let JobView { id, out, .. } = match job(args, ctx) {
        Ok(j) => j,
        Err(e) => return e,
    };
    let was_running = {
        let mut t = ctx.jobs.lock();
        match t.jobs.get_mut(&id) {
            Some(j) if j.running() => {
                j.cancel.cancel();
                j.killed = true;
                true
            }
            _ => false,
        }
    };
    if !was_running {
        return ToolOutput::ok(format!(
            "job {id} had already finished; job_output returns its status"
        ));
    }
    match ended_within(&out, KILL_WAIT).await {
        Some(_) => ToolOutput::ok(format!(
            "job {id} killed (its sandboxed process tree is gone); job_output still returns what it wrote"
        )),
        None => ToolOutput::error(
            "kill_pending",
            format!("job {id} was told to stop but had not ended after {} s", KILL_WAIT.as_secs()),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn stderr_is_merged_into_the_one_stream_without_changing_the_command() {
        assert_eq!(
            merged(vec!["sh".into(), "-c".into(), "make test".into()]),
            vec!["sh", "-c", "exec 2>&1\nmake test"]
        );
        assert_eq!(
            merged(vec!["ls".into(), "-l".into()]),
            vec!["sh", "-c", "exec 2>&1; exec \"$@\"", "sh", "ls", "-l"]
        );
    }

    #[test]
    fn the_unread_buffer_keeps_the_newest_bytes_and_counts_the_rest() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = Arc::new(Mutex::new(Buf::default()));
        let data = vec![b'x'; KEEP_UNREAD + 10];
        rt.block_on(read_into(&data[..], out.clone()));
        let b = lock(&out);
        assert_eq!(b.unread.len(), KEEP_UNREAD);
        assert_eq!(b.dropped, 10);
    }

    #[test]
    fn kill_owned_by_kills_only_the_turns_jobs() {
        let jobs = Jobs::default();
        let (a, b) = (CancelToken::new(), CancelToken::new());
        let job = |owner: &CancelToken| Job {
            command: "sleep 60".into(),
            started: Instant::now(),
            owner: owner.clone(),
            turn: None,
            cancel: CancelToken::new(),
            out: Arc::default(),
            killed: false,
        };
        {
            let mut t = jobs.lock();
            t.jobs.insert("job-1".into(), job(&a));
            t.jobs.insert("job-2".into(), job(&b));
        }
        assert_eq!(jobs.running(), 2);
        assert_eq!(jobs.kill_owned_by(&a.clone()), 1);
        let t = jobs.lock();
        assert!(t.jobs["job-1"].cancel.is_cancelled());
        assert!(!t.jobs["job-2"].cancel.is_cancelled());
        drop(t);
        assert_eq!(jobs.running(), 1);
        let c2 = jobs.lock().jobs["job-2"].cancel.clone();
        drop(jobs);
        assert!(c2.is_cancelled(), "the session's end kills the rest");
    }

    #[test]
    fn a_childs_job_dies_with_the_requests_turn_after_the_child_ended() {
        let jobs = Jobs::default();
        let (turn, child, other) = (CancelToken::new(), CancelToken::new(), CancelToken::new());
        let childs = jobs.for_child(&turn);
        // A grandchild's handle still names the request's turn.
        assert!(childs
            .for_child(&child)
            .turn
            .as_ref()
            .is_some_and(|t| t.same(&turn)));
        let job = |owner: &CancelToken, h: &Jobs| Job {
            command: "sleep 60".into(),
            started: Instant::now(),
            owner: owner.clone(),
            turn: h.turn.clone(),
            cancel: CancelToken::new(),
            out: Arc::default(),
            killed: false,
        };
        {
            let mut t = jobs.lock();
            t.jobs.insert("job-1".into(), job(&child, &childs));
            t.jobs.insert("job-2".into(), job(&other, &jobs));
        }
        // The child is long gone; its turn is interrupted: its job goes,
        // another turn's job (the control) stays.
        assert_eq!(jobs.kill_owned_by(&turn), 1);
        let t = jobs.lock();
        assert!(t.jobs["job-1"].cancel.is_cancelled());
        assert!(!t.jobs["job-2"].cancel.is_cancelled());
    }
}
