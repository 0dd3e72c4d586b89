#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Auto-Review's model reviewer deciding real shell commands in a runtime
//! turn, in every Linux tier: `app-server --http` with the scripted model
//! as worker and reviewer, `approval_policy = "auto-review"`. `touch` is
//! not read-only and not a build command, so each call is an ordinary
//! question for the reviewer: the allowed one runs under the sandbox and
//! leaves its file, the denied one leaves nothing (host state checked),
//! and nobody is asked.

mod common;

use common::runtime::*;
use common::sandbox::tiers;
use common::scripted_model::{call, reply, verdict, ScriptedModel, Wire};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reviewers_allow_runs_the_command_and_its_deny_does_not() {
    for tier in tiers() {
        let model = ScriptedModel::start(
            Wire::OpenAi,
            vec![
                call("s1", "shell", json!({"command": "touch allowed.txt"})),
                call("s2", "shell", json!({"command": "touch denied.txt"})),
                reply("done"),
            ],
        );
        model.reviews(vec![
            verdict("low", "allow", "creates an empty file in the workspace"),
            verdict("medium", "deny", "not needed"),
        ]);
        let f = common::cli::Fixture::with_config(&format!(
            "provider = \"custom\"\napproval_policy = \"auto-review\"\n\
             [providers.custom]\nkind = \"{}\"\nbase_url = \"{}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n\
             [sandbox]\nbackend = \"{}\"\n",
            model.kind(),
            model.base_url(),
            tier.backend
        ));
        let envs: Vec<(&str, String)> = if common::sandbox::no_bwrap() {
            vec![(
                "PATH",
                common::sandbox::path_without_bwrap().display().to_string(),
            )]
        } else {
            Vec::new()
        };
        let s = Server::start_env(&f, &["--approval-timeout", "2"], &envs);
        let thread = new_thread(&s, json!({"title": "t"})).await;
        new_turn(&s, &thread, "touch the files").await;
        let evs = until_completed(&s, &thread, 1).await;
        let tag = tier.name;
        assert!(f.ws.join("allowed.txt").exists(), "[{tag}] {evs:#?}");
        assert!(!f.ws.join("denied.txt").exists(), "[{tag}]");
        assert!(!has(&evs, "approval.required"), "[{tag}] nobody was asked");
        assert_eq!(count(&evs, "auto_review.decided"), 2, "[{tag}]");
        assert_eq!(model.review_requests().len(), 2, "[{tag}]");
    }
}
