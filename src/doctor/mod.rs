//! `codewhale doctor`: prove what the sandbox enforces on this machine.
//!
//! Data first: environment checks and functional probes are [`Row`]s in
//! one [`Report`], rendered as text or JSON (`docs/DOCTOR.md`). The probes
//! run real commands through `host::run` with the backend the host would
//! select ([`select::configured_backend`]); nothing is inferred from file
//! existence alone.
//!
//! Side effect to know about: [`run`] points this process's `HOME` at a
//! temporary home while the probes run (the host resolves the deny-read
//! paths from `HOME`, and the decoys must be in a home the probe owns),
//! and restores it afterwards. Call it before starting other threads that
//! read the environment.

pub mod checks;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
pub mod parse;
#[cfg(target_os = "linux")]
pub mod probes;
pub mod report;
#[cfg(target_os = "linux")]
mod sandbox_linux;
pub mod select;

pub use report::{ApiKeyReport, Platform, Report, Row, SandboxReport, Status};

use crate::config::{self, LoadOptions, RulesFile, SandboxContext, SandboxFlags};

use crate::policy::SandboxMode;
use std::path::PathBuf;
use std::time::Instant;

/// What a doctor run needs from its caller.
#[derive(Clone, Debug)]
pub struct Options {
    /// The workspace the user runs in (config layering starts there).
    pub workspace: PathBuf,
    /// The codewhale binary (helper stage and in-sandbox probe); `None` =
    /// this executable.
    pub exe: Option<PathBuf>,
}

fn platform() -> Platform {
    #[cfg(target_os = "linux")]
    let (kernel, distro, container) = {
        let (k, d) = linux::kernel_and_distro();
        (k, d, linux::container_kind())
    };
    #[cfg(not(target_os = "linux"))]
    let (kernel, distro, container) = (None, None, None);
    Platform {
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        kernel,
        distro,
        container,
    }
}

/// Provider facts: key presence and source, base URL, model. Never the key.
fn provider(
    rows: &mut Vec<Row>,
    settings: Option<&config::Settings>,
) -> (Option<ApiKeyReport>, Option<String>, Option<String>) {
    use crate::provider::config::ExecConfig;
    use crate::provider::registry::{self, KeySource};
    let Some(settings) = settings else {
        rows.push(Row::new(
            "provider",
            "provider",
            Status::Warn,
            "the config did not load: provider settings unknown",
        ));
        return (None, None, None);
    };
    let home = settings.paths.codewhale_home.clone();
    let cfg = match ExecConfig::from_settings(settings) {
        Ok(c) => c,
        Err(e) => {
            rows.push(Row::new(
                "provider",
                "provider",
                Status::Fail,
                e.to_string(),
            ));
            return (None, None, None);
        }
    };
    let store = crate::provider::auth::AuthStore::new(&home);
    let env = |n: &str| std::env::var(n).ok();
    match registry::select(None, None, &cfg, &store, &env) {
        Ok(s) => {
            let (source, env_var) = match &s.key_source {
                KeySource::Env(v) => ("env", Some(v.clone())),
                KeySource::AuthStore => ("auth-store", None),
                KeySource::Config => ("config", None),
                KeySource::NotNeeded => ("not-needed", None),
                KeySource::Missing => ("missing", None),
            };
            let mut r = Row::new(
                "provider.key",
                "provider",
                if source == "missing" {
                    Status::Warn
                } else {
                    Status::Ok
                },
                format!("provider {}: key {source}", s.id),
            );
            if source == "missing" {
                r = r.fix(format!(
                    "codewhale auth set {} (or export its key variable)",
                    s.id
                ));
            }
            rows.push(r);
            let key = ApiKeyReport {
                provider: s.id.clone(),
                source: source.into(),
                env_var,
                present: s.api_key.is_some(),
            };
            (Some(key), Some(s.base_url), Some(s.model))
        }
        Err(e) => {
            rows.push(Row::new(
                "provider",
                "provider",
                Status::Warn,
                e.to_string(),
            ));
            (None, None, None)
        }
    }
}

/// Run every check and probe and build the report.
pub fn run(opts: &Options) -> Report {
    let started = Instant::now();
    let mut checks = Vec::new();
    let mut load = LoadOptions::new(&opts.workspace);
    let config_path = load.paths.user_config().0;
    // The same sandbox context as every other client (no flags here).
    let context = SandboxContext::load_with(&mut load, &SandboxFlags::default(), RulesFile::Load);
    let (settings, context) = match context {
        Ok(c) => (Ok(c.settings.clone()), Some(c)),
        Err(e) => (Err(e), None),
    };
    let settings = match settings {
        Ok(s) => {
            for w in &s.warnings {
                checks.push(Row::new(
                    "config.warning",
                    "config",
                    Status::Warn,
                    w.clone(),
                ));
            }
            Some(s)
        }
        Err(e) => {
            checks.push(
                Row::new("config", "config", Status::Fail, e.to_string())
                    .fix("fix the named key, or move the file away to use the defaults"),
            );
            None
        }
    };
    let config_present = settings
        .as_ref()
        .map(|s| s.user_file.is_some())
        .unwrap_or_else(|| config_path.exists());
    let mode = context
        .as_ref()
        .map(|c| c.mode())
        .unwrap_or(SandboxMode::WorkspaceWrite);
    let mut host = context.map(|c| c.host).unwrap_or_default();
    host.helper_exe = opts.exe.clone();
    let section = settings
        .as_ref()
        .map(|s| s.user.sandbox.clone())
        .unwrap_or_default();
    // The MCP servers of `~/.codewhale/mcp.json` (docs/MCP.md); a file
    // that does not parse lists none (`codewhale mcp validate` says why).
    let mcp = settings
        .as_ref()
        .and_then(|s| {
            crate::mcp::config::load(&crate::mcp::config::path(&s.paths.codewhale_home)).ok()
        })
        .map(|d| d.mcp_servers.keys().cloned().collect())
        .unwrap_or_default();
    checks.push(checks::mode(mode));
    let (api_key, base_url, default_text_model) = provider(&mut checks, settings.as_ref());

    #[cfg(target_os = "linux")]
    checks.extend(linux::checks(&host, &opts.workspace));
    #[cfg(target_os = "macos")]
    checks.extend(macos::checks());
    #[cfg(target_os = "windows")]
    checks.push(checks::windows_row());

    let unmasked = workspace_env_files(&mut checks, &opts.workspace);
    let integrity = integrity(&mut checks);

    #[cfg(target_os = "linux")]
    let mut sandbox = sandbox_linux::sandbox(opts, &section, host, mode);
    #[cfg(not(target_os = "linux"))]
    let mut sandbox = sandbox(&section, host, mode);
    // The probes run in a scratch workspace; in this one, a `.env` file the
    // scan could not reach would be readable: never report `full` then.
    if !unmasked.is_empty() && sandbox.level == "full" {
        sandbox.level = "partial".into();
    }
    Report {
        version: env!("CARGO_PKG_VERSION").into(),
        platform: platform(),
        config_path,
        config_present,
        workspace: opts.workspace.clone(),
        sandbox,
        checks,
        api_key,
        base_url,
        default_text_model,
        mcp,
        skills: skills_report(&load.paths, &opts.workspace),
        duration_ms: started.elapsed().as_millis() as u64,
        integrity,
    }
}

/// Each skills folder with whether it exists and how many valid skills
/// it holds (only the named folders are read).
fn skills_report(
    paths: &crate::config::ConfigPaths,
    workspace: &std::path::Path,
) -> report::SkillsReport {
    let roots = crate::skills::roots(paths, workspace);
    let found = crate::skills::discover(&roots, workspace);
    report::SkillsReport {
        selected: paths.codewhale_home.join("skills"),
        roots: found
            .roots
            .into_iter()
            .map(|(k, r)| (k.to_string(), r))
            .collect(),
    }
}

/// Leftovers of interrupted runs: repair what is left (the start-up check
/// of this command already ran; a run that was still dying then is
/// checked now) and say what was repaired and what is still pending.
fn integrity(checks: &mut Vec<Row>) -> report::IntegrityReport {
    #[cfg(unix)]
    {
        use crate::host::integrity;
        integrity::recover_all();
        let repaired = integrity::recovered_so_far();
        let pending = integrity::pending();
        let row = if !pending.is_empty() {
            Row::new(
                "integrity",
                "sandbox",
                Status::Warn,
                format!(
                    "an interrupted run's integrity check is still pending in {}",
                    pending
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .fix("wait for its sandboxed processes to exit, then run doctor again")
        } else if !repaired.is_empty() {
            Row::new(
                "integrity",
                "sandbox",
                Status::Warn,
                format!(
                    "repaired {} protected path(s) an interrupted run had changed",
                    repaired.len()
                ),
            )
            .detail(
                repaired
                    .iter()
                    .map(|r| r.line())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        } else {
            Row::new(
                "integrity",
                "sandbox",
                Status::Ok,
                "no interrupted run left changes in protected paths",
            )
        };
        checks.push(row);
        report::IntegrityReport {
            state_dir: integrity::state_dir(),
            quarantine_dir: integrity::quarantine_dir(),
            repaired,
            pending,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = checks;
        report::IntegrityReport::default()
    }
}

/// The `.env` scan of the user's workspace, as every sandboxed run there
/// does it: a row saying how many are masked, or (warn, `partial`) which
/// paths could not be scanned. Returns those paths' lines.
fn workspace_env_files(rows: &mut Vec<Row>, workspace: &std::path::Path) -> Vec<String> {
    let Ok(ws) = std::fs::canonicalize(workspace) else {
        return Vec::new();
    };
    let scan = crate::policy::env_scan::scan_cached(&ws);
    // What git tracks is left readable in every run (policy::git_view):
    // say so here as the runs' reports do.
    let (repos, _, _) = crate::policy::git_view::observe(&scan.files);
    let view = crate::policy::git_view::plan(&repos);
    if scan.unmasked.is_empty() && !view.tracked_readable.is_empty() {
        rows.push(
            Row::new(
                "workspace.env-files",
                "sandbox",
                Status::Warn,
                format!(
                    "partial: {} .env file(s) in {}: {} masked in sandboxed runs, {} tracked by git and left readable (their content is in the repository's objects): {}",
                    scan.files.len(),
                    ws.display(),
                    scan.files.len() - view.tracked_readable.len(),
                    view.tracked_readable.len(),
                    view.tracked_readable
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .fix("if one holds a secret, take it out of git (git rm --cached FILE, and out of the history) and keep only templates tracked"),
        );
        return view.notes;
    }
    if scan.unmasked.is_empty() {
        rows.push(Row::new(
            "workspace.env-files",
            "sandbox",
            Status::Ok,
            format!(
                "{} .env file(s) in {} found and masked in sandboxed runs",
                scan.files.len(),
                ws.display()
            ),
        ));
    } else {
        rows.push(
            Row::new(
                "workspace.env-files",
                "sandbox",
                Status::Warn,
                format!(
                    "partial: .env files are not masked where the scan of {} could not look: {}",
                    ws.display(),
                    scan.unmasked.join("; ")
                ),
            )
            .fix("make those directories readable by this user, or remove them from the workspace"),
        );
    }
    scan.unmasked
}

pub(crate) fn unavailable(
    mode: SandboxMode,
    backend: &str,
    reason: String,
    probes: Vec<Row>,
) -> SandboxReport {
    SandboxReport {
        available: false,
        kind: "none".into(),
        backend: backend.into(),
        reason,
        level: "none".into(),
        mode: mode.to_string(),
        enforcement: None,
        probes,
    }
}

const PROBE_IDS: &[&str] = &[
    "probe.write-inside",
    "probe.write-outside",
    "probe.deny-read",
    "probe.protected-path",
    "probe.network",
    "probe.egress",
    "probe.no-new-privs",
    "probe.capabilities",
];

pub(crate) fn skipped(why: &str) -> Vec<Row> {
    PROBE_IDS
        .iter()
        .map(|id| Row::new(id, "probe", Status::Skip, format!("not run: {why}")))
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn sandbox(
    section: &crate::config::user::SandboxSection,
    host: crate::host::HostSettings,
    mode: SandboxMode,
) -> SandboxReport {
    let policy = section.policy(SandboxMode::WorkspaceWrite, &std::env::temp_dir());
    let sel = select::configured_backend(&policy, &host);
    let mut wrapper = Row::new(
        "probe.wrapper-starts",
        "probe",
        Status::Fail,
        sel.reason.clone(),
    );
    wrapper.remediation = sel.remedy.clone();
    let mut probes = vec![wrapper];
    probes.extend(skipped("functional probes run on Linux only in this build"));
    unavailable(mode, "none", sel.reason, probes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod skills_tests {
    use super::skills_report;
    use crate::config::ConfigPaths;

    #[test]
    fn skills_section_has_each_folder_with_path_present_and_count() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let (home, ws) = (base.join("home"), base.join("ws"));
        let d = ws.join(".claude/skills/lint");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("SKILL.md"),
            "---\nname: lint\ndescription: Lint.\n---\n",
        )
        .unwrap();
        let paths = ConfigPaths::from_parts(Some(home.clone()), None, None);
        let r = skills_report(&paths, &ws);
        assert_eq!(r.selected, home.join(".codewhale/skills"));
        let keys: Vec<&str> = r.roots.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            vec![
                "agents",
                "agents_global",
                "claude",
                "codewhale",
                "global",
                "local",
                "opencode"
            ]
        );
        assert!(r.roots["claude"].present && r.roots["claude"].count == 1);
        assert!(!r.roots["global"].present && r.roots["global"].count == 0);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["claude"]["count"], 1, "flattened as upstream: {v}");
        assert_eq!(
            v["selected"],
            serde_json::json!(home.join(".codewhale/skills"))
        );
    }
}
