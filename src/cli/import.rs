//! `codewhale import claude [--apply] [--output F]` (docs/IMPORT.md).
//!
//! Exit codes: 0 done (a proposal printed or written, or applied); 1 a
//! file could not be read or written; 78 a Claude file that does not parse
//! (the message names it).

use crate::claude_import::{apply, propose, render, ImportError, Locations};
use crate::config::ConfigPaths;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Claude Code: `~/.claude/settings.json` (model, permission rules),
    /// `~/.claude.json` and the workspace's `.mcp.json` (MCP servers),
    /// `CLAUDE.md`. Prints a proposal; writes only with `--apply`.
    Claude(ClaudeArgs),
}

#[derive(Debug, Args)]
pub struct ClaudeArgs {
    /// Write the proposal into codewhale's files.
    #[arg(long)]
    pub apply: bool,
    /// Write the proposal to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Workspace whose `.mcp.json` and `CLAUDE.md` are read (default: the
    /// current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn run(cmd: ImportCommand) -> i32 {
    let ImportCommand::Claude(a) = cmd;
    match claude(a) {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            super::report_error(&e);
            match e.downcast_ref::<ImportError>() {
                Some(ImportError::Json { .. } | ImportError::Toml { .. } | ImportError::Mcp(_)) => {
                    crate::exit::CONFIG
                }
                _ => crate::exit::FAILURE,
            }
        }
    }
}

fn claude(a: ClaudeArgs) -> anyhow::Result<()> {
    let paths = ConfigPaths::from_env();
    let home = paths
        .home
        .clone()
        .context("no HOME: cannot find ~/.claude")?;
    let workspace = match a.workspace {
        Some(w) => w,
        None => std::env::current_dir().context("current directory")?,
    };
    let workspace = std::fs::canonicalize(&workspace).unwrap_or(workspace);
    let loc = Locations {
        home,
        codewhale_home: paths.codewhale_home,
        workspace,
    };
    let p = propose(&loc)?;
    let text = render(&p, &loc)?;
    match &a.output {
        Some(f) => {
            std::fs::write(f, &text).with_context(|| format!("writing {}", f.display()))?;
            eprintln!("codewhale: proposal written to {}", f.display());
        }
        None => print!("{text}"),
    }
    if a.apply {
        for line in apply(&p, &loc)? {
            eprintln!("codewhale: applied: {line}");
        }
    }
    Ok(())
}
