//! `codewhale exec`: resolve flags, config, provider and sandbox once, then
//! hand over to the agent loop.

use crate::agent::setup::{prepare_run, ModelRequest, RunSetup, SetupError};
use crate::agent::tools::ALL_TOOLS;
use crate::agent::{exec_posture, Emitter, ExecOptions, ExecRun, OutputFormat};
use crate::config::{self, LoadOptions, RulesFile, SandboxContext, SandboxFlags, Settings};
use crate::host::BackendChoice;
use crate::policy::SandboxMode;
use crate::runtime::exec_client::{self, ExecThread, ExecThreadSpec};
use crate::session::{recover_all, sessions_dir, SessionLog};
use anyhow::{bail, Context};
use clap::Args;
use std::io::Read;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The task. Absent or `-`: read it from stdin.
    pub prompt: Option<String>,
    /// Provider id: any of `codewhale models list` (deepseek, openai,
    /// anthropic, google, groq, ollama, …) or a [providers.NAME] from config.
    #[arg(long)]
    pub provider: Option<String>,
    /// Model (default: the provider's; a local runtime's first listed
    /// model; `auto` routes per turn by the `[router]` config).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// How hard the model reasons: none, minimal, low, medium, high,
    /// xhigh, max (overrides `reasoning_effort` in config; mapped per
    /// provider, see docs/PROVIDERS.md "Reasoning").
    #[arg(long, value_name = "LEVEL", value_parser = parse_effort)]
    pub reasoning_effort: Option<crate::provider::ReasoningEffort>,
    /// Approve what the gates would ask about. Keeps the sandbox
    /// (workspace-write unless --sandbox says otherwise).
    #[arg(long)]
    pub auto: bool,
    /// The posture mode: plan (reads and read-only commands only, read-only
    /// sandbox; sub-agents clamped to it), work (default), operate (Work's
    /// permissions, run as a goal: docs/OPERATE.md).
    #[arg(long, value_enum, default_value_t = crate::authz::Mode::Work)]
    pub mode: crate::authz::Mode,
    /// Sandbox for commands and file tools (default: workspace-write). Only
    /// an explicit danger-full-access removes it.
    #[arg(long = "sandbox", value_enum)]
    pub sandbox: Option<SandboxMode>,
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Tools to offer (comma-separated); without --auto their questions
    /// get no response.
    #[arg(long, value_delimiter = ',', value_name = "TOOLS")]
    pub allowed_tools: Option<Vec<String>>,
    /// Tools never offered or run (comma-separated; wins over --allowed-tools).
    #[arg(long, value_delimiter = ',', value_name = "TOOLS")]
    pub disallowed_tools: Vec<String>,
    /// Stop after N model turns.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub max_turns: u32,
    /// `text`: answer on stdout, progress on stderr; `stream-json`: one
    /// codewhale.exec-stream event per line.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Print one JSON summary object at the end (overrides --output-format).
    #[arg(long)]
    pub json: bool,
    /// Skip the project override `<repo>/.codewhale/config.toml`.
    #[arg(long)]
    pub no_project_config: bool,
    /// Sandbox backend for commands (default: `[sandbox] backend` from the
    /// config, else auto).
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// Network for commands: `--network` (= on), `--network=off|on|allowlist`.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "on", value_parser = super::sandbox::parse_network_mode)]
    pub network: Option<crate::net::NetworkMode>,
    /// Allow this host name through the egress proxy (repeatable; implies
    /// `--network=allowlist` unless the network is on).
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    pub allow_domains: Vec<String>,
}

pub fn run(args: ExecArgs) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) => {
            super::report_error(&e);
            if let Some(p) = e.downcast_ref::<crate::provider::ProviderError>() {
                p.exit_code()
            } else if e.downcast_ref::<config::ConfigError>().is_some()
                || e.downcast_ref::<crate::mcp::config::McpConfigError>()
                    .is_some()
            {
                crate::exit::CONFIG
            } else {
                crate::exit::FAILURE
            }
        }
    }
}

fn read_prompt(arg: Option<String>) -> anyhow::Result<String> {
    let p = match arg {
        Some(p) if p != "-" => p,
        _ => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the prompt from stdin")?;
            s
        }
    };
    if p.trim().is_empty() {
        bail!("empty prompt: pass it as an argument or on stdin");
    }
    Ok(p)
}

fn check_tools(flag: &str, list: &[String]) -> anyhow::Result<()> {
    for t in list {
        // MCP tools are known only once their servers run: any
        // `mcp__…` name or `mcp__…*` family is accepted here.
        // `skill` and `remember` are offered only when the run has skills
        // or memory on, but may always be named.
        let conditional = crate::agent::run::CONDITIONAL_TOOLS.contains(&t.as_str());
        if !ALL_TOOLS.contains(&t.as_str())
            && !conditional
            && t != crate::agent::subagent::AGENT_TOOL
            && !crate::mcp::client_names::is_mcp(t)
        {
            bail!(
                "{flag}: unknown tool `{t}` (tools: {}, {}, agent, or mcp__<server>__<tool> / mcp__<server>__*)",
                ALL_TOOLS.join(", "),
                crate::agent::run::CONDITIONAL_TOOLS.join(", ")
            );
        }
    }
    Ok(())
}

fn run_inner(args: ExecArgs) -> anyhow::Result<i32> {
    // Bad flags and an empty prompt are usage errors (exit 2), like clap's.
    let usage = check_tools(
        "--allowed-tools",
        args.allowed_tools.as_deref().unwrap_or(&[]),
    )
    .and_then(|_| check_tools("--disallowed-tools", &args.disallowed_tools))
    .and_then(|_| read_prompt(args.prompt.clone()));
    let prompt = match usage {
        Ok(p) => p,
        Err(e) => {
            super::report_error(&e);
            return Ok(crate::exit::USAGE);
        }
    };
    let format = if args.json {
        OutputFormat::Json
    } else {
        args.output_format
    };
    let done = run_headless(&args, prompt, Emitter::stdio(format), &mut |_| None)?;
    Ok(done.report.exit_code)
}

/// What [`run_headless`] ran: the loop's last report and the session file.
pub(crate) struct HeadlessRun {
    pub report: crate::agent::ExecReport,
    pub session: PathBuf,
}

/// One headless agent run exactly as `exec` does it (layers, posture,
/// provider, MCP, session file, runtime record), for `exec` and the CLI
/// commands built on it (`review`). `follow_up` sees each completed
/// run's report and may ask for one more turn in the same session (its
/// prompt; the previous prompt and answer go before it).
pub(crate) fn run_headless(
    args: &ExecArgs,
    prompt: String,
    mut out: Emitter,
    follow_up: &mut dyn FnMut(&crate::agent::ExecReport) -> Option<String>,
) -> anyhow::Result<HeadlessRun> {
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("current directory")?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let sandbox = load_context(args, &workspace)?;
    let (posture, sandbox, posture_notes) = if args.mode == crate::authz::Mode::Work {
        exec_posture(sandbox, args.auto, args.sandbox)
    } else {
        // The same one posture function, with the mode asked for.
        sandbox.for_turn(&config::TurnAsk {
            mode: args.mode,
            ..config::TurnAsk::exec(args.auto, args.sandbox)
        })
    };
    let settings = &sandbox.settings;
    let subagents = crate::agent::Spawner::root(settings);
    let mut config_report = config_report(settings, args.no_project_config, &posture_notes);
    config_report["posture"] = posture.describe(sandbox.mode()).into();
    for line in settings
        .warnings
        .iter()
        .cloned()
        .chain(settings.ignored.iter().map(ToString::to_string))
        .chain(posture_notes)
    {
        out.note(&line);
    }
    let home = settings.paths.codewhale_home.clone();
    for r in recover_all(&sessions_dir(&home))? {
        out.note(&format!(
            "recovered session {}: removed {} uncommitted byte(s){}",
            r.path.display(),
            r.truncated_bytes,
            r.interrupted_turn
                .map(|t| format!(", turn {t} marked interrupted"))
                .unwrap_or_default()
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let RunSetup {
        models: resolved_models,
        mut snaps,
        authorizer,
        ctx,
    } = prepare_run(
        &sandbox,
        posture,
        ModelRequest {
            provider: args.provider.as_deref(),
            model: args.model.as_deref(),
        },
        Default::default(),
        &runtime,
        &mut |n: &str| out.note(n),
    )
    .map_err(|e| match e {
        SetupError::Provider(p) => anyhow::Error::new(p),
        SetupError::Config(c) => anyhow::Error::new(c),
        SetupError::Policy(p) => anyhow::Error::new(p),
    })?;
    // The first full look runs while MCP servers start and the model answers.
    snaps.look_ahead();
    let mcp = start_mcp(args, &home, &sandbox, &runtime, &mut out)?;
    let mut authorizer = authorizer;
    let mut ctx = ctx;
    if let Some(m) = &mcp {
        authorizer.set_mcp(m.clone());
    }
    ctx.mcp = mcp.clone();
    let (rt, rt_report) = exec_client::open(&home)?;
    note_runtime_recovery(&mut out, &rt_report);
    let mut log = SessionLog::create(&sessions_dir(&home))?;
    let offered = crate::agent::run::offered_tools(
        args.auto,
        args.allowed_tools.as_deref(),
        &args.disallowed_tools,
    );
    let mut thread = ExecThread::start(
        rt,
        ExecThreadSpec {
            thread_id: log.thread().to_string(),
            workspace: ctx.guard.workspace().to_path_buf(),
            provider: resolved_models.provider_label(),
            model: resolved_models.model_label(),
            agent: !offered.is_empty(),
            allow_shell: offered.contains(&"shell"),
            auto: args.auto,
            prompt: prompt.clone(),
        },
    )?;
    let mut out = out.with_tap(thread.tap());
    let mut opts = ExecOptions {
        prompt,
        auto: args.auto,
        allowed_tools: args.allowed_tools.clone(),
        disallowed_tools: args.disallowed_tools.clone(),
        max_turns: args.max_turns.max(1),
        config: config_report,
        instruction_imports: crate::config::imports::files(
            settings.user.project_instruction_imports.as_ref(),
        ),
        interactive: None,
        compaction: crate::agent::compaction::CompactionOptions {
            threshold: settings.user.compaction.threshold(),
            memory: Default::default(),
        },
    };
    let report = runtime.block_on(async {
        thread.spawn_ticker();
        if let Some(m) = &mcp {
            // The model's first turn should see the servers' tools: wait
            // for them to start, at most their startup timeout.
            m.wait_settled(m.startup_bound()).await;
            for s in m.status() {
                let what = match (&s.state, &s.last_error) {
                    (crate::mcp::client::Phase::Ready, None) => {
                        format!("ready, {} tool(s)", s.tools)
                    }
                    (crate::mcp::client::Phase::Ready, Some(w)) => {
                        format!("ready, {} tool(s); {w}", s.tools)
                    }
                    (_, Some(e)) => format!("not available: {e}"),
                    (p, None) => format!("{p:?}"),
                };
                out.note(&format!("mcp server {}: {what}", s.name));
            }
        }
        let (tx, rx) = tokio::sync::watch::channel(None);
        thread.watch_interrupt(rx.clone());
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = tx.send(Some(crate::agent::InterruptCause::CtrlC));
            }
        });
        let mut spawner = Some(subagents);
        let mut history = Vec::new();
        loop {
            let report = ExecRun::new(&opts, &ctx, resolved_models.models(), &authorizer)
                .hooks(crate::agent::RunHooks {
                    // `exec` offers `agent` with its tools; without `--auto` a
                    // child's question is "no response" like the parent's.
                    spawner: spawner.take(),
                    history: std::mem::take(&mut history),
                    ..crate::agent::RunHooks::new(&crate::agent::Headless)
                })
                .snapshots(&mut snaps)
                .run(&mut out, &mut log, rx.clone())
                .await;
            let next = if report.status == "completed" {
                follow_up(&report)
            } else {
                None
            };
            match next {
                Some(next) => {
                    history.push(crate::provider::Message::User {
                        text: std::mem::replace(&mut opts.prompt, next),
                    });
                    history.push(crate::provider::Message::Assistant {
                        text: report.answer.clone(),
                        tool_calls: Vec::new(),
                        reasoning: Vec::new(),
                    });
                }
                None => break report,
            }
        }
    });
    // The run's outcome is the loop's; a runtime record that could not be
    // written is said, not turned into a different exit code.
    if let Err(e) = runtime.block_on(async { thread.finish(&report.status) }) {
        out.note(&format!(
            "the runtime record of this run is incomplete: {e}"
        ));
    }
    Ok(HeadlessRun {
        report,
        session: log.path().to_path_buf(),
    })
}

/// Start the MCP servers of `mcp.json` when this run can offer MCP tools
/// (`--auto`, or an `mcp__` entry in `--allowed-tools`); `None` otherwise
/// or when none is configured. A project `.mcp.json` is never read (noted).
fn start_mcp(
    args: &ExecArgs,
    home: &std::path::Path,
    sandbox: &SandboxContext,
    runtime: &tokio::runtime::Runtime,
    out: &mut Emitter,
) -> anyhow::Result<Option<std::sync::Arc<crate::mcp::McpManager>>> {
    use crate::mcp::{client_names, config as mcp_config, ManagerSpec, McpManager};
    if let Some(n) = mcp_config::project_note(&sandbox.settings.workspace) {
        out.note(&n);
    }
    let wanted = match &args.allowed_tools {
        Some(list) => list.iter().any(|t| client_names::is_mcp(t)),
        None => args.auto,
    };
    if !wanted {
        return Ok(None);
    }
    let spec = ManagerSpec::new(home, sandbox.policy.clone(), sandbox.host.clone());
    let doc = mcp_config::load(&spec.config_file)?;
    if !doc.mcp_servers.values().any(|e| e.enabled) {
        return Ok(None);
    }
    let _enter = runtime.enter();
    Ok(Some(McpManager::start(spec)?))
}

/// Say what opening the runtime store repaired (nothing to say normally).
fn note_runtime_recovery(out: &mut crate::agent::Emitter, r: &crate::runtime::OpenReport) {
    if let Some(t) = &r.torn {
        out.note(&format!(
            "runtime event log: removed {} uncommitted byte(s) (seq {} skipped)",
            t.truncated_bytes, t.skipped_seq
        ));
    }
    for turn in &r.interrupted_turns {
        out.note(&format!(
            "runtime: turn {turn} marked interrupted (its process ended mid-turn)"
        ));
    }
}

/// Resolve every configuration layer once through the one sandbox context
/// (`--sandbox`, `--backend` and `--model` are CLI overrides; the project
/// override can only tighten them).
fn load_context(args: &ExecArgs, workspace: &std::path::Path) -> anyhow::Result<SandboxContext> {
    let mut o = LoadOptions::new(workspace);
    o.overrides.model = args.model.clone();
    o.overrides.reasoning_effort = args.reasoning_effort;
    let allow_domains = super::sandbox::check_allow_domains(args.network, &args.allow_domains)?;
    let flags = SandboxFlags {
        mode: args.sandbox,
        network_mode: args.network,
        allow_domains,
        backend: args.backend,
        no_project_config: args.no_project_config,
        ..SandboxFlags::default()
    };
    Ok(SandboxContext::load_with(&mut o, &flags, RulesFile::Load)?)
}

/// What the layers did, for the `metadata` event.
fn config_report(s: &Settings, skipped: bool, notes: &[String]) -> serde_json::Value {
    serde_json::json!({
        "user_file": s.user_file,
        "project_file": s.project_file,
        "project_config": match (skipped, &s.project_file) {
            (true, _) => "skipped (--no-project-config)",
            (false, Some(_)) => "applied",
            (false, None) => "none",
        },
        "ignored": s.ignored.iter().map(|k| serde_json::json!({
            "file": k.file, "key": k.key, "reason": k.reason,
        })).collect::<Vec<_>>(),
        "warnings": s.warnings.iter().chain(notes).collect::<Vec<_>>(),
    })
}

/// `--reasoning-effort`: clap names the flag and the value on error.
fn parse_effort(s: &str) -> Result<crate::provider::ReasoningEffort, String> {
    s.parse()
}
