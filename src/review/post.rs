//! What `--post` sends: one review with event `COMMENT`, its hidden
//! marker, inline comments only on lines inside the diff's hunks, the
//! other findings in the body; on a re-run, which review is ours and
//! which inline comments are already there.

use super::answer::{Finding, ReviewAnswer};
use super::diff::Diff;
use super::github::{DraftComment, Review};
use sha2::{Digest, Sha256};
use std::collections::HashSet;

/// The hidden marker in the body of codewhale's review. A review is ours
/// only with this marker *and* the token's own login as author.
pub const MARKER: &str = "<!-- codewhale-review -->";

/// The hidden key of one finding (path, line, title), carried in its
/// inline comment so a re-run does not repeat it.
pub fn finding_key(f: &Finding) -> String {
    let mut h = Sha256::new();
    h.update(f.path.as_bytes());
    h.update([0]);
    h.update(f.line.to_string().as_bytes());
    h.update([0]);
    h.update(f.title.as_bytes());
    format!(
        "<!-- codewhale-finding:{} -->",
        &hex::encode(h.finalize())[..16]
    )
}

/// Our earlier review: the marker and the same author (the latest, if
/// several). Another user's review quoting the marker is never ours.
pub fn own_review<'a>(reviews: &'a [Review], me: &str) -> Option<&'a Review> {
    reviews
        .iter()
        .filter(|r| r.body.contains(MARKER) && r.user.as_ref().is_some_and(|u| u.login == me))
        .max_by_key(|r| r.id)
}

/// The keys already present in the comments of our earlier review.
pub fn keys_in(comments: &[String]) -> HashSet<String> {
    comments
        .iter()
        .flat_map(|c| {
            c.match_indices("<!-- codewhale-finding:")
                .filter_map(|(i, _)| c[i..].find("-->").map(|e| c[i..i + e + 3].to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The review to post (or the summary to put on our earlier one).
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub body: String,
    /// New inline comments (only for a new review: a submitted review
    /// takes no more comments, so a re-run's new in-diff findings go into
    /// the updated body).
    pub inline: Vec<DraftComment>,
    /// Findings already commented inline by our earlier review.
    pub already: usize,
}

/// Split the findings between inline comments and the body.
/// `existing`: `Some(keys)` when updating our earlier review.
pub fn plan(answer: &ReviewAnswer, diff: &Diff, existing: Option<&HashSet<String>>) -> Plan {
    let mut inline = Vec::new();
    let mut in_body = Vec::new();
    let mut already = 0;
    for f in &answer.findings {
        let key = finding_key(f);
        if existing.is_some_and(|k| k.contains(&key)) {
            already += 1;
            continue;
        }
        if existing.is_none() && diff.commentable(&f.path, f.line) {
            inline.push(DraftComment {
                path: f.path.clone(),
                line: f.line,
                side: "RIGHT",
                body: format!(
                    "**{}** ({})\n\n{}\n\n{key}",
                    f.title,
                    f.severity.as_str(),
                    f.body
                ),
            });
        } else {
            in_body.push(f);
        }
    }
    let mut body = format!(
        "{MARKER}\n## codewhale review\n\n{}\n",
        answer.summary.trim()
    );
    body.push_str(&format!(
        "\n{} finding(s): {} inline{}.\n",
        answer.findings.len(),
        inline.len() + already,
        if in_body.is_empty() {
            String::new()
        } else {
            format!(", {} below", in_body.len())
        }
    ));
    if !in_body.is_empty() {
        body.push_str("\n### Findings\n");
        for f in in_body {
            body.push_str(&format!(
                "\n- **{}** `{}:{}` ({})\n\n  {}\n",
                f.title,
                f.path,
                f.line,
                f.severity.as_str(),
                f.body.replace('\n', "\n  ")
            ));
        }
    }
    Plan {
        body,
        inline,
        already,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::review::answer::Severity;
    use crate::review::github::User;

    fn finding(path: &str, line: u32) -> Finding {
        Finding {
            path: path.into(),
            line,
            severity: Severity::Medium,
            title: format!("t{line}"),
            body: "b".into(),
        }
    }

    #[test]
    fn inline_only_in_the_diff_and_never_twice() {
        let diff = Diff::parse(
            "diff --git a/a.rs b/a.rs\n--- a/a.rs\n+++ b/a.rs\n@@ -1,2 +1,3 @@\n x\n+y\n z\n"
                .into(),
        )
        .unwrap();
        let a = ReviewAnswer {
            summary: "s".into(),
            findings: vec![finding("a.rs", 2), finding("a.rs", 40), finding("b.rs", 1)],
        };
        let p = plan(&a, &diff, None);
        assert_eq!(p.inline.len(), 1);
        assert!(p.body.starts_with(MARKER) && p.body.contains("`a.rs:40`"));
        let keys = keys_in(&[p.inline[0].body.clone()]);
        let again = plan(&a, &diff, Some(&keys));
        assert!(again.inline.is_empty() && again.already == 1);
    }

    #[test]
    fn ours_needs_marker_and_author() {
        let r = |id, who: &str, body: &str| Review {
            id,
            user: Some(User { login: who.into() }),
            body: body.into(),
        };
        let list = [
            r(1, "someone", &format!("quoting {MARKER}")),
            r(2, "bot", "no marker"),
            r(3, "bot", MARKER),
        ];
        assert_eq!(own_review(&list, "bot").map(|r| r.id), Some(3));
        assert!(own_review(&list[..2], "bot").is_none());
    }
}
