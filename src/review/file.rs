//! The review as a file: `--json` / `--output F`, and the hand-over
//! between the two CI stages (`review --pr N --output review.json`, then
//! `review post review.json`). It carries what the post stage checks
//! before posting: repository, PR number, head SHA and the diff's
//! fingerprint.

use super::answer::{self, Finding, ReviewAnswer};
use super::github::Repo;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The `schema` field.
pub const SCHEMA: &str = "codewhale.review";
/// The `version` field (bumped on any change of the fields).
pub const VERSION: u32 = 1;

/// What was reviewed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Target {
    /// The working tree's uncommitted changes (untracked files included).
    WorkingTree,
    /// The changes since a ref.
    Base { base: String },
    /// A GitHub pull request.
    PullRequest {
        repository: Repo,
        number: u64,
        head_sha: String,
    },
}

impl Target {
    pub fn label(&self) -> String {
        match self {
            Target::WorkingTree => "working tree (uncommitted changes)".into(),
            Target::Base { base } => format!("changes since {base}"),
            Target::PullRequest {
                repository, number, ..
            } => format!("{repository}#{number}"),
        }
    }
}

/// The review file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewFile {
    pub schema: String,
    pub version: u32,
    pub target: Target,
    /// SHA-256 (hex) of the diff as fetched.
    pub fingerprint: String,
    pub summary: String,
    pub findings: Vec<Finding>,
    /// The session file of the reviewer's run (`codewhale receipts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {detail}")]
    Read { path: String, detail: String },
    #[error("{path}: not a codewhale review file: {detail}")]
    Malformed { path: String, detail: String },
}

impl ReviewFile {
    pub fn new(
        target: Target,
        fingerprint: String,
        a: ReviewAnswer,
        session: Option<String>,
    ) -> Self {
        ReviewFile {
            schema: SCHEMA.into(),
            version: VERSION,
            target,
            fingerprint,
            summary: a.summary,
            findings: a.findings,
            session,
        }
    }

    pub fn answer(&self) -> ReviewAnswer {
        ReviewAnswer {
            summary: self.summary.clone(),
            findings: self.findings.clone(),
        }
    }

    /// Read and check a review file (the whole file or an error naming it).
    pub fn read(path: &Path) -> Result<Self, FileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| FileError::Read {
            path: p.clone(),
            detail: e.to_string(),
        })?;
        let bad = |detail: String| FileError::Malformed {
            path: p.clone(),
            detail,
        };
        let f: ReviewFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if f.schema != SCHEMA || f.version != VERSION {
            return Err(bad(format!(
                "schema `{}` version {} (expected `{SCHEMA}` version {VERSION})",
                f.schema, f.version
            )));
        }
        if f.fingerprint.len() != 64 || !f.fingerprint.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad("fingerprint: not a SHA-256 in hex".into()));
        }
        answer::check(&f.answer()).map_err(|e| bad(e.to_string()))?;
        Ok(f)
    }
}
