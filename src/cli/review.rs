//! `codewhale review` (docs/REVIEW.md): a read-only reviewer over the
//! working tree's changes, the changes since `--base`, or a GitHub pull
//! request; and `codewhale review post FILE`, the write stage of CI that
//! needs no model and no model key.
//!
//! The reviewer is `exec`'s own headless run ([`super::exec::run_headless`])
//! in Plan mode: read tools and read-only commands in a read-only
//! sandbox, never a write; its session file and receipt are like any
//! session's. Its final answer must pass [`crate::review::answer`]'s
//! schema; a malformed answer gets one retry in the same session, then
//! the review fails (exit 4) — a review is never half parsed.

use super::exec::{run_headless, ExecArgs};
use crate::agent::{Emitter, OutputFormat};
use crate::exit;
use crate::review::answer::{parse_answer, AnswerError, ReviewAnswer};
use crate::review::diff::Diff;
use crate::review::file::{ReviewFile, Target};
use crate::review::github::{GitHub, GitHubError, Repo, DEFAULT_API};
use crate::review::{local, post, prompt, render};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ReviewArgs {
    #[command(subcommand)]
    pub action: Option<ReviewAction>,
    /// Review the changes since this ref (default: the working tree's
    /// uncommitted changes, untracked files included).
    #[arg(long, value_name = "REF", conflicts_with = "pr")]
    pub base: Option<String>,
    /// Review GitHub pull request N (REST API at `GITHUB_API_URL`, token
    /// `GITHUB_TOKEN`, repository `GITHUB_REPOSITORY` or `--repo`).
    #[arg(long, value_name = "N")]
    pub pr: Option<u64>,
    /// The repository of `--pr` (default: `GITHUB_REPOSITORY`).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// Print the structured review (JSON) instead of markdown.
    #[arg(long)]
    pub json: bool,
    /// Write the review to F instead of stdout (JSON with `--json` or a
    /// `.json` name: the file `review post` reads).
    #[arg(long, short = 'o', value_name = "F")]
    pub output: Option<PathBuf>,
    /// Post the review on the pull request (one COMMENT review; needs a
    /// token that may write pull requests).
    #[arg(long, requires = "pr")]
    pub post: bool,
    /// Provider id (as for `exec`).
    #[arg(long)]
    pub provider: Option<String>,
    /// Model (as for `exec`).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Stop the reviewer after N model turns.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub max_turns: u32,
    /// Skip the project override `<repo>/.codewhale/config.toml`.
    #[arg(long)]
    pub no_project_config: bool,
}

#[derive(Debug, Subcommand)]
pub enum ReviewAction {
    /// Post a review file written by `review --pr N --output F`: checks
    /// that the PR's head SHA and diff fingerprint still match, then posts
    /// (no model call; no model key needed).
    Post(PostArgs),
}

#[derive(Debug, Args)]
pub struct PostArgs {
    /// The review file (`codewhale.review` JSON).
    pub file: PathBuf,
}

/// The file no longer matches the pull request (exit 3).
#[derive(Debug, thiserror::Error)]
#[error("the review is stale: {0}; run the analysis stage again")]
struct Stale(String);

/// The reviewer's answer failed the schema twice, or a review file is
/// not one (exit 4).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Malformed(String);

/// The reviewer's run did not complete (exit 6, or 75 / 130).
#[derive(Debug, thiserror::Error)]
#[error("the reviewer's run ended `{status}` (session {session})")]
struct ModelFailed {
    status: String,
    code: i32,
    session: String,
}

pub fn run(args: ReviewArgs) -> i32 {
    let r = match args.action {
        Some(ReviewAction::Post(ref p)) => post_file(&p.file),
        None => review(&args),
    };
    match r {
        Ok(()) => exit::OK,
        Err(e) => {
            super::report_error(&e);
            exit_code(&e)
        }
    }
}

/// The documented exit code of a failed review (docs/REVIEW.md).
fn exit_code(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<Stale>().is_some() {
        exit::REVIEW_STALE
    } else if e.downcast_ref::<Malformed>().is_some()
        || matches!(
            e.downcast_ref::<crate::review::file::FileError>(),
            Some(crate::review::file::FileError::Malformed { .. })
        )
    {
        exit::REVIEW_MALFORMED
    } else if e.downcast_ref::<GitHubError>().is_some() {
        exit::GITHUB
    } else if let Some(m) = e.downcast_ref::<ModelFailed>() {
        m.code
    } else if e.downcast_ref::<crate::provider::ProviderError>().is_some() {
        exit::REVIEW_MODEL
    } else if e.downcast_ref::<crate::config::ConfigError>().is_some() {
        exit::CONFIG
    } else {
        exit::FAILURE
    }
}

fn github(repo: Repo) -> anyhow::Result<GitHub> {
    let api = std::env::var("GITHUB_API_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_API.into());
    let token = std::env::var("GITHUB_TOKEN").ok().filter(|s| !s.is_empty());
    Ok(GitHub::new(&api, token, repo)?)
}

fn tokio() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// What is reviewed, read before the reviewer starts.
struct Subject {
    target: Target,
    diff: Diff,
    /// `--pr`: the client the diff came through.
    gh: Option<GitHub>,
}

fn subject(args: &ReviewArgs, ws: &Path) -> anyhow::Result<Subject> {
    if let Some(n) = args.pr {
        let name = match args.repo.clone().or_else(|| {
            std::env::var("GITHUB_REPOSITORY")
                .ok()
                .filter(|s| !s.is_empty())
        }) {
            Some(r) => r,
            None => bail!("--pr: no repository (pass --repo OWNER/NAME or set GITHUB_REPOSITORY)"),
        };
        let gh = github(name.parse::<Repo>()?)?;
        let (pull, diff) = tokio()?.block_on(async {
            let pull = gh.pull(n).await?;
            let (diff, _) = gh.diff(n).await?;
            Ok::<_, GitHubError>((pull, diff))
        })?;
        return Ok(Subject {
            target: Target::PullRequest {
                repository: gh.repo.clone(),
                number: n,
                head_sha: pull.head.sha,
            },
            diff,
            gh: Some(gh),
        });
    }
    let (target, diff) = match &args.base {
        Some(b) => (Target::Base { base: b.clone() }, local::since(ws, b)?),
        None => (Target::WorkingTree, local::working_tree(ws)?),
    };
    Ok(Subject {
        target,
        diff,
        gh: None,
    })
}

/// The reviewer's run: `exec` in Plan mode with the read tools and the
/// shell (read-only commands in a read-only sandbox, by Plan's posture).
fn reviewer_args(args: &ReviewArgs, ws: &Path) -> ExecArgs {
    ExecArgs {
        prompt: None,
        provider: args.provider.clone(),
        model: args.model.clone(),
        reasoning_effort: None,
        auto: true,
        mode: crate::authz::Mode::Plan,
        sandbox: Some(crate::policy::SandboxMode::ReadOnly),
        workspace: Some(ws.to_path_buf()),
        allowed_tools: Some(
            ["read_file", "list_dir", "search", "shell"]
                .map(String::from)
                .to_vec(),
        ),
        disallowed_tools: Vec::new(),
        max_turns: args.max_turns.max(1),
        output_format: OutputFormat::Text,
        json: false,
        no_project_config: args.no_project_config,
        backend: None,
        network: None,
        allow_domains: Vec::new(),
    }
}

/// Run the reviewer until it gives a valid answer (one retry).
fn ask_reviewer(
    args: &ReviewArgs,
    ws: &Path,
    task: String,
) -> anyhow::Result<(ReviewAnswer, PathBuf)> {
    // The answer is ours to print: the loop's text goes nowhere, its
    // progress and notes to stderr.
    let out = Emitter::new(
        OutputFormat::Text,
        Box::new(std::io::sink()),
        Box::new(std::io::stderr()),
    );
    let mut parsed: Option<Result<ReviewAnswer, AnswerError>> = None;
    let mut retried = false;
    let done = run_headless(&reviewer_args(args, ws), task, out, &mut |report| {
        let r = parse_answer(&report.answer);
        let again = match &r {
            Err(e) if !retried => {
                retried = true;
                eprintln!("codewhale: the reviewer's answer was rejected ({e}); asking once more");
                Some(format!(
                    "Your answer was rejected: {e}. Answer again with only the JSON object \
                     valid under the schema, nothing else."
                ))
            }
            _ => None,
        };
        parsed = Some(r);
        again
    })?;
    let session = done.session.display().to_string();
    if done.report.status != "completed" {
        let code = match done.report.exit_code {
            exit::TEMPFAIL => exit::TEMPFAIL,
            exit::INTERRUPTED => exit::INTERRUPTED,
            _ => exit::REVIEW_MODEL,
        };
        return Err(ModelFailed {
            status: done.report.status,
            code,
            session,
        }
        .into());
    }
    match parsed {
        Some(Ok(a)) => Ok((a, done.session)),
        Some(Err(e)) => Err(Malformed(format!(
            "the reviewer's answer was malformed twice: {e} (session {session})"
        ))
        .into()),
        None => Err(Malformed(format!("the reviewer gave no answer (session {session})")).into()),
    }
}

fn review(args: &ReviewArgs) -> anyhow::Result<()> {
    let ws = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("current directory")?,
    };
    let ws = std::fs::canonicalize(&ws).with_context(|| format!("workspace {}", ws.display()))?;
    let s = subject(args, &ws)?;
    let label = s.target.label();
    let (answer, session) = if s.diff.files.is_empty() {
        eprintln!("codewhale: nothing to review in {label}: no changes (no model call)");
        (
            ReviewAnswer {
                summary: "No changes to review.".into(),
                findings: Vec::new(),
            },
            None,
        )
    } else {
        eprintln!(
            "codewhale: reviewing {label}: {} changed file(s)",
            s.diff.files.len()
        );
        let (a, session) = ask_reviewer(args, &ws, prompt::task(&label, &s.diff))?;
        (a, Some(session.display().to_string()))
    };
    let file = ReviewFile::new(s.target, s.diff.fingerprint.clone(), answer, session);
    let as_json = args.json
        || args
            .output
            .as_deref()
            .is_some_and(|p| p.extension().is_some_and(|e| e == "json"));
    let text = if as_json {
        serde_json::to_string_pretty(&file)? + "\n"
    } else {
        render::markdown(&file.answer(), &label)
    };
    match &args.output {
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("codewhale: review written to {}", p.display());
        }
        None => print!("{text}"),
    }
    if args.post {
        if let (Some(gh), Target::PullRequest { .. }) = (&s.gh, &file.target) {
            publish(gh, &file, &s.diff)?;
        }
    }
    Ok(())
}

/// `review post FILE`: refuse a stale file, then post. No model, no
/// provider configuration is read.
fn post_file(path: &Path) -> anyhow::Result<()> {
    let file = ReviewFile::read(path)?;
    let Target::PullRequest {
        repository,
        number,
        head_sha,
    } = &file.target
    else {
        return Err(Malformed(format!(
            "{}: the review is of {}, not of a pull request: nothing to post",
            path.display(),
            file.target.label()
        ))
        .into());
    };
    let gh = github(repository.clone())?;
    let diff = tokio()?.block_on(async {
        let pull = gh.pull(*number).await?;
        if &pull.head.sha != head_sha {
            return Ok(Err(Stale(format!(
                "the pull request's head is {} now, the review is of {head_sha}",
                pull.head.sha
            ))));
        }
        let (diff, _) = gh.diff(*number).await?;
        if diff.fingerprint != file.fingerprint {
            return Ok(Err(Stale(format!(
                "the pull request's diff has fingerprint {} now, the review is of {}",
                diff.fingerprint, file.fingerprint
            ))));
        }
        Ok::<_, GitHubError>(Ok(diff))
    })??;
    publish(&gh, &file, &diff)
}

/// Post one COMMENT review, or update our earlier one.
fn publish(gh: &GitHub, file: &ReviewFile, diff: &Diff) -> anyhow::Result<()> {
    let Target::PullRequest {
        number, head_sha, ..
    } = &file.target
    else {
        bail!("only a pull request's review can be posted");
    };
    let answer = file.answer();
    let n = *number;
    let line = tokio()?.block_on(async {
        let me = gh.own_login(&|k| std::env::var(k).ok()).await?;
        let reviews = gh.reviews(n).await?;
        if let Some(ours) = post::own_review(&reviews, &me) {
            let comments = gh.review_comments(n, ours.id).await?;
            let bodies: Vec<String> = comments.into_iter().map(|c| c.body).collect();
            let keys = post::keys_in(&bodies);
            let plan = post::plan(&answer, diff, Some(&keys));
            gh.update_review(n, ours.id, &plan.body).await?;
            Ok::<_, GitHubError>(format!(
                "updated review {} on {}#{n} ({} inline comment(s) already there)",
                ours.id, gh.repo, plan.already
            ))
        } else {
            let plan = post::plan(&answer, diff, None);
            let r = gh
                .create_review(n, head_sha, &plan.body, &plan.inline)
                .await?;
            Ok(format!(
                "posted review {} on {}#{n} ({} inline comment(s))",
                r.id,
                gh.repo,
                plan.inline.len()
            ))
        }
    })?;
    eprintln!("codewhale: {line}");
    Ok(())
}
