//! `codewhale sandbox run|explain`.

use crate::host::BackendChoice;
use crate::policy::SandboxMode;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Run a command under a sandbox policy and exit with its code.
    Run(RunArgs),
    /// Print the resolved policy and the backend's plan without running anything.
    Explain(ExplainArgs),
}

/// Policy flags shared by `run` and `explain`.
#[derive(Debug, Args, Clone)]
pub struct PolicyArgs {
    /// Sandbox mode.
    #[arg(long = "sandbox", value_enum, default_value_t = SandboxMode::WorkspaceWrite)]
    pub mode: SandboxMode,
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Allow network access.
    #[arg(long)]
    pub network: bool,
    /// Extra writable root (repeatable).
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_roots: Vec<PathBuf>,
    /// Which backend to use.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Kill the command (and everything it started) after N milliseconds.
    #[arg(long, value_name = "N")]
    pub timeout_ms: Option<u64>,
    /// Write the run's outcome and enforcement report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Run without a sandbox when none is available (labelled `unsandboxed`).
    #[arg(long)]
    pub allow_unsandboxed: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: SandboxCommand) -> i32 {
    let _ = cmd;
    eprintln!("codewhale: sandbox subcommands are being built");
    crate::exit::SANDBOX_SETUP
}
