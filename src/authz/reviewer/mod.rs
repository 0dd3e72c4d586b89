//! Auto-Review's second layer, the model reviewer, as pure values.
//!
//! The deterministic layer (gates 1–8) decides first; only an *ordinary*
//! question in the Auto-Review posture ([`super::Verdict::to_reviewer`])
//! reaches the reviewer. This module owns everything about that review
//! that does not need a network: the [`ReviewDocument`] (the one user
//! message the reviewer model gets — the proposed call and the gates'
//! observations, never the transcript, the model's own text, earlier tool
//! output or file contents), the fixed [`SYSTEM_PROMPT`], the strict
//! [`parse_answer`] (anything but the one JSON object is
//! [`ReviewVerdict::Unavailable`]), and the per-agent [`Breaker`].
//!
//! The request itself (provider, timeout, retries) is the agent layer's
//! (`agent::review`); the gates never talk to a model.

mod answer;
mod apply;
mod breaker;
mod document;
mod prompt;

pub use answer::{parse_answer, ReviewDecision, ReviewVerdict, Risk};
pub use breaker::{Breaker, Trip, TripKind};
pub use document::{Observations, ProposedCall, ReviewDocument, ReviewInputs, MAX_DOCUMENT_BYTES};
pub use prompt::SYSTEM_PROMPT;
