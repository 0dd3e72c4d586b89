//! Configuration layering, resolved once into [`Settings`].
//!
//! Order: the user config (`~/.codewhale/config.toml`, or the legacy
//! `~/.deepseek/config.toml` when only that exists) → CLI/runtime
//! overrides ([`CliOverrides`], any direction: the user typed them) → the
//! project override `<repo>/.codewhale/config.toml` (tighten-only, see
//! [`project`]; skipped with `--no-project-config`). The user's
//! `permissions.toml` is loaded here too, so everything that decides what
//! runs is read once, before anything runs. A repository never loosens
//! anything. Errors name the file, the line and the key.

pub mod auto_review;
pub mod compaction;
pub mod effort;
pub mod error;
pub mod imports;
pub mod network;
pub mod paths;
pub mod project;
pub mod project_network;
pub mod sandbox_context;
pub mod user;

/// For tests of one config section: `config` as the only user config
/// file (no project config), in a fresh directory, loaded.
#[cfg(test)]
#[allow(clippy::expect_used)]
pub(crate) fn load_user_config_text(config: &str) -> Result<Settings, ConfigError> {
    let t = tempfile::tempdir().expect("tempdir");
    let cw = t.path().join("cw");
    std::fs::create_dir_all(&cw).expect("config dir");
    std::fs::write(cw.join("config.toml"), config).expect("config file");
    let mut o = LoadOptions::new(t.path());
    o.paths = ConfigPaths::from_parts(Some(t.path().to_path_buf()), Some(cw), None);
    o.no_project_config = true;
    load(&o)
}

pub use error::{ConfigError, Location};
pub use paths::ConfigPaths;
pub use project::IgnoredKey;
pub use sandbox_context::{RulesFile, SandboxContext, SandboxFlags, TurnAsk};
pub use user::{SandboxSection, UserConfig};

use crate::authz::rules::{self, RuleSet};
use crate::authz::{Approval, FloorContext, Mode, Posture};
use crate::host::opensandbox::OpenSandboxConfig;
use crate::host::{BackendChoice, HostSettings};
use crate::policy::{SandboxMode, SandboxPolicy};
use std::path::{Path, PathBuf};

/// Values given on the command line (or by the runtime) for this run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CliOverrides {
    pub approval_policy: Option<Approval>,
    pub sandbox_mode: Option<SandboxMode>,
    pub model: Option<String>,
    pub reasoning_effort: Option<crate::config::effort::ReasoningEffort>,
    pub max_subagents: Option<u32>,
    pub allow_shell: Option<bool>,
}

/// What [`load`] needs.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub paths: ConfigPaths,
    /// The workspace (cwd or `-C DIR`); the project override is found from it.
    pub workspace: PathBuf,
    pub overrides: CliOverrides,
    /// `--no-project-config`.
    pub no_project_config: bool,
}

impl LoadOptions {
    /// From the environment for `workspace`.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        LoadOptions {
            paths: ConfigPaths::from_env(),
            workspace: workspace.into(),
            overrides: CliOverrides::default(),
            no_project_config: false,
        }
    }
}

/// Everything resolved: the single settings value the rest of codewhale reads.
#[derive(Clone, Debug)]
pub struct Settings {
    pub paths: ConfigPaths,
    pub workspace: PathBuf,
    /// The user config file read (None when there is none).
    pub user_file: Option<PathBuf>,
    pub user_file_is_legacy: bool,
    /// The project override applied (None when absent or skipped).
    pub project_file: Option<PathBuf>,
    /// The project override's `[sandbox] network`, applied (shrink only)
    /// by [`SandboxContext`] after the command line.
    pub project_network: Option<network::NetworkSetting>,
    /// The user config as read (sections for other subsystems live here).
    pub user: UserConfig,
    /// Effective values after all layers.
    pub approval: Approval,
    pub sandbox_mode: SandboxMode,
    pub allow_shell: bool,
    pub max_subagents: Option<u32>,
    pub model: Option<String>,
    pub reasoning_effort: Option<crate::config::effort::ReasoningEffort>,
    /// Keys not applied (project keys outside the allowed set, loosening attempts).
    pub ignored: Vec<IgnoredKey>,
    /// Non-fatal notes (unknown user-config keys, legacy location in use).
    pub warnings: Vec<String>,
    /// The rules in force: user `permissions.toml` + built-in.
    pub rules: RuleSet,
    pub permissions_file: PathBuf,
    /// The typed `[opensandbox]` section: parsed when the section exists or
    /// the backend is `opensandbox` (then defaults + API-key env variables).
    pub opensandbox: Option<crate::host::opensandbox::OpenSandboxConfig>,
}

impl Settings {
    /// The posture for a turn in `mode` (approval and shell use from
    /// settings; the sandbox mode is the sandbox context's, see
    /// [`SandboxContext::for_posture`]).
    pub fn posture(&self, mode: Mode) -> Posture {
        let mut p = Posture::new(mode, self.approval);
        p.shell_disabled = !self.allow_shell;
        p
    }

    /// Facts for the safety floor.
    pub fn floor_context(&self) -> FloorContext {
        let mut homes: Vec<String> = self
            .paths
            .home
            .iter()
            .map(|h| h.to_string_lossy().into_owned())
            .collect();
        homes.dedup();
        FloorContext {
            homes,
            extra_deny_read: self.user.sandbox.deny_read.clone(),
        }
    }

    /// The sandbox policy for `mode` with the user's `[sandbox]` section.
    pub fn sandbox_policy(&self, mode: SandboxMode) -> SandboxPolicy {
        let mut p = self.user.sandbox.policy(mode, &self.workspace);
        p.state_home = self.paths.state_home_outside_home();
        p
    }

    pub fn host_settings(&self) -> HostSettings {
        let mut h = self.user.sandbox.host_settings();
        h.opensandbox = self.opensandbox.clone();
        h
    }
}

fn read_user(file: &Path) -> Result<Option<(UserConfig, Vec<String>)>, ConfigError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                file: file.to_path_buf(),
                source,
            })
        }
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e| error::from_toml(file, &text, &e))?;
    let cfg: UserConfig = toml::from_str(&text).map_err(|e| error::from_toml(file, &text, &e))?;
    let unknown = table
        .keys()
        .filter(|k| !user::KNOWN_KEYS.contains(&k.as_str()))
        .map(|k| format!("{}: unknown key `{k}` ignored", file.display()))
        .collect();
    Ok(Some((cfg, unknown)))
}

/// Resolve every layer once.
pub fn load(opts: &LoadOptions) -> Result<Settings, ConfigError> {
    load_layers(opts, true)
}

/// [`load`] without the user's `permissions.toml`, for callers that need
/// only the sandbox settings (`codewhale sandbox run|explain`, which never
/// consult the authorization rules): reading and parsing the rules file is
/// per-command start-up cost on that hot path, and a broken rules file has
/// no bearing on a sandboxed run. `rules` holds the built-in layer only.
pub fn load_sandbox(opts: &LoadOptions) -> Result<Settings, ConfigError> {
    load_layers(opts, false)
}

fn load_layers(opts: &LoadOptions, user_rules: bool) -> Result<Settings, ConfigError> {
    let (user_file, legacy) = opts.paths.user_config();
    let mut warnings = Vec::new();
    let (user, found) = match read_user(&user_file)? {
        Some((cfg, unknown)) => {
            warnings.extend(unknown);
            (cfg, true)
        }
        None => (UserConfig::default(), false),
    };
    if found && legacy {
        warnings.push(format!(
            "reading the legacy config {}; move it to {}",
            user_file.display(),
            opts.paths.codewhale_home.join("config.toml").display()
        ));
    }
    let o = &opts.overrides;
    let mut eff = project::Tightenable {
        approval: o
            .approval_policy
            .or(user.approval_policy)
            .unwrap_or_default(),
        sandbox: o.sandbox_mode.or(user.sandbox_mode).unwrap_or_default(),
        allow_shell: o.allow_shell.or(user.allow_shell).unwrap_or(true),
        max_subagents: o.max_subagents.or(user.max_subagents),
        model: o.model.clone().or_else(|| user.model.clone()),
        reasoning_effort: o.reasoning_effort.or(user.reasoning_effort),
    };
    let mut ignored = Vec::new();
    let mut project_file = None;
    let mut project_network = None;
    if !opts.no_project_config {
        let file = paths::project_override(&opts.workspace);
        if let Some((ov, keys)) = project::read(&file)? {
            ignored.extend(keys);
            ignored.extend(project::apply(&file, &ov, &mut eff));
            project_network = ov.sandbox.and_then(|s| s.network);
            project_file = Some(file);
        }
    }
    let opensandbox = match (&user.opensandbox, user.sandbox.backend) {
        (Some(table), _) => Some(OpenSandboxConfig::from_table(table, &user_file)?),
        (None, Some(BackendChoice::Opensandbox)) => Some(OpenSandboxConfig::from_table(
            &toml::Table::new(),
            &user_file,
        )?),
        (None, _) => None,
    };
    let permissions_file = opts.paths.permissions();
    let mut rules = RuleSet::builtin();
    if user_rules {
        rules.extend(rules::load_user_rules(
            &permissions_file,
            opts.paths.home.as_deref(),
        )?);
    }
    Ok(Settings {
        paths: opts.paths.clone(),
        workspace: opts.workspace.clone(),
        opensandbox,
        user_file: found.then_some(user_file),
        user_file_is_legacy: found && legacy,
        project_file,
        project_network,
        user,
        approval: eff.approval,
        sandbox_mode: eff.sandbox,
        allow_shell: eff.allow_shell,
        max_subagents: eff.max_subagents,
        model: eff.model,
        reasoning_effort: eff.reasoning_effort,
        ignored,
        warnings,
        rules,
        permissions_file,
    })
}
