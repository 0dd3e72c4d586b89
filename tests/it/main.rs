#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The integration tests that need no real sandbox, in one test binary:
//! each file here is a module (`cargo test --test it exec_scripted::`
//! runs one), sharing the one harness in `tests/common/`. One binary
//! links the library once instead of once per file, which is most of a
//! clean CI build's test time. The real-sandbox suites (`tests/real_*.rs`)
//! stay their own targets: CI runs them again by name as an unprivileged
//! user and with bubblewrap hidden, and the Nix build compiles them to
//! nothing. Tests here must not change process-wide state (environment
//! variables, the current directory): they share one process; the few
//! that do (`bwrap_plan`, `snapshot_isolation`) stay separate targets.

#[path = "../common/mod.rs"]
mod common;

mod authz_cli;
mod authz_config;
mod authz_hooks;
mod authz_pipeline;
mod authz_props;
mod authz_spellings;
mod auto_review_call;
mod auto_review_runtime;
mod egress_proxy;
mod exec_authorizer_seam;
mod exec_caching;
mod exec_catalogue;
mod exec_compaction;
mod exec_config;
mod exec_instructions;
mod exec_memory;
mod exec_provider_errors;
mod exec_reasoning;
mod exec_recovery;
mod exec_responses;
mod exec_router;
mod exec_scripted;
mod exec_skills;
mod host_cancel;
mod import_claude;
mod layers;
mod mobile;
mod opensandbox_cli;
mod opensandbox_contract;
mod opensandbox_e2e;
mod opensandbox_errors;
mod operate;
mod receipt_sanitize;
mod review_github;
mod review_local;
mod review_schema;
mod review_workflow;
mod runtime_docs;
mod runtime_exec;
mod runtime_http;
mod runtime_introspect;
mod runtime_long_session;
mod runtime_stdio;
mod runtime_tasks;
mod runtime_turns;
mod seams;
mod seatbelt_structure;
mod serve_clients;
mod serve_raw;
mod skip_switch;
mod snapshot_journal;
mod snapshot_keeper;
mod snapshot_nested;
mod snapshot_seed;
mod snapshot_treebuild;
mod subagents;
mod subagents_runtime;
mod subagents_worktree;
mod tui_long_session;
mod tui_memory_editor;
mod tui_model_reasoning;
mod undo_config;
mod web_browser;
mod web_server;
