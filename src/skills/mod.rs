//! Skills: folders with a `SKILL.md` (the open Agent Skills format) that
//! the model can load when relevant.
//!
//! The model sees only each enabled skill's name and description
//! ([`listing`], bounded); the `skill` tool loads one skill's body and the
//! list of its files ([`load`]). A skill is text for the model, never
//! configuration: it cannot change the sandbox, approval, provider or
//! hooks, and its `allowed-tools` can only narrow what a session offers.
//! Which skills are switched off is kept in codewhale's home ([`state`]).
//! docs/SKILLS.md is the user's account.

pub mod discover;
pub mod listing;
pub mod load;
pub mod manifest;
pub mod state;

pub use discover::{discover, roots, Discovery, Problem, Root, RootReport, Scope, Skill};
pub use state::{SkillState, StateError, StateStore};

use crate::config::paths::ConfigPaths;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One skill as `skills list`, `GET /v1/skills` and `/skills` show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listed {
    pub name: String,
    pub description: String,
    /// The skill's `SKILL.md`.
    pub path: PathBuf,
    /// The root's key (`global`, `agents`, `claude`, …).
    pub root: &'static str,
    pub scope: Scope,
    pub enabled: bool,
    /// The `SKILL.md` of the skill of the same name that wins.
    pub shadowed_by: Option<PathBuf>,
    pub allowed_tools: Option<Vec<String>>,
}

/// `skills list --json` and `GET /v1/skills`: every skill, the files
/// that are not valid skills, and what each root held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub skills: Vec<Listed>,
    pub problems: Vec<Problem>,
    pub roots: std::collections::BTreeMap<&'static str, RootReport>,
    /// The state file the on/off switches are kept in.
    pub state_file: PathBuf,
}

/// The discovered skills with their stored on/off state.
#[derive(Clone, Debug, Default)]
pub struct Skills {
    pub discovery: Discovery,
    pub state: SkillState,
    pub state_file: PathBuf,
}

impl Skills {
    /// Discover the skills for `workspace` and read the state file.
    pub fn load(paths: &ConfigPaths, workspace: &Path) -> Result<Skills, StateError> {
        let store = StateStore::new(&paths.codewhale_home);
        let state = store.load()?;
        let discovery = discover(&roots(paths, workspace), workspace);
        Ok(Skills {
            discovery,
            state,
            state_file: store.path(),
        })
    }

    /// Every valid skill, shadowed ones included, in lookup order.
    pub fn listed(&self) -> Vec<Listed> {
        self.discovery
            .skills
            .iter()
            .map(|s| Listed {
                name: s.name.clone(),
                description: s.description.clone(),
                path: s.file.clone(),
                root: s.root,
                scope: s.scope,
                enabled: self.state.enabled(&s.name),
                shadowed_by: s.shadowed_by.clone(),
                allowed_tools: s.allowed_tools.clone(),
            })
            .collect()
    }

    /// The whole account, for `--json` and the runtime API.
    pub fn report(&self) -> Report {
        Report {
            skills: self.listed(),
            problems: self.discovery.problems.clone(),
            roots: self.discovery.roots.iter().cloned().collect(),
            state_file: self.state_file.clone(),
        }
    }

    /// The skills the model is offered: in effect and enabled.
    pub fn usable(&self) -> impl Iterator<Item = &Skill> {
        self.discovery
            .active()
            .filter(|s| self.state.enabled(&s.name))
    }

    /// The usable skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.usable().find(|s| s.name == name)
    }

    /// Whether a skill of this name was found at all (for a clear error
    /// when switching an unknown name).
    pub fn knows(&self, name: &str) -> bool {
        self.discovery.skills.iter().any(|s| s.name == name)
    }
}

impl Skills {
    /// The listing in words (`codewhale skills list`, `/skills`).
    pub fn text(&self) -> String {
        let mut out = String::new();
        let listed = self.listed();
        if listed.is_empty() {
            out.push_str("no skills found (the folders read: docs/SKILLS.md, `doctor --json`)\n");
        }
        for l in &listed {
            let mut flags = Vec::new();
            if !l.enabled {
                flags.push("disabled".to_string());
            }
            if let Some(w) = &l.shadowed_by {
                flags.push(format!("shadowed by {}", w.display()));
            }
            out.push_str(&format!(
                "{}  [{}] {}{}\n    {}\n",
                l.name,
                l.root,
                l.path.display(),
                if flags.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", flags.join("; "))
                },
                l.description
            ));
        }
        for p in &self.discovery.problems {
            out.push_str(&format!("not a skill: {}: {}\n", p.path.display(), p.error));
        }
        out
    }
}

/// `allowed-tools` as codewhale tool names: Claude Code's names mapped
/// (`Read` → `read_file`, `Bash`/`Bash(…)` → `shell`, `Edit`/`Write` →
/// the file-writing tools, `Grep` → `search`, `Glob`/`LS` → `list_dir`);
/// anything else (codewhale names, `mcp__…`) as written. A `Bash(…)`
/// command pattern narrows to the shell tool only, not to that command.
pub fn tool_names(allowed: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in allowed {
        let base = a.split('(').next().unwrap_or(a).trim();
        let mapped: &[&str] = match base {
            "Read" => &["read_file"],
            "Bash" => &["shell"],
            "Edit" | "Write" | "MultiEdit" => &["edit_file", "write_file", "apply_patch"],
            "Grep" => &["search"],
            "Glob" | "LS" => &["list_dir"],
            _ => &[],
        };
        if mapped.is_empty() {
            out.push(base.to_string());
        } else {
            out.extend(mapped.iter().map(|s| s.to_string()));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Why `/skills enable|disable` did nothing.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("no skill `{0}` (see /skills)")]
    Unknown(String),
    #[error(transparent)]
    State(#[from] StateError),
}

/// `/skills [enable|disable NAME]` (the TUI): switch one (a name no folder
/// has is refused), then the listing.
pub fn command(
    paths: &ConfigPaths,
    workspace: &Path,
    change: Option<(String, bool)>,
) -> Result<String, CommandError> {
    let mut head = String::new();
    if let Some((name, enabled)) = change {
        let s = Skills::load(paths, workspace)?;
        if !s.knows(&name) {
            return Err(CommandError::Unknown(name));
        }
        StateStore::new(&paths.codewhale_home).set(&name, enabled)?;
        head = format!(
            "{} `{name}` (from the next turn)\n",
            if enabled { "enabled" } else { "disabled" }
        );
    }
    Ok(format!("{head}{}", Skills::load(paths, workspace)?.text()))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
