//! The reviewer's final answer: a summary and a list of findings, checked
//! against `docs/review-answer.schema.json` before anything uses it.
//!
//! Why typed serde and not a JSON-Schema validator at run time: the schema
//! is small and closed (no `$ref`, no `oneOf`), so `deny_unknown_fields`
//! plus the explicit bounds in [`check`] enforce exactly the same rules,
//! and the release binary does not carry a schema engine for one
//! document. The schema file is what the model is shown (it is embedded
//! in the prompt), and a test validates the same accepted and rejected
//! answers with the `jsonschema` crate, so the two cannot drift apart.
//! An answer either passes whole or is rejected whole: there is no
//! half-parsed review.

use serde::{Deserialize, Serialize};

/// The schema the answer must satisfy (shown to the model verbatim).
pub const SCHEMA: &str = include_str!("../../docs/review-answer.schema.json");

/// At most this many findings in one answer (the schema's `maxItems`).
pub const MAX_FINDINGS: usize = 200;
/// A title's bound in characters (the schema's `maxLength`).
pub const MAX_TITLE: usize = 200;
/// A body's or the summary's bound in characters.
pub const MAX_TEXT: usize = 8000;
/// A path's bound in characters.
pub const MAX_PATH: usize = 4096;

/// How serious a finding is, most serious first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    High,
    Medium,
    Low,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }
}

/// One finding: a place in the changed code and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// Repository-relative path (the new side of a rename).
    pub path: String,
    /// 1-based line in the new version of the file.
    pub line: u32,
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// Markdown.
    pub body: String,
}

/// The whole answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewAnswer {
    pub summary: String,
    pub findings: Vec<Finding>,
}

/// Why an answer was rejected (said to the model on the one retry, and
/// to the user when the retry fails too).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error("the answer is not one JSON object (optionally in one ```json fence): {0}")]
    NotJson(String),
    #[error("the answer does not match the schema: {0}")]
    Schema(String),
}

/// Parse and check the model's final answer text.
///
/// Accepted: the JSON object alone, or alone inside one fenced block
/// (```` ```json ````). Anything else — prose around it, two objects, an
/// unknown field, a bound exceeded — is an [`AnswerError`].
pub fn parse_answer(text: &str) -> Result<ReviewAnswer, AnswerError> {
    let body = unfence(text.trim());
    if !body.starts_with('{') {
        return Err(AnswerError::NotJson(
            "it does not start with `{`".to_string(),
        ));
    }
    let answer: ReviewAnswer = serde_json::from_str(body).map_err(|e| {
        if e.is_data() {
            AnswerError::Schema(e.to_string())
        } else {
            AnswerError::NotJson(e.to_string())
        }
    })?;
    check(&answer)?;
    Ok(answer)
}

/// The schema's bounds that serde's types do not already enforce.
pub fn check(a: &ReviewAnswer) -> Result<(), AnswerError> {
    let bad = |m: String| Err(AnswerError::Schema(m));
    let chars = |s: &str| s.chars().count();
    if a.summary.is_empty() {
        return bad("/summary: must not be empty".into());
    }
    if chars(&a.summary) > MAX_TEXT {
        return bad(format!("/summary: longer than {MAX_TEXT} characters"));
    }
    if a.findings.len() > MAX_FINDINGS {
        return bad(format!("/findings: more than {MAX_FINDINGS} items"));
    }
    for (i, f) in a.findings.iter().enumerate() {
        let at = |k: &str| format!("/findings/{i}/{k}");
        if f.path.is_empty() || f.path.starts_with('/') {
            return bad(format!(
                "{}: must be a non-empty repository-relative path",
                at("path")
            ));
        }
        if chars(&f.path) > MAX_PATH {
            return bad(format!("{}: longer than {MAX_PATH} characters", at("path")));
        }
        if f.line == 0 {
            return bad(format!("{}: must be ≥ 1", at("line")));
        }
        if f.title.is_empty() || f.title.contains('\n') || chars(&f.title) > MAX_TITLE {
            return bad(format!(
                "{}: must be one non-empty line of at most {MAX_TITLE} characters",
                at("title")
            ));
        }
        if chars(&f.body) > MAX_TEXT {
            return bad(format!("{}: longer than {MAX_TEXT} characters", at("body")));
        }
    }
    Ok(())
}

/// The inside of one ```` ``` ```` / ```` ```json ```` fence around the
/// whole text, or the text itself.
fn unfence(t: &str) -> &str {
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(rest) = rest.strip_suffix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    if rest.contains("```") {
        return t;
    }
    rest.trim()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const OK: &str = r#"{"summary":"fine","findings":[{"path":"src/a.rs","line":3,"severity":"high","title":"t","body":"b"}]}"#;

    #[test]
    fn accepts_plain_and_fenced() {
        let a = parse_answer(OK).unwrap();
        assert_eq!(a.findings[0].severity, Severity::High);
        assert_eq!(parse_answer(&format!("```json\n{OK}\n```")).unwrap(), a);
        assert_eq!(parse_answer(&format!("```\n{OK}\n```")).unwrap(), a);
    }

    #[test]
    fn rejects_whole_never_half() {
        for bad in [
            "Here you go: {}",
            r#"{"summary":"x","findings":[],"extra":1}"#,
            r#"{"summary":"x","findings":[{"path":"a","line":0,"severity":"high","title":"t","body":""}]}"#,
            r#"{"summary":"x","findings":[{"path":"a","line":1,"severity":"urgent","title":"t","body":""}]}"#,
            r#"{"summary":"x","findings":[{"path":"/etc/a","line":1,"severity":"low","title":"t","body":""}]}"#,
            r#"{"summary":"x","findings":[{"path":"a","line":1,"severity":"low","title":"two\nlines","body":""}]}"#,
            r#"{"summary":"","findings":[]}"#,
            r#"{"summary":"x"}"#,
            r#"{"summary":"x","findings":[]} {"summary":"y","findings":[]}"#,
        ] {
            assert!(parse_answer(bad).is_err(), "{bad}");
        }
    }
}
