//! A `worktree: true` sub-agent's own checkout of the user's repository,
//! under codewhale's home (`<home>/worktrees/<uuid>`), and the diff that
//! brings its changes back.
//!
//! - **Not a `git worktree`**: a `git clone --shared --no-checkout` of the
//!   user's repository (its objects borrowed read-only through
//!   `objects/info/alternates`), so the user's `git worktree list` never
//!   shows it and nothing is written into the user's `.git`. HEAD is
//!   checked out detached, then the user's uncommitted state is brought
//!   in: the tracked changes (`git diff --binary HEAD`, applied with
//!   `git apply`) and the untracked, non-ignored files, never a deny-read
//!   file (`.env` files, `[sandbox] deny_read` entries). That state is
//!   recorded as the base tree.
//! - **The child's change** is `git add -A` then `git diff --cached
//!   <base>` in the checkout, as a text diff `apply_patch` applies; what a
//!   text diff cannot carry (binary files, a mode-only change, an empty new
//!   file) is listed, never silently dropped. A diff above
//!   [`MAX_DIFF_BYTES`] (what a tool result carries back to the model) is
//!   an error naming its size.
//! - **Removal**: dropping the [`Checkout`] removes it (a child that ends,
//!   fails or is interrupted). Each checkout's `<uuid>.lock` is held
//!   (`flock`) while it lives; a checkout whose lock is free when the next
//!   one is created is a leftover of a killed process and is removed then.
//!
//! Every git here runs on the host (not sandboxed) with hooks, fsmonitor
//! and external diff drivers off, so nothing the child wrote into the
//! checkout runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The largest diff a child may return (bytes): what a tool result
/// carries back to the model (the `agent` result, with the diff
/// JSON-encoded and the answer, is bounded by the same cap again). Above
/// it the child's result is an error naming the size: a cut diff would
/// apply as a different change.
pub const MAX_DIFF_BYTES: usize = crate::agent::tools::MODEL_OUTPUT_CAP;

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("`worktree: true` needs a git repository: {0} is not inside one")]
    NotARepo(PathBuf),
    #[error("`worktree: true` needs a commit to check out: the repository at {0} has none yet")]
    NoCommit(PathBuf),
    #[error("git {args}: {detail}")]
    Git { args: String, detail: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the child's diff is {size} bytes, above the {MAX_DIFF_BYTES}-byte bound for a sub-agent's result; its checkout was removed (ask for smaller steps)")]
    TooLarge { size: usize },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorktreeError + '_ {
    move |source| WorktreeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `git` in `dir` with nothing of the repository's own code run.
fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.quotePath=false",
            "--no-pager",
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_EXTERNAL_DIFF")
        .stdin(Stdio::null());
    c
}

fn run(mut c: Command, what: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, WorktreeError> {
    let fail = |detail: String| WorktreeError::Git {
        args: what.join(" "),
        detail,
    };
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    if input.is_some() {
        c.stdin(Stdio::piped());
    }
    let mut child = c.spawn().map_err(|e| fail(e.to_string()))?;
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        stdin.write_all(data).map_err(|e| fail(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(out.stdout)
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, WorktreeError> {
    let mut c = git_cmd(dir);
    c.args(args);
    run(c, args, None)
}

fn git_text(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    Ok(String::from_utf8_lossy(&git(dir, args)?).trim().to_string())
}

/// A held lock on one checkout (removal of leftovers tests it).
struct Lock {
    path: PathBuf,
    #[cfg(unix)]
    _held: nix::fcntl::Flock<std::fs::File>,
}

impl Lock {
    fn take(path: PathBuf) -> Result<Lock, WorktreeError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        #[cfg(unix)]
        {
            let held = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
                .map_err(|(_, e)| WorktreeError::Io {
                    path: path.clone(),
                    source: std::io::Error::from(e),
                })?;
            Ok(Lock { path, _held: held })
        }
        #[cfg(not(unix))]
        {
            drop(f);
            Ok(Lock { path })
        }
    }
}

/// Remove the checkouts under `dir` whose lock nobody holds (a killed
/// process's). Not on Windows (no lock there): leftovers stay.
fn sweep(dir: &Path) {
    #[cfg(unix)]
    {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "lock") {
                continue;
            }
            let Ok(f) = std::fs::OpenOptions::new().write(true).open(&p) else {
                continue;
            };
            if let Ok(held) =
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
            {
                let _ = std::fs::remove_dir_all(p.with_extension(""));
                let _ = std::fs::remove_file(&p);
                drop(held);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// One child's checkout; removed when dropped.
pub struct Checkout {
    /// `<home>/worktrees/<uuid>`: the repository's top level.
    root: PathBuf,
    /// The child's workspace: the user's workspace's place in the checkout.
    workspace: PathBuf,
    /// The tree of HEAD plus the user's uncommitted state.
    base: String,
    lock: Option<Lock>,
}

/// What a child changed in its checkout.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChildDiff {
    /// A unified diff relative to the user's workspace (`a/`/`b/`
    /// prefixes), for `apply_patch`.
    pub diff: String,
    /// Every path the child changed, relative to the workspace.
    pub files: Vec<PathBuf>,
    /// Changed paths the diff does not carry, each with why.
    pub omitted: Vec<Omitted>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Omitted {
    pub path: PathBuf,
    pub why: String,
}

impl Checkout {
    /// Check out `workspace`'s repository under `home` for a child:
    /// HEAD, plus the uncommitted state, minus `deny` (canonical paths of
    /// files never to copy: the parent's deny-read list).
    pub fn create(home: &Path, workspace: &Path, deny: &[PathBuf]) -> Result<Self, WorktreeError> {
        let workspace = std::fs::canonicalize(workspace).map_err(io(workspace))?;
        let top = match git_text(&workspace, &["rev-parse", "--show-toplevel"]) {
            Ok(t) if !t.is_empty() => PathBuf::from(t),
            _ => return Err(WorktreeError::NotARepo(workspace)),
        };
        let top = std::fs::canonicalize(&top).map_err(io(&top))?;
        let prefix = workspace
            .strip_prefix(&top)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let head = git_text(&top, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .map_err(|_| WorktreeError::NoCommit(top.clone()))?;
        let dir = home.join(crate::policy::resolve::CHECKOUTS_DIR);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        sweep(&dir);
        let name = uuid::Uuid::new_v4().simple().to_string();
        let root = dir.join(&name);
        let lock = Lock::take(dir.join(format!("{name}.lock")))?;
        let mut c = Checkout {
            root: root.clone(),
            workspace: root.join(&prefix),
            base: String::new(),
            lock: Some(lock),
        };
        let src = top.to_string_lossy().into_owned();
        let dst = root.to_string_lossy().into_owned();
        git(
            &dir,
            &[
                "clone",
                "--quiet",
                "--shared",
                "--no-checkout",
                "--template=",
                &src,
                &dst,
            ],
        )?;
        git(&root, &["checkout", "--quiet", "--detach", &head])?;
        c.bring_uncommitted(&top, deny)?;
        git(&root, &["add", "-A"])?;
        c.base = git_text(&root, &["write-tree"])?;
        std::fs::create_dir_all(&c.workspace).map_err(io(&c.workspace))?;
        Ok(c)
    }

    /// The child's workspace inside the checkout.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The checkout's top level (`<home>/worktrees/<uuid>`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The user's tracked changes and untracked files, without `deny`.
    fn bring_uncommitted(&self, top: &Path, deny: &[PathBuf]) -> Result<(), WorktreeError> {
        let denied = |p: &Path| deny.iter().any(|d| p.starts_with(d));
        let excludes: Vec<String> = deny
            .iter()
            .filter_map(|d| d.strip_prefix(top).ok())
            .filter(|r| !r.as_os_str().is_empty())
            .map(|r| format!(":(exclude,literal){}", r.to_string_lossy()))
            .collect();
        let mut args = vec![
            "diff",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "--ignore-submodules",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "HEAD",
            "--",
            ".",
        ];
        args.extend(excludes.iter().map(String::as_str));
        let tracked = git(top, &args)?;
        if !tracked.is_empty() {
            let mut c = git_cmd(&self.root);
            let a = ["apply", "--binary", "--whitespace=nowarn", "-"];
            c.args(a);
            run(c, &a, Some(&tracked))?;
        }
        let untracked = git(top, &["ls-files", "-z", "--others", "--exclude-standard"])?;
        for rel in untracked.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rel = PathBuf::from(String::from_utf8_lossy(rel).into_owned());
            let from = top.join(&rel);
            let env = from
                .file_name()
                .is_some_and(|n| crate::policy::tables::is_env_file_name(&n.to_string_lossy()));
            if denied(&from) || env {
                continue;
            }
            let to = self.root.join(&rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            let meta = std::fs::symlink_metadata(&from).map_err(io(&from))?;
            if meta.file_type().is_symlink() {
                #[cfg(unix)]
                {
                    let target = std::fs::read_link(&from).map_err(io(&from))?;
                    std::os::unix::fs::symlink(target, &to).map_err(io(&to))?;
                }
            } else if meta.is_file() {
                std::fs::copy(&from, &to).map_err(io(&from))?;
            }
        }
        Ok(())
    }

    /// The child's change since the base, relative to its workspace.
    pub fn diff(&self) -> Result<ChildDiff, WorktreeError> {
        let ws = &self.workspace;
        git(&self.root, &["add", "-A"])?;
        let base = self.base.as_str();
        let names = git(
            ws,
            &[
                "diff",
                "--cached",
                "--no-renames",
                "--ignore-submodules",
                "--relative",
                "-z",
                "--numstat",
                base,
            ],
        )?;
        // `added\tdeleted\tpath\0`; `-\t-\t` for a binary file.
        let mut files = Vec::new();
        let mut binary = Vec::new();
        for rec in names.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rec = String::from_utf8_lossy(rec);
            let mut parts = rec.splitn(3, '\t');
            let (added, _, path) = (parts.next(), parts.next(), parts.next());
            let Some(path) = path else { continue };
            let path = PathBuf::from(path);
            if added == Some("-") {
                binary.push(path.clone());
            }
            files.push(path);
        }
        let excludes: Vec<String> = binary
            .iter()
            .map(|p| format!(":(exclude,literal){}", p.to_string_lossy()))
            .collect();
        let mut args = vec![
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "--ignore-submodules",
            // Whatever the user's `diff.noprefix` / `diff.mnemonicPrefix`:
            // `apply_patch` reads `a/` and `b/`.
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--relative",
            base,
            "--",
            ".",
        ];
        args.extend(excludes.iter().map(String::as_str));
        let diff = String::from_utf8_lossy(&git(ws, &args)?).into_owned();
        if diff.len() > MAX_DIFF_BYTES {
            return Err(WorktreeError::TooLarge { size: diff.len() });
        }
        let mut omitted: Vec<Omitted> = binary
            .iter()
            .map(|p| Omitted {
                path: p.clone(),
                why: "binary: a text diff cannot carry it".into(),
            })
            .collect();
        for f in &files {
            let s = f.to_string_lossy();
            let carried = diff.lines().any(|l| {
                l.strip_prefix("--- a/")
                    .or_else(|| l.strip_prefix("+++ b/"))
                    .is_some_and(|p| p.split('\t').next() == Some(&*s))
            });
            if !carried && !binary.contains(f) {
                omitted.push(Omitted {
                    path: f.clone(),
                    why: "no content change a unified diff carries (a mode change or an empty new file)".into(),
                });
            }
        }
        Ok(ChildDiff {
            diff,
            files,
            omitted,
        })
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        if let Some(l) = self.lock.take() {
            let _ = std::fs::remove_file(&l.path);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "worktree_tests.rs"]
mod tests;
