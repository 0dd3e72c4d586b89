//! One command through an [`OpenSandboxSession`]: the request execd gets,
//! output capture, timeout and cancellation, sync-back, and the
//! `Enforcement` report.
//!
//! Output: execd sends stdout/stderr one line per event with the newline
//! stripped, so codewhale re-adds `\n` after every line. Exact bytes are
//! therefore not preserved: a missing final newline gains one, `\r\n` may
//! arrive as `\r` + `\n`, and invalid UTF-8 has already been replaced by
//! the server. Caps apply to the reassembled bytes.
//!
//! Timeout and cancellation: codewhale's own timer fires at the requested
//! timeout and interrupts the remote command with `DELETE /command?id=…`
//! (the id comes from the `init` event); execd also gets `timeout` (in
//! milliseconds, plus a small grace) as a backstop. If the future running
//! the command is dropped (Ctrl-C in the CLI), a guard sends the same
//! `DELETE` from a background task.

use super::error::OpenSandboxError;
use super::events::StreamEvent;
use super::execd::{ExecdClient, RunCommandRequest};
use super::session::{terminal_code, OpenSandboxSession};
use crate::host::child_env::ChildEnv;
use crate::host::enforcement::{
    policy_items, ExternalReport, NetworkEnforcer, PartialItem, Shortfall,
};
use crate::host::{
    BackendKind, CapturedOutput, Enforcement, EnforcementLevel, ExecOutcome, ExecRequest, ExitKind,
    StdinSpec,
};
use crate::policy::{resolve::normalize, ResolvedPolicy, SandboxMode};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Extra time execd's own timeout waits beyond codewhale's, so codewhale's
/// interrupt (and its timed-out report) comes first.
const SERVER_TIMEOUT_GRACE: Duration = Duration::from_secs(2);

/// Variables taken from this process's environment when the request has
/// none: only ones that mean the same on another machine. Host paths
/// (`PATH`, `HOME`, `TMPDIR`, …) would be wrong inside the sandbox, whose
/// image sets its own.
const PORTABLE_ENV: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "CI",
];

/// The note every report of this backend carries.
pub const ISOLATION_NOTE: &str = "isolation strength depends on the deployment";

/// Bounded capture of one stream, with optional live forwarding.
struct Capture {
    out: CapturedOutput,
    cap: usize,
    tee: Option<Box<dyn Write + Send>>,
}

impl Capture {
    fn new(cap: usize, tee: Option<Box<dyn Write + Send>>) -> Self {
        Capture {
            out: CapturedOutput::default(),
            cap,
            tee,
        }
    }

    fn line(&mut self, text: &str) {
        let mut bytes = text.as_bytes().to_vec();
        if !text.ends_with('\n') {
            bytes.push(b'\n');
        }
        if let Some(t) = self.tee.as_mut() {
            let _ = t.write_all(&bytes);
            let _ = t.flush();
        }
        self.out.total += bytes.len() as u64;
        let room = self.cap.saturating_sub(self.out.bytes.len());
        if bytes.len() > room {
            self.out.truncated = true;
        }
        self.out
            .bytes
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// Sends `DELETE /command?id=…` if dropped while armed (the command's
/// future was cancelled).
struct InterruptGuard {
    execd: ExecdClient,
    id: Arc<Mutex<Option<String>>>,
    armed: bool,
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let id = self.id.lock().ok().and_then(|g| g.clone());
        if let (Some(id), Ok(rt)) = (id, tokio::runtime::Handle::try_current()) {
            let execd = self.execd.clone();
            rt.spawn(async move {
                let _ = execd.interrupt(&id).await;
            });
        }
    }
}

/// Map the local cwd to the sandbox: only the workspace exists there.
pub fn remote_cwd(
    workdir: &str,
    workspace: &Path,
    cwd: Option<&Path>,
) -> Result<String, OpenSandboxError> {
    let Some(cwd) = cwd else {
        return Ok(workdir.to_string());
    };
    let abs = if cwd.is_absolute() {
        cwd.to_path_buf()
    } else {
        workspace.join(cwd)
    };
    let abs = std::fs::canonicalize(&abs).unwrap_or_else(|_| normalize(&abs));
    let rel = abs.strip_prefix(workspace).map_err(|_| {
        OpenSandboxError::Unsupported(format!(
            "cwd {} is outside the workspace {}; the opensandbox backend only has the workspace",
            cwd.display(),
            workspace.display()
        ))
    })?;
    let rel = rel.to_string_lossy().replace('\\', "/");
    Ok(if rel.is_empty() {
        workdir.to_string()
    } else {
        format!("{workdir}/{rel}")
    })
}

/// The environment execd injects: the request's (or the portable part of
/// ours), after the policy's secret scrubbing (done once, by the
/// dispatcher: [`ChildEnv`]).
pub fn command_env(
    resolved: &ResolvedPolicy,
    env: ChildEnv,
) -> (BTreeMap<String, String>, Vec<String>) {
    let e = env.for_remote(&resolved.env, |k| {
        PORTABLE_ENV.contains(&k) || k.starts_with("LC_")
    });
    (e.vars().clone(), e.removed().to_vec())
}

/// Refuse what the backend cannot express before any sandbox is created.
pub fn precheck(
    workdir: &str,
    resolved: &ResolvedPolicy,
    req: &ExecRequest,
) -> Result<(), OpenSandboxError> {
    if matches!(&req.stdin, StdinSpec::Bytes(b) if !b.is_empty()) {
        return Err(OpenSandboxError::Unsupported(
            "the opensandbox backend cannot feed stdin to a command (execd has no stdin for /command)".into(),
        ));
    }
    if req.argv.is_empty() {
        return Err(OpenSandboxError::Unsupported("empty command".into()));
    }
    remote_cwd(workdir, &resolved.workspace, req.cwd.as_deref())?;
    Ok(())
}

impl OpenSandboxSession {
    /// Run one command in the sandbox, then sync back (unless `read-only`).
    pub async fn exec(
        &mut self,
        resolved: &ResolvedPolicy,
        req: ExecRequest,
    ) -> Result<ExecOutcome, OpenSandboxError> {
        let env = ChildEnv::for_run(&resolved.env, &req);
        self.exec_with_env(resolved, req, env).await
    }

    /// [`Self::exec`] with the environment the dispatcher built.
    pub async fn exec_with_env(
        &mut self,
        resolved: &ResolvedPolicy,
        req: ExecRequest,
        env: ChildEnv,
    ) -> Result<ExecOutcome, OpenSandboxError> {
        let started = Instant::now();
        precheck(&self.cfg.remote_workdir, resolved, &req)?;
        if req.stdin == StdinSpec::Inherit {
            self.notes
                .push("stdin is not forwarded to the remote command".into());
        }
        let command = shlex::try_join(req.argv.iter().map(String::as_str))
            .map_err(|_| OpenSandboxError::Unsupported("an argument contains a NUL byte".into()))?;
        let cwd = remote_cwd(
            &self.cfg.remote_workdir,
            &resolved.workspace,
            req.cwd.as_deref(),
        )?;
        let (envs, env_removed) = command_env(resolved, env);
        self.keep_alive(resolved).await?;
        self.sync_up(resolved).await?;

        let body = RunCommandRequest {
            command,
            cwd,
            timeout: req
                .timeout
                .map(|t| (t + SERVER_TIMEOUT_GRACE).as_millis().min(u64::MAX as u128) as u64),
            envs,
        };
        let id_slot = Arc::new(Mutex::new(None::<String>));
        let mut guard = InterruptGuard {
            execd: self.execd.clone(),
            id: id_slot.clone(),
            armed: true,
        };
        let tee_out: Option<Box<dyn Write + Send>> =
            req.tee.then(|| Box::new(std::io::stdout()) as _);
        let tee_err: Option<Box<dyn Write + Send>> =
            req.tee.then(|| Box::new(std::io::stderr()) as _);
        let mut stdout = Capture::new(req.output_cap, tee_out);
        let mut stderr = Capture::new(req.output_cap, tee_err);
        let mut malformed = 0usize;
        let execd = self.execd.clone();
        let fut = execd.run(&body, |ev| match ev {
            StreamEvent::Init { id } => {
                if let Ok(mut g) = id_slot.lock() {
                    *g = Some(id.clone());
                }
            }
            StreamEvent::Stdout(l) => stdout.line(l),
            StreamEvent::Stderr(l) => stderr.line(l),
            StreamEvent::Malformed(_) => malformed += 1,
            _ => {}
        });
        let result = match req.timeout {
            Some(t) => tokio::time::timeout(t, fut).await.ok(),
            None => Some(fut.await),
        };
        let (exit, timed_out) = match result {
            None => {
                guard.armed = false;
                let id = id_slot.lock().ok().and_then(|g| g.clone());
                match id {
                    Some(id) => {
                        if let Err(e) = self.execd.interrupt(&id).await {
                            self.notes.push(format!("interrupting the timed-out command failed: {e}"));
                        }
                    }
                    None => self
                        .notes
                        .push("timed out before execd sent the command id; relying on execd's own timeout".into()),
                }
                (ExitKind::Signal(9), true)
            }
            Some(Ok(end)) => {
                guard.armed = false;
                (ExitKind::Code(terminal_code(&end)?), false)
            }
            // The stream broke: the guard interrupts the command if it still runs.
            Some(Err(e)) => return Err(e),
        };
        drop(guard);
        if malformed > 0 {
            self.notes.push(format!(
                "{malformed} malformed event(s) in the command stream were skipped"
            ));
        }
        let (synced_back, sync_refused) = if resolved.mode == SandboxMode::ReadOnly {
            self.notes.push(
                "read-only: the remote command could write its copy of the workspace; nothing is synced back".into(),
            );
            (Vec::new(), Vec::new())
        } else {
            self.sync_back(resolved).await?
        };
        Ok(ExecOutcome {
            exit,
            timed_out,
            duration: started.elapsed(),
            stdout: stdout.out,
            stderr: stderr.out,
            enforcement: self.enforcement(resolved, env_removed, synced_back, sync_refused),
        })
    }

    fn enforcement(
        &mut self,
        resolved: &ResolvedPolicy,
        env_removed: Vec<String>,
        synced_back: Vec<std::path::PathBuf>,
        sync_refused: Vec<std::path::PathBuf>,
    ) -> Enforcement {
        let mut partial = vec![PartialItem::new(
            Shortfall::ExternalIsolation,
            format!(
                "{ISOLATION_NOTE}; codewhale enforces only what it uploads and what it accepts back"
            ),
        )];
        partial.extend(
            self.notes
                .drain(..)
                .map(|n| PartialItem::new(Shortfall::Remote, n)),
        );
        partial.extend(policy_items(&resolved.notes));
        partial.extend(
            resolved
                .unmasked
                .iter()
                .map(|n| PartialItem::new(Shortfall::DenyRead, n.clone())),
        );
        if let Some(spec) = resolved.egress.as_ref().filter(|_| !resolved.network) {
            let lines = match super::egress::sidecar_rules(spec) {
                Ok(rules) => super::egress::shortfalls(&rules, self.sidecar.as_ref()),
                Err(e) => vec![format!(
                    "{e}: the sandbox was created with every connection denied"
                )],
            };
            partial.extend(
                lines
                    .into_iter()
                    .map(|l| PartialItem::new(Shortfall::Network, l)),
            );
        }
        Enforcement {
            level: EnforcementLevel::External,
            network_allowed: resolved.network,
            network_enforced_by: if resolved.network {
                Vec::new()
            } else {
                vec![NetworkEnforcer::OpensandboxEgressPolicy]
            },
            masked_paths: resolved
                .existing_deny_read()
                .map(|e| e.path.clone())
                .collect(),
            protected_paths: resolved.protected.iter().map(|e| e.path.clone()).collect(),
            env_removed,
            partial,
            external: Some(ExternalReport {
                provider: "opensandbox".to_string(),
                sandbox_id: self.sandbox_id.clone(),
                note: ISOLATION_NOTE.to_string(),
                synced_up: self.synced_up,
                synced_back,
                sync_refused,
            }),
            ..Enforcement::base(
                BackendKind::Opensandbox,
                resolved.mode,
                "external: opensandbox",
            )
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::policy::{resolve, HostFacts, SandboxPolicy};

    #[test]
    fn cwd_maps_into_the_remote_workdir_or_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        assert_eq!(remote_cwd("/workspace", &ws, None).unwrap(), "/workspace");
        assert_eq!(
            remote_cwd("/workspace", &ws, Some(&ws)).unwrap(),
            "/workspace"
        );
        assert_eq!(
            remote_cwd("/workspace", &ws, Some(&ws.join("a/b"))).unwrap(),
            "/workspace/a/b"
        );
        assert_eq!(
            remote_cwd("/workspace", &ws, Some(Path::new("a/../a"))).unwrap(),
            "/workspace/a"
        );
        let e = remote_cwd("/workspace", &ws, Some(&ws.join(".."))).unwrap_err();
        assert!(e.to_string().contains("outside the workspace"), "{e}");
    }

    #[test]
    fn env_is_the_request_scrubbed_or_the_portable_subset() {
        let t = tempfile::tempdir().unwrap();
        let facts = HostFacts::default();
        let r = resolve(
            &SandboxPolicy::new(SandboxMode::WorkspaceWrite, t.path()),
            &facts,
        )
        .unwrap();
        let mut req = ExecRequest::new(vec!["true".into()]);
        let mut env = BTreeMap::new();
        env.insert("PATH".to_string(), "/x".to_string());
        env.insert("GH_TOKEN".to_string(), "t".to_string());
        req.env = Some(env);
        let (vars, removed) = command_env(&r, ChildEnv::for_run(&r.env, &req));
        // The network is off: the package managers' retry settings are
        // set too (policy::resolve::OFFLINE_ENV).
        let offline = |k: &str| {
            crate::policy::resolve::OFFLINE_ENV
                .iter()
                .any(|(o, _)| *o == k)
        };
        let mut expect = vec!["PATH"];
        expect.extend(crate::policy::resolve::OFFLINE_ENV.iter().map(|(k, _)| *k));
        expect.sort_unstable();
        assert_eq!(vars.keys().map(String::as_str).collect::<Vec<_>>(), expect);
        assert_eq!(removed, vec!["GH_TOKEN".to_string()]);
        req.env = None;
        let (vars, _) = command_env(&r, ChildEnv::for_run(&r.env, &req));
        for k in vars.keys() {
            assert!(
                PORTABLE_ENV.contains(&k.as_str()) || k.starts_with("LC_") || offline(k),
                "{k}"
            );
        }
        assert!(!vars.contains_key("PATH") && !vars.contains_key("HOME"));
    }

    #[test]
    fn capture_caps_and_counts() {
        let mut c = Capture::new(5, None);
        c.line("abc");
        c.line("def\n");
        assert_eq!(c.out.bytes, b"abc\nd");
        assert_eq!(c.out.total, 8);
        assert!(c.out.truncated);
    }
}
