//! The changes under review as one git-format diff: where it came from,
//! its files, which new-side lines are in its hunks (the only lines an
//! inline comment may sit on) and its fingerprint.
//!
//! Parsing is diffy's `PatchSet` in git-diff mode (renames, binary
//! markers, creations, deletions); this module only maps its output to
//! what a review needs.

use diffy::patch_set::{FileOperation, ParseOptions, PatchKind, PatchSet};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What happened to a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

/// One changed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    /// The path after the change (before it, for a deletion).
    pub path: String,
    /// The path before a rename or copy.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// A binary change (no hunks, nothing to comment on inline).
    pub binary: bool,
    /// New-side line ranges (inclusive) covered by the hunks.
    pub lines: Vec<(u32, u32)>,
}

/// The diff of one review.
#[derive(Clone, Debug)]
pub struct Diff {
    /// The text shown to the reviewer.
    pub text: String,
    pub files: Vec<ChangedFile>,
    /// SHA-256 (hex) of `text`.
    pub fingerprint: String,
}

#[derive(Debug, thiserror::Error)]
#[error("the diff could not be parsed: {0}")]
pub struct DiffError(String);

impl Diff {
    /// Parse a `git diff` (or GitHub's `application/vnd.github.diff`) text.
    pub fn parse(text: String) -> Result<Diff, DiffError> {
        let mut files = Vec::new();
        if !text.trim().is_empty() {
            for p in PatchSet::parse(&text, ParseOptions::gitdiff()) {
                let p = p.map_err(|e| DiffError(e.to_string()))?;
                // `---`/`+++` paths carry git's `a/` `b/` prefixes; the
                // `rename from`/`copy from` lines do not.
                let op = match p.operation() {
                    o @ (FileOperation::Rename { .. } | FileOperation::Copy { .. }) => o.clone(),
                    o => o.strip_prefix(1),
                };
                let (path, old_path, status) = match &op {
                    FileOperation::Create(n) => (n.to_string(), None, FileStatus::Added),
                    FileOperation::Delete(n) => (n.to_string(), None, FileStatus::Deleted),
                    FileOperation::Modify { modified, .. } => {
                        (modified.to_string(), None, FileStatus::Modified)
                    }
                    FileOperation::Rename { from, to } => {
                        (to.to_string(), Some(from.to_string()), FileStatus::Renamed)
                    }
                    FileOperation::Copy { from, to } => {
                        (to.to_string(), Some(from.to_string()), FileStatus::Copied)
                    }
                };
                let (binary, lines) = match p.patch() {
                    PatchKind::Binary(_) => (true, Vec::new()),
                    PatchKind::Text(t) => (
                        false,
                        t.hunks()
                            .iter()
                            .filter_map(|h| {
                                let r = h.new_range();
                                let len = u32::try_from(r.len()).ok()?;
                                let start = u32::try_from(r.start()).ok()?;
                                (len > 0).then(|| (start, start + len - 1))
                            })
                            .collect(),
                    ),
                };
                files.push(ChangedFile {
                    path,
                    old_path,
                    status,
                    binary,
                    lines,
                });
            }
        }
        let fingerprint = fingerprint(text.as_bytes());
        Ok(Diff {
            text,
            files,
            fingerprint,
        })
    }

    /// Whether an inline comment may sit on `path:line` (a new-side line
    /// inside one of the file's hunks).
    pub fn commentable(&self, path: &str, line: u32) -> bool {
        self.files.iter().any(|f| {
            f.path == path
                && f.status != FileStatus::Deleted
                && f.lines.iter().any(|(a, b)| (*a..=*b).contains(&line))
        })
    }
}

/// One entry of GitHub's "List pull requests files" answer
/// (`GET /repos/{owner}/{repo}/pulls/{pull_number}/files`, operation
/// `pulls/list-files`; schema `diff-entry`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub filename: String,
    /// added, removed, modified, renamed, copied, changed, unchanged.
    pub status: String,
    #[serde(default)]
    pub previous_filename: Option<String>,
    /// The hunks (absent for a binary file or one too large to show).
    #[serde(default)]
    pub patch: Option<String>,
}

/// The git-format diff text of a files listing, so a PR read through the
/// files API is reviewed, placed and fingerprinted like one read as a diff.
pub fn text_of_files(entries: &[FileEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let new = &e.filename;
        let old = e.previous_filename.as_deref().unwrap_or(new);
        out.push_str(&format!("diff --git a/{old} b/{new}\n"));
        match e.status.as_str() {
            "added" => out.push_str("new file mode 100644\n"),
            "removed" => out.push_str("deleted file mode 100644\n"),
            "renamed" if old != new => {
                out.push_str(&format!("rename from {old}\nrename to {new}\n"));
            }
            _ => {}
        }
        let Some(patch) = e.patch.as_deref().filter(|p| !p.is_empty()) else {
            if e.status != "renamed" {
                out.push_str(&format!("Binary files a/{old} and b/{new} differ\n"));
            }
            continue;
        };
        let from = if e.status == "added" {
            "/dev/null".to_string()
        } else {
            format!("a/{old}")
        };
        let to = if e.status == "removed" {
            "/dev/null".to_string()
        } else {
            format!("b/{new}")
        };
        out.push_str(&format!("--- {from}\n+++ {to}\n{patch}"));
        if !patch.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// SHA-256 (hex) of the diff as fetched.
pub fn fingerprint(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const GIT: &str = "diff --git a/src/a.rs b/src/a.rs
index 1111111..2222222 100644
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,3 +1,4 @@
 fn a() {}
+fn b() {}
 fn c() {}
 fn d() {}
@@ -10,2 +11,2 @@
-x
+y
 z
diff --git a/docs/old.txt b/docs/new.txt
similarity index 100%
rename from docs/old.txt
rename to docs/new.txt
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..3333333
Binary files /dev/null and b/logo.png differ
diff --git a/gone.rs b/gone.rs
deleted file mode 100644
index 4444444..0000000
--- a/gone.rs
+++ /dev/null
@@ -1 +0,0 @@
-bye
";

    #[test]
    fn files_lines_renames_binaries() {
        let d = Diff::parse(GIT.to_string()).unwrap();
        let names: Vec<_> = d
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status, f.binary))
            .collect();
        assert_eq!(
            names,
            [
                ("src/a.rs", FileStatus::Modified, false),
                ("docs/new.txt", FileStatus::Renamed, false),
                ("logo.png", FileStatus::Added, true),
                ("gone.rs", FileStatus::Deleted, false),
            ]
        );
        assert_eq!(d.files[1].old_path.as_deref(), Some("docs/old.txt"));
        assert_eq!(d.files[0].lines, [(1, 4), (11, 12)]);
        assert!(d.commentable("src/a.rs", 2) && d.commentable("src/a.rs", 12));
        assert!(!d.commentable("src/a.rs", 7) && !d.commentable("logo.png", 1));
        assert!(!d.commentable("gone.rs", 1) && !d.commentable("docs/new.txt", 1));
        assert_eq!(d.fingerprint, fingerprint(GIT.as_bytes()));
    }

    #[test]
    fn files_api_text_parses_the_same_way() {
        let entries = vec![
            FileEntry {
                filename: "src/a.rs".into(),
                status: "modified".into(),
                previous_filename: None,
                patch: Some("@@ -1,2 +1,3 @@\n a\n+b\n c".into()),
            },
            FileEntry {
                filename: "new.txt".into(),
                status: "renamed".into(),
                previous_filename: Some("old.txt".into()),
                patch: None,
            },
            FileEntry {
                filename: "logo.png".into(),
                status: "added".into(),
                previous_filename: None,
                patch: None,
            },
        ];
        let d = Diff::parse(text_of_files(&entries)).unwrap();
        assert_eq!(d.files.len(), 3);
        assert_eq!(d.files[0].lines, [(1, 3)]);
        assert_eq!(d.files[1].status, FileStatus::Renamed);
        assert!(d.files[2].binary);
    }
}
