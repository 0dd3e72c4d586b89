//! A fake GitHub REST API: real HTTP on 127.0.0.1, the few operations
//! `codewhale review` uses, shaped as GitHub's published OpenAPI
//! description (github/rest-api-description, `api.github.com.json`) and
//! its rendered docs (github/rest-api-docs-md) define them:
//!
//! - `pulls/get` — `GET /repos/{owner}/{repo}/pulls/{pull_number}`: JSON
//!   (`pull-request`), or with `Accept: application/vnd.github.diff` (or
//!   the older `application/vnd.github.v3.diff`) the git diff as text. A
//!   PR of more than 300 files refuses the diff with `406` and
//!   `{"message": "Sorry, the diff exceeded the maximum number of files
//!   (300). …", "errors": [{"resource": "PullRequest", "field": "diff",
//!   "code": "too_large"}], "documentation_url": …}` (GitHub's answer).
//! - `pulls/list-files` — `GET …/pulls/{pull_number}/files`: `diff-entry`
//!   items, `per_page` (default 30, max 100) and `page`, a `Link` header
//!   with `rel="next"`/`"last"` (and `"prev"`/`"first"` after page 1), as
//!   "Using pagination in the REST API" describes.
//! - `users/get-authenticated` — `GET /user`: `401 Requires
//!   authentication` without a token.
//! - `pulls/list-reviews`, `pulls/list-comments-for-review`,
//!   `pulls/create-review` (`event` one of APPROVE, REQUEST_CHANGES,
//!   COMMENT; a comment off the diff is `422` "Pull request review thread
//!   line must be part of the diff"), `pulls/update-review` (only the
//!   review's author).
//! - Errors are `{"message", "documentation_url"}` (the `basic-error`
//!   schema); a token without write access gets `403 Resource not
//!   accessible by integration` on a write; a rate limit is `403` with
//!   `x-ratelimit-limit`, `x-ratelimit-remaining: 0`, `x-ratelimit-reset`
//!   (epoch seconds) and `x-ratelimit-resource` ("Rate limits for the REST
//!   API": primary limits).
//!
//! Every request is recorded with the token it carried, so tests can say
//! which stage used which token.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One changed file of a PR (GitHub's `diff-entry`).
#[derive(Clone, Debug)]
pub struct PrFile {
    pub filename: String,
    /// added, removed, modified, renamed.
    pub status: String,
    pub previous_filename: Option<String>,
    /// The hunks (`None`: binary).
    pub patch: Option<String>,
}

impl PrFile {
    pub fn modified(name: &str, patch: &str) -> Self {
        PrFile {
            filename: name.into(),
            status: "modified".into(),
            previous_filename: None,
            patch: Some(patch.into()),
        }
    }
    pub fn renamed(from: &str, to: &str, patch: Option<&str>) -> Self {
        PrFile {
            filename: to.into(),
            status: "renamed".into(),
            previous_filename: Some(from.into()),
            patch: patch.map(str::to_string),
        }
    }
    pub fn binary(name: &str) -> Self {
        PrFile {
            filename: name.into(),
            status: "added".into(),
            previous_filename: None,
            patch: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Pr {
    pub number: u64,
    pub head_sha: String,
    pub files: Vec<PrFile>,
}

/// A stored review.
#[derive(Clone, Debug)]
pub struct ReviewRec {
    pub id: u64,
    pub user: String,
    pub body: String,
    pub event: String,
    pub commit_id: String,
    pub comments: Vec<(String, u32, String)>,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub accept: String,
    /// The bearer/token value, if any.
    pub token: Option<String>,
}

#[derive(Default)]
struct State_ {
    owner: String,
    repo: String,
    prs: HashMap<u64, Pr>,
    reviews: HashMap<u64, Vec<ReviewRec>>,
    /// token → (login, may write pull requests)
    tokens: HashMap<String, (String, bool)>,
    next_id: u64,
    seen: Vec<Seen>,
    /// Requests still to be answered with a rate limit: (count, reset in s).
    rate_limited: Option<(u32, u64)>,
}

#[derive(Clone)]
struct Shared(Arc<Mutex<State_>>);

pub struct FakeGitHub {
    pub port: u16,
    shared: Shared,
}

fn error(status: StatusCode, message: &str, doc: &str) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(
            json!({"message": message, "documentation_url": doc}).to_string(),
        ))
        .unwrap()
}

fn json_resp(v: Value) -> Response {
    Response::builder()
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(v.to_string()))
        .unwrap()
}

/// The new-side lines of a `patch` (the hunks' `+c,d` ranges).
fn diff_lines(patch: &str) -> Vec<(u32, u32)> {
    patch
        .lines()
        .filter_map(|l| {
            let plus = l
                .strip_prefix("@@ -")?
                .split(' ')
                .nth(1)?
                .strip_prefix('+')?;
            let (start, len) = match plus.split_once(',') {
                Some((s, n)) => (s.parse().ok()?, n.parse().ok()?),
                None => (plus.parse().ok()?, 1u32),
            };
            (len > 0).then_some((start, start + len - 1))
        })
        .collect()
}

/// The PR's diff as GitHub's diff media type renders it.
fn diff_text(pr: &Pr) -> String {
    let mut out = String::new();
    for f in &pr.files {
        let new = &f.filename;
        let old = f.previous_filename.as_deref().unwrap_or(new);
        out.push_str(&format!("diff --git a/{old} b/{new}\n"));
        match f.status.as_str() {
            "added" => out.push_str("new file mode 100644\nindex 0000000..1111111\n"),
            "removed" => out.push_str("deleted file mode 100644\nindex 1111111..0000000\n"),
            "renamed" => out.push_str(&format!(
                "similarity index 90%\nrename from {old}\nrename to {new}\n"
            )),
            _ => out.push_str("index 1111111..2222222 100644\n"),
        }
        match &f.patch {
            None if f.status == "renamed" => {}
            None => out.push_str(&format!(
                "Binary files {} and b/{new} differ\n",
                if f.status == "added" {
                    "/dev/null".to_string()
                } else {
                    format!("a/{old}")
                }
            )),
            Some(p) => {
                let from = if f.status == "added" {
                    "/dev/null".into()
                } else {
                    format!("a/{old}")
                };
                out.push_str(&format!("--- {from}\n+++ b/{new}\n{p}\n"));
            }
        }
    }
    out
}

impl FakeGitHub {
    /// A repository `owner/repo` and its tokens: `(token, login, write)`.
    pub fn start(owner: &str, repo: &str, tokens: &[(&str, &str, bool)]) -> Self {
        let st = State_ {
            owner: owner.into(),
            repo: repo.into(),
            tokens: tokens
                .iter()
                .map(|(t, l, w)| (t.to_string(), (l.to_string(), *w)))
                .collect(),
            next_id: 1000,
            ..Default::default()
        };
        let shared = Shared(Arc::new(Mutex::new(st)));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let s2 = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let app = Router::new()
                    .route("/user", get(user))
                    .route("/repos/{owner}/{repo}/pulls/{n}", get(pull))
                    .route("/repos/{owner}/{repo}/pulls/{n}/files", get(files))
                    .route(
                        "/repos/{owner}/{repo}/pulls/{n}/reviews",
                        get(list_reviews).post(create_review),
                    )
                    .route(
                        "/repos/{owner}/{repo}/pulls/{n}/reviews/{id}",
                        axum::routing::put(update_review),
                    )
                    .route(
                        "/repos/{owner}/{repo}/pulls/{n}/reviews/{id}/comments",
                        get(review_comments),
                    )
                    .layer(axum::middleware::from_fn_with_state(s2.clone(), gate))
                    .with_state(s2);
                let _ = axum::serve(l, app).await;
            });
        });
        FakeGitHub { port, shared }
    }

    /// `GITHUB_API_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn add_pr(&self, pr: Pr) {
        self.shared.0.lock().unwrap().prs.insert(pr.number, pr);
    }

    /// A new push: the head moves and the files change.
    pub fn push(&self, n: u64, head_sha: &str, files: Option<Vec<PrFile>>) {
        let mut s = self.shared.0.lock().unwrap();
        let pr = s.prs.get_mut(&n).expect("pr");
        pr.head_sha = head_sha.into();
        if let Some(f) = files {
            pr.files = f;
        }
    }

    /// Another user's review already on the PR.
    pub fn add_review(&self, n: u64, user: &str, body: &str) -> u64 {
        let mut s = self.shared.0.lock().unwrap();
        s.next_id += 1;
        let id = s.next_id;
        s.reviews.entry(n).or_default().push(ReviewRec {
            id,
            user: user.into(),
            body: body.into(),
            event: "COMMENT".into(),
            commit_id: String::new(),
            comments: Vec::new(),
        });
        id
    }

    pub fn reviews(&self, n: u64) -> Vec<ReviewRec> {
        self.shared
            .0
            .lock()
            .unwrap()
            .reviews
            .get(&n)
            .cloned()
            .unwrap_or_default()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.shared.0.lock().unwrap().seen.clone()
    }

    /// The next `count` requests get a primary rate limit resetting in
    /// `reset_in` seconds.
    pub fn rate_limit(&self, count: u32, reset_in: u64) {
        self.shared.0.lock().unwrap().rate_limited = Some((count, reset_in));
    }
}

fn token_of(h: &HeaderMap) -> Option<String> {
    let v = h.get("authorization")?.to_str().ok()?;
    v.strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("token "))
        .map(str::to_string)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Records every request, answers rate limits and unknown tokens.
async fn gate(
    State(s): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let h = req.headers();
    let token = token_of(h);
    {
        let mut st = s.0.lock().unwrap();
        st.seen.push(Seen {
            method: req.method().to_string(),
            path: req.uri().path().to_string(),
            query: req.uri().query().map(str::to_string),
            accept: h
                .get("accept")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string(),
            token: token.clone(),
        });
        if let Some((count, reset_in)) = st.rate_limited {
            st.rate_limited = (count > 1).then(|| (count - 1, reset_in));
            let mut r = error(
                StatusCode::FORBIDDEN,
                "API rate limit exceeded for user ID 1.",
                "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            );
            let hm = r.headers_mut();
            hm.insert("x-ratelimit-limit", "5000".parse().unwrap());
            hm.insert("x-ratelimit-remaining", "0".parse().unwrap());
            hm.insert("x-ratelimit-used", "5000".parse().unwrap());
            hm.insert("x-ratelimit-resource", "core".parse().unwrap());
            hm.insert(
                "x-ratelimit-reset",
                (now() + reset_in).to_string().parse().unwrap(),
            );
            return r;
        }
        if let Some(t) = &token {
            if !st.tokens.contains_key(t) {
                return error(
                    StatusCode::UNAUTHORIZED,
                    "Bad credentials",
                    "https://docs.github.com/rest",
                );
            }
        }
    }
    next.run(req).await
}

type Params = Path<(String, String, u64)>;

// The error is the response itself (a fake answers early): not boxed.
#[allow(clippy::result_large_err)]
fn check_repo(st: &State_, owner: &str, repo: &str, n: u64) -> Result<(), Response> {
    if owner != st.owner || repo != st.repo || !st.prs.contains_key(&n) {
        return Err(error(
            StatusCode::NOT_FOUND,
            "Not Found",
            "https://docs.github.com/rest/pulls/pulls#get-a-pull-request",
        ));
    }
    Ok(())
}

/// `pulls/get`.
async fn pull(State(s): State<Shared>, Path((o, r, n)): Params, h: HeaderMap) -> Response {
    let st = s.0.lock().unwrap();
    if let Err(e) = check_repo(&st, &o, &r, n) {
        return e;
    }
    let pr = &st.prs[&n];
    let accept = h.get("accept").and_then(|v| v.to_str().ok()).unwrap_or("");
    if accept.contains("application/vnd.github.diff")
        || accept.contains("application/vnd.github.v3.diff")
    {
        if pr.files.len() > 300 {
            return Response::builder()
                .status(StatusCode::NOT_ACCEPTABLE)
                .header("content-type", "application/json; charset=utf-8")
                .body(Body::from(json!({
                    "message": "Sorry, the diff exceeded the maximum number of files (300). Consider using 'List pull requests files' API or locally cloning the repository instead.",
                    "errors": [{"resource": "PullRequest", "field": "diff", "code": "too_large"}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls#list-pull-requests-files"
                }).to_string()))
                .unwrap();
        }
        return Response::builder()
            .header("content-type", "application/vnd.github.diff; charset=utf-8")
            .body(Body::from(diff_text(pr)))
            .unwrap();
    }
    json_resp(json!({
        "number": pr.number,
        "state": "open",
        "title": format!("PR {}", pr.number),
        "body": null,
        "draft": false,
        "user": {"login": "contributor", "id": 7},
        "head": {"sha": pr.head_sha, "ref": "feature"},
        "base": {"sha": "0000000000000000000000000000000000000b45", "ref": "main"},
        "changed_files": pr.files.len(),
    }))
}

#[derive(serde::Deserialize)]
struct Page {
    per_page: Option<usize>,
    page: Option<usize>,
}

/// One page of `items` with GitHub's `Link` header.
fn paginate(uri: &Uri, items: Vec<Value>, q: &Page) -> Response {
    let per = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    let last = items.len().div_ceil(per).max(1);
    let chunk: Vec<Value> = items.into_iter().skip((page - 1) * per).take(per).collect();
    let link = |p: usize, rel: &str| {
        format!(
            "<http://{}{}?per_page={per}&page={p}>; rel=\"{rel}\"",
            "HOST",
            uri.path()
        )
    };
    let mut rels = Vec::new();
    if page > 1 {
        rels.push(link(page - 1, "prev"));
    }
    if page < last {
        rels.push(link(page + 1, "next"));
        rels.push(link(last, "last"));
    }
    if page > 1 {
        rels.push(link(1, "first"));
    }
    let mut b = Response::builder().header("content-type", "application/json; charset=utf-8");
    if !rels.is_empty() {
        b = b.header("link", rels.join(", "));
    }
    b.body(Body::from(Value::Array(chunk).to_string())).unwrap()
}

/// `pulls/list-files`.
async fn files(
    State(s): State<Shared>,
    Path((o, r, n)): Params,
    Query(q): Query<Page>,
    h: HeaderMap,
    uri: Uri,
) -> Response {
    let st = s.0.lock().unwrap();
    if let Err(e) = check_repo(&st, &o, &r, n) {
        return e;
    }
    let items = st.prs[&n]
        .files
        .iter()
        .map(|f| {
            let mut v = json!({
                "sha": "1111111111111111111111111111111111111111",
                "filename": f.filename,
                "status": f.status,
                "additions": 1, "deletions": 0, "changes": 1,
            });
            if let Some(p) = &f.previous_filename {
                v["previous_filename"] = json!(p);
            }
            if let Some(p) = &f.patch {
                v["patch"] = json!(p);
            }
            v
        })
        .collect();
    with_host(paginate(&uri, items, &q), &h)
}

/// Absolute `Link` URLs name the host the client called.
fn with_host(mut r: Response, h: &HeaderMap) -> Response {
    let host = h
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    if let Some(l) = r
        .headers()
        .get("link")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    {
        r.headers_mut()
            .insert("link", l.replace("HOST", &host).parse().unwrap());
    }
    r
}

/// `users/get-authenticated`. A bot login (`…[bot]`) stands for an app
/// installation token, which this endpoint refuses: 403 "Resource not
/// accessible by integration" (GitHub documents the endpoint for user
/// tokens only: "GitHub App user access token" / "Fine-grained personal
/// access token", not installation tokens; Actions' `GITHUB_TOKEN` is one).
async fn user(State(s): State<Shared>, h: HeaderMap) -> Response {
    let st = s.0.lock().unwrap();
    match token_of(&h).and_then(|t| st.tokens.get(&t).cloned()) {
        Some((login, _)) if login.ends_with("[bot]") => error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
            "https://docs.github.com/rest/users/users#get-the-authenticated-user",
        ),
        Some((login, _)) => json_resp(json!({"login": login, "id": 42, "type": "User"})),
        None => error(
            StatusCode::UNAUTHORIZED,
            "Requires authentication",
            "https://docs.github.com/rest/users/users#get-the-authenticated-user",
        ),
    }
}

fn review_json(r: &ReviewRec) -> Value {
    json!({
        "id": r.id,
        "user": {"login": r.user, "id": 1},
        "body": r.body,
        "state": "COMMENTED",
        "commit_id": r.commit_id,
    })
}

/// `pulls/list-reviews`.
async fn list_reviews(
    State(s): State<Shared>,
    Path((o, r, n)): Params,
    Query(q): Query<Page>,
    h: HeaderMap,
    uri: Uri,
) -> Response {
    let st = s.0.lock().unwrap();
    if let Err(e) = check_repo(&st, &o, &r, n) {
        return e;
    }
    let items = st
        .reviews
        .get(&n)
        .map(|v| v.iter().map(review_json).collect())
        .unwrap_or_default();
    with_host(paginate(&uri, items, &q), &h)
}

/// `pulls/list-comments-for-review`.
async fn review_comments(
    State(s): State<Shared>,
    Path((o, r, n, id)): Path<(String, String, u64, u64)>,
    Query(q): Query<Page>,
    h: HeaderMap,
    uri: Uri,
) -> Response {
    let st = s.0.lock().unwrap();
    if let Err(e) = check_repo(&st, &o, &r, n) {
        return e;
    }
    let Some(rev) = st
        .reviews
        .get(&n)
        .and_then(|v| v.iter().find(|x| x.id == id))
    else {
        return error(
            StatusCode::NOT_FOUND,
            "Not Found",
            "https://docs.github.com/rest/pulls/reviews#list-comments-for-a-pull-request-review",
        );
    };
    let items = rev
        .comments
        .iter()
        .map(|(path, line, body)| json!({"path": path, "line": line, "body": body, "pull_request_review_id": id}))
        .collect();
    with_host(paginate(&uri, items, &q), &h)
}

#[allow(clippy::result_large_err)]
fn writer(st: &State_, h: &HeaderMap, doc: &str) -> Result<String, Response> {
    match token_of(h).and_then(|t| st.tokens.get(&t).cloned()) {
        Some((login, true)) => Ok(login),
        Some((_, false)) => Err(error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
            doc,
        )),
        None => Err(error(
            StatusCode::UNAUTHORIZED,
            "Requires authentication",
            doc,
        )),
    }
}

/// `pulls/create-review`.
async fn create_review(
    State(s): State<Shared>,
    Path((o, r, n)): Params,
    h: HeaderMap,
    body: String,
) -> Response {
    let doc = "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request";
    let mut st = s.0.lock().unwrap();
    if let Err(e) = check_repo(&st, &o, &r, n) {
        return e;
    }
    let login = match writer(&st, &h, doc) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let Ok(b) = serde_json::from_str::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", doc);
    };
    let event = b["event"].as_str().unwrap_or("").to_string();
    if !["APPROVE", "REQUEST_CHANGES", "COMMENT"].contains(&event.as_str()) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed", doc);
    }
    let pr = st.prs[&n].clone();
    let mut comments = Vec::new();
    for c in b["comments"].as_array().cloned().unwrap_or_default() {
        let path = c["path"].as_str().unwrap_or("").to_string();
        let line = c["line"].as_u64().unwrap_or(0) as u32;
        let in_diff = pr.files.iter().any(|f| {
            f.filename == path
                && f.patch
                    .as_deref()
                    .is_some_and(|p| diff_lines(p).iter().any(|(a, b)| (*a..=*b).contains(&line)))
        });
        if !in_diff {
            return Response::builder()
                .status(StatusCode::UNPROCESSABLE_ENTITY)
                .header("content-type", "application/json; charset=utf-8")
                .body(Body::from(
                    json!({
                        "message": "Unprocessable Entity",
                        "errors": ["Pull request review thread line must be part of the diff"],
                        "documentation_url": doc,
                    })
                    .to_string(),
                ))
                .unwrap();
        }
        comments.push((path, line, c["body"].as_str().unwrap_or("").to_string()));
    }
    st.next_id += 1;
    let rec = ReviewRec {
        id: st.next_id,
        user: login,
        body: b["body"].as_str().unwrap_or("").to_string(),
        event,
        commit_id: b["commit_id"].as_str().unwrap_or(&pr.head_sha).to_string(),
        comments,
    };
    let v = review_json(&rec);
    st.reviews.entry(n).or_default().push(rec);
    json_resp(v)
}

/// `pulls/update-review`.
async fn update_review(
    State(s): State<Shared>,
    Path((o, r, n, id)): Path<(String, String, u64, u64)>,
    h: HeaderMap,
    body: String,
) -> Response {
    let doc = "https://docs.github.com/rest/pulls/reviews#update-a-review-for-a-pull-request";
    let mut st = s.0.lock().unwrap();
    if let Err(e) = check_repo(&st, &o, &r, n) {
        return e;
    }
    let login = match writer(&st, &h, doc) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let Ok(b) = serde_json::from_str::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", doc);
    };
    let Some(rev) = st
        .reviews
        .get_mut(&n)
        .and_then(|v| v.iter_mut().find(|x| x.id == id))
    else {
        return error(StatusCode::NOT_FOUND, "Not Found", doc);
    };
    if rev.user != login {
        return error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
            doc,
        );
    }
    rev.body = b["body"].as_str().unwrap_or("").to_string();
    let v = review_json(rev);
    json_resp(v)
}
