//! Sub-agents: the `agent` tool's pure parts.
//!
//! - [`role`]: the roles a child may take (the upstream product's table)
//!   and what each may do at most;
//! - [`clamp`]: the one pure function from a parent's live posture and a
//!   role to the child's posture (the meet of the two, never wider than
//!   either), with its property tests;
//! - [`limits`]: the tree's shared limits (running-agent cap, depth,
//!   spawns per request, token budget, write scopes);
//! - [`worktree`]: a `worktree: true` child's own checkout under
//!   codewhale's home and the diff that brings its change back.
//!
//! The child itself is run by the same agent loop as its parent
//! (`agent::run`'s `subagents` child module): a child is a loop run like
//! any other, never a second loop implementation.

pub mod clamp;
pub mod limits;
pub mod role;
pub mod worktree;

pub use clamp::{clamp, EffectivePosture, Network};
pub use limits::{SpawnRefused, Tree, MAX_DEPTH, MAX_SPAWNS_PER_REQUEST};
pub use role::Role;

/// The tool's name as the model sees it.
pub const AGENT_TOOL: &str = "agent";

/// A sub-agent as its questions and records name it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AgentRef {
    /// `a1`, `a2`, … (unique within the request's tree).
    pub id: String,
    pub role: Role,
    /// The request's agent is depth 0.
    pub depth: u32,
}

impl AgentRef {
    /// `agent:<id>`, as `approval.required`'s `asked_by` says it.
    pub fn asked_by(&self) -> String {
        format!("agent:{}", self.id)
    }
}
