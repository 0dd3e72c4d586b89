//! The headless agent behind `codewhale exec`: prompt → model → tool calls →
//! authorization → host → results back, until the model stops, the turn
//! limit, or Ctrl-C.
//!
//! Invariants: the loop never spawns a process (shell goes through
//! [`crate::host::run`]); every tool call passes admission (offered tools,
//! `--allowed-tools`/`--disallowed-tools`, deny wins) and an [`Authorizer`]
//! before it runs; an `ask` in a headless run is "no response" unless
//! `--auto` (gate 8 answers it; the loop gets the final verdict), and
//! `--auto` never removes the sandbox; every step is a
//! durable session event before the next one starts.

pub mod authorizer;
pub mod authz_adapter;
pub mod compaction;
pub mod event;
pub mod includes;
pub mod models;
pub mod operate;
pub mod output;
pub mod prompt;
pub mod review;
pub mod run;
pub mod setup;
pub mod snapshots;
pub mod subagent;
pub mod tools;

pub use authorizer::{Authorizer, DecidedBy, Decision, Verdict};
pub use authz_adapter::{exec_posture, PipelineAuthorizer};
pub use event::Event;
pub use output::{Emitter, EventTap, OutputFormat};
pub use run::{
    Approver, ExecOptions, ExecReport, ExecRun, ExtraOutput, ExtraTools, Headless, Interrupt,
    InterruptCause, Models, RunHooks, Spawner,
};
pub use snapshots::RunSnapshots;
