//! [`OpenSandboxSession`]: one sandbox per workspace, reused across
//! commands, renewed while in use, deleted (or kept) at the end.
//!
//! Reuse is by metadata label: the sandbox carries
//! `codewhale-workspace=<hash of the workspace path>` and
//! `codewhale-network=on|off|allowlist-<digest>`, so a sandbox created
//! with egress denied (or with one allow-list) is never reused for a run
//! that asked for network (or another list), and vice versa.

use super::config::{OpenSandboxConfig, EXECD_PORT};
use super::error::OpenSandboxError;
use super::events::StreamEvent;
use super::execd::{ExecdClient, FileMetadata, RunCommandRequest};
use super::guard::WriteGuard;
use super::lifecycle::{
    CreateSandboxRequest, ImageSpec, LifecycleClient, NetworkPolicy, SandboxInfo,
};
use super::sidecar::{self, SidecarClient, SidecarVerdict, EGRESS_PORT};
use super::sync::{self, Baseline};
use crate::policy::ResolvedPolicy;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub const LABEL_WORKSPACE: &str = "codewhale-workspace";
pub const LABEL_NETWORK: &str = "codewhale-network";
/// Beyond this many local deletions, re-upload everything instead of
/// listing them on one remote command line.
const MAX_REMOTE_REMOVALS: usize = 500;

/// A live sandbox bound to one workspace.
pub struct OpenSandboxSession {
    pub(super) cfg: OpenSandboxConfig,
    pub(super) lifecycle: LifecycleClient,
    pub(super) execd: ExecdClient,
    pub(super) sandbox_id: String,
    /// `None` until the workspace has been uploaded.
    pub(super) baseline: Option<Baseline>,
    /// Hashes of the local files the last upload walk accepted.
    local: Baseline,
    pub(super) synced_up: usize,
    pub(super) notes: Vec<String>,
    recreated: bool,
    /// The sandbox's expiry as the server last reported it (`expiresAt` of
    /// `GET /sandboxes/{id}`), pushed forward by every renewal we make.
    expires_at: Option<time::OffsetDateTime>,
    /// Under `allowlist`: what the egress sidecar said when the list was
    /// applied through its own API (`None` otherwise).
    pub(super) sidecar: Option<SidecarVerdict>,
}

/// Parse an `expiresAt` value (RFC 3339); `None` when absent or unreadable.
fn parse_expiry(s: Option<&str>) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(s?, &time::format_description::well_known::Rfc3339).ok()
}

/// The expiry to ask for before a command, or `None` to leave the sandbox
/// alone. The lifecycle server accepts any future time, *shorter ones
/// included* (`ensure_future_expiration` in
/// `server/src/services/validators.py` only checks "in the future"), so
/// renewing a sandbox that already lives longer (a kept sandbox created
/// with a larger `timeout_s`, or renewed by another run) would cut its
/// life short: never ask for less than it has.
pub fn renew_target(
    known: Option<time::OffsetDateTime>,
    now: time::OffsetDateTime,
    ttl_s: u64,
) -> Option<time::OffsetDateTime> {
    let mut target = now + time::Duration::seconds(ttl_s as i64);
    // Sent with whole seconds (`lifecycle::rfc3339`): round up, so the
    // truncation cannot pull the expiry below what the TTL promises.
    if target.nanosecond() > 0 {
        target = target.replace_nanosecond(0).unwrap_or(target) + time::Duration::SECOND;
    }
    match known {
        Some(k) if k >= target => None,
        _ => Some(target),
    }
}

/// Labels identifying the sandbox of this workspace and network setting.
pub fn labels_for(resolved: &ResolvedPolicy) -> BTreeMap<String, String> {
    let hash = sync::sha256_hex(resolved.workspace.to_string_lossy().as_bytes());
    let mut m = BTreeMap::new();
    m.insert(LABEL_WORKSPACE.to_string(), hash[..32].to_string());
    m.insert(LABEL_NETWORK.to_string(), network_label(resolved));
    m
}

/// `on`, `off`, or `allowlist-<digest of the sidecar rules>`.
fn network_label(resolved: &ResolvedPolicy) -> String {
    match (&resolved.egress, resolved.network) {
        (_, true) => "on".into(),
        (Some(spec), false) => match super::egress::sidecar_rules(spec) {
            Ok(rules) => super::egress::rules_label(&rules),
            // Created deny-all (see `network_policy`): share that label.
            Err(_) => "off".into(),
        },
        (None, false) => "off".into(),
    }
}

/// The sidecar policy: none with network on, deny-all with it off, the
/// allow-list's rules under `allowlist` (deny-all if the lists do not
/// parse: fail closed; the run reports the error).
fn network_policy(resolved: &ResolvedPolicy) -> Option<NetworkPolicy> {
    if resolved.network {
        return None;
    }
    let egress = resolved
        .egress
        .as_ref()
        .and_then(|spec| super::egress::sidecar_rules(spec).ok())
        .map(|r| r.rules)
        .unwrap_or_default();
    Some(NetworkPolicy {
        default_action: "deny".into(),
        egress,
    })
}

/// The create request for this config and policy.
pub fn create_request(cfg: &OpenSandboxConfig, resolved: &ResolvedPolicy) -> CreateSandboxRequest {
    CreateSandboxRequest {
        image: ImageSpec {
            uri: cfg.image.clone(),
        },
        entrypoint: cfg.entrypoint.clone(),
        timeout: cfg.timeout_s,
        resource_limits: cfg.resource_limits.clone(),
        metadata: labels_for(resolved),
        network_policy: network_policy(resolved),
    }
}

impl OpenSandboxSession {
    /// Find this workspace's sandbox (when `keep` makes reuse meaningful) or
    /// create one, wait until it runs, discover execd and wait for `/ping`.
    pub async fn open(
        cfg: &OpenSandboxConfig,
        resolved: &ResolvedPolicy,
    ) -> Result<Self, OpenSandboxError> {
        let lifecycle = LifecycleClient::new(cfg)?;
        let labels = labels_for(resolved);
        let mut notes = Vec::new();
        let mut reuse = None;
        if cfg.keep {
            reuse = lifecycle.find(&labels).await?.into_iter().next();
        }
        let (id, (execd, expires_at)) = match reuse {
            Some(sbx) => match Self::attach(cfg, &lifecycle, &sbx.id).await {
                Ok(attached) => {
                    notes.push(format!("reused sandbox {}", sbx.id));
                    (sbx.id, attached)
                }
                Err(e) if e.is_gone() || matches!(e, OpenSandboxError::SandboxDead { .. }) => {
                    notes.push(format!(
                        "sandbox {} was unusable ({e}); created a new one",
                        sbx.id
                    ));
                    Self::create_and_attach(cfg, &lifecycle, resolved).await?
                }
                Err(e) => return Err(e),
            },
            None => Self::create_and_attach(cfg, &lifecycle, resolved).await?,
        };
        let mut session = OpenSandboxSession {
            cfg: cfg.clone(),
            lifecycle,
            execd,
            sandbox_id: id,
            baseline: None,
            local: Baseline::new(),
            synced_up: 0,
            notes,
            recreated: false,
            expires_at,
            sidecar: None,
        };
        session.confirm_egress(resolved).await;
        Ok(session)
    }

    /// Under `allowlist`, apply the list's rules through the egress
    /// sidecar's API and keep what it answered (`sidecar.rs`); a failure
    /// is kept as the reason the run stays `partial`, never fatal: the
    /// sandbox was created with the same rules.
    pub(super) async fn confirm_egress(&mut self, resolved: &ResolvedPolicy) {
        let Some(spec) = resolved.egress.as_ref().filter(|_| !resolved.network) else {
            self.sidecar = None;
            return;
        };
        let Ok(rules) = super::egress::sidecar_rules(spec) else {
            // Created deny-all; the run reports the list's error.
            self.sidecar = None;
            return;
        };
        let want = rules.rules;
        let verdict = match self
            .lifecycle
            .endpoint(&self.sandbox_id, EGRESS_PORT, self.cfg.use_server_proxy)
            .await
            .and_then(|ep| SidecarClient::new(&self.cfg, &ep))
        {
            Ok(client) => sidecar::apply(&client, &want).await,
            Err(e) => SidecarVerdict::NotAccepted {
                reason: format!("no egress sidecar endpoint: {e}"),
            },
        };
        self.sidecar = Some(verdict);
    }

    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }

    async fn create_and_attach(
        cfg: &OpenSandboxConfig,
        lifecycle: &LifecycleClient,
        resolved: &ResolvedPolicy,
    ) -> Result<(String, (ExecdClient, Option<time::OffsetDateTime>)), OpenSandboxError> {
        let created = lifecycle.create(&create_request(cfg, resolved)).await?;
        match Self::attach(cfg, lifecycle, &created.id).await {
            Ok(attached) => Ok((created.id, attached)),
            Err(e) => {
                // Never leave a half-started sandbox behind, even with
                // `keep`: keeping is for sandboxes that work.
                let _ = lifecycle.delete(&created.id).await;
                Err(e)
            }
        }
    }

    /// Wait for `Running`, get the execd endpoint, wait for `/ping`.
    /// Also returns the sandbox's expiry as the server reports it.
    async fn attach(
        cfg: &OpenSandboxConfig,
        lifecycle: &LifecycleClient,
        id: &str,
    ) -> Result<(ExecdClient, Option<time::OffsetDateTime>), OpenSandboxError> {
        let deadline = Instant::now() + Duration::from_secs(cfg.ready_timeout_s);
        let interval = Duration::from_millis(cfg.poll_interval_ms);
        let expires_at;
        loop {
            let SandboxInfo {
                status,
                expires_at: exp,
                ..
            } = lifecycle.get(id).await?;
            match status.state.as_str() {
                "Running" => {
                    expires_at = parse_expiry(exp.as_deref());
                    break;
                }
                "Failed" | "Terminated" | "Stopping" => {
                    return Err(OpenSandboxError::SandboxDead {
                        id: id.to_string(),
                        state: status.state,
                        reason: [status.reason, status.message]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>()
                            .join(": "),
                    })
                }
                // Pending, Resuming, and states added later: not ready yet.
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(OpenSandboxError::NotReady {
                    what: format!(
                        "sandbox {id} reaching Running (last state {:?})",
                        status.state
                    ),
                    secs: cfg.ready_timeout_s,
                });
            }
            tokio::time::sleep(interval).await;
        }
        let ep = lifecycle
            .endpoint(id, EXECD_PORT, cfg.use_server_proxy)
            .await?;
        let execd = ExecdClient::new(cfg, &ep)?;
        loop {
            match execd.ping().await {
                Ok(()) => return Ok((execd, expires_at)),
                Err(e @ OpenSandboxError::Auth { .. }) => return Err(e),
                Err(e) if Instant::now() >= deadline => {
                    return Err(OpenSandboxError::NotReady {
                        what: format!(
                            "execd at {} answering /ping (last error: {e})",
                            execd.base()
                        ),
                        secs: cfg.ready_timeout_s,
                    })
                }
                Err(_) => tokio::time::sleep(interval).await,
            }
        }
    }

    /// Push the expiration out to a full TTL from now before every command
    /// (one small lifecycle call), so a long session never expires under
    /// us — but never pull it in (see [`renew_target`]). A sandbox that vanished (404) is recreated once and the
    /// workspace uploaded again.
    pub(super) async fn keep_alive(
        &mut self,
        resolved: &ResolvedPolicy,
    ) -> Result<(), OpenSandboxError> {
        let Some(ttl) = self.cfg.timeout_s else {
            return Ok(());
        };
        let step = match renew_target(self.expires_at, time::OffsetDateTime::now_utc(), ttl) {
            Some(until) => self
                .lifecycle
                .renew(&self.sandbox_id, until)
                .await
                .map(|()| Some(until)),
            // It already lives longer than a renewal would make it: only
            // check it is still there (and learn its current expiry).
            None => self
                .lifecycle
                .get(&self.sandbox_id)
                .await
                .map(|info| parse_expiry(info.expires_at.as_deref())),
        };
        match step {
            Ok(exp) => self.expires_at = exp.or(self.expires_at),
            Err(e) if e.is_gone() && !self.recreated => {
                self.recreated = true;
                self.notes.push(format!(
                    "sandbox {} disappeared; recreated it and uploaded the workspace again",
                    self.sandbox_id
                ));
                let (id, (execd, expires_at)) =
                    Self::create_and_attach(&self.cfg, &self.lifecycle, resolved).await?;
                self.sandbox_id = id;
                self.execd = execd;
                self.expires_at = expires_at;
                self.baseline = None;
                self.confirm_egress(resolved).await;
            }
            // 409: the sandbox cannot be renewed in its state (e.g. the
            // server refuses to move an expiry backwards). Not fatal.
            Err(OpenSandboxError::Conflict { message, .. }) => {
                self.notes
                    .push(format!("renew-expiration refused: {message}"));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Bring the sandbox's copy of the workspace up to date: everything on
    /// the first call for a sandbox, then only what changed locally.
    pub(super) async fn sync_up(
        &mut self,
        resolved: &ResolvedPolicy,
    ) -> Result<(), OpenSandboxError> {
        let resolved_c = resolved.clone();
        let (max_file, max_total) = (self.cfg.max_file_bytes, self.cfg.max_upload_bytes);
        let known = self.baseline.clone();
        let archive = tokio::task::spawn_blocking(move || {
            sync::build_upload(&resolved_c, max_file, max_total, known.as_ref())
        })
        .await
        .map_err(|e| OpenSandboxError::Unsupported(format!("workspace archive task: {e}")))?
        .map_err(|m| OpenSandboxError::Unsupported(format!("workspace sync: {m}")))?;
        let mut fresh = self.baseline.is_none();
        let removed: Vec<String> = match &self.baseline {
            Some(remote) => self
                .local
                .keys()
                .filter(|k| !archive.hashes.contains_key(*k) && remote.contains_key(*k))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if removed.len() > MAX_REMOTE_REMOVALS {
            fresh = true;
        }
        self.synced_up = archive.files;
        if !fresh && archive.files == 0 && removed.is_empty() {
            self.local = archive.hashes;
            return Ok(());
        }
        let archive = if fresh && self.baseline.is_some() {
            // Too many removals for one command line: start over.
            let resolved_c = resolved.clone();
            tokio::task::spawn_blocking(move || {
                sync::build_upload(&resolved_c, max_file, max_total, None)
            })
            .await
            .map_err(|e| OpenSandboxError::Unsupported(format!("workspace archive task: {e}")))?
            .map_err(|m| OpenSandboxError::Unsupported(format!("workspace sync: {m}")))?
        } else {
            archive
        };
        let remote_tar = format!(
            "{}/codewhale-sync-{}.tar",
            self.cfg.remote_tmp,
            uuid::Uuid::new_v4().simple()
        );
        self.execd
            .upload(
                &FileMetadata {
                    path: remote_tar.clone(),
                    mode: 600,
                },
                archive.tar,
            )
            .await?;
        let removed = if fresh { Vec::new() } else { removed };
        let script = sync::extract_command(&remote_tar, &self.cfg.remote_workdir, fresh, &removed);
        let (code, _out, err) = self.run_internal(&script).await?;
        if code != 0 {
            return Err(OpenSandboxError::Protocol {
                call: "unpacking the workspace archive (tar -x)".into(),
                detail: format!("exit {code}: {}", err.join("\n")),
            });
        }
        if self.baseline.is_none() {
            for (p, why) in archive.skipped.iter().filter(|(_, w)| w != "deny-read") {
                self.notes
                    .push(format!("not uploaded: {} ({why})", p.display()));
            }
        }
        let mut remote = if fresh {
            Baseline::new()
        } else {
            self.baseline.take().unwrap_or_default()
        };
        for r in &removed {
            remote.remove(r);
        }
        remote.extend(archive.hashes.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.synced_up = archive.files;
        self.baseline = Some(remote);
        self.local = archive.hashes;
        Ok(())
    }

    /// Run a helper command of codewhale's own (sync scripts): exit code,
    /// stdout lines, stderr lines.
    pub(super) async fn run_internal(
        &self,
        script: &str,
    ) -> Result<(i32, Vec<String>, Vec<String>), OpenSandboxError> {
        let body = RunCommandRequest {
            command: script.to_string(),
            cwd: self.cfg.remote_tmp.clone(),
            timeout: Some(600_000),
            envs: BTreeMap::new(),
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let end = self
            .execd
            .run(&body, |ev| match ev {
                StreamEvent::Stdout(l) => out.push(l.clone()),
                StreamEvent::Stderr(l) => err.push(l.clone()),
                _ => {}
            })
            .await?;
        Ok((terminal_code(&end)?, out, err))
    }

    /// Bring back what the last command changed (see [`sync`]).
    pub(super) async fn sync_back(
        &mut self,
        resolved: &ResolvedPolicy,
    ) -> Result<(Vec<std::path::PathBuf>, Vec<std::path::PathBuf>), OpenSandboxError> {
        let Some(baseline) = self.baseline.clone() else {
            return Ok((Vec::new(), Vec::new()));
        };
        let (code, lines, err) = self
            .run_internal(&sync::manifest_command(&self.cfg.remote_workdir))
            .await?;
        if code != 0 {
            return Err(OpenSandboxError::Protocol {
                call: "listing changed files (find + sha256sum)".into(),
                detail: format!("exit {code}: {}", err.join("\n")),
            });
        }
        let manifest = sync::parse_manifest(&lines);
        for l in &manifest.unreadable {
            self.notes
                .push(format!("not synced back (unrepresentable name): {l}"));
        }
        let guard = WriteGuard::new(resolved);
        let gi = sync::root_gitignore(&resolved.workspace);
        let ignored = |p: &str| gi.matched_path_or_any_parents(p, false).is_ignore();
        let plan = sync::plan_back(&baseline, &manifest, &guard, &ignored);
        let mut synced = Vec::new();
        let mut refused: Vec<std::path::PathBuf> = Vec::new();
        for (p, why) in &plan.refused {
            self.notes.push(format!("sync-back refused {p}: {why}"));
            refused.push(p.into());
        }
        for (p, why) in &plan.skipped {
            self.notes.push(format!("not synced back: {p} ({why})"));
        }
        let mut new_baseline = manifest.files.clone();
        for p in &plan.write {
            if self.host_changed(&resolved.workspace, p) {
                self.notes.push(format!(
                    "not synced back: {p} changed on the host during the command too; the host version is kept"
                ));
                continue;
            }
            let remote = format!("{}/{p}", self.cfg.remote_workdir);
            match self
                .execd
                .download(&remote, self.cfg.max_file_bytes)
                .await?
            {
                None => {
                    self.notes
                        .push(format!("not synced back: {p} (over max_file_bytes)"));
                }
                Some(bytes) => {
                    let exec = manifest.executable.contains(p);
                    if manifest.files.get(p) != Some(&sync::sha256_hex(&bytes)) {
                        // Changed again while we read it: keep what we got,
                        // and let the next manifest compare against it.
                        new_baseline.insert(p.clone(), sync::sha256_hex(&bytes));
                    }
                    match guard.write(p, &bytes, exec) {
                        Ok(_) => synced.push(p.into()),
                        Err(why) => {
                            self.notes.push(format!("sync-back refused {p}: {why}"));
                            refused.push(p.into());
                        }
                    }
                }
            }
        }
        for p in &plan.delete {
            if self.host_changed(&resolved.workspace, p) {
                self.notes.push(format!(
                    "not deleted: {p} was removed remotely but changed on the host; the host version is kept"
                ));
                continue;
            }
            match guard.delete(p) {
                Ok(_) => synced.push(p.into()),
                Err(why) => {
                    self.notes
                        .push(format!("sync-back deletion refused {p}: {why}"));
                    refused.push(p.into());
                }
            }
        }
        self.baseline = Some(new_baseline);
        Ok((synced, refused))
    }

    /// Whether the host's `rel` differs from what was uploaded before the
    /// command (then a remote change must not overwrite it).
    fn host_changed(&self, workspace: &std::path::Path, rel: &str) -> bool {
        let path = workspace.join(rel);
        let now = match std::fs::symlink_metadata(&path) {
            Err(_) => None,
            Ok(m) if m.is_file() => Some(
                std::fs::read(&path)
                    .map(|b| sync::sha256_hex(&b))
                    .unwrap_or_default(),
            ),
            Ok(_) => Some(String::new()),
        };
        now.as_ref() != self.local.get(rel)
    }

    /// Delete the sandbox unless `keep` is set.
    pub async fn close(self) -> Result<(), OpenSandboxError> {
        if self.cfg.keep {
            return Ok(());
        }
        match self.lifecycle.delete(&self.sandbox_id).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_gone() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The exit code of a terminal event (`execution_complete` → 0,
/// `error` → its `evalue`).
pub fn terminal_code(ev: &StreamEvent) -> Result<i32, OpenSandboxError> {
    match ev {
        StreamEvent::Complete => Ok(0),
        StreamEvent::Error {
            ename,
            evalue,
            traceback,
        } => evalue
            .trim()
            .parse::<i32>()
            .map_err(|_| OpenSandboxError::Protocol {
                call: "POST /command".into(),
                detail: format!(
                    "execd reported {ename}: {evalue}{}",
                    traceback
                        .first()
                        .map(|t| format!(" ({t})"))
                        .unwrap_or_default()
                ),
            }),
        other => Err(OpenSandboxError::Protocol {
            call: "POST /command".into(),
            detail: format!("{other:?} is not a terminal event"),
        }),
    }
}

#[cfg(test)]
mod renew_tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn renewal_never_shortens_a_sandbox_life() {
        let now = datetime!(2026-01-01 12:00 UTC);
        // Unknown expiry, or one sooner than a full TTL: renew to now + TTL.
        assert_eq!(
            renew_target(None, now, 3600),
            Some(datetime!(2026-01-01 13:00 UTC))
        );
        assert_eq!(
            renew_target(Some(datetime!(2026-01-01 12:10 UTC)), now, 3600),
            Some(datetime!(2026-01-01 13:00 UTC))
        );
        // Already living longer (kept sandbox created with a larger TTL):
        // a renewal would cut it short, so none is sent.
        assert_eq!(
            renew_target(Some(datetime!(2026-01-02 00:00 UTC)), now, 3600),
            None
        );
        assert_eq!(
            renew_target(Some(datetime!(2026-01-01 13:00 UTC)), now, 3600),
            None
        );
        // Sub-second now: rounded up, never truncated below now + TTL.
        let now = datetime!(2026-01-01 12:00:00.4 UTC);
        assert_eq!(
            renew_target(Some(datetime!(2026-01-01 13:00:00.2 UTC)), now, 3600),
            Some(datetime!(2026-01-01 13:00:01 UTC))
        );
    }

    #[test]
    fn expiry_is_read_from_rfc3339() {
        assert_eq!(
            parse_expiry(Some("2030-01-01T00:00:00Z")),
            Some(datetime!(2030-01-01 00:00 UTC))
        );
        assert_eq!(parse_expiry(Some("soon")), None);
        assert_eq!(parse_expiry(None), None);
    }
}
