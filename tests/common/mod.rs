//! The one test harness every integration test shares (`mod common;`).
//!
//! - [`cli`]: the CLI builder — a fixture with its own empty `HOME`,
//!   `CODEWHALE_HOME`, `TMPDIR` and `XDG_RUNTIME_DIR` (a fresh machine for
//!   every test), `codewhale …` commands with a clean environment, and
//!   readers for stream-json and session files.
//! - [`scripted_model`]: the scripted model server (real HTTP on loopback,
//!   OpenAI and Anthropic wires) that the `exec`, runtime and adapter tests
//!   drive the agent with.
//! - [`runtime`]: `app-server` over HTTP and stdio as real processes,
//!   their requests, event streams and replies, and the runner of the
//!   Python standard-library clients in tests/clients/.
//! - [`filters`]: the insta filters that replace what differs between runs
//!   (paths, thread ids, times, durations, store ids).
//! - [`sandbox`]: the real-sandbox tiers and their claims, and runners that
//!   check host state afterwards.
//! - [`receipts`] and [`receipt_scenario`]: tree fingerprints, a user
//!   `.git`, schema validation, and the one receipts + undo scenario run
//!   with and without the real execution host.
//! - [`snapshots`], [`authz`], [`seatbelt`]: fixtures of the snapshot store,
//!   the gates and the Seatbelt profile tests.
//! - [`fake_github`]: GitHub's REST API for `codewhale review` (routes,
//!   media types, pagination, errors, rate limits as its OpenAPI says).
//! - [`fake_opensandbox`] + [`opensandbox_env`], [`egress`]: fake servers
//!   (each behaviour cited from the real project) and loopback peers;
//!   [`tool_origin`]: a git/PyPI/npm origin for real package tools.
//! - [`pty`]: the TUI's PTY harness (a program in a real pty, a vt100
//!   parser answering cursor-position queries, waits on the screen) and
//!   the fresh home its runs get; benches/tui_pty.rs includes it too.
//!
//! Every test binary compiles the whole harness, so items one binary does
//! not use are expected: dead code is allowed here and only here.
#![allow(dead_code, unused_imports)]

pub mod authz;
pub mod cli;
pub mod egress;
pub mod fake_github;
pub mod fake_opensandbox;
pub mod filters;
pub mod long_session;
pub mod opensandbox_env;
pub mod procs;
pub mod pty;
pub mod receipt_scenario;
pub mod receipts;
pub mod runtime;
pub mod sandbox;
pub mod scripted_model;
pub mod seatbelt;
pub mod session_mix;
pub mod snapshots;
pub mod tool_origin;

/// Where `ci/setup` keeps what it fetched for the tests (the pinned
/// Python venvs, the pinned npm server): `$var` when set, else its
/// default `${XDG_CACHE_HOME:-$HOME/.cache}/codewhale-ci/<name>` (kept
/// out of `target/` so a clean clone does not fetch it again; `target/`
/// without a home).
pub fn ci_cache_dir(var: &str, name: &str) -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| std::path::Path::new(&h).join(".cache"))
        })
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    cache.join("codewhale-ci").join(name)
}
