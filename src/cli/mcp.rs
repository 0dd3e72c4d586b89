//! `codewhale mcp add|list|validate|remove`: the MCP servers of
//! `~/.codewhale/mcp.json` (see docs/MCP.md).
//!
//! Exit codes: 0 done (`list`: every enabled server initialized); 1 a
//! server failed (`list`) or the named server does not exist (`remove`);
//! 2 bad flags; 78 a bad `mcp.json` (the message names file, line and key).

use crate::config::{ConfigPaths, LoadOptions, RulesFile, SandboxContext, SandboxFlags};
use crate::mcp::client::{ManagerSpec, McpManager, Phase, ServerStatus};
use crate::mcp::config::{self, McpConfigError, ServerEntry, ServerSandbox};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Add (or replace) a stdio server: `codewhale mcp add NAME -- COMMAND [ARGS…]`.
    Add(AddArgs),
    /// Start every configured server under the sandbox and report, per
    /// server: command found, started, initialized, tools, last error.
    List(ListArgs),
    /// Check `mcp.json` without starting anything.
    Validate,
    /// Remove a server from `mcp.json`.
    Remove {
        /// The server's name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Server name: letters, digits, `-`, `_` (its tools are `mcp__NAME__TOOL`).
    pub name: String,
    /// `KEY=VALUE` set for the server (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Let the server use the network (default: no network).
    #[arg(long)]
    pub network: bool,
    /// The server's sandbox (default: workspace-write).
    #[arg(long, value_enum)]
    pub sandbox: Option<SandboxArg>,
    /// Seconds to answer `initialize` and `tools/list` (default 30, at most 300).
    #[arg(long, value_name = "SECONDS")]
    pub startup_timeout: Option<u64>,
    /// Seconds one tool call may take (default 120, at most 900).
    #[arg(long, value_name = "SECONDS")]
    pub tool_timeout: Option<u64>,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
#[clap(rename_all = "kebab-case")]
pub enum SandboxArg {
    ReadOnly,
    WorkspaceWrite,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// One JSON object: `{"config_file", "servers": [...]}`.
    #[arg(long)]
    pub json: bool,
    /// Workspace the servers are started in (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn run(cmd: McpCommand) -> i32 {
    match run_inner(cmd) {
        Ok(code) => code,
        Err(e) => {
            super::report_error(&e);
            if e.downcast_ref::<McpConfigError>().is_some()
                || e.downcast_ref::<crate::config::ConfigError>().is_some()
            {
                crate::exit::CONFIG
            } else {
                crate::exit::FAILURE
            }
        }
    }
}

fn home() -> anyhow::Result<PathBuf> {
    let paths = ConfigPaths::from_env();
    if paths.home.is_none() && std::env::var_os("CODEWHALE_HOME").is_none() {
        anyhow::bail!("no CODEWHALE_HOME and no HOME: cannot find ~/.codewhale");
    }
    Ok(paths.codewhale_home)
}

fn run_inner(cmd: McpCommand) -> anyhow::Result<i32> {
    let home = home()?;
    let file = config::path(&home);
    match cmd {
        McpCommand::Add(a) => add(&file, a),
        McpCommand::Remove { name } => {
            let mut doc = config::load(&file)?;
            if doc.mcp_servers.remove(&name).is_none() {
                eprintln!("codewhale: no MCP server `{name}` in {}", file.display());
                return Ok(crate::exit::FAILURE);
            }
            config::save(&file, &doc)?;
            println!("removed `{name}` from {}", file.display());
            Ok(crate::exit::OK)
        }
        McpCommand::Validate => {
            let doc = config::load(&file)?;
            let cwd = std::env::current_dir().context("current directory")?;
            if let Some(n) = config::project_note(&cwd) {
                eprintln!("note: {n}");
            }
            println!(
                "{}: ok ({} server(s){})",
                file.display(),
                doc.mcp_servers.len(),
                if file.exists() { "" } else { ", file absent" }
            );
            Ok(crate::exit::OK)
        }
        McpCommand::List(a) => list(&home, a),
    }
}

fn add(file: &std::path::Path, a: AddArgs) -> anyhow::Result<i32> {
    if let Err(why) = config::check_name(&a.name) {
        eprintln!("codewhale: mcp add {}: {why}", a.name);
        return Ok(crate::exit::USAGE);
    }
    let mut doc = config::load(file)?;
    let (command, args) = match a.command.split_first() {
        Some((c, rest)) => (c.clone(), rest.to_vec()),
        None => {
            eprintln!("codewhale: mcp add: give the command after `--`");
            return Ok(crate::exit::USAGE);
        }
    };
    let mut e = ServerEntry::new(command, args);
    for kv in &a.env {
        let Some((k, v)) = kv.split_once('=') else {
            eprintln!("codewhale: --env {kv:?}: expected KEY=VALUE");
            return Ok(crate::exit::USAGE);
        };
        e.env.insert(k.to_string(), v.to_string());
    }
    e.network = a.network;
    e.sandbox = a.sandbox.map(|s| match s {
        SandboxArg::ReadOnly => ServerSandbox::ReadOnly,
        SandboxArg::WorkspaceWrite => ServerSandbox::WorkspaceWrite,
    });
    e.startup_timeout_sec = a.startup_timeout;
    e.tool_timeout_sec = a.tool_timeout;
    let replaced = doc.mcp_servers.insert(a.name.clone(), e).is_some();
    config::save(file, &doc)?;
    println!(
        "{} `{}` in {}",
        if replaced { "replaced" } else { "added" },
        a.name,
        file.display()
    );
    Ok(crate::exit::OK)
}

fn list(home: &std::path::Path, a: ListArgs) -> anyhow::Result<i32> {
    let workspace = match a.workspace {
        Some(w) => w,
        None => std::env::current_dir().context("current directory")?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let mut o = LoadOptions::new(&workspace);
    let sandbox = SandboxContext::load_with(&mut o, &SandboxFlags::default(), RulesFile::Load)?;
    let spec = ManagerSpec::new(home, sandbox.policy.clone(), sandbox.host.clone());
    let note = config::project_note(&workspace);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let statuses = runtime.block_on(async {
        let m = McpManager::start(spec)?;
        m.wait_settled(m.startup_bound() + std::time::Duration::from_secs(2))
            .await;
        let s = m.status();
        m.stop_all();
        Ok::<_, McpConfigError>((s, m.config_file().to_path_buf()))
    });
    let (statuses, file) = statuses?;
    let failed = statuses
        .iter()
        .any(|s| s.enabled && s.state != Phase::Ready);
    if a.json {
        let v = serde_json::json!({
            "config_file": file,
            "project_mcp_json": note,
            "servers": statuses,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if let Some(n) = &note {
            eprintln!("note: {n}");
        }
        if statuses.is_empty() {
            println!("no MCP servers in {}", file.display());
        }
        for s in &statuses {
            print_status(s);
        }
    }
    Ok(if failed {
        crate::exit::FAILURE
    } else {
        crate::exit::OK
    })
}

fn print_status(s: &ServerStatus) {
    let state = serde_json::to_value(s.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    println!(
        "{}: {state} — command {} ({}), started {}, initialized {}, {} tool(s); sandbox {}, network {}, backend {}",
        s.name,
        s.command,
        if s.command_found { "found" } else { "not found" },
        yes(s.started),
        yes(s.initialized),
        s.tools,
        s.sandbox,
        if s.network { "on" } else { "off" },
        s.backend.as_deref().unwrap_or("-"),
    );
    if let Some(e) = &s.last_error {
        println!("  last error: {e}");
    }
    println!("  stderr log: {}", s.stderr_log.display());
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
