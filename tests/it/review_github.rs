//! `codewhale review --pr N` and `codewhale review post FILE` against the
//! fake GitHub REST server (tests/common/fake_github.rs) and the scripted
//! model playing the reviewer: real processes, real loopback sockets.

use crate::common;
use common::cli::{stderr, Fixture};
use common::fake_github::{FakeGitHub, Pr, PrFile};
use common::scripted_model::{reply, ScriptedModel, Wire};
use serde_json::{json, Value};
use std::process::{Command, Output};

const READ: &str = "ghs_read_only_token";
const WRITE: &str = "ghs_pull_requests_write_token";
const BOT: &str = "codewhale-bot";

fn github() -> FakeGitHub {
    FakeGitHub::start(
        "octo",
        "demo",
        &[
            (READ, BOT, false),
            (WRITE, BOT, true),
            ("ghs_mallory", "mallory", true),
        ],
    )
}

/// A PR with a modified file, a renamed file and a binary file.
fn pr1() -> Pr {
    Pr {
        number: 1,
        head_sha: "a".repeat(40),
        files: vec![
            PrFile::modified(
                "src/lib.rs",
                "@@ -1,3 +1,4 @@\n fn a() {}\n+fn b() { danger() }\n fn c() {}\n fn d() {}",
            ),
            PrFile::renamed(
                "docs/old.md",
                "docs/new.md",
                Some("@@ -1 +1 @@\n-old title\n+new title"),
            ),
            PrFile::binary("assets/logo.png"),
        ],
    }
}

fn answer() -> String {
    json!({
        "summary": "One risky call; the rest is fine.",
        "findings": [
            {"path": "src/lib.rs", "line": 2, "severity": "high", "title": "danger() is unchecked", "body": "Check its result."},
            {"path": "src/lib.rs", "line": 90, "severity": "low", "title": "far from the diff", "body": "Not in a hunk."},
            {"path": "assets/logo.png", "line": 1, "severity": "info", "title": "binary asset", "body": "Large image."},
            {"path": "docs/new.md", "line": 1, "severity": "medium", "title": "title wording", "body": "Say what changed."}
        ]
    })
    .to_string()
}

/// Stage 1: the analysis process. Its environment: the model key (in
/// its config) and the read-only token — never the write token.
fn analyse(fx: &Fixture, gh: &FakeGitHub, args: &[&str]) -> Output {
    let mut c = fx.cmd(&[&["review", "--provider", "custom", "--pr"], args].concat());
    c.env("GITHUB_API_URL", gh.url())
        .env("GITHUB_TOKEN", READ)
        .env("GITHUB_REPOSITORY", "octo/demo");
    assert_no_value(&c, WRITE);
    c.output().expect("run codewhale")
}

/// Stage 2: the post process. A fresh home with no config (no model key
/// anywhere) and the write token.
fn post(gh: &FakeGitHub, file: &std::path::Path) -> Output {
    let fx = Fixture::with_config("");
    let mut c = fx.cmd(&["review", "post", file.to_str().unwrap()]);
    c.env("GITHUB_API_URL", gh.url()).env("GITHUB_TOKEN", WRITE);
    assert_no_value(&c, "test-key");
    assert!(!std::fs::read_to_string(fx.cw_home.join("config.toml"))
        .unwrap()
        .contains("api_key"));
    c.output().expect("run codewhale")
}

fn assert_no_value(c: &Command, secret: &str) {
    for (k, v) in c.get_envs() {
        assert_ne!(
            v.map(|v| v.to_string_lossy().into_owned()).as_deref(),
            Some(secret),
            "{k:?} carries {secret}"
        );
    }
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstderr:\n{}",
        o.status.code(),
        stderr(o)
    );
}

fn writes(gh: &FakeGitHub) -> usize {
    gh.seen().iter().filter(|s| s.method != "GET").count()
}

#[test]
fn two_stages_post_once_update_twice_and_refuse_a_stale_file() {
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply(&answer())]);
    let fx = Fixture::new(&model, "");
    let gh = github();
    gh.add_pr(pr1());
    // Another user's review quoting our marker: never ours.
    let mallory_body = "I copied <!-- codewhale-review --> here";
    let mallory = gh.add_review(1, "mallory", mallory_body);

    let out = fx.root.join("review.json");
    let o = analyse(&fx, &gh, &["1", "--output", out.to_str().unwrap()]);
    ok(&o);
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(file["schema"], "codewhale.review");
    assert_eq!(file["target"]["kind"], "pull_request");
    assert_eq!(file["target"]["repository"], "octo/demo");
    assert_eq!(file["target"]["number"], 1);
    assert_eq!(file["target"]["head_sha"], "a".repeat(40));
    assert_eq!(file["fingerprint"].as_str().unwrap().len(), 64);
    assert_eq!(file["findings"].as_array().unwrap().len(), 4);
    // The session of the reviewer's run is written like any session.
    let session = file["session"].as_str().unwrap();
    assert!(std::path::Path::new(session).exists());
    // The analysis stage only read, with the read-only token, and asked
    // for the diff media type.
    let seen = gh.seen();
    assert!(seen
        .iter()
        .all(|s| s.method == "GET" && s.token.as_deref() == Some(READ)));
    assert!(seen
        .iter()
        .any(|s| s.accept == "application/vnd.github.diff"));
    // The reviewer saw the rename and the binary file.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    let prompt = reqs[0].body.to_string();
    assert!(
        prompt.contains("docs/new.md (from docs/old.md): Renamed"),
        "{prompt}"
    );
    assert!(
        prompt.contains("assets/logo.png: Added, binary"),
        "{prompt}"
    );

    // Stage 2: posts one COMMENT review; no model call.
    let before = gh.seen().len();
    ok(&post(&gh, &out));
    assert_eq!(model.requests().len(), 1, "the post stage called the model");
    assert!(gh.seen()[before..]
        .iter()
        .all(|s| s.token.as_deref() == Some(WRITE)));
    let reviews = gh.reviews(1);
    assert_eq!(reviews.len(), 2);
    let ours = reviews.iter().find(|r| r.user == BOT).unwrap();
    assert_eq!(ours.event, "COMMENT");
    assert_eq!(ours.commit_id, "a".repeat(40));
    assert!(ours.body.contains("<!-- codewhale-review -->"));
    let inline: Vec<_> = ours
        .comments
        .iter()
        .map(|(p, l, _)| (p.as_str(), *l))
        .collect();
    assert_eq!(inline, [("src/lib.rs", 2), ("docs/new.md", 1)]);
    // Findings off the diff are in the body.
    assert!(ours.body.contains("`src/lib.rs:90`") && ours.body.contains("`assets/logo.png:1`"));

    // Again: the same review is updated, no second review, no repeated
    // inline comment; mallory's review untouched.
    let posts = gh.seen().iter().filter(|s| s.method == "POST").count();
    ok(&post(&gh, &out));
    let reviews = gh.reviews(1);
    assert_eq!(reviews.len(), 2, "{reviews:?}");
    let ours2 = reviews.iter().find(|r| r.user == BOT).unwrap();
    assert_eq!(ours2.id, ours.id);
    assert_eq!(ours2.comments.len(), 2);
    assert_eq!(
        gh.seen().iter().filter(|s| s.method == "POST").count(),
        posts
    );
    assert_eq!(gh.seen().iter().filter(|s| s.method == "PUT").count(), 1);
    let m = reviews.iter().find(|r| r.id == mallory).unwrap();
    assert_eq!(m.body, mallory_body);

    // A new push: the head SHA no longer matches → refused, nothing written.
    let w = writes(&gh);
    gh.push(1, &"b".repeat(40), None);
    let o = post(&gh, &out);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("stale"), "{}", stderr(&o));
    assert_eq!(writes(&gh), w);

    // Same head, different diff: the fingerprint no longer matches.
    let mut files = pr1().files;
    files[0] = PrFile::modified(
        "src/lib.rs",
        "@@ -1,3 +1,4 @@\n fn a() {}\n+fn b() { safe() }\n fn c() {}\n fn d() {}",
    );
    gh.push(1, &"a".repeat(40), Some(files));
    let o = post(&gh, &out);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("fingerprint"), "{}", stderr(&o));
    assert_eq!(writes(&gh), w);
}

/// GitHub Actions' `GITHUB_TOKEN` is an app installation token: `GET
/// /user` refuses it (403). Inside Actions the review is posted and found
/// again as `github-actions[bot]`'s (a re-run updates it); outside, the
/// post fails naming `CODEWHALE_REVIEW_LOGIN` and writes nothing.
#[test]
fn an_actions_installation_token_posts_once_and_updates_its_review() {
    const ACTIONS: &str = "ghs_actions_installation_token";
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply(&answer())]);
    let fx = Fixture::new(&model, "");
    let gh = FakeGitHub::start(
        "octo",
        "demo",
        &[(READ, BOT, false), (ACTIONS, "github-actions[bot]", true)],
    );
    gh.add_pr(pr1());
    let out = fx.root.join("review.json");
    ok(&analyse(
        &fx,
        &gh,
        &["1", "--output", out.to_str().unwrap()],
    ));
    let post_as = |actions: bool| {
        let home = Fixture::with_config("");
        let mut c = home.cmd(&["review", "post", out.to_str().unwrap()]);
        c.env("GITHUB_API_URL", gh.url())
            .env("GITHUB_TOKEN", ACTIONS);
        if actions {
            c.env("GITHUB_ACTIONS", "true");
        }
        c.output().expect("run codewhale")
    };
    // Outside Actions, with nothing naming the login: refused, no write.
    let o = post_as(false);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("CODEWHALE_REVIEW_LOGIN"),
        "{}",
        stderr(&o)
    );
    assert_eq!(writes(&gh), 0);
    // Inside Actions: one review, then the same one updated.
    ok(&post_as(true));
    ok(&post_as(true));
    let reviews = gh.reviews(1);
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0].user, "github-actions[bot]");
    assert_eq!(gh.seen().iter().filter(|s| s.method == "PUT").count(), 1);
}

#[test]
fn the_read_only_token_cannot_post() {
    // Positive control of the split: a write with the analysis stage's
    // token is refused by GitHub, so the post stage's token is the only
    // one that can write.
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply(&answer())]);
    let fx = Fixture::new(&model, "");
    let gh = github();
    gh.add_pr(pr1());
    let o = analyse(&fx, &gh, &["1", "--post", "--json"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Resource not accessible by integration"),
        "{}",
        stderr(&o)
    );
    assert!(gh.reviews(1).is_empty());
    // One stage at the terminal (model key and write token together):
    // posts.
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply(&answer())]);
    let fx = Fixture::new(&model, "");
    let o = fx
        .cmd(&[
            "review",
            "--provider",
            "custom",
            "--pr",
            "1",
            "--repo",
            "octo/demo",
            "--post",
        ])
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_TOKEN", WRITE)
        .output()
        .unwrap();
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("# codewhale review: octo/demo#1"));
    let r = gh.reviews(1);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].event.as_str(), r[0].comments.len()), ("COMMENT", 2));
}

#[test]
fn over_300_files_are_read_through_the_paginated_files_api() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply(r#"{"summary":"ok","findings":[]}"#)],
    );
    let fx = Fixture::new(&model, "");
    let gh = github();
    gh.add_pr(Pr {
        number: 2,
        head_sha: "c".repeat(40),
        files: (0..301)
            .map(|i| PrFile::modified(&format!("f{i:03}.txt"), "@@ -1 +1 @@\n-a\n+b"))
            .collect(),
    });
    let o = analyse(&fx, &gh, &["2", "--json"]);
    ok(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"]["number"], 2);
    let seen = gh.seen();
    assert!(
        seen.iter()
            .any(|s| s.path == "/repos/octo/demo/pulls/2"
                && s.accept == "application/vnd.github.diff")
    );
    let pages: Vec<_> = seen
        .iter()
        .filter(|s| s.path == "/repos/octo/demo/pulls/2/files")
        .map(|s| s.query.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        pages,
        [
            "per_page=100",
            "per_page=100&page=2",
            "per_page=100&page=3",
            "per_page=100&page=4"
        ]
    );
    let prompt = model.requests()[0].body.to_string();
    assert!(prompt.contains("Changed files (301)") && prompt.contains("f300.txt"));
}

#[test]
fn a_rate_limit_is_waited_out_under_a_minute_and_named_otherwise() {
    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply(r#"{"summary":"ok","findings":[]}"#)],
    );
    let fx = Fixture::new(&model, "");
    let gh = github();
    gh.add_pr(pr1());
    gh.rate_limit(1, 1);
    let o = analyse(&fx, &gh, &["1", "--json"]);
    ok(&o);
    // The reset is an hour away: fail at once, naming it.
    gh.rate_limit(1, 3600);
    let t = std::time::Instant::now();
    let o = analyse(&fx, &gh, &["1", "--json"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rate limit exhausted; it resets at 20"),
        "{}",
        stderr(&o)
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn a_malformed_answer_is_retried_once_then_an_error() {
    let good = r#"{"summary":"ok","findings":[]}"#;
    let model = ScriptedModel::start(Wire::OpenAi, vec![reply("Looks good to me!"), reply(good)]);
    let fx = Fixture::new(&model, "");
    let gh = github();
    gh.add_pr(pr1());
    let o = analyse(&fx, &gh, &["1", "--json"]);
    ok(&o);
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1]
        .body
        .to_string()
        .contains("Your answer was rejected"));

    let model = ScriptedModel::start(
        Wire::OpenAi,
        vec![
            reply("nope"),
            reply(
                r#"{"summary":"x","findings":[{"path":"a","line":0,"severity":"high","title":"t","body":""}]}"#,
            ),
        ],
    );
    let fx = Fixture::new(&model, "");
    let out = fx.root.join("r.json");
    let o = analyse(&fx, &gh, &["1", "--output", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("malformed twice"), "{}", stderr(&o));
    assert!(!out.exists(), "a half-parsed review was written");
}

#[test]
fn a_file_that_is_not_a_review_is_refused() {
    let gh = github();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.json");
    std::fs::write(&f, r#"{"schema":"codewhale.review","version":1}"#).unwrap();
    let o = post(&gh, &f);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(gh.seen().is_empty());
}
