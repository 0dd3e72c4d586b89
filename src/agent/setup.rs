//! The one way a run is set up from resolved settings, shared by `codewhale
//! exec` and runtime-started turns (`app-server`): the models (one provider
//! with the local-Ollama fallback, or the router), the sandbox policy every
//! call uses, undo snapshots from the same store `codewhale undo` reads,
//! the nine-gate authorizer and the tools' context.
//!
//! The caller decides the posture ([`super::exec_posture`], then whether a
//! person can answer gate 8) and where notes go; everything after that is
//! here so the two front ends cannot drift apart.

use super::models::{self, Note, Resolved};
use super::tools::{guard::FsGuard, ToolContext};
use super::{PipelineAuthorizer, RunSnapshots};
use crate::authz::{Posture, SessionGrants};
use crate::config::{ConfigError, SandboxContext};
use crate::policy::resolve::ResolveError;
use crate::policy::{resolve, HostFacts};
use crate::provider::auth::AuthStore;
use crate::provider::config::ExecConfig;
use crate::provider::ProviderError;
use crate::snapshot::{SnapshotOptions, SnapshotStore};
use std::sync::{Arc, Mutex};

/// Why a run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Policy(#[from] ResolveError),
}

/// Which model a run asks for (`--provider`/`--model`, or a thread's model).
#[derive(Clone, Debug, Default)]
pub struct ModelRequest<'a> {
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
}

/// Everything the loop needs, owned.
pub struct RunSetup {
    pub models: Resolved,
    pub snaps: RunSnapshots,
    pub authorizer: PipelineAuthorizer,
    pub ctx: ToolContext,
}

/// Set a run up. `grants` are the session's "always for this kind"
/// answers (a fresh set for `exec`; a thread's for the runtime, so a
/// remembered approval covers its later calls).
pub fn prepare_run(
    sandbox: &SandboxContext,
    posture: Posture,
    want: ModelRequest<'_>,
    grants: Arc<Mutex<SessionGrants>>,
    rt: &tokio::runtime::Runtime,
    note: Note<'_>,
) -> Result<RunSetup, SetupError> {
    let settings = &sandbox.settings;
    // Beside the single-core `.env` scan that `resolve` starts with.
    #[cfg(unix)]
    crate::host::integrity::warm_gitlinks(&settings.workspace);
    let home = settings.paths.codewhale_home.clone();
    let cfg = ExecConfig::from_settings(settings)?;
    let store = AuthStore::new(&home);
    let env = |n: &str| std::env::var(n).ok();
    let models = models::resolve(want.provider, want.model, &cfg, &store, &env, rt, note)?;
    // The one policy every call of this run uses (gate 9 is handed its mode).
    // Its `.env` scan, when it reads the whole workspace, keeps what it
    // read for the snapshot store's first size walk below.
    crate::policy::resolve::keep_workspace_listing(&sandbox.policy);
    let resolved = resolve(&sandbox.policy, &HostFacts::detect())?;
    // Undo snapshots: same store lookup as `codewhale undo`; a refusal or a
    // failure to open switches them off for this run (every surface says
    // so) and the run goes on.
    let mut snap_opts = SnapshotOptions::from_env()
        .unwrap_or_else(|| SnapshotOptions::new(&home))
        .with_resolved_policy(&resolved);
    // The run's first snapshot follows at once.
    snap_opts.seed_at_open = true;
    // And it keeps a journal (`RunSnapshots` enables it).
    snap_opts.journal_at_open = true;
    // Refusals are decided here; the store is built on a thread while the
    // run goes on (`SnapshotStore::open_ahead`).
    let snaps =
        RunSnapshots::from_open_ahead(SnapshotStore::open_ahead(&settings.workspace, snap_opts));
    let authorizer = PipelineAuthorizer::new(settings, posture, sandbox.mode()).with_grants(grants);
    let ctx = ToolContext {
        guard: FsGuard::new(&resolved),
        policy: sandbox.policy.clone(),
        host: sandbox.host.clone(),
        cancel: crate::host::CancelToken::new(),
        mcp: None,
        skills: skills(settings, note),
        memory: settings
            .user
            .memory
            .enabled
            .then(|| settings.paths.codewhale_home.clone()),
        jobs: Default::default(),
    };
    Ok(RunSetup {
        models,
        snaps,
        authorizer,
        ctx,
    })
}

/// The turn's Auto-Review, for a posture that has one: the reviewer
/// `[auto_review]` names (default: the session's own provider and model;
/// the router's plan model when routed), `breaker` (the agent's own
/// counts), and the facts its documents state. `trusted`: whether the
/// workspace's project configuration is trusted.
pub fn auto_review(
    sandbox: &SandboxContext,
    models: &Resolved,
    breaker: super::review::SharedBreaker,
    trusted: bool,
) -> Result<super::review::AutoReview, SetupError> {
    let settings = &sandbox.settings;
    let cfg = ExecConfig::from_settings(settings)?;
    let store = AuthStore::new(&settings.paths.codewhale_home);
    let env = |n: &str| std::env::var(n).ok();
    let session = match models {
        Resolved::Single(p) => p.settings.clone(),
        Resolved::Routed(r) => r
            .first(crate::provider::router::TurnKind::Plan)
            .map(|p| p.settings.clone())
            .ok_or_else(|| ProviderError::Setup {
                provider: "router".into(),
                message: "[auto_review]: the router has no plan model to review with".into(),
            })?,
    };
    let reviewer = super::review::Reviewer::configured(
        &settings.user.auto_review,
        &session,
        &cfg,
        &store,
        &env,
    )?;
    Ok(super::review::AutoReview::new(
        reviewer,
        breaker,
        sandbox.policy.network_mode(),
        trusted,
    ))
}

/// The run's skills (docs/SKILLS.md): `None` when there are none usable,
/// or when the state file is bad (the note says so; the run goes on).
fn skills(
    settings: &crate::config::Settings,
    note: &mut dyn FnMut(&str),
) -> Option<Arc<crate::skills::Skills>> {
    match crate::skills::Skills::load(&settings.paths, &settings.workspace) {
        Ok(s) => {
            for p in &s.discovery.problems {
                note(&format!(
                    "skills: {} not used: {}",
                    p.path.display(),
                    p.error
                ));
            }
            let any = s.usable().next().is_some();
            any.then(|| Arc::new(s))
        }
        Err(e) => {
            note(&format!("skills: not loaded: {e}"));
            None
        }
    }
}
