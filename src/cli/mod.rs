//! Command-line interface (clap derive; doc comments are the help text).

pub mod probe;
pub mod sandbox;

use clap::{Parser, Subcommand};

/// codewhale: a sandbox-first terminal coding agent.
#[derive(Debug, Parser)]
#[command(name = "codewhale", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run or explain commands under a sandbox policy.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// Attempt one syscall and print its errno (for the sandbox tests).
    #[command(name = "__probe", hide = true)]
    Probe(probe::ProbeArgs),
    /// The in-sandbox helper stage (started by bwrap, not by users).
    #[command(name = "__sandbox-helper", hide = true)]
    SandboxHelper(sandbox::HelperArgs),
}

/// Parse arguments, run, and return the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Command::Sandbox(cmd) => sandbox::run(cmd),
        Command::Probe(args) => probe::run(args),
        Command::SandboxHelper(args) => sandbox::helper(args),
    }
}

/// Print an error chain to stderr in one consistent format.
pub fn report_error(err: &anyhow::Error) {
    eprintln!("codewhale: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}
