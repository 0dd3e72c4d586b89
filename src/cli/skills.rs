//! `codewhale skills list|enable|disable` (docs/SKILLS.md).
//!
//! Exit codes: 0 done; 1 the named skill was not found; 78 a bad
//! `skills.json` (the message names the file).

use crate::config::ConfigPaths;
use crate::skills::{Skills, StateError, StateStore};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill found, in lookup order (first name wins; a shadowed
    /// duplicate is listed with `shadowed_by`), and files that are not
    /// valid skills.
    List(ListArgs),
    /// Switch a skill on (the default).
    Enable(NameArgs),
    /// Switch a skill off: the model is no longer told about it.
    Disable(NameArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// One JSON object: `{"skills": [...], "problems": [...], "roots": {...}}`.
    #[arg(long)]
    pub json: bool,
    /// Workspace whose skill folders are read (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    /// The skill's name (its front matter's `name`).
    pub name: String,
    /// Workspace whose skill folders are read (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn run(cmd: SkillsCommand) -> i32 {
    match run_inner(cmd) {
        Ok(code) => code,
        Err(e) => {
            super::report_error(&e);
            if e.downcast_ref::<StateError>()
                .is_some_and(|e| matches!(e, StateError::Parse { .. }))
            {
                crate::exit::CONFIG
            } else {
                crate::exit::FAILURE
            }
        }
    }
}

fn workspace(w: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match w {
        Some(w) => Ok(w),
        None => std::env::current_dir().context("current directory"),
    }
}

fn run_inner(cmd: SkillsCommand) -> anyhow::Result<i32> {
    let paths = ConfigPaths::from_env();
    match cmd {
        SkillsCommand::List(a) => {
            let ws = workspace(a.workspace)?;
            let s = Skills::load(&paths, &ws)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&s.report())?);
            } else {
                print!("{}", s.text());
            }
            Ok(crate::exit::OK)
        }
        SkillsCommand::Enable(a) => toggle(&paths, a, true),
        SkillsCommand::Disable(a) => toggle(&paths, a, false),
    }
}

fn toggle(paths: &ConfigPaths, a: NameArgs, enabled: bool) -> anyhow::Result<i32> {
    let ws = workspace(a.workspace)?;
    let s = Skills::load(paths, &ws)?;
    // An unknown name is almost always a typo. Enabling a name that is
    // stored off but no longer found is still allowed (it clears it).
    if !s.knows(&a.name) && (!enabled || s.state.enabled(&a.name)) {
        eprintln!(
            "codewhale: no skill `{}` (see `codewhale skills list`)",
            a.name
        );
        return Ok(crate::exit::FAILURE);
    }
    StateStore::new(&paths.codewhale_home).set(&a.name, enabled)?;
    println!(
        "{} `{}` ({})",
        if enabled { "enabled" } else { "disabled" },
        a.name,
        StateStore::new(&paths.codewhale_home).path().display()
    );
    Ok(crate::exit::OK)
}
