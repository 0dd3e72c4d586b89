//! The shipped CI example (docs/workflows/codewhale-review.yml) keeps the
//! two-stage split: `pull_request` only, fork and draft PRs skipped, the
//! analysis job reads with the model key, the posting job writes without
//! it and gets only the JSON artifact.

use serde_yaml::Value;

fn workflow() -> Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/workflows/codewhale-review.yml"
    );
    serde_yaml::from_str(&std::fs::read_to_string(p).expect("workflow file")).expect("YAML")
}

fn text(v: &Value) -> String {
    serde_yaml::to_string(v).unwrap()
}

#[test]
fn two_jobs_split_the_model_key_from_the_write_token() {
    let w = workflow();
    let on = &w["on"];
    assert!(on.get("pull_request").is_some(), "{}", text(on));
    assert!(!text(&w).contains("pull_request_target"));
    // Nothing at the top level widens what jobs may do.
    let top = w.get("permissions").map(text).unwrap_or_default();
    assert!(!top.contains("write"), "{top}");

    let jobs = w["jobs"].as_mapping().expect("jobs");
    assert_eq!(jobs.len(), 2);
    let (analyse, post) = (&w["jobs"]["analyse"], &w["jobs"]["post"]);

    // Fork and draft PRs are skipped by the first job (and so the second).
    let cond = analyse["if"].as_str().expect("analyse.if");
    assert!(
        cond.contains("head.repo.full_name == github.repository"),
        "{cond}"
    );
    assert!(cond.contains("draft"), "{cond}");

    // Analysis: read-only contents, the model key, no write permission.
    let perms = analyse["permissions"]
        .as_mapping()
        .expect("analyse.permissions");
    assert_eq!(analyse["permissions"]["contents"], "read");
    assert!(
        perms.values().all(|v| v != "write"),
        "{}",
        text(&analyse["permissions"])
    );
    let a = text(analyse);
    assert!(
        a.contains("secrets.CODEWHALE_MODEL_KEY")
            || a.contains("secrets.OPENAI_API_KEY")
            || a.contains("secrets.ANTHROPIC_API_KEY"),
        "{a}"
    );
    assert!(
        a.contains("codewhale review --pr") && a.contains("--output review.json"),
        "{a}"
    );
    assert!(a.contains("actions/upload-artifact"), "{a}");

    // Post: pull-requests write, no model key, only the artifact.
    assert_eq!(post["needs"], "analyse");
    assert_eq!(post["permissions"]["pull-requests"], "write");
    let p = text(post);
    assert!(!p.contains("MODEL_KEY") && !p.contains("API_KEY"), "{p}");
    assert!(
        !p.contains("actions/checkout"),
        "the post job runs no repository code: {p}"
    );
    assert!(
        p.contains("actions/download-artifact") && p.contains("codewhale review post review.json"),
        "{p}"
    );
}
