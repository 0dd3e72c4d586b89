//! The diff of a local review, from `git`: the working tree's uncommitted
//! changes against `HEAD` (staged and unstaged) plus every untracked,
//! not-ignored file as an addition; or everything since `--base REF`.
//! Only reads: the user's index is never written. Untracked files are
//! diffed through a temporary copy of the index (`GIT_INDEX_FILE`) in
//! which they are marked intent-to-add, so one `git diff` shows them as
//! new files exactly as git renders them (binary detection, symlinks as
//! their target text, `.gitattributes`) — three `git` runs however many
//! files there are, instead of one `git diff --no-index` per file.

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
    git_with(ws, None, args, ok_codes)
}

/// `git` in `ws`, with `index` as its index file when given.
fn git_with(
    ws: &Path,
    index: Option<&Path>,
    args: &[&str],
    ok_codes: &[i32],
) -> Result<String, LocalError> {
    let mut cmd = Command::new("git");
    if let Some(i) = index {
        cmd.env("GIT_INDEX_FILE", i);
    }
    let out = cmd
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
    let untracked = git(
        ws,
        &["ls-files", "--others", "--exclude-standard", "-z"],
        &[0],
    )?;
    let untracked: Vec<&str> = untracked.split('\0').filter(|f| !f.is_empty()).collect();
    if untracked.is_empty() {
        return Ok(Diff::parse(git(
            ws,
            &[DIFF, &[head, "--"]].concat(),
            &[0],
        )?)?);
    }
    let err = |detail: String| LocalError::Git {
        args: "(temporary index)".into(),
        detail,
    };
    // The temporary index lives in TMPDIR, or — when that is unusable —
    // in the git directory, as git's own temporary indexes do.
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(_) => {
            let gd = git(
                ws,
                &["rev-parse", "--path-format=absolute", "--git-dir"],
                &[0],
            )?;
            tempfile::Builder::new()
                .prefix("codewhale-review-")
                .tempdir_in(gd.trim_end_matches('\n'))
                .map_err(|e| err(e.to_string()))?
        }
    };
    let index = tmp.path().join("index");
    let own = git(
        ws,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        &[0],
    )?;
    let own = Path::new(own.trim_end_matches('\n'));
    if own.exists() {
        std::fs::copy(own, &index).map_err(|e| err(format!("{}: {e}", own.display())))?;
    }
    let add: Vec<&str> = ["--literal-pathspecs", "add", "--intent-to-add", "--"]
        .into_iter()
        .chain(untracked.iter().copied())
        .collect();
    git_with(ws, Some(&index), &add, &[0])?;
    let text = git_with(ws, Some(&index), &[DIFF, &[head, "--"]].concat(), &[0])?;
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
