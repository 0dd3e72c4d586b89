//! The authorization pipeline: what a tool call passes before it runs.
//!
//! # API (for the agent loop)
//!
//! ```text
//! let posture = Posture { mode, approval, headless, auto_approve, background, shell_disabled };
//! let call    = ToolCall::shell("cargo test", cwd)       // or ToolCall::new(tool, json_args, cwd)
//! let answers = hooks::run_before(&settings.hooks, &call).await;   // gate 3's I/O, done first
//! let verdict = authorize(&call, &posture, &Context { rules, hooks: &answers, grants,
//!                                                     registry, admission, workspace, floor });
//! match verdict.decision {
//!     Decision::Allow => host::run(policy_for(verdict.sandbox_mode()), …),   // gate 9
//!     Decision::Ask if verdict.to_reviewer => /* Auto-Review: model reviewer */,
//!     Decision::Ask   => verdict.answer(HumanAnswer::{Once|Session|Deny}, &mut grants),
//!     Decision::Deny  => /* report verdict.reason to the model */,
//! }
//! ```
//!
//! [`authorize`] is pure: (tool call, posture, rules, hooks' answers, session
//! grants) → [`Verdict`] with the gate-by-gate trace. [`Decision`] is ordered
//! `Allow < Ask < Deny`; strictest wins is `max`. See `docs/AUTHORIZATION.md`.
//!
//! Modules: [`shell`] (what the shell would run), [`readonly`] (what runs
//! without asking), [`unicode`] + [`floor`] (gate 6), [`rules`]
//! (`permissions.toml`, gate 5), [`hooks`] (gate 3's runner), [`repo`]
//! (gate 7), [`posture`], [`call`], [`verdict`], [`pipeline`].

mod acc;
pub mod call;
pub mod floor;
mod gates;
pub mod hooks;
pub mod pipeline;
pub mod posture;
pub mod readonly;
pub mod repo;
pub mod reviewer;
pub mod rules;
pub mod shell;
pub mod unicode;
pub mod verdict;

pub use call::{Admission, SessionGrants, ToolCall, ToolKind, ToolRegistry, ToolSpec, SHELL_TOOL};
pub use floor::FloorContext;
pub use hooks::{HookAnswer, HooksConfig};
pub use pipeline::{authorize, Context, HumanAnswer};
pub use posture::{Approval, Mode, Posture};
pub use rules::{Layer, RuleSet};
pub use verdict::{AskKind, DecidedBy, Decision, Gate, Question, Verdict};
