//! `codewhale sandbox run|explain` and the hidden helper stage entry.
//!
//! Settings are resolved once: the user config (`[sandbox]`,
//! `[opensandbox]`) and the tighten-only project override through
//! `config::load_sandbox` (everything `config::load` reads but the
//! authorization rules file), then the flags given on the command line on top.

use crate::config;
use crate::host::backends::bwrap::{self, BwrapOptions};
use crate::host::seccomp::{self, SeccompOptions};
use crate::host::{BackendChoice, ExecOutcome, ExecRequest, HostError, HostSettings, StdinSpec};
use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
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
    /// Allow network access.
    #[arg(long)]
    pub network: bool,
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

/// `__sandbox-helper --spec JSON -- CMD…` (see `host::backends::bwrap::helper`).
#[derive(Debug, Args)]
pub struct HelperArgs {
    #[arg(long)]
    pub spec: String,
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

impl PolicyArgs {
    /// The policy and host settings: config layers first, flags on top.
    fn resolve_settings(
        &self,
        allow_unsandboxed: bool,
    ) -> anyhow::Result<(SandboxPolicy, HostSettings)> {
        let workspace = match &self.workspace {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("reading the current directory")?,
        };
        let mut opts = config::LoadOptions::new(&workspace);
        opts.no_project_config = self.no_project_config;
        let settings = config::load_sandbox(&opts)?;
        for w in &settings.warnings {
            eprintln!("codewhale: {w}");
        }
        let mode = self.mode.unwrap_or(settings.sandbox_mode);
        let mut p = settings.sandbox_policy(mode);
        if self.network {
            p.network = true;
        }
        p.writable_roots.extend(self.writable_roots.iter().cloned());
        let mut h = settings.host_settings();
        if let Some(b) = self.backend {
            h.backend = b;
        }
        if let Some(b) = &self.bwrap_path {
            h.bwrap_path = Some(b.clone());
        }
        h.allow_unsandboxed |= allow_unsandboxed;
        Ok((p, h))
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
    let result = if settings.backend == BackendChoice::Opensandbox || !cfg!(target_os = "linux") {
        // The async backends (remote, macOS, Windows) go through host::run.
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HostError::io("starting the async runtime", e))
            .and_then(|rt| rt.block_on(crate::host::run(&policy, &settings, req)))
    } else {
        // Linux local backends: no runtime on the hot path (see PERFORMANCE.md).
        crate::host::select::run_blocking(&policy, &settings, &req)
    };
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
                out.enforcement.partial.first().map_or("", String::as_str)
            );
        }
        if !out.enforcement.is_sandboxed() {
            eprintln!(
                "codewhale: warning: ran UNSANDBOXED ({})",
                out.enforcement.partial.join("; ")
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
    if settings.backend == BackendChoice::Seatbelt {
        // The Seatbelt planner is pure: its profile can be read on any OS.
        let e = crate::host::seatbelt::explain_policy(&policy)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&e)?);
        } else {
            print!("{}", e.render_text());
        }
        return Ok(());
    }
    let resolved = resolve(&policy, &HostFacts::detect())
        .with_context(|| format!("resolving the policy for {}", policy.workspace.display()))?;
    let seccomp_opts = SeccompOptions::for_bwrap(resolved.network);
    let bwrap_bin = args
        .policy
        .bwrap_path
        .clone()
        .or_else(|| which::which("bwrap").ok())
        .unwrap_or_else(|| PathBuf::from("bwrap"));
    // The same helper executable a run would use.
    #[cfg(target_os = "linux")]
    let exe = crate::host::backends::bwrap::spawn::default_helper_exe()
        .unwrap_or_else(|_| PathBuf::from("codewhale"));
    #[cfg(not(target_os = "linux"))]
    let exe = PathBuf::from("codewhale-sandbox-helper");
    let base = bwrap::placeholder_base();
    // The fd numbers are assigned when a run starts; 3 and 4 are shown.
    let spec = super::sandbox_explain::helper_spec_json(&resolved, &seccomp_opts);
    let opts = BwrapOptions {
        bwrap: bwrap_bin,
        cwd: resolved.workspace.clone(),
        placeholder_file: base.join("empty-file"),
        placeholder_dir: base.join("empty-dir"),
        helper: Some((
            exe,
            vec!["__sandbox-helper".into(), "--spec".into(), spec.into()],
        )),
        command: vec!["CMD".into(), "ARGS…".into()],
    };
    if settings.backend == BackendChoice::Landlock {
        return super::sandbox_explain::landlock(&policy, &resolved, args.json);
    }
    let plan = bwrap::plan(&resolved, &opts);
    let rules = seccomp::rules(&seccomp_opts);
    if args.json {
        let v = serde_json::json!({
            "policy": policy,
            "resolved": resolved,
            "backend": settings.backend,
            "bwrap": match &plan { Ok(p) => serde_json::to_value(p)?, Err(e) => serde_json::json!({"error": e.to_string()}) },
            "seccomp": rules,
            "landlock": super::sandbox_explain::inside_bwrap_json(&resolved),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("mode: {}   network: {}", resolved.mode, resolved.network);
    println!("workspace: {}", resolved.workspace.display());
    println!("writable roots:");
    for r in &resolved.writable_roots {
        println!("  {}  ({})", r.path.display(), r.reason);
    }
    println!("write-protected:");
    for r in &resolved.protected {
        println!("  {} [{:?}]  ({})", r.path.display(), r.kind, r.reason);
    }
    println!("deny-read:");
    for r in resolved.existing_deny_read() {
        println!("  {}  ({})", r.path.display(), r.reason);
    }
    for n in &resolved.notes {
        println!("note: {n}");
    }
    match &plan {
        Ok(p) => {
            println!("bwrap argv (status fd assigned at run time):");
            println!("  {}", p.display());
        }
        Err(e) => println!("bwrap: refuses to run: {e}"),
    }
    println!("seccomp (helper stage, after no_new_privs and dropping all capabilities):");
    for r in &rules {
        println!("  {}", seccomp::describe(r));
    }
    super::sandbox_explain::inside_bwrap_text(&resolved);
    Ok(())
}

/// Entry of the hidden helper subcommand.
pub fn helper(args: HelperArgs) -> i32 {
    #[cfg(target_os = "linux")]
    {
        crate::host::backends::bwrap::helper::main(&args.spec, &args.command)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("codewhale: the sandbox helper runs only on Linux");
        crate::exit::SANDBOX_SETUP
    }
}
