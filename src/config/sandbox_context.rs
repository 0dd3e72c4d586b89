//! The one sandbox context: flags + user config + project override →
//! the policy and the host settings, for every client (`exec`, `sandbox
//! run`, `sandbox explain`, `doctor`, and every later front end).
//!
//! Precedence is one rule for every command:
//!
//! 1. the user config (`sandbox_mode`, `[sandbox]`, `[opensandbox]`);
//! 2. the command line (`--sandbox`, `--network`, `--writable-root`,
//!    `--backend`, `--bwrap-path`, `--allow-unsandboxed`) on top, in any
//!    direction: the user typed it;
//! 3. the project override `<repo>/.codewhale/config.toml`, which can only
//!    tighten `sandbox_mode` and shrink `[sandbox] network`
//!    (skipped with `--no-project-config`);
//! 4. for an agent turn, the posture's own implied mode (Plan → read-only,
//!    Full Access → none) narrowed by the result of 1–3
//!    ([`Posture::sandbox_under`]).
//!
//! The result's mode lives in one place only: [`SandboxContext::policy`].
//! The gates are handed it as a plain value (gate 9 names it; nothing
//! re-derives it), the tools run under it, and the records carry what the
//! host reported.

use super::{load, load_sandbox, ConfigError, LoadOptions, Settings};
use crate::authz::{Approval, Mode, Posture};
use crate::host::{BackendChoice, HostSettings};
use crate::policy::{SandboxMode, SandboxPolicy};
use std::path::PathBuf;

/// What a client was told on its command line (or by its API caller).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxFlags {
    /// `--sandbox MODE`.
    pub mode: Option<SandboxMode>,
    /// `--network`: allow network access.
    pub network: bool,
    /// `--network=off|on|allowlist` (overrides `network` when set).
    pub network_mode: Option<crate::net::NetworkMode>,
    /// `--allow-domain D` (repeatable): added to the allow list; implies
    /// `allowlist` unless the network is on. Validated by the CLI.
    pub allow_domains: Vec<String>,
    /// `--writable-root DIR` (repeatable).
    pub writable_roots: Vec<PathBuf>,
    /// `--backend B`.
    pub backend: Option<BackendChoice>,
    /// `--bwrap-path PATH`.
    pub bwrap_path: Option<PathBuf>,
    /// `--allow-unsandboxed`.
    pub allow_unsandboxed: bool,
    /// `--no-project-config`.
    pub no_project_config: bool,
}

/// Whether the user's `permissions.toml` is read with the settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RulesFile {
    /// The agent and anything that authorizes calls.
    Load,
    /// `sandbox run|explain`: the rules are never consulted there, so the
    /// file is not read (start-up cost, and a broken rules file has no
    /// bearing on a sandboxed run).
    Skip,
}

/// The resolved settings, the policy every call of this client runs under,
/// and the host settings that pick and configure the backend.
#[derive(Clone, Debug)]
pub struct SandboxContext {
    pub settings: Settings,
    pub policy: SandboxPolicy,
    pub host: HostSettings,
}

/// `--network=MODE` and `--allow-domain` on top of the configured policy.
fn apply_network_flags(policy: &mut SandboxPolicy, flags: &SandboxFlags) {
    use crate::net::{EgressSpec, NetworkMode};
    match flags.network_mode {
        Some(NetworkMode::On) => {
            policy.network = true;
            policy.egress = None;
        }
        Some(NetworkMode::Off) => {
            policy.network = false;
            policy.egress = None;
        }
        Some(NetworkMode::Allowlist) => {
            policy.network = false;
            policy
                .egress
                .get_or_insert_with(|| EgressSpec::new(Vec::new(), Vec::new()));
        }
        None => {}
    }
    if !flags.allow_domains.is_empty() && !policy.network {
        policy
            .egress
            .get_or_insert_with(|| EgressSpec::new(Vec::new(), Vec::new()))
            .allow
            .extend(flags.allow_domains.iter().cloned());
    }
}

impl SandboxContext {
    /// Resolve every layer for a client without a posture (`sandbox run`,
    /// `sandbox explain`, `doctor`): the mode is the configured one.
    pub fn load(
        workspace: impl Into<PathBuf>,
        flags: &SandboxFlags,
        rules: RulesFile,
    ) -> Result<Self, ConfigError> {
        let mut opts = LoadOptions::new(workspace);
        Self::load_with(&mut opts, flags, rules)
    }

    /// [`Self::load`] with caller-provided load options (config paths,
    /// other overrides such as `--model`); `flags` are applied to them.
    pub fn load_with(
        opts: &mut LoadOptions,
        flags: &SandboxFlags,
        rules: RulesFile,
    ) -> Result<Self, ConfigError> {
        if flags.mode.is_some() {
            opts.overrides.sandbox_mode = flags.mode;
        }
        opts.no_project_config |= flags.no_project_config;
        let settings = match rules {
            RulesFile::Load => load(opts)?,
            RulesFile::Skip => load_sandbox(opts)?,
        };
        Ok(Self::from_settings(settings, flags))
    }

    /// Build the context from already-resolved settings (whose
    /// `sandbox_mode` holds `--sandbox` and the project's tightening).
    pub fn from_settings(mut settings: Settings, flags: &SandboxFlags) -> Self {
        let mut policy = settings.sandbox_policy(settings.sandbox_mode);
        if flags.network {
            policy.network = true;
        }
        apply_network_flags(&mut policy, flags);
        if let (Some(net), Some(file)) = (&settings.project_network, &settings.project_file) {
            let notes = super::project_network::apply(file, net, &mut policy);
            settings.ignored.extend(notes);
        }
        policy
            .writable_roots
            .extend(flags.writable_roots.iter().cloned());
        let mut host = settings.host_settings();
        if let Some(b) = flags.backend {
            host.backend = b;
        }
        if let Some(b) = &flags.bwrap_path {
            host.bwrap_path = Some(b.clone());
        }
        host.allow_unsandboxed |= flags.allow_unsandboxed;
        SandboxContext {
            settings,
            policy,
            host,
        }
    }

    /// Narrow the context to an agent turn's posture (step 4 of the module
    /// docs). A mode without a sandbox was chosen explicitly (the posture
    /// is Full Access, which only an explicit flag or setting reaches), so
    /// the host may run unsandboxed for it; the label says so.
    pub fn for_posture(mut self, posture: &Posture) -> Self {
        let mode = posture.sandbox_under(self.policy.mode);
        self.set_mode(mode);
        if !mode.is_sandboxed() {
            self.host.allow_unsandboxed = true;
        }
        self
    }

    /// Change the mode, keeping the network setting's meaning: a mode's
    /// default network applies unless the user turned it on.
    fn set_mode(&mut self, mode: SandboxMode) {
        if mode == self.policy.mode {
            return;
        }
        let user_network = self.policy.network != self.policy.mode.default_network();
        self.policy.mode = mode;
        if !user_network {
            self.policy.network = mode.default_network();
        }
    }

    /// The mode every call of this context runs under.
    pub fn mode(&self) -> SandboxMode {
        self.policy.mode
    }

    /// Load the layers for a turn a person's client starts (the runtime
    /// driver, and the TUI's footer preview of the same turn) and decide
    /// its posture and sandbox with [`SandboxContext::for_turn`]. A turn
    /// in Full Access asks for no sandbox as `--sandbox
    /// danger-full-access` does, so the settings' cap (`[sandbox] mode`,
    /// the project's tightening) applies to it like to the flag.
    pub fn load_for_turn(
        opts: &mut LoadOptions,
        ask: &TurnAsk,
    ) -> Result<(Posture, SandboxContext, Vec<String>), ConfigError> {
        let flags = SandboxFlags {
            mode: (ask.permission == Some(Approval::FullAccess))
                .then_some(SandboxMode::DangerFullAccess),
            ..Default::default()
        };
        Ok(SandboxContext::load_with(opts, &flags, RulesFile::Load)?.for_turn(ask))
    }

    /// The one function from what a turn asks for to its posture and
    /// sandbox, with notes for the user: `exec`, `serve --mcp`, the
    /// runtime's turns (and so the TUI's and ACP's) all call it, so the
    /// Full Access and `never-run` rules live here only.
    ///
    /// - With a permission chosen for the turn: that permission, except
    ///   that a configured `never-run` stays.
    /// - Without (`exec`'s rules): the configured permission, but
    ///   `approval_policy = "full-access"` is not applied (only `--auto`
    ///   with an explicit unsandboxed `--sandbox` is Full Access, and
    ///   `never-run` still wins); `--auto` approves questions.
    /// - The sandbox: [`SandboxContext::for_posture`], the posture's
    ///   implied mode narrowed by the context's (which already holds
    ///   `--sandbox` and the project's tightening).
    pub fn for_turn(self, ask: &TurnAsk) -> (Posture, SandboxContext, Vec<String>) {
        let mut p = self.settings.posture(ask.mode);
        p.headless = ask.headless;
        if let Some(a) = ask.permission {
            if p.approval != Approval::NeverRun {
                p.approval = a;
            }
            let ctx = self.for_posture(&p);
            return (p, ctx, Vec::new());
        }
        let mut notes = Vec::new();
        p.auto_approve = ask.auto;
        let explicit_unsandboxed = ask.flag.is_some_and(|m| !m.is_sandboxed());
        if p.approval == Approval::FullAccess && !(ask.auto && explicit_unsandboxed) {
            notes.push(
                "approval_policy = \"full-access\" is not applied by exec: only --auto with \
                 --sandbox danger-full-access (or external-sandbox) runs without the sandbox; \
                 using `ask`"
                    .into(),
            );
            p.approval = Approval::Ask;
        } else if ask.auto && explicit_unsandboxed && p.approval != Approval::NeverRun {
            p.approval = Approval::FullAccess;
        }
        let ctx = self.for_posture(&p);
        if let Some(m) = ask.flag.filter(|m| !m.is_sandboxed()) {
            if !ask.auto {
                notes.push(format!(
                    "--sandbox {m} without --auto: commands still run under `{}`",
                    ctx.mode()
                ));
            } else if ctx.mode() != m {
                notes.push(format!(
                    "--sandbox {m} was narrowed to `{}` by the settings",
                    ctx.mode()
                ));
            }
        }
        (p, ctx, notes)
    }
}

/// What a turn asks for, whichever front end starts it: the one input of
/// [`SandboxContext::for_turn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnAsk {
    /// Plan, Work or Operate.
    pub mode: Mode,
    /// A permission chosen for this turn (the TUI's, a runtime client's);
    /// `None`: the configured one under `exec`'s rules.
    pub permission: Option<Approval>,
    /// `--auto` (a thread's `auto_approve`): approve ordinary questions.
    pub auto: bool,
    /// Nobody can answer a question (`exec`, `serve --mcp`).
    pub headless: bool,
    /// An explicit `--sandbox` flag.
    pub flag: Option<SandboxMode>,
}

impl TurnAsk {
    /// `exec`'s ask (headless, Work mode, the configured permission).
    pub fn exec(auto: bool, flag: Option<SandboxMode>) -> Self {
        TurnAsk {
            mode: Mode::Work,
            permission: None,
            auto,
            headless: true,
            flag,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::authz::{Approval, Mode};
    use crate::config::ConfigPaths;

    fn opts(dir: &std::path::Path) -> LoadOptions {
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut o = LoadOptions::new(dir.join("ws"));
        o.paths = ConfigPaths::from_parts(Some(home), None, None);
        o
    }

    #[test]
    fn flag_then_project_tightens() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join(".codewhale")).unwrap();
        std::fs::write(
            ws.join(".codewhale/config.toml"),
            "sandbox_mode = \"read-only\"\n",
        )
        .unwrap();
        let flags = SandboxFlags {
            mode: Some(SandboxMode::WorkspaceWrite),
            ..Default::default()
        };
        let c = SandboxContext::load_with(&mut opts(d.path()), &flags, RulesFile::Skip).unwrap();
        assert_eq!(c.mode(), SandboxMode::ReadOnly);
        let flags = SandboxFlags {
            no_project_config: true,
            ..flags
        };
        let c = SandboxContext::load_with(&mut opts(d.path()), &flags, RulesFile::Skip).unwrap();
        assert_eq!(c.mode(), SandboxMode::WorkspaceWrite);
    }

    #[test]
    fn posture_narrows_and_full_access_needs_no_fallback_flag() {
        let d = tempfile::tempdir().unwrap();
        let flags = SandboxFlags::default();
        let base = SandboxContext::load_with(&mut opts(d.path()), &flags, RulesFile::Skip).unwrap();
        assert_eq!(base.mode(), SandboxMode::WorkspaceWrite);
        let plan = base
            .clone()
            .for_posture(&Posture::new(Mode::Plan, Approval::Ask));
        assert_eq!(plan.mode(), SandboxMode::ReadOnly);
        assert!(!plan.host.allow_unsandboxed);
        // Full Access implies no sandbox, but the configured mode caps it.
        let full = base
            .clone()
            .for_posture(&Posture::new(Mode::Work, Approval::FullAccess));
        assert_eq!(full.mode(), SandboxMode::WorkspaceWrite);
        let flags = SandboxFlags {
            mode: Some(SandboxMode::DangerFullAccess),
            ..Default::default()
        };
        let open = SandboxContext::load_with(&mut opts(d.path()), &flags, RulesFile::Skip)
            .unwrap()
            .for_posture(&Posture::new(Mode::Work, Approval::FullAccess));
        assert_eq!(open.mode(), SandboxMode::DangerFullAccess);
        assert!(open.host.allow_unsandboxed);
        assert!(open.policy.network);
    }

    /// A client's turn is loaded and decided by one function: Full Access
    /// runs unsandboxed unless the settings cap it, Ask keeps the
    /// configured sandbox, and a configured `never-run` survives any
    /// chosen permission. (The TUI's footer previews with this same call.)
    #[test]
    fn load_for_turn_is_the_drivers_and_the_previews_decision() {
        let ask = |permission| TurnAsk {
            mode: Mode::Work,
            permission: Some(permission),
            auto: false,
            headless: false,
            flag: None,
        };
        let d = tempfile::tempdir().unwrap();
        let (p, c, _) =
            SandboxContext::load_for_turn(&mut opts(d.path()), &ask(Approval::FullAccess)).unwrap();
        assert_eq!(p.approval, Approval::FullAccess);
        assert_eq!(c.mode(), SandboxMode::DangerFullAccess);
        assert!(c.host.allow_unsandboxed);
        let (_, c, _) =
            SandboxContext::load_for_turn(&mut opts(d.path()), &ask(Approval::Ask)).unwrap();
        assert_eq!(c.mode(), SandboxMode::WorkspaceWrite);
        // A project that tightens the mode caps Full Access too.
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join(".codewhale")).unwrap();
        std::fs::write(
            ws.join(".codewhale/config.toml"),
            "sandbox_mode = \"workspace-write\"\n",
        )
        .unwrap();
        let (_, c, _) =
            SandboxContext::load_for_turn(&mut opts(d.path()), &ask(Approval::FullAccess)).unwrap();
        assert_eq!(c.mode(), SandboxMode::WorkspaceWrite);
        assert!(!c.host.allow_unsandboxed);
    }

    #[test]
    fn network_flag_survives_narrowing() {
        let d = tempfile::tempdir().unwrap();
        let flags = SandboxFlags {
            network: true,
            ..Default::default()
        };
        let c = SandboxContext::load_with(&mut opts(d.path()), &flags, RulesFile::Skip)
            .unwrap()
            .for_posture(&Posture::new(Mode::Plan, Approval::Ask));
        assert_eq!(c.mode(), SandboxMode::ReadOnly);
        assert!(c.policy.network);
    }
}
