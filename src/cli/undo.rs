//! `codewhale undo` and `codewhale restore`: roll the working folder back
//! from the snapshot store. Neither touches conversation history.
//!
//! `undo` needs no trust: it only ever goes back to the state before the
//! latest request, and is itself undoable. `restore N` can jump anywhere,
//! so it requires trust: `--trust`, `trust = true` in the user config, or
//! the Full Access approval posture (`approval_policy = "full-access"`,
//! after the project override, which can only tighten it). Both read the
//! configuration through `config::load`, so `[sandbox] deny_read` also
//! shapes what the pre-restore snapshot leaves out.

use crate::authz::Approval;
use crate::config::{self, LoadOptions, Settings};
use crate::policy::SandboxMode;
use crate::snapshot::{report, SnapshotStore, UndoScope};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct UndoArgs {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Undo the latest request of this session.
    #[arg(long, value_name = "ID", conflicts_with = "last")]
    pub session: Option<String>,
    /// Undo the latest request of the most recent session (the default).
    #[arg(long)]
    pub last: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The snapshot number to restore (see `--list`).
    #[arg(
        value_name = "N",
        required_unless_present = "list",
        conflicts_with = "list"
    )]
    pub id: Option<u64>,
    /// List the kept snapshots instead of restoring.
    #[arg(long)]
    pub list: bool,
    /// With `--list`: print JSON.
    #[arg(long, requires = "list")]
    pub json: bool,
    /// Trust this restore (otherwise `trust = true` in config.toml is needed).
    #[arg(long)]
    pub trust: bool,
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn run_undo(args: UndoArgs) -> i32 {
    finish(undo(args))
}

pub fn run_restore(args: RestoreArgs) -> i32 {
    finish(restore(args))
}

fn finish(r: anyhow::Result<()>) -> i32 {
    match r {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            super::report_error(&e);
            crate::exit::FAILURE
        }
    }
}

fn open_store(workspace: Option<PathBuf>) -> anyhow::Result<(SnapshotStore, Settings)> {
    let opts = report::options()?;
    let ws = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let settings = config::load(&LoadOptions::new(&ws))?;
    // The pre-restore snapshot must leave out the same deny-read files the
    // agent's snapshots do: the policy with the user's `[sandbox]` section.
    let store = report::open_excluding(&ws, opts, |w| {
        settings.user.sandbox.policy(SandboxMode::WorkspaceWrite, w)
    })?;
    Ok((store, settings))
}

fn undo(args: UndoArgs) -> anyhow::Result<()> {
    print!("{}", undo_report(args)?);
    Ok(())
}

/// `codewhale undo` without printing: the text it prints.
pub fn undo_report(args: UndoArgs) -> anyhow::Result<String> {
    let scope = match args.session {
        Some(s) => UndoScope::Session(s),
        None => UndoScope::Last,
    };
    let (mut store, _) = open_store(args.workspace)?;
    Ok(report::undo(&mut store, &scope)?)
}

fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    if args.list {
        let (store, _) = open_store(args.workspace)?;
        return list(&store, args.json);
    }
    print!("{}", restore_report(args)?);
    Ok(())
}

/// `codewhale restore N` without printing (trust as the CLI checks it:
/// `args.trust`, the config's `trust`, or Full Access).
pub fn restore_report(args: RestoreArgs) -> anyhow::Result<String> {
    let (mut store, settings) = open_store(args.workspace)?;
    let id = args
        .id
        .ok_or_else(|| anyhow!("restore: give a snapshot number N or --list"))?;
    if !args.trust && !configured_trust(&settings)? {
        bail!(
            "restore rewrites the working folder and needs trust: pass --trust, set \
             `trust = true` in {}, or use approval_policy = \"full-access\"",
            settings.paths.user_config().0.display()
        );
    }
    Ok(report::restore(&mut store, id)?)
}

fn list(store: &SnapshotStore, json: bool) -> anyhow::Result<()> {
    if json {
        let v = serde_json::json!({
            "workspace": store.workspace(),
            "store": store.dir(),
            "snapshots": store.list(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if store.list().is_empty() {
        println!("No snapshots yet for {}.", store.workspace().display());
        return Ok(());
    }
    println!(
        "{:>5}  {:<20}  {:<24}  session/request",
        "N", "taken (UTC)", "label"
    );
    for r in store.list().iter().rev() {
        let ctx = match (&r.meta.session_id, r.meta.request.or(r.meta.turn)) {
            (Some(s), Some(n)) => format!("{s} #{n}"),
            (Some(s), None) => s.clone(),
            (None, Some(n)) => format!("#{n}"),
            (None, None) => String::new(),
        };
        println!(
            "{:>5}  {:<20}  {:<24}  {ctx}",
            r.id,
            r.created_at.get(..19).unwrap_or(&r.created_at),
            r.label.to_string()
        );
    }
    Ok(())
}

/// Whether the settings trust a restore: `trust = true` in the user config
/// (only the user config has `trust`; a project override cannot set it),
/// or the Full Access approval posture.
fn configured_trust(settings: &Settings) -> anyhow::Result<bool> {
    if settings.approval == Approval::FullAccess {
        return Ok(true);
    }
    match &settings.user.trust {
        None => Ok(false),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(other) => bail!(
            "{}: key `trust` must be true or false, found {}",
            settings.paths.user_config().0.display(),
            other.type_str()
        ),
    }
}
