//! Postures: mode (Tab) × approval (Shift+Tab), and what each implies.
//!
//! The posture is gate 1's output. It fixes which tools are admitted (Plan
//! reads only), which calls ask (Ask: any shell command that is not
//! read-only), and the sandbox mode a call runs under: Plan → `read-only`,
//! Ask and Auto-Review → `workspace-write`, Full Access → none. A setting can
//! only narrow that range ([`Posture::sandbox_mode`] takes the stricter).

use crate::policy::SandboxMode;
use serde::{Deserialize, Serialize};

/// What the agent is doing this turn.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum, Default,
)]
#[serde(rename_all = "kebab-case")]
#[clap(rename_all = "kebab-case")]
pub enum Mode {
    /// Reads and searches only; writes and non-read-only shell are denied.
    Plan,
    /// Edits files and runs commands.
    #[default]
    Work,
    /// Work's permissions, run as a goal with sub-agents and a reviewer.
    Operate,
}

/// How much the human is asked. Ordered loosest → strictest, so the
/// tighten-only merges of the config are `max`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum, Default,
)]
#[serde(rename_all = "kebab-case")]
#[clap(rename_all = "kebab-case")]
pub enum Approval {
    /// Asks nothing; runs without the OS sandbox (repository rules and
    /// rules-file denies still apply).
    FullAccess,
    /// Deterministic rules approve what they prove safe; the rest goes to a
    /// model reviewer (headless: deterministic layer only).
    /// Also spelled `on-failure` (see [`Approval::parse`]).
    #[value(alias = "on-failure")]
    AutoReview,
    /// Workspace edits apply; shell commands that are not read-only ask.
    /// Also spelled `on-request` and `untrusted`.
    #[default]
    #[value(alias = "on-request", alias = "untrusted")]
    Ask,
    /// Config-only: anything that would ask is denied instead.
    /// Also spelled `never`.
    #[value(alias = "never")]
    NeverRun,
}

/// Every spelling `approval_policy` accepts, with the posture it means.
///
/// The documented vocabulary (`untrusted`, `on-request`, `on-failure`,
/// `never`, as in Codex's `approval_policy`) maps onto the four postures;
/// the posture names themselves stay accepted. Where the documented word
/// is looser than any posture that fits it, the stricter posture is
/// chosen (`on-request` → `ask`: codewhale asks before every shell command
/// that is not read-only, rather than only when the agent requests it).
/// docs/CONFIG.md explains each mapping.
pub const APPROVAL_SPELLINGS: &[(&str, Approval)] = &[
    ("untrusted", Approval::Ask),
    ("on-request", Approval::Ask),
    ("on-failure", Approval::AutoReview),
    ("never", Approval::NeverRun),
    ("full-access", Approval::FullAccess),
    ("auto-review", Approval::AutoReview),
    ("ask", Approval::Ask),
    ("never-run", Approval::NeverRun),
];

impl Approval {
    /// The posture `s` names in either vocabulary; the error lists every
    /// accepted value (config errors add the file, line and key).
    pub fn parse(s: &str) -> Result<Approval, String> {
        APPROVAL_SPELLINGS
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, a)| *a)
            .ok_or_else(|| {
                let all: Vec<&str> = APPROVAL_SPELLINGS.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown approval_policy `{s}`; accepted values: {}",
                    all.join(", ")
                )
            })
    }
}

impl<'de> Deserialize<'de> for Approval {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Approval::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::FullAccess => "full-access",
            Approval::AutoReview => "auto-review",
            Approval::Ask => "ask",
            Approval::NeverRun => "never-run",
        }
    }
}

impl Approval {
    /// The name a person sees (footer, card, receipts): upstream's words.
    pub fn label(self) -> &'static str {
        match self {
            Approval::Ask => "Ask",
            Approval::AutoReview => "Auto-Review",
            Approval::FullAccess => "Full Access",
            Approval::NeverRun => "Never Run",
        }
    }
}

impl Mode {
    /// The name a person sees (footer, card, receipts).
    pub fn label(self) -> &'static str {
        match self {
            Mode::Plan => "Plan",
            Mode::Work => "Work",
            Mode::Operate => "Operate",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Work => "work",
            Mode::Operate => "operate",
        }
    }
}

/// Gate 1's output: everything about the turn the later gates depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Posture {
    pub mode: Mode,
    pub approval: Approval,
    /// No human can answer a question (headless `exec`, CI).
    pub headless: bool,
    /// Headless only (`exec --auto`): gate 8 approves an ordinary or rule
    /// question itself — the sandbox stays — and never releases a hold.
    #[serde(default)]
    pub auto_approve: bool,
    /// The call runs as a background task (nobody watches it finish).
    pub background: bool,
    /// `allow_shell = false` in the merged settings.
    pub shell_disabled: bool,
}

impl Default for Posture {
    fn default() -> Self {
        Posture::new(Mode::Work, Approval::Ask)
    }
}

impl Posture {
    pub fn new(mode: Mode, approval: Approval) -> Self {
        Posture {
            mode,
            approval,
            headless: false,
            auto_approve: false,
            background: false,
            shell_disabled: false,
        }
    }

    /// Mode and permission as a person reads them: `Work + Ask`.
    pub fn label(&self) -> String {
        format!("{} + {}", self.mode.label(), self.approval.label())
    }

    /// The sandbox mode the posture implies before settings narrow it.
    pub fn implied_sandbox(&self) -> SandboxMode {
        if self.mode == Mode::Plan {
            return SandboxMode::ReadOnly;
        }
        match self.approval {
            Approval::FullAccess => SandboxMode::DangerFullAccess,
            Approval::AutoReview | Approval::Ask | Approval::NeverRun => {
                SandboxMode::WorkspaceWrite
            }
        }
    }

    /// The sandbox mode a turn in this posture runs under when the settings
    /// allow at most `configured`: the posture's implied mode, narrowed.
    /// Called once, by the sandbox context (`config::SandboxContext`),
    /// which stores the result in the policy; nothing else derives it.
    ///
    /// `external-sandbox` in the settings is kept as such when the posture
    /// would have no sandbox anyway (the user says a container encloses us).
    pub fn sandbox_under(&self, configured: SandboxMode) -> SandboxMode {
        let implied = self.implied_sandbox();
        if configured.strictness() == implied.strictness() && !implied.is_sandboxed() {
            configured
        } else {
            implied.tighten(configured)
        }
    }

    /// Whether nobody is there to answer a question. A background task in
    /// an interactive session can still ask (its question waits); only a
    /// headless run has no one.
    pub fn no_human(&self) -> bool {
        self.headless
    }

    /// One line for reports; `sandbox` is the mode the context resolved.
    pub fn describe(&self, sandbox: SandboxMode) -> String {
        format!(
            "mode={} approval={} sandbox={}{}{}{}{}",
            self.mode.as_str(),
            self.approval.as_str(),
            sandbox,
            if self.headless { " headless" } else { "" },
            if self.headless && self.auto_approve {
                " auto-approve"
            } else {
                ""
            },
            if self.background { " background" } else { "" },
            if self.shell_disabled {
                " allow_shell=false"
            } else {
                ""
            }
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_by_posture() {
        assert_eq!(
            Posture::new(Mode::Plan, Approval::FullAccess).implied_sandbox(),
            SandboxMode::ReadOnly
        );
        assert_eq!(
            Posture::new(Mode::Work, Approval::Ask).implied_sandbox(),
            SandboxMode::WorkspaceWrite
        );
        assert_eq!(
            Posture::new(Mode::Work, Approval::AutoReview).implied_sandbox(),
            SandboxMode::WorkspaceWrite
        );
        assert_eq!(
            Posture::new(Mode::Operate, Approval::FullAccess).implied_sandbox(),
            SandboxMode::DangerFullAccess
        );
    }

    #[test]
    fn settings_only_narrow() {
        let p = Posture::new(Mode::Work, Approval::FullAccess);
        assert_eq!(
            p.sandbox_under(SandboxMode::DangerFullAccess),
            SandboxMode::DangerFullAccess
        );
        assert_eq!(
            p.sandbox_under(SandboxMode::WorkspaceWrite),
            SandboxMode::WorkspaceWrite
        );
        assert_eq!(
            p.sandbox_under(SandboxMode::ExternalSandbox),
            SandboxMode::ExternalSandbox
        );
        let q = Posture::new(Mode::Work, Approval::Ask);
        assert_eq!(
            q.sandbox_under(SandboxMode::DangerFullAccess),
            SandboxMode::WorkspaceWrite
        );
        assert_eq!(
            q.sandbox_under(SandboxMode::ReadOnly),
            SandboxMode::ReadOnly
        );
    }

    #[test]
    fn approval_order_is_strictness() {
        assert!(Approval::FullAccess < Approval::AutoReview);
        assert!(Approval::AutoReview < Approval::Ask);
        assert!(Approval::Ask < Approval::NeverRun);
    }

    #[test]
    fn documented_spellings_map_onto_postures_and_names_stay_canonical() {
        use clap::ValueEnum;
        for (name, posture) in APPROVAL_SPELLINGS {
            assert_eq!(Approval::parse(name), Ok(*posture), "{name}");
            let v: Approval = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(v, *posture, "{name}");
            assert_eq!(
                Approval::from_str(name, false),
                Ok(*posture),
                "--approval {name}"
            );
        }
        // Output keeps the posture names.
        assert_eq!(serde_json::to_value(Approval::Ask).unwrap(), "ask");
        let err = Approval::parse("sometimes").unwrap_err();
        for (name, _) in APPROVAL_SPELLINGS {
            assert!(err.contains(name), "{err}");
        }
    }
}
