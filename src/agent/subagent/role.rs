//! The sub-agent roles, as the upstream product names them (issue #30's
//! table), and the most each may do.
//!
//! | role | file writes | shell |
//! |---|---|---|
//! | `general`, `implement` | yes | yes |
//! | `test` | no | verification (build/test; read-only OS sandbox) |
//! | `explore`, `reviewer` | no | investigation (read-only commands) |
//! | `planner` | no | read-only checks |
//! | `advisor` | no | none |
//!
//! A role without writes runs under a read-only OS sandbox (no writable
//! root), not only without the write tools: whatever a command does, the
//! kernel refuses its writes.

use super::clamp::{EffectivePosture, Network, Tools};
use crate::authz::{Approval, Mode};
use crate::policy::SandboxMode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A child's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    General,
    Implement,
    Test,
    Explore,
    Reviewer,
    Planner,
    Advisor,
}

/// Every role, in the table's order.
pub const ROLES: [Role; 7] = [
    Role::General,
    Role::Implement,
    Role::Test,
    Role::Explore,
    Role::Reviewer,
    Role::Planner,
    Role::Advisor,
];

/// The read tools every role keeps.
const READ_TOOLS: [&str; 3] = ["read_file", "list_dir", "search"];
/// The file-writing tools (writers only).
const WRITE_TOOLS: [&str; 3] = ["write_file", "edit_file", "apply_patch"];

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::General => "general",
            Role::Implement => "implement",
            Role::Test => "test",
            Role::Explore => "explore",
            Role::Reviewer => "reviewer",
            Role::Planner => "planner",
            Role::Advisor => "advisor",
        }
    }

    /// The role called `s`; the error lists every role (it goes back to
    /// the model as the tool's error).
    pub fn parse(s: &str) -> Result<Role, String> {
        ROLES
            .iter()
            .copied()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<&str> = ROLES.iter().map(|r| r.as_str()).collect();
                format!("unknown role `{s}`; roles: {}", all.join(", "))
            })
    }

    /// May write files (and so runs with the parent's writable sandbox).
    pub fn writes(self) -> bool {
        matches!(self, Role::General | Role::Implement)
    }

    /// Has a shell at all.
    pub fn has_shell(self) -> bool {
        !matches!(self, Role::Advisor)
    }

    /// One line for the child's system prompt: what it may do.
    pub fn limits_line(self) -> &'static str {
        match self {
            Role::General | Role::Implement => {
                "You may read and edit files and run commands, within your parent's permissions."
            }
            Role::Test => {
                "You may read files and run verification commands (builds, tests); you may not \
                 edit files, and every command runs under a read-only sandbox."
            }
            Role::Explore | Role::Reviewer => {
                "You investigate: read files and run read-only commands; you may not edit files."
            }
            Role::Planner => {
                "You plan: read files and run read-only checks; you may not edit files."
            }
            Role::Advisor => "You advise from reading files only: no edits, no commands.",
        }
    }

    /// The most this role may do, as a posture whose every unlimited part
    /// is the loosest value: [`super::clamp`] meets the parent's posture
    /// with it.
    pub fn cap(self) -> EffectivePosture {
        let mut tools: BTreeSet<String> = READ_TOOLS.iter().map(|t| t.to_string()).collect();
        tools.insert(super::AGENT_TOOL.to_string());
        if self.writes() {
            tools.extend(WRITE_TOOLS.iter().map(|t| t.to_string()));
        }
        if self.has_shell() {
            tools.insert(crate::catalogue::SHELL.to_string());
        }
        let (mode, sandbox) = match self {
            // No cap: the parent's mode and sandbox.
            Role::General | Role::Implement => (Mode::Operate, SandboxMode::DangerFullAccess),
            // Verification commands are not read-only (the gates ask about
            // them in Ask); the sandbox makes them read-only.
            Role::Test => (Mode::Work, SandboxMode::ReadOnly),
            // Plan: the gates admit read-only commands only.
            Role::Explore | Role::Reviewer | Role::Planner | Role::Advisor => {
                (Mode::Plan, SandboxMode::ReadOnly)
            }
        };
        EffectivePosture {
            mode,
            approval: Approval::FullAccess,
            headless: false,
            auto_approve: true,
            background: false,
            shell_disabled: !self.has_shell(),
            sandbox,
            writable_roots: None,
            write_scope: None,
            network: if self.has_shell() {
                Network::On
            } else {
                Network::Off
            },
            deny_read: BTreeSet::new(),
            protect_write: BTreeSet::new(),
            tools: Tools::Only(tools),
        }
        .normalized()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn unknown_role_lists_every_role() {
        let e = Role::parse("hacker").unwrap_err();
        for r in ROLES {
            assert!(e.contains(r.as_str()), "{e}");
            assert_eq!(Role::parse(r.as_str()), Ok(r));
        }
    }

    #[test]
    fn roles_without_writes_get_a_read_only_sandbox_and_no_write_tools() {
        for r in ROLES {
            let c = r.cap();
            assert_eq!(c.sandbox == SandboxMode::ReadOnly, !r.writes(), "{r:?}");
            for w in WRITE_TOOLS {
                assert_eq!(c.tools.contains(w), r.writes(), "{r:?} {w}");
            }
            assert_eq!(c.tools.contains("shell"), r.has_shell(), "{r:?}");
        }
    }
}
