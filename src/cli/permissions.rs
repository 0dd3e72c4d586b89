//! `codewhale permissions check|list`: explain authorization without running anything.

use crate::authz::{
    self, hooks, shell, Approval, Context, Mode, SessionGrants, ToolCall, ToolRegistry,
};
use crate::config::{self, CliOverrides, LoadOptions};
use anyhow::Context as _;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Print the verdict and the gate-by-gate trace for a tool call. Nothing is run
    /// (hooks only with --run-hooks).
    Check(CheckArgs),
    /// Show the effective rules with their source file, and the settings they act under.
    List(ListArgs),
}

/// Flags shared by both subcommands.
#[derive(Debug, Args, Clone)]
pub struct SettingsArgs {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Skip the project override `<repo>/.codewhale/config.toml`.
    #[arg(long)]
    pub no_project_config: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Mode (Tab): plan, work or operate.
    #[arg(long, value_enum, default_value_t = Mode::Work)]
    pub mode: Mode,
    /// Approval (Shift+Tab); default: the configured approval_policy.
    #[arg(long, value_enum)]
    pub approval: Option<Approval>,
    /// The tool being called.
    #[arg(long, default_value = authz::SHELL_TOOL)]
    pub tool: String,
    /// The tool's JSON arguments (non-shell tools; default: {"path": COMMAND}).
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Evaluate as a headless run (no one to answer questions).
    #[arg(long)]
    pub headless: bool,
    /// Evaluate as a background task.
    #[arg(long)]
    pub background: bool,
    /// Run the configured tool_call_before hooks (they are real commands).
    #[arg(long)]
    pub run_hooks: bool,
    /// The command line (shell) or the target path (file tools).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub settings: SettingsArgs,
}

fn load(s: &SettingsArgs, approval: Option<Approval>) -> anyhow::Result<config::Settings> {
    let workspace = match &s.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    let mut opts = LoadOptions::new(workspace);
    opts.no_project_config = s.no_project_config;
    opts.overrides = CliOverrides {
        approval_policy: approval,
        ..CliOverrides::default()
    };
    Ok(config::load(&opts)?)
}

pub fn run(cmd: PermissionsCommand) -> i32 {
    let result = match cmd {
        PermissionsCommand::Check(a) => check(a),
        PermissionsCommand::List(a) => list(a),
    };
    match result {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            super::report_error(&e);
            crate::exit::FAILURE
        }
    }
}

fn check(a: CheckArgs) -> anyhow::Result<()> {
    let settings = load(&a.settings, a.approval)?;
    let registry = ToolRegistry::builtin();
    let text = a.command.join(" ");
    let call = if registry.get(&a.tool).map(|t| t.kind) == Some(authz::ToolKind::Shell) {
        // One argument is a command line; several are an argv.
        let line = if a.command.len() == 1 {
            text.clone()
        } else {
            shlex::try_join(a.command.iter().map(String::as_str)).context("joining the command")?
        };
        ToolCall::shell(line, &settings.workspace)
    } else {
        let args = match &a.args {
            Some(j) => serde_json::from_str(j).context("--args: not valid JSON")?,
            None => serde_json::json!({ "path": text }),
        };
        ToolCall::new(a.tool.clone(), args, &settings.workspace)
    };
    let answers = if a.run_hooks {
        hooks::run_before_blocking(&settings.user.hooks, &call).context("running hooks")?
    } else {
        Vec::new()
    };
    let mut posture = settings.posture(a.mode);
    posture.headless = a.headless;
    posture.background = a.background;
    let floor = settings.floor_context();
    let grants = SessionGrants::default();
    // The same sandbox context a run in this posture would get.
    let sandbox = config::SandboxContext::from_settings(settings.clone(), &Default::default())
        .for_posture(&posture)
        .mode();
    let ctx = Context {
        rules: &settings.rules,
        hooks: &answers,
        grants: &grants,
        registry: &registry,
        admission: &settings.user.tools,
        workspace: &settings.workspace,
        floor: &floor,
        sandbox,
    };
    let verdict = authz::authorize(&call, &posture, &ctx);
    let analysis = call.command_line().map(|c| shell::analyze(&c));
    // Auto-Review: which layer decides, and the request the reviewer
    // would get (built exactly as a run builds it; never sent).
    let layer = if verdict.to_reviewer {
        "reviewer"
    } else {
        "deterministic"
    };
    let review = if verdict.to_reviewer {
        Some(reviewer_request(&settings, &call, &verdict, &posture)?)
    } else {
        None
    };
    if a.settings.json {
        let out = serde_json::json!({
            "layer": layer,
            "reviewer_request": review.as_ref().map(|r| &r.body),
            "reviewer": review.as_ref().map(|r| serde_json::json!({
                "provider": r.provider, "model": r.model, "url": r.url})),
            "call": call,
            "verdict": verdict,
            "analysis": analysis,
            "hooks_run": a.run_hooks,
            "ignored": settings.ignored.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    for i in &settings.ignored {
        eprintln!("note: {i}");
    }
    if let Some(an) = &analysis {
        println!("pieces the shell would run:");
        for p in &an.pieces {
            let via = if p.via.is_empty() {
                String::new()
            } else {
                format!("   (via {})", p.via.join(" → "))
            };
            println!("  - {}{via}", p.display());
        }
        if let Some(f) = &an.failure {
            println!("  ! not fully analysed: {f}");
        }
    }
    if !a.run_hooks && !settings.user.hooks.tool_call_before.is_empty() {
        println!("(hooks not run; pass --run-hooks to include them)");
    }
    print!("{}", verdict.render());
    match &review {
        Some(r) => {
            println!(
                "decided by: the model reviewer {}/{} (Auto-Review's second layer)",
                r.provider, r.model
            );
            println!("request it would send to {} (not sent):", r.url);
            println!("{}", serde_json::to_string_pretty(&r.body)?);
        }
        None => println!("decided by: the deterministic layer (no reviewer request)"),
    }
    Ok(())
}

/// The reviewer request of a question that goes to the model reviewer.
struct ReviewRequest {
    provider: String,
    model: String,
    url: String,
    /// The exact body, or the unavailable verdict of an oversized document.
    body: serde_json::Value,
}

fn reviewer_request(
    settings: &config::Settings,
    call: &ToolCall,
    verdict: &authz::Verdict,
    posture: &authz::Posture,
) -> anyhow::Result<ReviewRequest> {
    use crate::agent::review;
    use crate::authz::reviewer::{ReviewDocument, ReviewInputs};
    use crate::provider::{auth::AuthStore, config::ExecConfig, registry};
    let cfg = ExecConfig::from_settings(settings)?;
    let store = AuthStore::new(&settings.paths.codewhale_home);
    let env = |n: &str| std::env::var(n).ok();
    let session = registry::select(None, None, &cfg, &store, &env)
        .context("the session's provider (the reviewer's default)")?;
    let s = review::reviewer_settings(&settings.user.auto_review, &session, &cfg, &store, &env)
        .context("[auto_review]")?;
    let network = config::SandboxContext::from_settings(settings.clone(), &Default::default())
        .for_posture(posture)
        .policy
        .network_mode();
    let doc = ReviewDocument::build(&ReviewInputs {
        call,
        verdict,
        posture,
        network,
        workspace: &settings.workspace,
        workspace_trusted: false,
    });
    let body = match review::request_body(&s, &doc) {
        Ok(b) => b,
        Err(v) => serde_json::to_value(&v)?,
    };
    Ok(ReviewRequest {
        url: crate::provider::wire::url(&s),
        provider: s.id,
        model: s.model,
        body,
    })
}

fn list(a: ListArgs) -> anyhow::Result<()> {
    let s = load(&a.settings, None)?;
    if a.settings.json {
        let rules: Vec<serde_json::Value> = s
            .rules
            .rules
            .iter()
            .map(|r| {
                serde_json::json!({
                    "layer": r.layer, "tool": r.tool, "action": r.action,
                    "source": r.source, "line": r.line, "rule": r.describe(),
                })
            })
            .collect();
        let out = serde_json::json!({
            "user_config": s.user_file,
            "project_override": s.project_file,
            "permissions_file": s.permissions_file,
            "approval_policy": s.approval.as_str(),
            "sandbox_mode": s.sandbox_mode.as_str(),
            "allow_shell": s.allow_shell,
            "rules": rules,
            "ignored": s.ignored.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
            "warnings": s.warnings,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let show = |p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(none)".into())
    };
    println!(
        "user config:      {}{}",
        show(&s.user_file),
        if s.user_file_is_legacy {
            " (legacy)"
        } else {
            ""
        }
    );
    println!("project override: {}", show(&s.project_file));
    println!("rules file:       {}", s.permissions_file.display());
    println!(
        "effective:        approval_policy={} sandbox_mode={} allow_shell={}{}",
        s.approval.as_str(),
        s.sandbox_mode,
        s.allow_shell,
        s.max_subagents
            .map(|m| format!(" max_subagents={m}"))
            .unwrap_or_default()
    );
    println!("rules (precedence: user > agent > built-in; deny > ask > allow within a layer):");
    for r in &s.rules.rules {
        println!("  {}", r.describe());
    }
    for i in &s.ignored {
        println!("ignored: {i}");
    }
    for w in &s.warnings {
        println!("warning: {w}");
    }
    Ok(())
}
