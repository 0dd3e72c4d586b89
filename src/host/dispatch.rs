//! The one dispatcher: gather the [`Facts`], [`select`] once, run the
//! selected backend, and — for `auto` only — answer a typed set-up failure
//! of that backend (the command never started) by selecting again with the
//! failure in the facts and running the result. Every client comes through
//! here (`host::run` for async callers, [`run_blocking`] for the one-shot
//! CLI), so the cancel token, the stale-plan retry and the fallback behave
//! the same for all of them.

use super::child_env::ChildEnv;
use super::request::{ExecOutcome, ExecRequest};
use super::select::{select, BwrapState, Facts, Os, Selection, Unsandboxed};
use super::{BackendChoice, BackendKind, EnforcementLevel, HostError, HostSettings};
use crate::policy::{SandboxMode, SandboxPolicy};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Timeout of the functional bwrap probe (`doctor`).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// bwrap set-up failures seen in this process, by configured bwrap path:
/// later `auto` runs go straight to the fallback.
fn broken_bwrap() -> &'static Mutex<HashMap<Option<PathBuf>, String>> {
    static BROKEN: OnceLock<Mutex<HashMap<Option<PathBuf>, String>>> = OnceLock::new();
    BROKEN.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The landlock tier's availability (kernel ABI and the test seam).
pub fn landlock_available() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        super::backends::landlock::tier::available()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("Landlock exists only on Linux".into())
    }
}

fn landlock_remedy() -> String {
    #[cfg(target_os = "linux")]
    {
        super::backends::landlock::tier::REMEDY.to_string()
    }
    #[cfg(not(target_os = "linux"))]
    {
        "pass --allow-unsandboxed to run without a sandbox (labelled unsandboxed)".to_string()
    }
}

/// What selection needs to know here, without running anything: the OS,
/// bwrap's state as far as this process has seen it, Landlock's
/// availability, and whether OpenSandbox is configured.
pub fn facts(settings: &HostSettings) -> Facts {
    let bwrap = broken_bwrap()
        .lock()
        .ok()
        .and_then(|m| m.get(&settings.bwrap_path).cloned())
        .map_or(BwrapState::Untried, BwrapState::Broken);
    // Landlock is only consulted when bwrap may not be used; asking the
    // kernel is one syscall, cached by the tier.
    Facts {
        os: Os::current(),
        bwrap,
        landlock: landlock_available(),
        landlock_remedy: landlock_remedy(),
        opensandbox_configured: settings.opensandbox.is_some(),
    }
}

/// The selection a run of `policy` under `settings` makes now.
pub fn selection(policy: &SandboxPolicy, settings: &HostSettings) -> Result<Selection, HostError> {
    select(
        policy.mode,
        settings.backend,
        settings.allow_unsandboxed,
        &facts(settings),
    )
}

/// Run one command under `policy`, blocking (see the module docs).
pub fn run_blocking(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    let facts = facts(settings);
    let sel = select(
        policy.mode,
        settings.backend,
        settings.allow_unsandboxed,
        &facts,
    )?;
    match run_selected(&sel, policy, settings, req, None) {
        Err(e) if settings.backend == BackendChoice::Auto && e.is_setup_failure_of(sel.backend) => {
            let (reason, remedy) = match &e {
                HostError::Unavailable { reason, remedy, .. } => (reason.clone(), remedy.clone()),
                other => (other.to_string(), None),
            };
            if sel.backend == BackendKind::Bwrap {
                if let Ok(mut m) = broken_bwrap().lock() {
                    m.insert(settings.bwrap_path.clone(), reason.clone());
                }
            }
            let next = select(
                policy.mode,
                settings.backend,
                settings.allow_unsandboxed,
                &facts.with_failure(sel.backend, &reason),
            )
            .map_err(|e| match (e, remedy) {
                // Keep bwrap's own fix next to the general one.
                (HostError::NoBackend { reason, remedy: r }, Some(bw)) => HostError::NoBackend {
                    reason,
                    remedy: Some(format!("bwrap: {bw}\n  {}", r.unwrap_or_default())),
                },
                (e, _) => e,
            })?;
            run_selected(&next, policy, settings, req, Some(next.why.clone()))
        }
        other => other,
    }
}

/// Run `req` under the selected backend. `note` (a fallback's reason) is
/// carried into the enforcement report.
fn run_selected(
    sel: &Selection,
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
    note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    let mut out = run_backend(sel, policy, settings, req, note)?;
    out.enforcement.settle_level();
    Ok(out)
}

fn run_backend(
    sel: &Selection,
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
    note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    match sel.backend {
        BackendKind::None => {
            let mut out = run_unsandboxed(policy, req, &sel.why)?;
            if sel.unsandboxed == Some(Unsandboxed::External) {
                out.enforcement.level = EnforcementLevel::External;
                out.enforcement.label = "external-sandbox".into();
            }
            Ok(out)
        }
        BackendKind::Bwrap => run_bwrap(policy, settings, req),
        BackendKind::Landlock => run_landlock(policy, req, note),
        BackendKind::Seatbelt => run_seatbelt(policy, req),
        BackendKind::Opensandbox if req.stdio.is_some() => Err(no_remote_server()),
        BackendKind::Opensandbox => run_opensandbox_blocking(policy, settings, req),
    }
}

/// A server process (piped stdio for its whole life, e.g. an MCP server)
/// needs a local backend: OpenSandbox's execd runs commands, it does not
/// relay a live stdio stream.
fn no_remote_server() -> HostError {
    HostError::Unavailable {
        backend: BackendKind::Opensandbox,
        reason: "a process with live stdio (an MCP server, a background job) cannot run on OpenSandbox; \
                 use a local backend"
            .into(),
        remedy: None,
    }
}

#[cfg(target_os = "linux")]
fn run_bwrap(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    use super::backends::bwrap::spawn;
    use crate::policy::{resolve, HostFacts};
    let resolved = resolve(policy, &HostFacts::detect())?;
    let mut writable: Vec<&std::path::Path> = vec![resolved.workspace.as_path()];
    writable.extend(resolved.writable_roots.iter().map(|r| r.path.as_path()));
    let bwrap = spawn::find_bwrap(settings.bwrap_path.as_deref(), &writable)?;
    let env = ChildEnv::for_run(&resolved.env, req);
    spawn::run(&resolved, &bwrap, settings.helper_exe.as_deref(), req, env)
}

#[cfg(not(target_os = "linux"))]
fn run_bwrap(
    _policy: &SandboxPolicy,
    _settings: &HostSettings,
    _req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    Err(HostError::Unavailable {
        backend: BackendKind::Bwrap,
        reason: "bubblewrap exists only on Linux".into(),
        remedy: None,
    })
}

#[cfg(target_os = "linux")]
fn run_landlock(
    policy: &SandboxPolicy,
    req: &ExecRequest,
    note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    use crate::policy::{resolve, HostFacts};
    let resolved = resolve(policy, &HostFacts::detect())?;
    let env = ChildEnv::for_run(&resolved.env, req);
    super::backends::landlock::tier::run(&resolved, req, &env, note)
}

#[cfg(not(target_os = "linux"))]
fn run_landlock(
    _policy: &SandboxPolicy,
    _req: &ExecRequest,
    _note: Option<String>,
) -> Result<ExecOutcome, HostError> {
    Err(HostError::Unavailable {
        backend: BackendKind::Landlock,
        reason: "Landlock exists only on Linux".into(),
        remedy: None,
    })
}

#[cfg(target_os = "macos")]
fn run_seatbelt(policy: &SandboxPolicy, req: &ExecRequest) -> Result<ExecOutcome, HostError> {
    use crate::policy::{resolve, HostFacts};
    let resolved = resolve(policy, &HostFacts::detect())?;
    let env = ChildEnv::for_run(&resolved.env, req);
    super::backends::seatbelt::spawn::run(&resolved, req, env)
}

#[cfg(not(target_os = "macos"))]
fn run_seatbelt(_policy: &SandboxPolicy, _req: &ExecRequest) -> Result<ExecOutcome, HostError> {
    Err(super::seatbelt::unavailable_here())
}

/// OpenSandbox from a blocking caller: a current-thread runtime for the
/// HTTP client (async callers go through `host::run`, which awaits it).
fn run_opensandbox_blocking(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HostError::io("starting the async runtime", e))?;
    let out = rt.block_on(run_opensandbox(policy, settings, req.clone()));
    if matches!(out, Err(HostError::Cancelled)) {
        // The dropped run spawned its clean-up (interrupt the remote
        // command, delete the box) on this runtime: let it finish.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while rt.metrics().num_alive_tasks() > 0 && std::time::Instant::now() < deadline {
            rt.block_on(tokio::time::sleep(Duration::from_millis(10)));
        }
    }
    out
}

/// OpenSandbox, awaited; the request's cancel token ends the remote
/// command (the run's future is dropped, which kills the remote command and
/// deletes the sandbox, see `opensandbox::command`) within a poll interval.
pub(super) async fn run_opensandbox(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: ExecRequest,
) -> Result<ExecOutcome, HostError> {
    if req.stdio.is_some() {
        return Err(no_remote_server());
    }
    let cfg = settings
        .opensandbox
        .as_ref()
        .ok_or_else(|| HostError::Unavailable {
            backend: BackendKind::Opensandbox,
            reason: "no [opensandbox] configuration".into(),
            remedy: None,
        })?;
    let resolved = crate::policy::resolve(policy, &crate::policy::HostFacts::detect())?;
    let token = req.cancel.clone();
    let env = ChildEnv::for_run(&resolved.env, &req);
    let run = super::opensandbox::run_with_env(cfg, &resolved, req, env);
    let settle = |r: Result<ExecOutcome, HostError>| {
        r.map(|mut o| {
            o.enforcement.settle_level();
            o
        })
    };
    let Some(token) = token else {
        return settle(run.await);
    };
    tokio::pin!(run);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            out = &mut run => return settle(out),
            _ = tick.tick() => {
                if token.is_cancelled() {
                    return Err(HostError::Cancelled);
                }
            }
        }
    }
}

/// Run without any sandbox (scrubbed environment, labelled `unsandboxed`),
/// through the same supervisor as every other local run.
#[cfg(unix)]
fn run_unsandboxed(
    policy: &SandboxPolicy,
    req: &ExecRequest,
    why: &str,
) -> Result<ExecOutcome, HostError> {
    let Some((program, args)) = req.argv.split_first() else {
        return Err(HostError::NotFound(String::new()));
    };
    let env = ChildEnv::for_run(&policy.env, req);
    let path_var = env.get("PATH").cloned();
    let resolved_program = which::which_in(program, path_var, &policy.workspace)
        .map_err(|_| HostError::NotFound(program.clone()))?;
    let mut cmd = std::process::Command::new(&resolved_program);
    cmd.args(args)
        .env_clear()
        .envs(env.vars())
        .current_dir(req.cwd.as_ref().unwrap_or(&policy.workspace));
    let sup = super::process::supervise::run(cmd, Vec::new(), req).map_err(|e| match e {
        HostError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            HostError::NotExecutable {
                path: resolved_program.clone(),
                reason: source.to_string(),
            }
        }
        other => other,
    })?;
    let mut enforcement = super::Enforcement::unsandboxed(policy.mode, why);
    enforcement.env_removed = env.removed().to_vec();
    Ok(sup.into_outcome(enforcement))
}

/// Windows: the minimal supervisor (no OS sandbox; flagged by the label).
#[cfg(windows)]
fn run_unsandboxed(
    policy: &SandboxPolicy,
    req: &ExecRequest,
    why: &str,
) -> Result<ExecOutcome, HostError> {
    super::backends::windows::run(policy, req, ChildEnv::for_run(&policy.env, req), why)
}

/// The functional probe, cached per process and per configured bwrap path:
/// the first answer for a path stands (also for `doctor`).
pub fn probe_bwrap(workspace: &std::path::Path, settings: &HostSettings) -> Result<(), HostError> {
    type Cache = Mutex<HashMap<Option<PathBuf>, Result<(), String>>>;
    static PROBE: OnceLock<Cache> = OnceLock::new();
    let cache = PROBE.get_or_init(|| Mutex::new(HashMap::new()));
    let known = cache
        .lock()
        .ok()
        .and_then(|m| m.get(&settings.bwrap_path).cloned());
    let answer = match known {
        Some(a) => a,
        None => {
            let mut req = ExecRequest::new(vec!["true".into()]);
            req.timeout = Some(PROBE_TIMEOUT);
            req.output_cap = 16 * 1024;
            let probe_policy = SandboxPolicy::new(SandboxMode::ReadOnly, workspace);
            let a = match run_bwrap(&probe_policy, settings, &req) {
                Ok(out) if out.exit == super::ExitKind::Code(0) => Ok(()),
                Ok(out) => Err(format!(
                    "probe `true` under bwrap exited with {:?}: {}",
                    out.exit,
                    out.stderr.text().trim()
                )),
                Err(HostError::Unavailable { reason, .. }) => Err(reason),
                Err(e) => Err(e.to_string()),
            };
            if let Ok(mut m) = cache.lock() {
                m.insert(settings.bwrap_path.clone(), a.clone());
            }
            a
        }
    };
    answer.map_err(|reason| HostError::Unavailable {
        backend: BackendKind::Bwrap,
        reason,
        remedy: None,
    })
}

/// What `auto` would choose here after a functional bwrap probe (for
/// `doctor`): the same [`select`] as a run, with the probe's answer in the
/// facts instead of a run's.
pub fn probed_selection(
    policy: &SandboxPolicy,
    settings: &HostSettings,
) -> (Result<Selection, HostError>, Facts) {
    let mut f = facts(settings);
    if f.os == Os::Linux {
        f.bwrap = match probe_bwrap(&policy.workspace, settings) {
            Ok(()) => BwrapState::Works,
            Err(HostError::Unavailable { reason, .. }) => BwrapState::Broken(reason),
            Err(e) => BwrapState::Broken(e.to_string()),
        };
    }
    let sel = select(
        policy.mode,
        settings.backend,
        settings.allow_unsandboxed,
        &f,
    );
    (sel, f)
}
