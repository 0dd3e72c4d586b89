//! `codewhale sandbox run|explain` and the hidden helper stage entry.
//!
//! Settings are resolved once: the user config (`[sandbox]`,
//! `[opensandbox]`) and the tighten-only project override through
//! `config::load_sandbox` (everything `config::load` reads but the
//! authorization rules file), then the flags given on the command line on top.

use crate::config;
use crate::host::{BackendChoice, ExecOutcome, ExecRequest, HostSettings, StdinSpec};
use crate::policy::{SandboxMode, SandboxPolicy};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Run a command under a sandbox policy and exit with its code.
    ///
    /// Exit codes: the command's own; 128+N when it died of signal N; 124
    /// timeout; 125 the sandbox could not be set up (the command did not
    /// run); 126 found but not executable; 127 not found.
    Run(RunArgs),
    /// Print the resolved policy and the backend's plan without running anything.
    Explain(ExplainArgs),
}

/// Policy flags shared by `run` and `explain`.
#[derive(Debug, Args, Clone)]
pub struct PolicyArgs {
    /// Sandbox mode (default: `sandbox_mode` from the config, else workspace-write).
    #[arg(long = "sandbox", value_enum)]
    pub mode: Option<SandboxMode>,
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Network: `--network` (= on), `--network=off|on|allowlist`.
    /// `allowlist` reaches only the names allowed in `[sandbox.network]`
    /// and by `--allow-domain`, through codewhale's egress proxy.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "on", value_parser = parse_network_mode)]
    pub network: Option<crate::net::NetworkMode>,
    /// Allow this host name (`crates.io`, `*.example.com`, `@registries`)
    /// through the egress proxy (repeatable; implies `--network=allowlist`
    /// unless the network is on).
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    pub allow_domains: Vec<String>,
    /// Extra writable root (repeatable).
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_roots: Vec<PathBuf>,
    /// Which backend to use (default: `[sandbox] backend` from the config, else auto).
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// Ignore `<workspace>/.codewhale/config.toml`.
    #[arg(long)]
    pub no_project_config: bool,
    /// The bwrap binary to use (default: `bwrap` on PATH, never one inside the workspace).
    #[arg(long, value_name = "PATH")]
    pub bwrap_path: Option<PathBuf>,
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

/// `__sandbox-helper --spec JSON -- CMD…` (see `host::helper_main`).
#[derive(Debug, Args)]
pub struct HelperArgs {
    #[arg(long)]
    pub spec: String,
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// clap's parser for `--network=MODE`.
pub fn parse_network_mode(s: &str) -> Result<crate::net::NetworkMode, String> {
    crate::net::NetworkMode::parse(s).map_err(|e| e.to_string())
}

/// `--allow-domain` entries must parse, and make no sense with the network
/// on. Returns them as entries (a URL's host; see
/// `net::policy::flag_entry`), saying on stderr what was taken from a URL.
pub fn check_allow_domains(
    mode: Option<crate::net::NetworkMode>,
    domains: &[String],
) -> anyhow::Result<Vec<String>> {
    let mut entries = Vec::with_capacity(domains.len());
    for d in domains {
        let (entry, note) = crate::net::policy::flag_entry(d)
            .map_err(|e| anyhow::anyhow!("--allow-domain {d}: {e}"))?;
        crate::net::policy::expand(std::slice::from_ref(&entry))
            .map_err(|e| anyhow::anyhow!("--allow-domain {d}: {e}"))?;
        if let Some(n) = note {
            eprintln!("codewhale: --allow-domain {d}: {n}");
        }
        entries.push(entry);
    }
    if mode == Some(crate::net::NetworkMode::On) && !domains.is_empty() {
        anyhow::bail!(
            "--allow-domain needs --network=allowlist (with --network=on everything is reachable)"
        );
    }
    if mode == Some(crate::net::NetworkMode::Off) && !domains.is_empty() {
        anyhow::bail!("--allow-domain contradicts --network=off");
    }
    Ok(entries)
}

impl PolicyArgs {
    /// The policy and host settings through the one sandbox context
    /// (`config::SandboxContext`): the user config, these flags on top,
    /// then the project's tighten-only override. The rules file is not read.
    fn resolve_settings(
        &self,
        allow_unsandboxed: bool,
    ) -> anyhow::Result<(SandboxPolicy, HostSettings)> {
        let workspace = match &self.workspace {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("reading the current directory")?,
        };
        let allow_domains = check_allow_domains(self.network, &self.allow_domains)?;
        let flags = config::SandboxFlags {
            mode: self.mode,
            network: false,
            network_mode: self.network,
            allow_domains,
            writable_roots: self.writable_roots.clone(),
            backend: self.backend,
            bwrap_path: self.bwrap_path.clone(),
            allow_unsandboxed,
            no_project_config: self.no_project_config,
        };
        let ctx = config::SandboxContext::load(&workspace, &flags, config::RulesFile::Skip)?;
        for w in &ctx.settings.warnings {
            eprintln!("codewhale: {w}");
        }
        for k in &ctx.settings.ignored {
            eprintln!("codewhale: {k}");
        }
        Ok((ctx.policy, ctx.host))
    }
}

pub fn run(cmd: SandboxCommand) -> i32 {
    match cmd {
        SandboxCommand::Run(args) => run_cmd(args),
        SandboxCommand::Explain(args) => match explain(&args) {
            Ok(()) => crate::exit::OK,
            Err(e) => {
                super::report_error(&e);
                crate::exit::FAILURE
            }
        },
    }
}

fn write_report(path: &Path, value: &serde_json::Value) -> i32 {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("codewhale: --report-json {}: {e}", path.display());
        return crate::exit::FAILURE;
    }
    crate::exit::OK
}

fn run_cmd(args: RunArgs) -> i32 {
    let (policy, settings) = match args.policy.resolve_settings(args.allow_unsandboxed) {
        Ok(v) => v,
        Err(e) => {
            super::report_error(&e);
            return crate::exit::SANDBOX_SETUP;
        }
    };
    let mut req = ExecRequest::new(args.command);
    req.tee = true;
    req.stdin = StdinSpec::Inherit;
    req.timeout = args.timeout_ms.map(Duration::from_millis);
    // The one dispatcher, blocking: no async runtime on the hot path
    // (OpenSandbox builds its own; see PERFORMANCE.md).
    let result = crate::host::run_blocking(&policy, &settings, &req);
    let code = match &result {
        Ok(out) => out.shell_code(),
        Err(e) => {
            eprintln!("codewhale: {e}");
            e.exit_code()
        }
    };
    if let Ok(out) = &result {
        if settings.backend == BackendChoice::Auto
            && out.enforcement.backend == crate::host::BackendKind::Landlock
        {
            eprintln!(
                "codewhale: note: using the landlock tier ({})",
                out.enforcement
                    .partial
                    .first()
                    .map_or(String::new(), |p| p.reason.clone())
            );
        }
        if let Some(e) = &out.enforcement.egress {
            // `network: 3 connections to crates.io; 1 refused: evil.example (…)`.
            eprintln!("codewhale: {}", e.line);
        }
        // The command ran in the workspace (`-C`).
        for h in crate::host::hints::after_run(out, &policy, &policy.workspace) {
            eprintln!("codewhale: {}", h.text());
        }
        if !out.enforcement.is_sandboxed() {
            eprintln!(
                "codewhale: warning: ran UNSANDBOXED ({})",
                out.enforcement
                    .partial
                    .iter()
                    .map(|p| p.reason.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    if let Some(path) = &args.report_json {
        // Built only when asked for: serialising the outcome is per-run
        // work nobody reads otherwise.
        let report = match &result {
            Ok(out) => outcome_json(out),
            Err(e) => serde_json::json!({ "error": e.to_string(), "exit_code": e.exit_code() }),
        };
        if write_report(path, &report) != crate::exit::OK && code == crate::exit::OK {
            return crate::exit::FAILURE;
        }
    }
    code
}

fn outcome_json(out: &ExecOutcome) -> serde_json::Value {
    let mut v = serde_json::to_value(out).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("exit_code".into(), out.shell_code().into());
    }
    v
}

fn explain(args: &ExplainArgs) -> anyhow::Result<()> {
    let (policy, settings) = args.policy.resolve_settings(false)?;
    let format = if args.json {
        crate::host::explain::Format::Json
    } else {
        crate::host::explain::Format::Text
    };
    let text = crate::host::explain::explain(&policy, &settings, format)
        .with_context(|| format!("explaining the policy for {}", policy.workspace.display()))?;
    print!("{text}");
    if format == crate::host::explain::Format::Json {
        println!();
    }
    Ok(())
}

/// Entry of the hidden helper subcommand.
pub fn helper(args: HelperArgs) -> i32 {
    #[cfg(target_os = "linux")]
    {
        crate::host::helper_main(&args.spec, &args.command)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("codewhale: the sandbox helper runs only on Linux");
        crate::exit::SANDBOX_SETUP
    }
}
