//! The project override `<repo>/.codewhale/config.toml`: tighten-only.
//!
//! A repository is untrusted input, so its override may only make codewhale
//! *stricter*: exactly `model`, `reasoning_effort`, `approval_policy`,
//! `sandbox_mode`, `max_subagents`, `allow_shell` and `[sandbox] network`
//! are read; approval and sandbox only toward stricter, `allow_shell` only
//! to `false`, `max_subagents` only down, the network only smaller
//! (applied last, after the command line: [`super::project_network`]). Every other key (api keys, base URLs,
//! providers, hooks, MCP, sandbox tables) and every loosening attempt is
//! ignored and reported by name. A symlinked override (file or `.codewhale`
//! directory) is rejected, and an invalid one is an error, never treated
//! as absent.

use super::error::{self as cerr, ConfigError};
use crate::authz::Approval;
use crate::policy::SandboxMode;
use serde::Deserialize;
use std::path::Path;

/// Keys a project override may set.
pub const ALLOWED_KEYS: &[&str] = &[
    "sandbox",
    "model",
    "reasoning_effort",
    "approval_policy",
    "sandbox_mode",
    "max_subagents",
    "allow_shell",
];

/// The allowed keys, typed (serde ignores the rest; they are reported from
/// the raw table so errors keep toml's spans).
#[derive(Debug, Default, Deserialize)]
pub struct ProjectOverride {
    pub model: Option<String>,
    pub reasoning_effort: Option<crate::config::effort::ReasoningEffort>,
    pub approval_policy: Option<Approval>,
    pub sandbox_mode: Option<SandboxMode>,
    #[serde(default, deserialize_with = "super::user::de_max_subagents")]
    pub max_subagents: Option<u32>,
    pub allow_shell: Option<bool>,
    /// Only `[sandbox] network` is read from the `[sandbox]` table (shrink
    /// only, see [`super::project_network`]); its other keys are ignored.
    #[serde(default)]
    pub sandbox: Option<ProjectSandbox>,
}

/// The part of `[sandbox]` a project may set.
#[derive(Debug, Default, Deserialize)]
pub struct ProjectSandbox {
    pub network: Option<super::network::NetworkSetting>,
}

/// A key of a config file that was not applied, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredKey {
    pub file: std::path::PathBuf,
    pub key: String,
    pub reason: String,
}

impl std::fmt::Display for IgnoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: `{}` ignored: {}",
            self.file.display(),
            self.key,
            self.reason
        )
    }
}

/// Read and validate the override at `file`. `Ok(None)` when it does not exist.
pub fn read(file: &Path) -> Result<Option<(ProjectOverride, Vec<IgnoredKey>)>, ConfigError> {
    let dir = file.parent().unwrap_or(Path::new("."));
    for p in [dir, file] {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(ConfigError::SymlinkedOverride {
                    file: p.to_path_buf(),
                })
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Read {
                    file: p.to_path_buf(),
                    source,
                })
            }
        }
    }
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    let table: toml::Table = text.parse().map_err(|e| cerr::from_toml(file, &text, &e))?;
    let typed: ProjectOverride =
        toml::from_str(&text).map_err(|e| cerr::from_toml(file, &text, &e))?;
    let mut ignored: Vec<IgnoredKey> = table
        .keys()
        .filter(|k| !ALLOWED_KEYS.contains(&k.as_str()))
        .map(|k| IgnoredKey {
            file: file.to_path_buf(),
            key: k.clone(),
            reason: "not allowed in a project override (only model, reasoning_effort, approval_policy, sandbox_mode, max_subagents, allow_shell, [sandbox] network)".into(),
        })
        .collect();
    if let Some(toml::Value::Table(t)) = table.get("sandbox") {
        ignored.extend(
            t.keys()
                .filter(|k| k.as_str() != "network")
                .map(|k| IgnoredKey {
                    file: file.to_path_buf(),
                    key: format!("sandbox.{k}"),
                    reason: "not allowed in a project override (only `network` of [sandbox], and only to shrink it)".into(),
                }),
        );
    }
    Ok(Some((typed, ignored)))
}

/// The effective values the override may touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tightenable {
    pub approval: Approval,
    pub sandbox: SandboxMode,
    pub allow_shell: bool,
    pub max_subagents: Option<u32>,
    pub model: Option<String>,
    pub reasoning_effort: Option<crate::config::effort::ReasoningEffort>,
}

/// Apply `o` to `base` in the tightening direction only; report what was ignored.
pub fn apply(file: &Path, o: &ProjectOverride, base: &mut Tightenable) -> Vec<IgnoredKey> {
    let mut ignored = Vec::new();
    let mut ignore = |key: &str, reason: String| {
        ignored.push(IgnoredKey {
            file: file.to_path_buf(),
            key: key.to_string(),
            reason,
        })
    };
    if let Some(a) = o.approval_policy {
        if a >= base.approval {
            base.approval = a;
        } else {
            ignore(
                "approval_policy",
                format!(
                    "`{}` would loosen `{}` (a project may only tighten)",
                    a.as_str(),
                    base.approval.as_str()
                ),
            );
        }
    }
    if let Some(s) = o.sandbox_mode {
        if s.strictness() > base.sandbox.strictness() || s == base.sandbox {
            base.sandbox = s;
        } else {
            ignore(
                "sandbox_mode",
                format!(
                    "`{s}` is not stricter than `{}` (a project may only tighten)",
                    base.sandbox
                ),
            );
        }
    }
    if let Some(v) = o.allow_shell {
        if v {
            ignore(
                "allow_shell",
                "only `false` is accepted from a project".into(),
            );
        } else {
            base.allow_shell = false;
        }
    }
    if let Some(n) = o.max_subagents {
        match base.max_subagents {
            Some(cur) if n > cur => ignore(
                "max_subagents",
                format!("{n} would raise the limit of {cur} (a project may only lower it)"),
            ),
            _ => base.max_subagents = Some(n),
        }
    }
    if let Some(m) = &o.model {
        base.model = Some(m.clone());
    }
    if let Some(r) = o.reasoning_effort {
        base.reasoning_effort = Some(r);
    }
    ignored
}
