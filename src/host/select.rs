//! Backend selection and dispatch.
//!
//! - `danger-full-access` / `external-sandbox` run without a local sandbox
//!   and are labelled so.
//! - An explicit `--backend bwrap` is used without probing (the hot path);
//!   a setup failure is still reported as exit 125 from the helper's
//!   status pipe.
//! - `--backend auto` on Linux: bwrap → landlock tier → unavailable (see
//!   [`super::select_auto`]): bwrap runs the command directly and only a
//!   *setup* failure (the command never ran) falls back.
//! - Nothing falls back to unsandboxed silently: that needs
//!   `allow_unsandboxed` (or `--backend none`), and the label says so.

use super::request::{ExecOutcome, ExecRequest};
use super::{BackendChoice, EnforcementLevel, HostError, HostSettings};
use crate::policy::{SandboxMode, SandboxPolicy};
use std::time::Duration;

/// How often a run re-resolves after a concurrent run changed a protected path.
#[cfg(target_os = "linux")]
const STALE_RETRIES: u32 = 12;

/// Timeout of the functional probe.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn not_built(backend: &str, why: &str) -> HostError {
    HostError::Unavailable {
        backend: backend.into(),
        reason: why.into(),
        remedy: Some("use --backend auto or --backend bwrap on Linux".into()),
    }
}

/// Run one command under `policy` (blocking; see [`super::run`]).
pub fn run_blocking(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    match policy.mode {
        SandboxMode::DangerFullAccess => {
            return run_unsandboxed(policy, req, "danger-full-access: no sandbox by request")
        }
        SandboxMode::ExternalSandbox => {
            let mut out = run_unsandboxed(
                policy,
                req,
                "external-sandbox: isolation is provided outside codewhale",
            )?;
            out.enforcement.level = EnforcementLevel::External;
            out.enforcement.label = "external-sandbox".into();
            return Ok(out);
        }
        SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite => {}
    }
    match settings.backend {
        BackendChoice::None => run_unsandboxed(policy, req, "--backend none requested"),
        BackendChoice::Bwrap => run_bwrap(policy, settings, req),
        BackendChoice::Auto => super::select_auto::run_auto(policy, settings, req),
        BackendChoice::Landlock => super::select_auto::run_landlock(policy, settings, req, None),
        BackendChoice::Seatbelt => Err(super::seatbelt::unavailable_here()),
        // Dispatched (async) by `host::run` before reaching here.
        BackendChoice::Opensandbox => Err(not_built(
            "opensandbox",
            "the OpenSandbox backend runs through host::run, not run_blocking",
        )),
    }
}

#[cfg(target_os = "linux")]
pub(crate) fn run_bwrap(
    policy: &SandboxPolicy,
    settings: &HostSettings,
    req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    use crate::policy::{resolve, HostFacts};
    let facts = HostFacts::detect();
    let mut attempt = 0;
    loop {
        let resolved = resolve(policy, &facts)?;
        let mut writable: Vec<&std::path::Path> = vec![resolved.workspace.as_path()];
        writable.extend(resolved.writable_roots.iter().map(|r| r.path.as_path()));
        let bwrap =
            super::backends::bwrap::spawn::find_bwrap(settings.bwrap_path.as_deref(), &writable)?;
        match super::backends::bwrap::spawn::run(
            &resolved,
            &bwrap,
            settings.helper_exe.as_deref(),
            req,
        ) {
            // A concurrent run's placeholder came or went: resolve again.
            Err(HostError::Stale(_)) if attempt < STALE_RETRIES => {
                // Concurrent runs in the same root (parallel tool calls,
                // doctor's probes) keep adding and removing placeholders:
                // back off a little more each time so they settle instead
                // of racing in lock-step until the retries run out.
                attempt += 1;
                std::thread::sleep(Duration::from_millis(5 * u64::from(attempt)));
            }
            other => return other,
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn run_bwrap(
    _policy: &SandboxPolicy,
    _settings: &HostSettings,
    _req: &ExecRequest,
) -> Result<ExecOutcome, HostError> {
    Err(not_built("bwrap", "bubblewrap exists only on Linux"))
}

/// The functional probe, cached per process and per configured bwrap path:
/// the first answer for a path stands (also for `doctor`).
pub fn probe_bwrap(policy: &SandboxPolicy, settings: &HostSettings) -> Result<(), HostError> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Cache = Mutex<HashMap<Option<std::path::PathBuf>, Result<(), String>>>;
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
            let probe_policy = SandboxPolicy::new(SandboxMode::ReadOnly, &policy.workspace);
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
        backend: "bwrap".into(),
        reason,
        remedy: None,
    })
}

#[cfg(target_os = "linux")]
pub(crate) fn run_unsandboxed(
    policy: &SandboxPolicy,
    req: &ExecRequest,
    why: &str,
) -> Result<ExecOutcome, HostError> {
    let Some((program, args)) = req.argv.split_first() else {
        return Err(HostError::NotFound(String::new()));
    };
    let base_env: Vec<(String, String)> = match &req.env {
        Some(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        None => std::env::vars().collect(),
    };
    let scrubbed = policy.env.apply(base_env);
    let path_var = scrubbed.vars.get("PATH").cloned();
    let resolved_program = which::which_in(program, path_var, &policy.workspace)
        .map_err(|_| HostError::NotFound(program.clone()))?;
    let mut cmd = std::process::Command::new(&resolved_program);
    cmd.args(args)
        .env_clear()
        .envs(&scrubbed.vars)
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
    enforcement.env_removed = scrubbed.removed;
    Ok(ExecOutcome {
        exit: sup.exit,
        timed_out: sup.timed_out,
        duration: sup.duration,
        stdout: sup.stdout,
        stderr: sup.stderr,
        enforcement,
    })
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn run_unsandboxed(
    _policy: &SandboxPolicy,
    _req: &ExecRequest,
    _why: &str,
) -> Result<ExecOutcome, HostError> {
    Err(not_built(
        "none",
        "process supervision is only implemented on Linux in this build",
    ))
}
