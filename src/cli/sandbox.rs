//! `codewhale sandbox run|explain` and the hidden helper stage entry.
//!
//! Settings come from flags only for now: the config layering (`[sandbox]`
//! in the user config) is owned by `src/config/` and is wired in there.

use crate::host::linux::bwrap::{self, BwrapOptions};
use crate::host::linux::seccomp::{self, SeccompOptions};
use crate::host::{BackendChoice, ExecOutcome, ExecRequest, HostSettings, StdinSpec};
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

/// `__sandbox-helper --spec JSON -- CMD…` (see `host::linux::helper`).
#[derive(Debug, Args)]
pub struct HelperArgs {
    #[arg(long)]
    pub spec: String,
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

impl PolicyArgs {
    fn policy(&self) -> anyhow::Result<SandboxPolicy> {
        let workspace = match &self.workspace {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("reading the current directory")?,
        };
        let mut p = SandboxPolicy::new(self.mode, workspace);
        p.network = self.network || self.mode.default_network();
        p.writable_roots = self.writable_roots.clone();
        Ok(p)
    }

    fn settings(&self, allow_unsandboxed: bool) -> HostSettings {
        HostSettings {
            backend: self.backend,
            bwrap_path: self.bwrap_path.clone(),
            allow_unsandboxed,
            helper_exe: None,
            opensandbox: None,
        }
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
    let policy = match args.policy.policy() {
        Ok(p) => p,
        Err(e) => {
            super::report_error(&e);
            return crate::exit::SANDBOX_SETUP;
        }
    };
    let settings = args.policy.settings(args.allow_unsandboxed);
    let mut req = ExecRequest::new(args.command);
    req.tee = true;
    req.stdin = StdinSpec::Inherit;
    req.timeout = args.timeout_ms.map(Duration::from_millis);
    let result = crate::host::select::run_blocking(&policy, &settings, &req);
    let (code, report) = match &result {
        Ok(out) => (out.shell_code(), outcome_json(out)),
        Err(e) => {
            eprintln!("codewhale: {e}");
            (
                e.exit_code(),
                serde_json::json!({ "error": e.to_string(), "exit_code": e.exit_code() }),
            )
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
    let policy = args.policy.policy()?;
    let resolved = resolve(&policy, &HostFacts::detect())
        .with_context(|| format!("resolving the policy for {}", policy.workspace.display()))?;
    let seccomp_opts = SeccompOptions::for_bwrap(resolved.network);
    let bwrap_bin = args
        .policy
        .bwrap_path
        .clone()
        .or_else(|| which::which("bwrap").ok())
        .unwrap_or_else(|| PathBuf::from("bwrap"));
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("codewhale"));
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
    if args.policy.backend == BackendChoice::Landlock {
        return super::sandbox_explain::landlock(&policy, &resolved, args.json);
    }
    let plan = bwrap::plan(&resolved, &opts);
    let rules = seccomp::rules(&seccomp_opts);
    if args.json {
        let v = serde_json::json!({
            "policy": policy,
            "resolved": resolved,
            "backend": args.policy.backend,
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
        crate::host::linux::helper::main(&args.spec, &args.command)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("codewhale: the sandbox helper runs only on Linux");
        crate::exit::SANDBOX_SETUP
    }
}
