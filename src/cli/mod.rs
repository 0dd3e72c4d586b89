//! Command-line interface (clap derive; doc comments are the help text).

pub mod auth;
pub mod doctor;
pub mod exec;
pub mod import;
/// Moved to [`crate::agent::models`] (shared with runtime turns).
pub mod exec_models {
    pub use crate::agent::models::*;
}
pub mod mcp;
pub mod models;
pub mod permissions;
pub mod probe;
pub mod receipts;
pub mod review;
pub mod sandbox;
pub mod setup;
pub mod skills;
pub mod undo;

use clap::{Parser, Subcommand};

/// codewhale: a sandbox-first terminal coding agent. With no command, in
/// a terminal, it opens the interactive UI (docs/TUI.md).
#[derive(Debug, Parser)]
#[command(name = "codewhale", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run or explain commands under a sandbox policy.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// Run the agent headless on one task (see docs/EXEC.md).
    Exec(exec::ExecArgs),
    /// Manage provider keys (stored locally, mode 0600, never printed).
    #[command(subcommand)]
    Auth(auth::AuthCommand),
    /// The provider catalogue: ids, endpoints, default models, prices.
    #[command(subcommand)]
    Models(models::ModelsCommand),
    /// Revert the most recent request's file changes in one step.
    Undo(undo::UndoArgs),
    /// Restore the working folder to snapshot N, or list snapshots (`--list`).
    Restore(undo::RestoreArgs),
    /// Explain what the authorization pipeline decides, without running anything.
    #[command(subcommand)]
    Permissions(permissions::PermissionsCommand),
    /// Attempt one syscall and print its errno (for the sandbox tests).
    #[command(name = "__probe", hide = true)]
    Probe(probe::ProbeArgs),
    /// ssh `ProxyCommand` inside an allow-list sandbox: HOST PORT through
    /// the egress proxy, relayed over stdin/stdout.
    #[command(name = "__egress-connect", hide = true)]
    EgressConnect { host: String, port: String },
    /// The in-sandbox helper stage (started by bwrap, not by users).
    #[command(name = "__sandbox-helper", hide = true)]
    SandboxHelper(sandbox::HelperArgs),
    /// A store's change journal kept between runs (started by a run, not
    /// by users; see `snapshot::keeper`).
    #[command(name = "__snapshot-keeper", hide = true)]
    SnapshotKeeper {
        #[arg(long)]
        store: std::path::PathBuf,
        #[arg(long)]
        workspace: std::path::PathBuf,
    },
    /// Show what a session did and did not do (read-only; see docs/RECEIPTS.md).
    Receipts(receipts::ReceiptsArgs),
    /// Prove what the sandbox enforces here: environment checks and real probes.
    Doctor(doctor::DoctorArgs),
    /// Setup status: sandbox kind and level, config path, provider key presence.
    Setup(setup::SetupArgs),
    /// Serve the runtime: HTTP/SSE (`--http`) or JSON-RPC on stdio
    /// (`--stdio`). See docs/RUNTIME_API.md.
    AppServer(crate::server::AppServerArgs),
    /// Alias of `app-server --http` (with `--insecure` for `--insecure-no-auth`).
    Serve(crate::server::ServeArgs),
    /// The runtime on loopback with a browser client: prints a one-time
    /// link and opens it (see docs/WEB.md).
    Web(crate::server::web::WebArgs),
    /// MCP servers as tools: `~/.codewhale/mcp.json` (see docs/MCP.md).
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Skills (`SKILL.md` folders): list, enable, disable (see docs/SKILLS.md).
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// Bring settings over from another agent, as a proposal applied only
    /// with `--apply` (see docs/IMPORT.md).
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Review changes with a read-only agent: the working tree, `--base
    /// REF`, or a GitHub PR (`--pr N`, `--post`; `review post FILE` for
    /// CI's write stage). See docs/REVIEW.md.
    Review(review::ReviewArgs),
}

/// Parse arguments, run, and return the process exit code.
pub fn main() -> i32 {
    if let Ok(exe) = std::env::current_exe() {
        // Runs keep their undo journal in a keeper started from this
        // executable (`snapshot::keeper`).
        crate::snapshot::keeper::register_exe(exe);
    }
    recover_interrupted_runs();
    if let Some(code) = sandbox_run_fast_path() {
        return code;
    }
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        return crate::tui::run();
    };
    match command {
        Command::Sandbox(cmd) => sandbox::run(cmd),
        Command::Exec(args) => exec::run(args),
        Command::Auth(cmd) => auth::run(cmd),
        Command::Models(cmd) => models::run(cmd),
        Command::Undo(args) => undo::run_undo(args),
        Command::Restore(args) => undo::run_restore(args),
        Command::Permissions(cmd) => permissions::run(cmd),
        Command::Probe(args) => probe::run(args),
        #[cfg(unix)]
        Command::EgressConnect { host, port } => crate::net::connect::main(&host, &port),
        #[cfg(not(unix))]
        Command::EgressConnect { .. } => crate::exit::FAILURE,
        Command::SandboxHelper(args) => sandbox::helper(args),
        Command::SnapshotKeeper { store, workspace } => {
            crate::snapshot::keeper::serve(&store, &workspace)
        }
        Command::Receipts(args) => receipts::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Setup(args) => setup::run(args),
        Command::AppServer(args) => crate::server::run(args),
        Command::Serve(args) => serve(args),
        Command::Web(args) => crate::server::web::run(args),
        Command::Mcp(cmd) => mcp::run(cmd),
        Command::Skills(cmd) => skills::run(cmd),
        Command::Import(cmd) => import::run(cmd),
        Command::Review(args) => review::run(args),
    }
}

/// Before any command (except the in-sandbox helper, which runs inside a
/// sandbox): undo what a codewhale run that died mid-command (SIGKILL)
/// left in protected paths, and say so on stderr. Cheap when there is
/// nothing to do: one directory listing.
fn recover_interrupted_runs() {
    #[cfg(unix)]
    {
        // The keeper is started by a live run, under its store's lock.
        let helper = std::env::args_os()
            .nth(1)
            .is_some_and(|a| a == "__sandbox-helper" || a == "__snapshot-keeper");
        if helper {
            return;
        }
        for (ws, reverts) in crate::host::integrity::recover_all() {
            for r in reverts {
                eprintln!(
                    "codewhale: integrity check of an interrupted run in {}: {}",
                    ws.display(),
                    r.line()
                );
            }
        }
    }
}

/// `codewhale sandbox run …` (the per-command hot path, also what scripts
/// and the benchmark call) parsed by a parser that knows only that
/// subcommand's arguments (release build, measured: 0.3 ms from `main` to
/// parsed for the whole CLI's clap tree, 0.2 ms for this one). Anything
/// this parser does not accept as a run — `--help`, a typo, a missing
/// command — falls through to [`Cli::parse`], so help and error messages
/// are the full CLI's, unchanged.
fn sandbox_run_fast_path() -> Option<i32> {
    #[derive(Debug, Parser)]
    #[command(name = "codewhale sandbox run")]
    struct RunOnly {
        #[command(flatten)]
        args: sandbox::RunArgs,
    }
    let mut argv = std::env::args_os();
    let bin = argv.next()?;
    if argv.next()? != "sandbox" || argv.next()? != "run" {
        return None;
    }
    let parsed = RunOnly::try_parse_from(std::iter::once(bin).chain(argv)).ok()?;
    Some(sandbox::run(sandbox::SandboxCommand::Run(parsed.args)))
}

pub(crate) use crate::exit::report_error;

/// `codewhale serve`: `--mcp` and `--acp` are their own front ends;
/// `--http` is the app-server under the older flag names.
fn serve(args: crate::server::ServeArgs) -> i32 {
    let r = if args.mcp {
        crate::mcp_server::run(args.workspace)
    } else if args.acp {
        crate::acp::run(
            args.workspace,
            std::time::Duration::from_secs(args.approval_timeout),
        )
    } else {
        return crate::server::run(args.into());
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            report_error(&e);
            crate::exit::FAILURE
        }
    }
}
