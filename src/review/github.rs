//! The few GitHub REST operations a review uses, at `GITHUB_API_URL`
//! (default `https://api.github.com`), as GitHub's published OpenAPI
//! description (github/rest-api-description) defines them:
//!
//! | operation id | route |
//! |---|---|
//! | `pulls/get` | `GET /repos/{owner}/{repo}/pulls/{pull_number}` (JSON, or the diff with `Accept: application/vnd.github.diff`; a diff over 300 files is refused with 406) |
//! | `pulls/list-files` | `GET /repos/{owner}/{repo}/pulls/{pull_number}/files` (paginated, `Link` header) |
//! | `users/get-authenticated` | `GET /user` |
//! | `pulls/list-reviews` | `GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews` |
//! | `pulls/list-comments-for-review` | `GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments` |
//! | `pulls/create-review` | `POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews` |
//! | `pulls/update-review` | `PUT /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}` |
//!
//! Errors are GitHub's `{"message", "documentation_url"}` shape, said as
//! they came. A rate limit (`403`/`429` with `x-ratelimit-remaining: 0`
//! or `retry-after`) is waited out when it resets within a minute, and
//! otherwise fails naming the reset time.

use super::diff::{text_of_files, Diff, FileEntry};
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION, LINK, USER_AGENT};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The default API root.
pub const DEFAULT_API: &str = "https://api.github.com";
/// The longest rate-limit wait taken instead of failing.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// GitHub's diff media type.
pub const DIFF_MEDIA_TYPE: &str = "application/vnd.github.diff";
/// Pages followed at most (GitHub lists at most 3000 files of a PR).
const MAX_PAGES: usize = 100;

/// `owner/name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Repo {
    pub owner: String,
    pub name: String,
}

impl std::str::FromStr for Repo {
    type Err = GitHubError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        match s.split_once('/') {
            Some((o, n)) if ok(o) && ok(n) => Ok(Repo {
                owner: o.into(),
                name: n.into(),
            }),
            _ => Err(GitHubError::BadRepo(s.to_string())),
        }
    }
}

impl TryFrom<String> for Repo {
    type Error = GitHubError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Repo> for String {
    fn from(r: Repo) -> String {
        r.to_string()
    }
}

impl std::fmt::Display for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    #[error("`{0}` is not a repository as owner/name")]
    BadRepo(String),
    #[error("GitHub {method} {path}: HTTP {status}: {message}{}", doc.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Api {
        method: String,
        path: String,
        status: u16,
        message: String,
        doc: Option<String>,
    },
    #[error("GitHub {method} {path}: rate limit exhausted; it resets at {reset} (more than a minute away: not waiting)")]
    RateLimited {
        method: String,
        path: String,
        reset: String,
    },
    #[error("GitHub {method} {path}: {detail}")]
    Transport {
        method: String,
        path: String,
        detail: String,
    },
    #[error("GitHub {method} {path}: unexpected answer: {detail}")]
    Decode {
        method: String,
        path: String,
        detail: String,
    },
}

/// GitHub's `simple-user` (the fields used).
#[derive(Clone, Debug, Deserialize)]
pub struct User {
    pub login: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct GitRef {
    pub sha: String,
}

/// `pull-request` (the fields used).
#[derive(Clone, Debug, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub title: String,
    pub head: GitRef,
    pub base: GitRef,
    #[serde(default)]
    pub body: Option<String>,
}

/// `pull-request-review` (the fields used).
#[derive(Clone, Debug, Deserialize)]
pub struct Review {
    pub id: u64,
    pub user: Option<User>,
    #[serde(default)]
    pub body: String,
}

/// `review-comment` (the fields used).
#[derive(Clone, Debug, Deserialize)]
pub struct ReviewComment {
    pub body: String,
}

/// One inline comment of `pulls/create-review`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DraftComment {
    pub path: String,
    pub line: u32,
    pub side: &'static str,
    pub body: String,
}

/// A client for one repository.
pub struct GitHub {
    http: reqwest::Client,
    api: String,
    token: Option<String>,
    pub repo: Repo,
}

/// GitHub's error body.
#[derive(Deserialize)]
struct ErrorBody {
    message: Option<String>,
    documentation_url: Option<String>,
}

impl GitHub {
    /// `api`: `GITHUB_API_URL` or [`DEFAULT_API`]; `token`: `GITHUB_TOKEN`.
    pub fn new(api: &str, token: Option<String>, repo: Repo) -> Result<Self, GitHubError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| GitHubError::Transport {
                method: "-".into(),
                path: api.into(),
                detail: e.to_string(),
            })?;
        Ok(GitHub {
            http,
            api: api.trim_end_matches('/').to_string(),
            token,
            repo,
        })
    }

    fn pulls(&self, n: u64) -> String {
        format!("/repos/{}/pulls/{n}", self.repo)
    }

    /// One request with the rate-limit rule; `target` is a path under the
    /// API root or (pagination) an absolute URL from a `Link` header.
    async fn send(
        &self,
        method: Method,
        target: &str,
        accept: &str,
        body: Option<&Value>,
    ) -> Result<(HeaderMap, String), GitHubError> {
        let url = if target.starts_with("http://") || target.starts_with("https://") {
            target.to_string()
        } else {
            format!("{}{target}", self.api)
        };
        let path = target.to_string();
        let m = method.to_string();
        let mut waited = 0;
        loop {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .header(ACCEPT, accept)
                .header(USER_AGENT, "codewhale-review")
                .header("X-GitHub-Api-Version", "2022-11-28");
            if let Some(t) = &self.token {
                req = req.header(AUTHORIZATION, format!("Bearer {t}"));
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.map_err(|e| GitHubError::Transport {
                method: m.clone(),
                path: path.clone(),
                detail: e.to_string(),
            })?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let text = resp.text().await.map_err(|e| GitHubError::Transport {
                method: m.clone(),
                path: path.clone(),
                detail: e.to_string(),
            })?;
            if status.is_success() {
                return Ok((headers, text));
            }
            if let Some(wait) = rate_limit_wait(status, &headers) {
                match wait {
                    Ok(d) if waited < 3 => {
                        waited += 1;
                        tokio::time::sleep(d).await;
                        continue;
                    }
                    Ok(_) | Err(_) => {
                        return Err(GitHubError::RateLimited {
                            method: m,
                            path,
                            reset: reset_label(&headers),
                        })
                    }
                }
            }
            let e: Option<ErrorBody> = serde_json::from_str(&text).ok();
            return Err(GitHubError::Api {
                method: m,
                path,
                status: status.as_u16(),
                message: e
                    .as_ref()
                    .and_then(|e| e.message.clone())
                    .unwrap_or_else(|| text.chars().take(200).collect()),
                doc: e.and_then(|e| e.documentation_url),
            });
        }
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        target: &str,
        body: Option<&Value>,
    ) -> Result<(HeaderMap, T), GitHubError> {
        let (h, text) = self
            .send(method.clone(), target, "application/vnd.github+json", body)
            .await?;
        let v = serde_json::from_str(&text).map_err(|e| GitHubError::Decode {
            method: method.to_string(),
            path: target.to_string(),
            detail: e.to_string(),
        })?;
        Ok((h, v))
    }

    /// Every page of a list (`per_page=100`, following `rel="next"`).
    async fn all<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, GitHubError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut next = Some(format!("{path}{sep}per_page=100"));
        let mut out = Vec::new();
        let mut pages = 0;
        while let Some(target) = next.take() {
            let (h, page): (_, Vec<T>) = self.json(Method::GET, &target, None).await?;
            out.extend(page);
            pages += 1;
            next = next_link(&h);
            let Some(link) = &next else { break };
            // The token goes only to this API: a `next` elsewhere is refused.
            if !link.starts_with(&format!("{}/", self.api)) {
                return Err(GitHubError::Decode {
                    method: "GET".into(),
                    path: target,
                    detail: format!("a `Link: rel=\"next\"` outside {}: {link}", self.api),
                });
            }
            // Never a silently shortened list (a missed earlier review
            // would post a second one; a cut file list an incomplete diff).
            if pages >= MAX_PAGES {
                return Err(GitHubError::Decode {
                    method: "GET".into(),
                    path: target,
                    detail: format!("more than {MAX_PAGES} pages of 100"),
                });
            }
        }
        Ok(out)
    }

    /// `pulls/get`.
    pub async fn pull(&self, n: u64) -> Result<PullRequest, GitHubError> {
        Ok(self.json(Method::GET, &self.pulls(n), None).await?.1)
    }

    /// The PR's diff: the diff media type, or — when GitHub refuses it
    /// (406: more than 300 files) — the paginated files listing.
    pub async fn diff(&self, n: u64) -> Result<(Diff, DiffSource), GitHubError> {
        let target = self.pulls(n);
        let decode = |e: super::diff::DiffError| GitHubError::Decode {
            method: "GET".into(),
            path: target.clone(),
            detail: e.to_string(),
        };
        match self.send(Method::GET, &target, DIFF_MEDIA_TYPE, None).await {
            Ok((_, text)) => Ok((Diff::parse(text).map_err(decode)?, DiffSource::MediaType)),
            Err(GitHubError::Api { status: 406, .. }) => {
                let files: Vec<FileEntry> = self.all(&format!("{target}/files")).await?;
                let d = Diff::parse(text_of_files(&files)).map_err(decode)?;
                Ok((d, DiffSource::FilesApi))
            }
            Err(e) => Err(e),
        }
    }

    /// `users/get-authenticated`: whose token this is.
    pub async fn me(&self) -> Result<User, GitHubError> {
        Ok(self.json(Method::GET, "/user", None).await?.1)
    }

    /// The login this token's reviews are posted as. `GET /user` answers
    /// an app installation token (GitHub Actions' `GITHUB_TOKEN`) 403
    /// "Resource not accessible by integration"; such a token posts as
    /// its app's bot, named by `CODEWHALE_REVIEW_LOGIN`, else
    /// `github-actions[bot]` inside GitHub Actions (`GITHUB_ACTIONS=true`).
    pub async fn own_login(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, GitHubError> {
        match self.me().await {
            Ok(u) => Ok(u.login),
            Err(GitHubError::Api {
                status: 403,
                method,
                path,
                message,
                doc,
            }) => env("CODEWHALE_REVIEW_LOGIN")
                .filter(|l| !l.is_empty())
                .or_else(|| {
                    (env("GITHUB_ACTIONS").as_deref() == Some("true"))
                        .then(|| "github-actions[bot]".to_string())
                })
                .ok_or(GitHubError::Api {
                    method,
                    path,
                    status: 403,
                    message: format!(
                        "{message}; an app installation token cannot say whose it is: set CODEWHALE_REVIEW_LOGIN to the login its reviews are posted as"
                    ),
                    doc,
                }),
            Err(e) => Err(e),
        }
    }

    /// `pulls/list-reviews`.
    pub async fn reviews(&self, n: u64) -> Result<Vec<Review>, GitHubError> {
        self.all(&format!("{}/reviews", self.pulls(n))).await
    }

    /// `pulls/list-comments-for-review`.
    pub async fn review_comments(
        &self,
        n: u64,
        review: u64,
    ) -> Result<Vec<ReviewComment>, GitHubError> {
        self.all(&format!("{}/reviews/{review}/comments", self.pulls(n)))
            .await
    }

    /// `pulls/create-review` with event `COMMENT` (never an approval or a
    /// change request).
    pub async fn create_review(
        &self,
        n: u64,
        commit_id: &str,
        body: &str,
        comments: &[DraftComment],
    ) -> Result<Review, GitHubError> {
        let b = serde_json::json!({
            "commit_id": commit_id,
            "body": body,
            "event": "COMMENT",
            "comments": comments,
        });
        let path = format!("{}/reviews", self.pulls(n));
        Ok(self.json(Method::POST, &path, Some(&b)).await?.1)
    }

    /// `pulls/update-review`: the summary only.
    pub async fn update_review(&self, n: u64, id: u64, body: &str) -> Result<Review, GitHubError> {
        let b = serde_json::json!({ "body": body });
        let path = format!("{}/reviews/{id}", self.pulls(n));
        Ok(self.json(Method::PUT, &path, Some(&b)).await?.1)
    }
}

/// How the PR's diff was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffSource {
    /// `application/vnd.github.diff`.
    MediaType,
    /// `pulls/list-files` (GitHub refused the diff: over 300 files).
    FilesApi,
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(h: &HeaderMap) -> Option<String> {
    let link = h.get(LINK)?.to_str().ok()?;
    let map = parse_link_header::parse_with_rel(link).ok()?;
    map.get("next").map(|l| l.raw_uri.clone())
}

/// `Some(Ok(wait))` for a rate limit resetting within [`MAX_WAIT`],
/// `Some(Err(()))` for one resetting later, `None` when not limited.
/// Secondary limits say `retry-after` (seconds); primary ones
/// `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (epoch seconds).
fn rate_limit_wait(status: StatusCode, h: &HeaderMap) -> Option<Result<Duration, ()>> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let num = |k: &str| {
        h.get(k)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let wait = if let Some(s) = num("retry-after") {
        Duration::from_secs(s)
    } else if num("x-ratelimit-remaining") == Some(0) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Duration::from_secs(num("x-ratelimit-reset")?.saturating_sub(now) + 1)
    } else {
        return None;
    };
    Some(if wait <= MAX_WAIT { Ok(wait) } else { Err(()) })
}

/// The reset time for the error message (RFC 3339, UTC).
fn reset_label(h: &HeaderMap) -> String {
    let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok());
    if let Some(reset) = get("x-ratelimit-reset").and_then(|v| v.parse::<i64>().ok()) {
        if let Ok(t) = time::OffsetDateTime::from_unix_timestamp(reset) {
            if let Ok(s) = t.format(&time::format_description::well_known::Rfc3339) {
                return s;
            }
        }
    }
    match get("retry-after") {
        Some(s) => format!("in {s} s"),
        None => "an unknown time".into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn repo_names() {
        let r: Repo = "octo/hello-world".parse().unwrap();
        assert_eq!(r.to_string(), "octo/hello-world");
        for bad in ["octo", "/x", "a/b/c", "a/", "a b/c"] {
            assert!(bad.parse::<Repo>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rate_limits() {
        let mut h = HeaderMap::new();
        assert!(rate_limit_wait(StatusCode::FORBIDDEN, &h).is_none());
        h.insert("retry-after", "5".parse().unwrap());
        assert_eq!(
            rate_limit_wait(StatusCode::TOO_MANY_REQUESTS, &h),
            Some(Ok(Duration::from_secs(5)))
        );
        assert!(rate_limit_wait(StatusCode::NOT_FOUND, &h).is_none());
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", "4102444800".parse().unwrap());
        assert_eq!(rate_limit_wait(StatusCode::FORBIDDEN, &h), Some(Err(())));
        assert_eq!(reset_label(&h), "2100-01-01T00:00:00Z");
    }

    #[test]
    fn link_next() {
        let mut h = HeaderMap::new();
        h.insert(
            LINK,
            "<http://x/repos/o/r/pulls/1/files?per_page=100&page=2>; rel=\"next\", <http://x/repos/o/r/pulls/1/files?per_page=100&page=4>; rel=\"last\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("http://x/repos/o/r/pulls/1/files?per_page=100&page=2")
        );
    }
}
