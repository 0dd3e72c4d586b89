//! codewhale: a terminal coding agent whose heart is a sandbox-first
//! execution host. See `docs/ARCHITECTURE.md` for the module map.

// Library code reports errors; it never panics on them (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod authz;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod exit;
pub mod host;
pub mod policy;
pub mod provider;
pub mod receipt;
pub mod runtime;
pub mod server;
pub mod session;
pub mod snapshot;
