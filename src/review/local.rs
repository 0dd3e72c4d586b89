//! The diff of a local review, from `git`: the working tree's uncommitted
//! changes against `HEAD` (staged and unstaged) plus every untracked,
//! not-ignored file as an addition; or everything since `--base REF`.
//! Only reads: `git diff` and `git ls-files` never change the index.

use super::diff::Diff;
use std::path::Path;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("git {args}: {detail}")]
    Git { args: String, detail: String },
    #[error(transparent)]
    Diff(#[from] super::diff::DiffError),
}

/// The empty tree (a repository without commits diffs against it).
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

fn git(ws: &Path, args: &[&str], ok_codes: &[i32]) -> Result<String, LocalError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(["-c", "core.quotePath=false", "--no-pager"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_EXTERNAL_DIFF")
        .output()
        .map_err(|e| LocalError::Git {
            args: args.join(" "),
            detail: e.to_string(),
        })?;
    let code = out.status.code().unwrap_or(-1);
    if !ok_codes.contains(&code) {
        return Err(LocalError::Git {
            args: args.join(" "),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

const DIFF: &[&str] = &["diff", "--no-color", "--no-ext-diff", "--find-renames"];

/// The uncommitted changes, untracked files included.
pub fn working_tree(ws: &Path) -> Result<Diff, LocalError> {
    let head = if git(ws, &["rev-parse", "--verify", "--quiet", "HEAD"], &[0]).is_ok() {
        "HEAD"
    } else {
        EMPTY_TREE
    };
    let mut text = git(ws, &[DIFF, &[head, "--"]].concat(), &[0])?;
    let untracked = git(
        ws,
        &["ls-files", "--others", "--exclude-standard", "-z"],
        &[0],
    )?;
    for f in untracked.split('\0').filter(|f| !f.is_empty()) {
        // `--no-index` exits 1 when the files differ (always, here).
        text.push_str(&git(
            ws,
            &[DIFF, &["--no-index", "--", "/dev/null", f]].concat(),
            &[0, 1],
        )?);
    }
    Ok(Diff::parse(text)?)
}

/// The changes since `base` (committed or not; untracked files are not
/// part of a base comparison).
pub fn since(ws: &Path, base: &str) -> Result<Diff, LocalError> {
    if base.starts_with('-') {
        return Err(LocalError::Git {
            args: format!("diff {base}"),
            detail: "--base: a ref may not start with `-`".into(),
        });
    }
    Ok(Diff::parse(git(
        ws,
        &[DIFF, &[base, "--"]].concat(),
        &[0],
    )?)?)
}
