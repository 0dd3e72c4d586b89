//! The doctor report as data: typed rows and the top-level document,
//! serialised as `doctor --json` and rendered as text.
//!
//! Field names are a stable interface (documented in `docs/DOCTOR.md`):
//! scripts and the integration tests deserialise this exact shape, so
//! renaming a field is a breaking change.

use crate::host::Enforcement;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::PathBuf;

/// The verdict of one row. Ordered so "the worst row" is a `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not applicable here (another OS, or a probe the policy makes moot).
    Skip,
    Ok,
    /// Works, but something is weaker than it could be; read the remediation.
    Warn,
    /// Broken: the sandbox (or a promise it makes) does not hold here.
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Skip => "skip",
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check or probe: what was looked at, what was found, what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Stable identifier, e.g. `bwrap.found` or `probe.write-outside`.
    pub id: String,
    /// `platform`, `sandbox`, `probe`, `config` or `provider`.
    pub category: String,
    pub status: Status,
    /// One line: what was tried and what happened.
    pub summary: String,
    /// Supporting facts (paths, versions, raw values, captured output).
    #[serde(default)]
    pub details: Vec<String>,
    /// The exact fix, when there is one.
    #[serde(default)]
    pub remediation: Option<String>,
}

impl Row {
    pub fn new(id: &str, category: &str, status: Status, summary: impl Into<String>) -> Self {
        Row {
            id: id.to_string(),
            category: category.to_string(),
            status,
            summary: summary.into(),
            details: Vec::new(),
            remediation: None,
        }
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.details.push(d.into());
        self
    }

    pub fn fix(mut self, r: impl Into<String>) -> Self {
        self.remediation = Some(r.into());
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// `linux`, `macos`, `windows` (Rust's `std::env::consts::OS`).
    pub os: String,
    pub arch: String,
    /// Kernel release (`uname -r`), when known.
    pub kernel: Option<String>,
    /// `PRETTY_NAME` from os-release, when known.
    pub distro: Option<String>,
    /// `docker`, `podman`, `lxc`, `kubernetes`, `wsl`…, or none.
    pub container: Option<String>,
}

/// What the sandbox is on this machine, proven by the probes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// A backend was selected and the wrapper started.
    pub available: bool,
    /// The enforcement label of the probe runs (e.g.
    /// `sandboxed: bwrap+seccomp`), or `none`.
    pub kind: String,
    /// The backend `auto` (or the configured backend) selected: `bwrap`,
    /// `landlock`, `seatbelt`, `opensandbox`, `none`.
    pub backend: String,
    /// Why that backend (or why none).
    pub reason: String,
    /// `full`, `partial`, `external`, `unsandboxed`, or `none` when nothing ran.
    pub level: String,
    /// The configured sandbox mode (the probes use `workspace-write`).
    pub mode: String,
    /// The enforcement report of the probe runs (absent when nothing ran).
    pub enforcement: Option<Enforcement>,
    pub probes: Vec<Row>,
}

/// Where the default provider's key comes from; never the key itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyReport {
    pub provider: String,
    /// `env`, `auth-store`, `config`, `not-needed` or `missing`.
    pub source: String,
    /// The environment variable name when `source` is `env`.
    pub env_var: Option<String>,
    pub present: bool,
}

/// The whole `doctor --json` document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub version: String,
    pub platform: Platform,
    pub config_path: PathBuf,
    pub config_present: bool,
    pub workspace: PathBuf,
    pub sandbox: SandboxReport,
    pub checks: Vec<Row>,
    pub api_key: Option<ApiKeyReport>,
    pub base_url: Option<String>,
    pub default_text_model: Option<String>,
    /// The server names in `~/.codewhale/mcp.json` (not started here:
    /// `codewhale mcp list` starts and checks them).
    pub mcp: Vec<String>,
    /// Each skills folder, as upstream reports it (`{path, present, count}`).
    pub skills: SkillsReport,
    /// Wall time of the whole doctor run, in milliseconds.
    pub duration_ms: u64,
    /// The after-run integrity check's state: what an interrupted run
    /// left and this command repaired, and what is still pending.
    #[serde(default)]
    pub integrity: IntegrityReport,
}

/// `doctor --json`'s `skills`: the folder a new global skill goes in
/// (`selected`), and per discovery root its `{path, present, count}`
/// under the root's key (`global`, `agents_global`, `agents`, `local`,
/// `codewhale`, `claude`, `opencode`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillsReport {
    pub selected: PathBuf,
    #[serde(flatten)]
    pub roots: std::collections::BTreeMap<String, crate::skills::RootReport>,
}

/// See [`Report::integrity`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrityReport {
    pub state_dir: PathBuf,
    pub quarantine_dir: PathBuf,
    /// Reverts made at the start of this command for runs that died.
    pub repaired: Vec<crate::host::enforcement::Revert>,
    /// Workspaces whose dead run's baseline could not be checked yet.
    pub pending: Vec<PathBuf>,
}

impl Report {
    /// Every row: environment checks, then probes.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.checks.iter().chain(self.sandbox.probes.iter())
    }

    /// The worst status of any row.
    pub fn worst(&self) -> Status {
        self.rows().map(|r| r.status).max().unwrap_or(Status::Ok)
    }

    /// Exit 0 when nothing fails, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.worst() == Status::Fail {
            crate::exit::FAILURE
        } else {
            crate::exit::OK
        }
    }

    /// Human-readable rendering of the same data.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let p = &self.platform;
        let _ = writeln!(
            s,
            "codewhale {} on {} {}{}{}",
            self.version,
            p.os,
            p.arch,
            p.kernel
                .as_deref()
                .map(|k| format!(" (kernel {k})"))
                .unwrap_or_default(),
            p.distro
                .as_deref()
                .map(|d| format!(", {d}"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            s,
            "config: {} ({})",
            self.config_path.display(),
            if self.config_present {
                "present"
            } else {
                "absent, defaults in use"
            }
        );
        let sb = &self.sandbox;
        let _ = writeln!(
            s,
            "sandbox: {} — backend {}, level {} ({})",
            if sb.available {
                "available"
            } else {
                "NOT available"
            },
            sb.backend,
            sb.level,
            sb.reason
        );
        if let Some(e) = &sb.enforcement {
            for p in &e.partial {
                let _ = writeln!(s, "  only partially enforced: {}", p.line());
            }
        }
        if let Some(k) = &self.api_key {
            let _ = writeln!(
                s,
                "provider: {} key {}{}",
                k.provider,
                k.source,
                k.env_var
                    .as_deref()
                    .map(|v| format!(" ({v})"))
                    .unwrap_or_default()
            );
        }
        for (title, rows) in [("checks", &self.checks), ("probes", &sb.probes)] {
            let _ = writeln!(s, "\n{title}:");
            for r in rows {
                let _ = writeln!(s, "  [{:>4}] {:<24} {}", r.status.as_str(), r.id, r.summary);
                for d in &r.details {
                    let _ = writeln!(s, "         {d}");
                }
                if let Some(fix) = &r.remediation {
                    let _ = writeln!(s, "         fix: {fix}");
                }
            }
        }
        let _ = writeln!(
            s,
            "\nresult: {} ({} ms)",
            match self.worst() {
                Status::Fail => "FAIL",
                Status::Warn => "ok with warnings",
                _ => "ok",
            },
            self.duration_ms
        );
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn worst_is_the_max_and_decides_the_exit_code() {
        assert!(Status::Fail > Status::Warn && Status::Warn > Status::Ok);
        assert!(Status::Ok > Status::Skip);
        let r = Row::new("a", "probe", Status::Warn, "x").fix("do y");
        assert_eq!(r.remediation.as_deref(), Some("do y"));
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""status":"warn""#), "{json}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod render_tests {
    use super::*;

    fn report(probe: Status) -> Report {
        Report {
            version: "0.1.0".into(),
            platform: Platform {
                os: "linux".into(),
                arch: "x86_64".into(),
                kernel: Some("6.8.0".into()),
                distro: Some("Ubuntu 24.04.1 LTS".into()),
                container: None,
            },
            config_path: "/h/.codewhale/config.toml".into(),
            config_present: false,
            workspace: "/w".into(),
            sandbox: SandboxReport {
                available: probe != Status::Fail,
                kind: "sandboxed: bwrap+seccomp+landlock".into(),
                backend: "bwrap".into(),
                reason: "bwrap started".into(),
                level: "full".into(),
                mode: "workspace-write".into(),
                enforcement: None,
                probes: vec![Row::new(
                    "probe.deny-read",
                    "probe",
                    probe,
                    "read the decoy: unreadable",
                )
                .fix("fix it")],
            },
            checks: vec![Row::new("userns", "sandbox", Status::Warn, "restricted")],
            api_key: Some(ApiKeyReport {
                provider: "deepseek".into(),
                source: "env".into(),
                env_var: Some("DEEPSEEK_API_KEY".into()),
                present: true,
            }),
            base_url: None,
            default_text_model: None,
            mcp: vec![],
            skills: SkillsReport::default(),
            duration_ms: 90,
            integrity: IntegrityReport::default(),
        }
    }

    #[test]
    fn text_shows_every_row_and_the_verdict() {
        let ok = report(Status::Ok);
        assert_eq!(ok.exit_code(), 0, "warn does not fail");
        let t = ok.render_text();
        assert!(t.contains("Ubuntu 24.04.1 LTS"), "{t}");
        assert!(t.contains("[  ok] probe.deny-read"), "{t}");
        assert!(t.contains("[warn] userns"), "{t}");
        assert!(t.contains("fix: fix it"), "{t}");
        assert!(t.contains("deepseek key env (DEEPSEEK_API_KEY)"), "{t}");
        assert!(t.contains("result: ok with warnings"), "{t}");

        let bad = report(Status::Fail);
        assert_eq!(bad.exit_code(), 1);
        assert!(bad.render_text().contains("result: FAIL"));
        assert!(bad.render_text().contains("NOT available"));
    }

    #[test]
    fn json_round_trips_with_the_documented_names() {
        let r = report(Status::Ok);
        let v = serde_json::to_value(&r).unwrap();
        for k in [
            "version",
            "platform",
            "config_path",
            "config_present",
            "workspace",
            "sandbox",
            "checks",
            "api_key",
            "base_url",
            "default_text_model",
            "mcp",
            "skills",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        for k in ["available", "kind", "backend", "enforcement", "probes"] {
            assert!(v["sandbox"].get(k).is_some(), "missing sandbox.{k}");
        }
        assert_eq!(v["api_key"]["source"], "env");
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
