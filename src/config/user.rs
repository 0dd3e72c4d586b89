//! The user config (`~/.codewhale/config.toml`) as a typed value.
//!
//! Sections owned by other parts of codewhale are kept raw
//! (`opensandbox`, `providers`, `mcp`, `tui`, …) so they can be typed there
//! without editing these structs. Unknown top-level keys are not errors
//! (newer configs must load in older binaries) but are reported by name.

use crate::authz::{Admission, Approval, HooksConfig};
use crate::host::{BackendChoice, HostSettings};
use crate::policy::{CachePolicy, SandboxMode, SandboxPolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top-level keys this struct knows; anything else is reported.
pub const KNOWN_KEYS: &[&str] = &[
    "approval_policy",
    "sandbox_mode",
    "model",
    "reasoning_effort",
    "max_subagents",
    "allow_shell",
    "trust",
    "sandbox",
    "hooks",
    "tools",
    "provider",
    "base_url",
    "providers",
    "opensandbox",
    "mcp",
    "mcp_servers",
    "tui",
    "agent",
    "router",
    "project_instruction_imports",
    "compaction",
    "auto_review",
    "subagents",
    "memory",
];

/// `Debug` is written by hand: raw sections (providers, opensandbox, …) may
/// hold API keys, so only their key names are shown.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserConfig {
    pub approval_policy: Option<Approval>,
    pub sandbox_mode: Option<SandboxMode>,
    pub model: Option<String>,
    pub reasoning_effort: Option<crate::config::effort::ReasoningEffort>,
    /// Running sub-agents at once (default 8, at most 64: a larger value
    /// is an error naming the file, line and key).
    #[serde(deserialize_with = "de_max_subagents")]
    pub max_subagents: Option<u32>,
    pub allow_shell: Option<bool>,
    /// Trusted-project settings (owned by onboarding; kept raw).
    pub trust: Option<toml::Value>,
    pub sandbox: SandboxSection,
    pub hooks: HooksConfig,
    /// Tool admission lists (gate 2): `[tools] allow = […]`, `deny = […]`.
    pub tools: Admission,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    /// Provider definitions (owned by `provider/`; kept raw).
    pub providers: BTreeMap<String, toml::Table>,
    /// OpenSandbox backend settings (owned by `host/opensandbox`; kept raw).
    pub opensandbox: Option<toml::Table>,
    pub mcp: Option<toml::Table>,
    pub mcp_servers: Option<toml::Table>,
    pub tui: Option<toml::Table>,
    pub agent: Option<toml::Table>,
    /// `model = "auto"` routing rules (owned by `provider/router`; kept raw).
    pub router: Option<toml::Table>,
    /// Also read other tools' instruction files into the prompt: `true`
    /// for `CLAUDE.md`, `.cursorrules` and `.github/copilot-instructions.md`,
    /// or a list of file names (user config only; docs/CONFIG.md).
    pub project_instruction_imports: Option<super::imports::InstructionImports>,
    /// `[compaction]`: when the conversation is compacted automatically.
    pub compaction: super::compaction::CompactionSection,
    /// `[auto_review]`: the Auto-Review reviewer's model and timeout.
    pub auto_review: super::auto_review::AutoReviewSection,
    /// `[subagents]`: the token budget of a request's sub-agents.
    pub subagents: SubagentsSection,
    /// `[memory]`: the memory file in the prompt and the `remember` tool
    /// (docs/MEMORY.md; user config only).
    pub memory: crate::memory::MemorySection,
}

/// `[subagents]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubagentsSection {
    /// Tokens (input + output) a request's tree of sub-agents may use in
    /// all; once spent, spawns and child turns stop with status `limit`.
    pub token_budget: Option<u64>,
    /// Seconds a sub-agent's model request may go unanswered before the
    /// child is stopped (status `failed`) and its slot freed; default 300.
    pub stall_secs: Option<u64>,
}

/// The largest `max_subagents` accepted.
pub const MAX_SUBAGENTS_LIMIT: u32 = 64;

/// `max_subagents`: at most [`MAX_SUBAGENTS_LIMIT`] (the error names the
/// file, line and key through the TOML error).
pub(crate) fn de_max_subagents<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u32>, D::Error> {
    let limit = MAX_SUBAGENTS_LIMIT;
    let v = Option::<u32>::deserialize(d)?;
    match v {
        Some(n) if n > limit => Err(serde::de::Error::custom(format!(
            "max_subagents = {n} is above the limit of {limit}"
        ))),
        Some(0) => Err(serde::de::Error::custom(
            "max_subagents = 0: at least 1 (to run no sub-agents, deny the `agent` tool in [tools] deny)",
        )),
        _ => Ok(v),
    }
}

fn table_keys(t: Option<&toml::Table>) -> Option<Vec<&String>> {
    t.map(|t| t.keys().collect())
}

impl std::fmt::Debug for UserConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserConfig")
            .field("approval_policy", &self.approval_policy)
            .field("sandbox_mode", &self.sandbox_mode)
            .field("model", &self.model)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("max_subagents", &self.max_subagents)
            .field("allow_shell", &self.allow_shell)
            .field("trust", &self.trust.as_ref().map(|_| "…"))
            .field("sandbox", &self.sandbox)
            .field("hooks", &self.hooks)
            .field("tools", &self.tools)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .field("opensandbox", &table_keys(self.opensandbox.as_ref()))
            .field("mcp", &table_keys(self.mcp.as_ref()))
            .field("mcp_servers", &table_keys(self.mcp_servers.as_ref()))
            .field("tui", &table_keys(self.tui.as_ref()))
            .field("agent", &table_keys(self.agent.as_ref()))
            .field("router", &table_keys(self.router.as_ref()))
            .field(
                "project_instruction_imports",
                &self.project_instruction_imports,
            )
            .field("compaction", &self.compaction)
            .field("auto_review", &self.auto_review)
            .field("subagents", &self.subagents)
            .field("memory", &self.memory)
            .finish()
    }
}

/// `[sandbox]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSection {
    pub backend: Option<BackendChoice>,
    pub bwrap_path: Option<PathBuf>,
    /// Extra unreadable paths (`~/`-relative or absolute); add-only.
    pub deny_read: Vec<String>,
    /// Extra write-protected paths; add-only.
    pub protect_write: Vec<String>,
    pub writable_roots: Vec<PathBuf>,
    /// `true`/`false`, `"off" | "on" | "allowlist"`, or the
    /// `[sandbox.network]` table (see `config::network`).
    pub network: Option<super::network::NetworkSetting>,
    /// Run unsandboxed when no backend is available (labelled as such).
    pub allow_unsandboxed: Option<bool>,
    pub env: EnvSection,
    pub caches: CacheSection,
    /// `[sandbox.landlock]`: the landlock tier's hole strategies.
    pub landlock: crate::policy::LandlockHoles,
}

/// `[sandbox.env]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvSection {
    pub keep: Vec<String>,
    pub set: BTreeMap<String, String>,
    pub scrub_secrets: Option<bool>,
}

/// `[sandbox.caches]`: switch individual toolchain caches off (all on by default).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheSection {
    pub cargo: Option<bool>,
    pub npm: Option<bool>,
    pub xdg_cache: Option<bool>,
    pub go: Option<bool>,
    pub pip: Option<bool>,
}

impl SandboxSection {
    /// The sandbox policy for `mode` in `workspace`, with this section applied.
    pub fn policy(&self, mode: SandboxMode, workspace: &Path) -> SandboxPolicy {
        let mut p = SandboxPolicy::new(mode, workspace);
        p.writable_roots = self.writable_roots.clone();
        if let Some(n) = &self.network {
            p.network = n.mode() == crate::net::NetworkMode::On;
            p.egress = n.egress();
        }
        p.extra_deny_read = self.deny_read.clone();
        p.extra_protect_write = self.protect_write.clone();
        p.landlock = self.landlock;
        p.env.keep = self.env.keep.clone();
        p.env.set = self.env.set.clone();
        if let Some(s) = self.env.scrub_secrets {
            p.env.scrub_secrets = s;
        }
        let d = CachePolicy::default();
        let c = &self.caches;
        p.caches = CachePolicy {
            cargo: c.cargo.unwrap_or(d.cargo),
            npm: c.npm.unwrap_or(d.npm),
            xdg_cache: c.xdg_cache.unwrap_or(d.xdg_cache),
            go: c.go.unwrap_or(d.go),
            pip: c.pip.unwrap_or(d.pip),
        };
        p
    }

    /// Host settings (backend choice, bwrap path, unsandboxed fallback).
    pub fn host_settings(&self) -> HostSettings {
        HostSettings {
            backend: self.backend.unwrap_or_default(),
            bwrap_path: self.bwrap_path.clone(),
            allow_unsandboxed: self.allow_unsandboxed.unwrap_or(false),
            opensandbox: None,
            helper_exe: None,
        }
    }
}
