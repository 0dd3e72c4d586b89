//! codewhale: a terminal coding agent whose heart is a sandbox-first
//! execution host. See `docs/ARCHITECTURE.md` for the module map.

// `unwrap_used`, `expect_used` and `undocumented_unsafe_blocks` are denied
// for the whole crate in Cargo.toml's `[lints.clippy]`.

pub mod acp;
pub mod agent;
pub mod authz;
pub mod catalogue;
pub mod claude_import;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod exit;
pub mod host;
pub mod mcp;
pub mod mcp_server;
pub mod memory;
pub mod net;
pub mod policy;
pub mod provider;
pub mod receipt;
pub mod review;
pub mod runtime;
pub mod seams;
pub mod server;
pub mod session;
pub mod skills;
pub mod snapshot;
pub mod toml_file;
pub mod tui;
pub mod work_stack;
