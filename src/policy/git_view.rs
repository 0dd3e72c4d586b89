//! What git inside the sandbox sees of the deny-read files in a repository.
//!
//! Masking a `.env` with an empty file changes what git sees: a tracked
//! one reads as modified (and `git commit -am` commits it emptied), an
//! untracked one is a new empty file (and `git add -A` makes it tracked,
//! so the user's next `git commit -am` on the host commits the real
//! secret). So the mask follows git's view of each file
//! (docs/SANDBOX.md, "Secrets and git"):
//!
//! - **tracked, working copy equal to the index**: left readable. Its
//!   content is in `.git/objects` (`git show HEAD:.env`), which every
//!   command may read; a mask would protect nothing and break git. The
//!   report says so (`partial`), never claims it masked.
//! - **tracked, modified**: the local change may be a secret (a committed
//!   template filled in by hand). The mask shows the *indexed* content
//!   instead of an empty file, so git inside sees the file clean: nothing
//!   is committed, emptied or stashed, and the host's file is untouched.
//! - **untracked**: an empty read-only mask, and the repository's
//!   `info/exclude` is overlaid (read-only, inside the sandbox only) with
//!   its own lines plus one anchored line per masked name, so `git status`,
//!   `git add -A` and `git stash -u` skip it cleanly. Where the repository
//!   has no `info/exclude` to overlay (a mount needs an existing file; one
//!   created on the host would litter `.git`), the mask is made unreadable
//!   instead, so git fails loudly rather than commit an empty file.
//!
//! [`plan`] is pure (facts in, decisions out); [`observe`] asks host git
//! (`ls-files`, `cat-file`: neither runs a filter, hook or fsmonitor) in
//! a scrubbed environment.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The largest tracked file whose content is compared and served from the
/// index (`.env` files are a few hundred bytes); a larger modified one is
/// masked empty and named `partial`.
const MAX_SERVED: u64 = 1 << 20;

/// What a mask made of content is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverlayRole {
    /// A tracked deny-read file with local changes: shows the indexed
    /// version.
    IndexedVersion,
    /// A repository's `info/exclude`, extended by the masked names.
    GitExclude,
}

/// A read-only file laid over `path` inside the sandbox only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlay {
    pub path: PathBuf,
    pub role: OverlayRole,
    /// The bytes the sandbox sees (never serialised: `sandbox explain
    /// --json` names the overlay, not its content).
    #[serde(skip)]
    pub content: Vec<u8>,
}

/// The decisions for one run's deny-read files inside repositories.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitView {
    /// Tracked deny-read files equal to their index entry: left readable
    /// (their content is in the object store anyway).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tracked_readable: Vec<PathBuf>,
    /// Content overlays (indexed versions, extended `info/exclude` files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlays: Vec<Overlay>,
    /// Untracked deny-read files in a repository without `info/exclude`:
    /// masked unreadable, so git fails on them instead of adding them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<PathBuf>,
    /// Lines for the report's `partial` list (what is not held as asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl GitView {
    pub fn is_empty(&self) -> bool {
        self.tracked_readable.is_empty()
            && self.overlays.is_empty()
            && self.unreadable.is_empty()
            && self.notes.is_empty()
    }

    /// The content a deny-read file's mask shows, when it is not empty.
    pub fn indexed_version(&self, path: &Path) -> Option<&[u8]> {
        self.overlays
            .iter()
            .find(|o| o.role == OverlayRole::IndexedVersion && o.path == path)
            .map(|o| o.content.as_slice())
    }

    /// Whether a deny-read file's mask must refuse reads.
    pub fn is_unreadable(&self, path: &Path) -> bool {
        self.unreadable.iter().any(|p| p == path)
    }

    /// One line per overlay, for a backend that cannot lay files over
    /// paths (`why`): what git inside its sandbox sees instead.
    pub fn unapplied(&self, why: &str) -> Vec<String> {
        self.overlays
            .iter()
            .map(|o| match o.role {
                OverlayRole::IndexedVersion => format!(
                    "{}: its indexed version is not shown in place of the local changes ({why}): the file is unreadable, so git commands that read it fail",
                    o.path.display()
                ),
                OverlayRole::GitExclude => format!(
                    "{}: not extended by the masked names ({why}): git sees the masked untracked files and fails on reading them",
                    o.path.display()
                ),
            })
            .collect()
    }

    /// The extended `info/exclude` files.
    pub fn excludes(&self) -> impl Iterator<Item = &Overlay> {
        self.overlays
            .iter()
            .filter(|o| o.role == OverlayRole::GitExclude)
    }
}

/// What git knows of one deny-read file (the input of [`plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tracked {
    /// Not in the index.
    No,
    /// In the index; `blob` is its indexed content when it was read (at
    /// most [`MAX_SERVED`] bytes), `same` whether the working copy equals it.
    Yes { blob: Option<Vec<u8>>, same: bool },
}

/// One repository holding deny-read files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFacts {
    /// The worktree's top directory.
    pub top: PathBuf,
    /// Its `info/exclude` and that file's content, when it exists.
    pub exclude: Option<(PathBuf, Vec<u8>)>,
    /// `(absolute path, what git knows)` per deny-read file in it.
    pub files: Vec<(PathBuf, Tracked)>,
}

/// The pure decision (see the module documentation).
pub fn plan(repos: &[RepoFacts]) -> GitView {
    let mut view = GitView::default();
    for repo in repos {
        let mut excluded = Vec::new();
        for (path, tracked) in &repo.files {
            match tracked {
                Tracked::Yes { same: true, .. } => {
                    view.tracked_readable.push(path.clone());
                    view.notes.push(format!(
                        "{}: tracked by git and unchanged, so left readable (its content is in the repository's objects, which the command can read; a mask would only break git)",
                        path.display()
                    ));
                }
                Tracked::Yes {
                    blob: Some(blob),
                    same: false,
                } => view.overlays.push(Overlay {
                    path: path.clone(),
                    role: OverlayRole::IndexedVersion,
                    content: blob.clone(),
                }),
                Tracked::Yes {
                    blob: None,
                    same: false,
                } => view.notes.push(format!(
                    "{}: tracked by git, modified and too large to serve its indexed version ({} bytes at most): masked empty, so git inside the sandbox sees it modified",
                    path.display(),
                    MAX_SERVED
                )),
                Tracked::No => match path.strip_prefix(&repo.top) {
                    Ok(rel) if repo.exclude.is_some() => excluded.push(rel.to_path_buf()),
                    _ => {
                        view.unreadable.push(path.clone());
                        view.notes.push(format!(
                            "{}: untracked, and its repository has no info/exclude to hide it from git: masked unreadable, so git commands that read it fail instead of adding it empty",
                            path.display()
                        ));
                    }
                },
            }
        }
        if let (Some((file, original)), false) = (&repo.exclude, excluded.is_empty()) {
            view.overlays.push(Overlay {
                path: file.clone(),
                role: OverlayRole::GitExclude,
                content: extended_exclude(original, &excluded),
            });
        }
    }
    view
}

/// `original` plus one anchored, escaped pattern per path (relative to the
/// worktree's top), after a comment saying where they come from.
pub fn extended_exclude(original: &[u8], rels: &[PathBuf]) -> Vec<u8> {
    let mut out = original.to_vec();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(
        b"# codewhale: files masked in this sandbox (the host's info/exclude is unchanged)\n",
    );
    for rel in rels {
        out.push(b'/');
        out.extend_from_slice(&escape_pattern(&rel.to_string_lossy()));
        out.push(b'\n');
    }
    out
}

/// Escape a literal path for a gitignore line (gitignore(5): `\` quotes
/// the glob characters, a leading `#` or `!` and trailing spaces).
fn escape_pattern(rel: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(rel.len());
    for c in rel.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ') {
            out.push(b'\\');
        }
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    out
}

/// The worktree top holding `path` (the nearest ancestor with a `.git`
/// directory or pointer file), if any. Like git's own discovery it never
/// enters a directory named in `GIT_CEILING_DIRECTORIES` (git(1)).
fn top_of(path: &Path, ceilings: &[PathBuf]) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .take_while(|d| !ceilings.iter().any(|c| c == d))
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .map(Path::to_path_buf)
}

/// `GIT_CEILING_DIRECTORIES` as absolute paths.
fn ceilings() -> Vec<PathBuf> {
    std::env::var_os("GIT_CEILING_DIRECTORIES")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| p.is_absolute())
                .collect()
        })
        .unwrap_or_default()
}

/// The `info/exclude` git reads for the worktree at `top` (the common
/// directory's, for linked worktrees and submodules with a `.git` file).
fn exclude_path(top: &Path) -> Option<PathBuf> {
    let dotgit = top.join(".git");
    let meta = std::fs::symlink_metadata(&dotgit).ok()?;
    let gitdir = if meta.is_dir() {
        dotgit
    } else {
        let text = std::fs::read_to_string(&dotgit).ok()?;
        let rel = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        super::paths::normalize(&top.join(rel))
    };
    let common = match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(c) => super::paths::normalize(&gitdir.join(c.trim())),
        Err(_) => gitdir,
    };
    Some(common.join("info").join("exclude"))
}

/// Host git, steered by nothing from the environment or the global and
/// system config; `ls-files`, `cat-file` and `config --file` run no
/// filter, hook or fsmonitor, and optional locks are off (the index is
/// never written). Also the nested-repository audit's git
/// (`host::integrity::nested`).
pub fn safe_git(top: &Path) -> Option<Command> {
    let exe = which::which("git").ok()?;
    let mut c = Command::new(exe);
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        // `top` holds the `.git` we mean: never one further up.
        .env(
            "GIT_CEILING_DIRECTORIES",
            top.parent().unwrap_or(Path::new("/")),
        )
        .current_dir(top)
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    Some(c)
}

/// `(path relative to top, blob id)` of each regular file among `rels`
/// that the index holds at stage 0; `None` when git could not answer.
fn indexed(top: &Path, rels: &[PathBuf]) -> Option<BTreeMap<PathBuf, String>> {
    let mut c = safe_git(top)?;
    c.args(["ls-files", "--stage", "-z", "--full-name", "--"]);
    for r in rels {
        let mut spec = std::ffi::OsString::from(":(literal)");
        spec.push(r.as_os_str());
        c.arg(spec);
    }
    let out = c.stdout(Stdio::piped()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let mut map = BTreeMap::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        // "<mode> <oid> <stage>\t<path>"
        let text = String::from_utf8_lossy(rec);
        let Some((meta, path)) = text.split_once('\t') else {
            continue;
        };
        let mut it = meta.split(' ');
        let (Some(mode), Some(oid), Some(stage)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if stage == "0" && (mode == "100644" || mode == "100755") {
            map.insert(PathBuf::from(path), oid.to_string());
        }
    }
    Some(map)
}

/// The content of each blob (at most [`MAX_SERVED`] bytes; larger ones
/// are `None`), by one `cat-file --batch`.
fn blobs(top: &Path, oids: &[&str]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut child = safe_git(top)?
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let mut input = Vec::new();
    for o in oids {
        input.extend_from_slice(o.as_bytes());
        input.push(b'\n');
    }
    let mut stdin = child.stdin.take()?;
    // The answers of a few small blobs fit the pipe; a writer thread keeps
    // a large batch from blocking against our read.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    if !out.status.success() {
        return None;
    }
    let mut rest = out.stdout.as_slice();
    let mut answers = Vec::new();
    for _ in oids {
        let nl = rest.iter().position(|b| *b == b'\n')?;
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        rest = &rest[nl + 1..];
        let mut parts = header.split(' ');
        let (_, kind, size) = (parts.next(), parts.next()?, parts.next());
        if kind != "blob" {
            answers.push(None);
            continue;
        }
        let size: usize = size?.parse().ok()?;
        let body = rest.get(..size)?;
        answers.push((size as u64 <= MAX_SERVED).then(|| body.to_vec()));
        rest = rest.get(size + 1..)?;
    }
    Some(answers)
}

/// Gather [`RepoFacts`] for the deny-read `files` (existing regular files,
/// absolute), grouped by repository. Files outside every repository are
/// not listed. The notes name repositories git could not read; their
/// files are returned last, to be masked unreadable (git could add an
/// empty mask it cannot tell from a new file).
pub fn observe(files: &[PathBuf]) -> (Vec<RepoFacts>, Vec<String>, Vec<PathBuf>) {
    let mut by_top: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    let ceilings = ceilings();
    for f in files {
        if let Some(top) = top_of(f, &ceilings) {
            by_top.entry(top).or_default().push(f.clone());
        }
    }
    let mut repos = Vec::new();
    let mut notes = Vec::new();
    let mut failed = Vec::new();
    for (top, files) in by_top {
        let key = StatKey::of(&top, &files);
        if let Some(hit) = key.as_ref().and_then(|k| cached(&top, k)) {
            repos.push(hit);
            continue;
        }
        let rels: Vec<PathBuf> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&top).ok().map(Path::to_path_buf))
            .collect();
        let Some(index) = indexed(&top, &rels) else {
            notes.push(format!(
                "{}: git could not list the repository's index (nor, then, can git inside the sandbox commit there); its deny-read files are masked empty",
                top.display()
            ));
            continue;
        };
        let oids: Vec<&str> = rels
            .iter()
            .filter_map(|r| index.get(r).map(String::as_str))
            .collect();
        let contents = if oids.is_empty() {
            Some(Vec::new())
        } else {
            blobs(&top, &oids)
        };
        let Some(contents) = contents else {
            // Without the indexed contents nothing can be told apart: the
            // files keep the empty mask, said as for an unreadable index.
            notes.push(format!(
                "{}: git could not read the indexed versions of its deny-read files; they are masked unreadable, so git commands that read them fail",
                top.display()
            ));
            failed.extend(files);
            continue;
        };
        let mut contents = contents.into_iter();
        let mut out = Vec::new();
        for (abs, rel) in files.iter().zip(&rels) {
            let tracked = if index.contains_key(rel) {
                let blob = contents.next().flatten();
                let same = blob.as_ref().is_some_and(|b| same_content(abs, b));
                Tracked::Yes { blob, same }
            } else {
                Tracked::No
            };
            out.push((abs.clone(), tracked));
        }
        let exclude = exclude_path(&top).and_then(|p| {
            let meta = std::fs::symlink_metadata(&p).ok()?;
            if !meta.is_file() {
                return None;
            }
            let content = std::fs::read(&p).ok()?;
            Some((p, content))
        });
        let facts = RepoFacts {
            top,
            exclude,
            files: out,
        };
        if let Some(k) = key {
            remember(&facts.top, k, &facts);
        }
        repos.push(facts);
    }
    (repos, notes, failed)
}

/// What [`RepoFacts`] depend on, by `lstat`: the index, the
/// `info/exclude` and each deny-read file (device, inode, size, mtime and
/// ctime in nanoseconds). A long-lived process (the TUI, the runtime)
/// asks git again only when one of them changed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct StatKey(Vec<Option<Stat>>);

/// `(dev, ino, size, mtime, mtime_nsec, ctime, ctime_nsec)`.
type Stat = (u64, u64, u64, i64, i64, i64, i64);

impl StatKey {
    #[cfg(unix)]
    fn of(top: &Path, files: &[PathBuf]) -> Option<StatKey> {
        use std::os::unix::fs::MetadataExt;
        let exclude = exclude_path(top)?;
        let index = exclude.parent()?.parent()?.join("index");
        let stat = |p: &Path| {
            std::fs::symlink_metadata(p).ok().map(|m| {
                (
                    m.dev(),
                    m.ino(),
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                )
            })
        };
        let mut v = vec![stat(&index), stat(&exclude), stat(&top.join(".git"))];
        v.extend(files.iter().map(|f| stat(f)));
        Some(StatKey(v))
    }

    #[cfg(not(unix))]
    fn of(_top: &Path, _files: &[PathBuf]) -> Option<StatKey> {
        None
    }
}

type FactsCache = std::collections::HashMap<PathBuf, (StatKey, RepoFacts)>;

fn cache() -> &'static std::sync::Mutex<FactsCache> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<FactsCache>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn cached(top: &Path, key: &StatKey) -> Option<RepoFacts> {
    let c = cache().lock().ok()?;
    c.get(top).filter(|(k, _)| k == key).map(|(_, f)| f.clone())
}

fn remember(top: &Path, key: StatKey, facts: &RepoFacts) {
    if let Ok(mut c) = cache().lock() {
        c.insert(top.to_path_buf(), (key, facts.clone()));
    }
}

fn same_content(path: &Path, blob: &[u8]) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == blob.len() as u64 => std::fs::read(path).is_ok_and(|c| c == blob),
        _ => false,
    }
}

/// The whole step for a resolution: observe, plan, and take the tracked,
/// unchanged files out of `deny_read`.
pub fn resolve(deny_read: &mut Vec<super::paths::PathEntry>, workspace: &Path) -> GitView {
    let files: Vec<PathBuf> = deny_read
        .iter()
        .filter(|e| e.kind == super::paths::PathKind::File && e.path.starts_with(workspace))
        .map(|e| e.path.clone())
        .collect();
    if files.is_empty() {
        return GitView::default();
    }
    let (repos, notes, failed) = observe(&files);
    let mut view = plan(&repos);
    view.notes.extend(notes);
    view.unreadable.extend(failed);
    deny_read.retain(|e| !view.tracked_readable.contains(&e.path));
    view
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn repo(exclude: bool, files: Vec<(&str, Tracked)>) -> RepoFacts {
        RepoFacts {
            top: "/w".into(),
            exclude: exclude.then(|| (PathBuf::from("/w/.git/info/exclude"), b"# x\n*.o".to_vec())),
            files: files
                .into_iter()
                .map(|(p, t)| (PathBuf::from(p), t))
                .collect(),
        }
    }

    #[test]
    fn each_kind_of_file_gets_its_own_form() {
        let v = plan(&[repo(
            true,
            vec![
                (
                    "/w/.env",
                    Tracked::Yes {
                        blob: Some(b"A=1\n".to_vec()),
                        same: true,
                    },
                ),
                (
                    "/w/app/.env.local",
                    Tracked::Yes {
                        blob: Some(b"A=\n".to_vec()),
                        same: false,
                    },
                ),
                ("/w/sub dir/.env", Tracked::No),
            ],
        )]);
        assert_eq!(v.tracked_readable, vec![PathBuf::from("/w/.env")]);
        assert_eq!(
            v.indexed_version(Path::new("/w/app/.env.local")),
            Some(&b"A=\n"[..])
        );
        assert!(v.unreadable.is_empty());
        let ex: Vec<_> = v.excludes().collect();
        assert_eq!(ex.len(), 1);
        assert_eq!(
            String::from_utf8(ex[0].content.clone()).unwrap(),
            "# x\n*.o\n# codewhale: files masked in this sandbox (the host's info/exclude is unchanged)\n/sub\\ dir/.env\n"
        );
        assert!(v.notes.iter().any(|n| n.contains("left readable")));
    }

    #[test]
    fn without_an_exclude_file_untracked_files_are_unreadable() {
        let v = plan(&[repo(false, vec![("/w/.env", Tracked::No)])]);
        assert_eq!(v.unreadable, vec![PathBuf::from("/w/.env")]);
        assert!(v.excludes().next().is_none());
        assert!(v.is_unreadable(Path::new("/w/.env")));
    }

    #[test]
    fn a_large_modified_file_is_named() {
        let v = plan(&[repo(
            true,
            vec![(
                "/w/.env",
                Tracked::Yes {
                    blob: None,
                    same: false,
                },
            )],
        )]);
        assert!(v.overlays.is_empty());
        assert!(v.notes[0].contains("too large"));
    }

    #[test]
    fn patterns_are_escaped_literals() {
        assert_eq!(
            escape_pattern("a/#b/!c*[x]?.env"),
            b"a/\\#b/\\!c\\*\\[x\\]\\?.env"
        );
    }

    #[test]
    fn observe_reads_a_real_repository() {
        if which::which("git").is_err() {
            panic!("git is needed for this test (ci/setup installs it)");
        }
        let t = tempfile::tempdir().unwrap();
        let w = t.path().canonicalize().unwrap();
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&w)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "-q"]);
        std::fs::write(w.join(".env"), "A=1\n").unwrap();
        std::fs::create_dir(w.join("app")).unwrap();
        std::fs::write(w.join("app/.env.test"), "B=template\n").unwrap();
        run(&["add", "-A"]);
        run(&["commit", "-qm", "init"]);
        std::fs::write(w.join("app/.env.test"), "B=real-secret\n").unwrap();
        std::fs::write(w.join(".env.local"), "C=untracked\n").unwrap();
        let files = vec![
            w.join(".env"),
            w.join("app/.env.test"),
            w.join(".env.local"),
        ];
        let (repos, notes, failed) = observe(&files);
        assert!(notes.is_empty() && failed.is_empty(), "{notes:?}");
        assert_eq!(repos.len(), 1);
        let v = plan(&repos);
        assert_eq!(v.tracked_readable, vec![w.join(".env")]);
        assert_eq!(
            v.indexed_version(&w.join("app/.env.test")),
            Some(&b"B=template\n"[..])
        );
        let ex: Vec<_> = v.excludes().collect();
        assert_eq!(ex[0].path, w.join(".git/info/exclude"));
        assert!(String::from_utf8_lossy(&ex[0].content).ends_with("\n/.env.local\n"));
    }
}
