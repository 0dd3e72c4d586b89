//! After the run: repositories *inside* a writable root that host git
//! reads configuration from, and that the command wrote.
//!
//! The protected-path table covers the root repository's own `.git/config`,
//! `.git/hooks` and `.git/commondir`. Git on the host also reads, at the
//! user's next `git status` in the root:
//!
//! - the gitdir of every gitlink in the index: an embedded repository
//!   `sub/.git/` (`git init sub && git add sub`) or a `sub/.git` pointer
//!   file naming one — `git status` runs a status inside it, which starts
//!   its `core.fsmonitor`;
//! - submodule gitdirs under `.git/modules/` (names may contain `/`, and
//!   submodules nest under `<gitdir>/modules/`);
//! - linked worktrees' gitdirs under `.git/worktrees/` (their `commondir`
//!   names the repository whose config applies).
//!
//! None of these can be protected before the run without littering the
//! workspace or forbidding `git submodule update` / `git worktree add`, so
//! each file git would take code from (`config`, `config.worktree`,
//! `commondir`, `hooks/*`, the pointer file) is checked after the run when
//! its ctime says it was written during it (the command cannot set ctime
//! back: `utimensat` itself moves it to now). A written config is kept
//! when every key is on a short list of keys that name no program
//! ([`config_key_allowed`]: what `git clone`, `git submodule update` and
//! `git worktree add` write); otherwise — and for every hook that is not a
//! `*.sample`, every unexpected `commondir` and every pointer leading out
//! of the root — the file is moved to the quarantine and reported.

use crate::host::enforcement::{Revert, RevertAction};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How deep `.git/modules` is searched for gitdirs, and how many entries
/// are looked at in all (a bound, so a hostile tree cannot stall the check).
const MAX_DEPTH: usize = 8;
const MAX_VISITS: usize = 4096;
/// Files written this long before the baseline was taken still count as
/// written during the run (filesystem timestamps are coarse).
pub const SLACK: Duration = Duration::from_secs(2);

/// How a nested gitdir is reached from the root repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `.git/modules/**`: a submodule's gitdir.
    Module,
    /// `.git/worktrees/<name>`: a linked worktree's gitdir.
    Worktree,
    /// The gitdir of a gitlink's working tree (`<path>/.git`).
    Gitlink { pointer: Option<PathBuf> },
}

/// One gitdir host git would read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gitdir {
    /// The gitdir (for a pointer, where it leads).
    pub path: PathBuf,
    /// What kind of nested repository it is.
    pub kind: Kind,
}

/// Whether a config key (as `git config --list` prints it: section and
/// name lower-case, subsection verbatim) names no program and redirects
/// no configuration. Everything else — `core.fsmonitor`, `core.hooksPath`,
/// `core.sshCommand`, `include.path`, `submodule.*.update`, filters, diff
/// drivers, aliases, credential helpers, `remote.*.uploadpack`, … — makes
/// a written config quarantined.
pub fn config_key_allowed(key: &str) -> bool {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    let name = rest.rsplit('.').next().unwrap_or(rest);
    let has_sub = rest.contains('.');
    match (section, has_sub) {
        ("core", false) => matches!(
            name,
            "repositoryformatversion"
                | "filemode"
                | "bare"
                | "logallrefupdates"
                | "ignorecase"
                | "precomposeunicode"
                | "symlinks"
                | "worktree"
                | "autocrlf"
                | "eol"
        ),
        ("remote", true) => matches!(
            name,
            "url" | "pushurl" | "fetch" | "tagopt" | "prune" | "promisor" | "partialclonefilter"
        ),
        ("branch", true) => matches!(name, "remote" | "merge" | "rebase"),
        ("submodule", true) => matches!(name, "url" | "active" | "branch"),
        ("extensions", false) => matches!(
            name,
            "objectformat" | "refstorage" | "worktreeconfig" | "partialclone" | "preciousobjects"
        ),
        ("user", false) => matches!(name, "name" | "email"),
        ("init", false) => name == "defaultbranch",
        ("index", false) => name == "version",
        ("feature", false) => name == "manyfiles",
        ("fetch", false) => name == "recursesubmodules",
        ("pull", false) => matches!(name, "rebase" | "ff"),
        ("gc", false) => name == "auto",
        _ => false,
    }
}

/// The keys of `git config --list -z` output (`key\nvalue\0` records).
pub fn keys_of_list(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let k = r.split(|b| *b == b'\n').next().unwrap_or(r);
            String::from_utf8_lossy(k).into_owned()
        })
        .collect()
}

/// Gitlink paths in `git ls-files --stage -z` output
/// (`<mode> <object> <stage>\t<path>\0` records, mode 160000).
pub fn gitlinks_of_stage(out: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    out.split(|b| *b == 0)
        .filter(|r| r.starts_with(b"160000 "))
        .filter_map(|r| {
            let tab = r.iter().position(|b| *b == b'\t')?;
            Some(PathBuf::from(std::ffi::OsStr::from_bytes(&r[tab + 1..])))
        })
        .collect()
}

/// Gitlink paths of the index file `index`, read in process with
/// `gix-index` (~10 ms at 100k entries against ~60 ms for `git ls-files
/// --stage` and its 7 MB of output, beside the first `.env` scan on two
/// cores). `None` when it cannot be read so (another object format, a
/// split index whose shared part is missing, a version it does not know)
/// or when it is a sparse index, whose collapsed directories `gix-index`
/// does not expand and `ls-files` does (a gitlink inside one must not go
/// unaudited): git is asked then. The checksum is not verified: git
/// replaces the index by a rename, and the answer is kept only while its
/// stamp holds.
pub fn gitlinks_of_index(index: &Path) -> Option<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    let file = gix_index::File::at(
        index,
        gix_index::hash::Kind::Sha1,
        true,
        gix_index::decode::Options::default(),
    )
    .ok()?;
    if file.is_sparse() {
        return None;
    }
    Some(
        file.entries()
            .iter()
            .filter(|e| e.mode == gix_index::entry::Mode::COMMIT)
            .map(|e| {
                let p: &[u8] = e.path(&file);
                PathBuf::from(std::ffi::OsStr::from_bytes(p))
            })
            .collect(),
    )
}

/// The target of a `gitdir: <path>` pointer file, relative to its directory.
pub fn pointer_target(pointer: &Path, contents: &str) -> Option<PathBuf> {
    let t = contents.lines().next()?.strip_prefix("gitdir:")?.trim();
    if t.is_empty() {
        return None;
    }
    let p = Path::new(t);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        pointer.parent()?.join(p)
    })
}

/// Host git, with nothing from the environment or the user's global and
/// system config steering it, and nothing that could start a program
/// (`ls-files` and `config --file` read; fsmonitor off regardless).
fn git(dir: &Path) -> Option<Command> {
    crate::policy::git_view::safe_git(dir)
}

/// The keys of a config file, or `None` when it cannot be read as one
/// (git missing or the file unparsable: treated as not allowed).
fn config_keys(file: &Path) -> Option<Vec<String>> {
    let dir = file.parent()?;
    let out = git(dir)?
        .arg("config")
        .arg("--file")
        .arg(file)
        .args(["--no-includes", "--list", "-z"])
        .output()
        .ok()?;
    out.status.success().then(|| keys_of_list(&out.stdout))
}

/// Every nested gitdir of the repository at `root` that host git reads.
/// `cache`: where the gitlink list is kept between runs (see [`gitlinks`]);
/// `None` always asks git.
pub fn discover(root: &Path, cache: Option<&Path>) -> Vec<Gitdir> {
    let dotgit = root.join(".git");
    if !std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut visits = 0;
    modules_under(&dotgit.join("modules"), 0, &mut visits, &mut out);
    if let Ok(rd) = std::fs::read_dir(dotgit.join("worktrees")) {
        for e in rd.flatten().take(MAX_VISITS) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(Gitdir {
                    path: e.path(),
                    kind: Kind::Worktree,
                });
            }
        }
    }
    for link in gitlinks(root, cache) {
        let wt = root.join(&link);
        let dg = wt.join(".git");
        let Ok(m) = std::fs::symlink_metadata(&dg) else {
            continue;
        };
        if m.is_dir() {
            out.push(Gitdir {
                path: dg,
                kind: Kind::Gitlink { pointer: None },
            });
        } else if m.is_file() {
            let target = std::fs::read_to_string(&dg)
                .ok()
                .and_then(|s| pointer_target(&dg, &s))
                .unwrap_or_else(|| dg.clone());
            out.push(Gitdir {
                path: target,
                kind: Kind::Gitlink { pointer: Some(dg) },
            });
        }
    }
    out
}

fn modules_under(dir: &Path, depth: usize, visits: &mut usize, out: &mut Vec<Gitdir>) {
    if depth > MAX_DEPTH || *visits > MAX_VISITS {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        *visits += 1;
        if *visits > MAX_VISITS {
            return;
        }
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        if p.join("HEAD").exists() {
            // A gitdir: its own submodules live under `modules/`.
            modules_under(&p.join("modules"), depth + 1, visits, out);
            out.push(Gitdir {
                path: p,
                kind: Kind::Module,
            });
        } else {
            // A submodule name with `/` in it: keep looking.
            modules_under(&p, depth + 1, visits, out);
        }
    }
}

/// The index's identity: device, inode, size, mtime and ctime (ns). Git
/// replaces the index by a rename on every write (a new inode), and no
/// process can set a ctime, so a command that rewrote the index in place
/// and reset its mtime still changes this.
fn index_stamp(index: &Path) -> Option<[i128; 5]> {
    let m = std::fs::symlink_metadata(index).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some([
        i128::from(m.dev()),
        i128::from(m.ino()),
        i128::from(m.size()),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    ])
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Cached {
    stamp: [i128; 5],
    links: Vec<PathBuf>,
}

/// Fill `cache` with `root`'s gitlinks (see [`gitlinks`]).
pub fn warm(root: &Path, cache: &Path) {
    if std::fs::symlink_metadata(root.join(".git")).is_ok_and(|m| m.is_dir()) {
        let _ = gitlinks(root, Some(cache));
    }
}

/// The gitlinks of `root`'s index. Listing them runs `git ls-files`
/// (a process, and the whole index read), which the after-run check would
/// otherwise pay on every sandboxed command; so the list is kept in
/// `cache` with the index's [`index_stamp`] and git is asked again only
/// when the index changed.
fn gitlinks(root: &Path, cache: Option<&Path>) -> Vec<PathBuf> {
    let index = root.join(".git/index");
    let Some(stamp) = index_stamp(&index) else {
        return Vec::new();
    };
    let file = cache.map(|d| {
        use sha2::Digest;
        let key = hex::encode(&sha2::Sha256::digest(root.as_os_str().as_encoded_bytes())[..8]);
        d.join(format!("{key}.json"))
    });
    if let Some(f) = &file {
        let hit = std::fs::read(f)
            .ok()
            .and_then(|b| serde_json::from_slice::<Cached>(&b).ok())
            .filter(|c| c.stamp == stamp);
        if let Some(c) = hit {
            return c.links;
        }
    }
    let links = match gitlinks_of_index(&index) {
        Some(links) => links,
        None => {
            let Some(mut c) = git(root) else {
                return Vec::new();
            };
            match c.args(["ls-files", "--stage", "-z"]).output() {
                Ok(o) if o.status.success() => gitlinks_of_stage(&o.stdout),
                _ => return Vec::new(),
            }
        }
    };
    // Kept only if the index did not change while git read it.
    if let (Some(f), Some(after)) = (&file, index_stamp(&index)) {
        if after == stamp {
            let c = Cached {
                stamp,
                links: links.clone(),
            };
            if let (Some(d), Ok(bytes)) = (f.parent(), serde_json::to_vec(&c)) {
                let _ = std::fs::create_dir_all(d);
                let tmp = f.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, bytes).is_ok() {
                    let _ = std::fs::rename(&tmp, f);
                }
            }
        }
    }
    links
}

fn written_since(p: &Path, since: SystemTime) -> bool {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return false;
    };
    let ctime = UNIX_EPOCH
        + Duration::from_secs(m.ctime().max(0) as u64)
        + Duration::from_nanos(m.ctime_nsec().max(0) as u64);
    ctime >= since
}

/// What is wrong with one file git would take code from, if anything.
fn offence(file: &Path, role: Role, root: &Path) -> Option<String> {
    match role {
        Role::Config => match config_keys(file) {
            None => Some("not readable as a git config file".into()),
            Some(keys) => {
                let bad: Vec<String> = keys
                    .into_iter()
                    .filter(|k| !config_key_allowed(k))
                    .collect();
                (!bad.is_empty()).then(|| format!("sets {}", bad.join(", ")))
            }
        },
        Role::Hook => (!file.to_string_lossy().ends_with(".sample"))
            .then(|| "a hook git would run on the host".into()),
        Role::CommonDir { allowed } => {
            let contents = std::fs::read_to_string(file).unwrap_or_default();
            let target = file
                .parent()
                .map(|d| d.join(contents.trim()))
                .and_then(|t| t.canonicalize().ok());
            let want = allowed
                .then(|| root.join(".git").canonicalize().ok())
                .flatten();
            (target.is_none() || target != want)
                .then(|| "redirects which repository's config applies".into())
        }
        Role::Pointer => {
            let contents = std::fs::read_to_string(file).unwrap_or_default();
            let inside = pointer_target(file, &contents)
                .and_then(|t| t.canonicalize().ok())
                .is_some_and(|t| t.starts_with(root));
            (!inside).then(|| "points git at a repository outside the root".into())
        }
    }
}

#[derive(Clone, Copy)]
enum Role {
    Config,
    Hook,
    CommonDir { allowed: bool },
    Pointer,
}

/// The files of `g` that git takes code or configuration from.
fn files_of(g: &Gitdir) -> Vec<(PathBuf, Role)> {
    let mut v = vec![
        (g.path.join("config"), Role::Config),
        (g.path.join("config.worktree"), Role::Config),
        (
            g.path.join("commondir"),
            Role::CommonDir {
                allowed: g.kind == Kind::Worktree,
            },
        ),
    ];
    if let Ok(rd) = std::fs::read_dir(g.path.join("hooks")) {
        v.extend(rd.flatten().take(512).map(|e| (e.path(), Role::Hook)));
    }
    if let Kind::Gitlink { pointer: Some(p) } = &g.kind {
        v.push((p.clone(), Role::Pointer));
    }
    v
}

/// Check every nested gitdir of `root` and quarantine (via `quarantine`)
/// each file written since `since` that would run code on the host.
/// `skip`: paths the exact baseline comparison already handled.
pub fn audit(
    root: &Path,
    cache: Option<&Path>,
    since: SystemTime,
    skip: &[PathBuf],
    earlier_run: bool,
    quarantine: &mut dyn FnMut(&Path) -> Result<PathBuf, String>,
) -> Vec<Revert> {
    let mut out = Vec::new();
    for g in discover(root, cache) {
        for (file, role) in files_of(&g) {
            if skip.contains(&file) || !written_since(&file, since) {
                continue;
            }
            // Only what lies inside the root can have been written by the
            // command; a pointer is judged by where it leads.
            if !matches!(role, Role::Pointer) && !file.starts_with(root) {
                continue;
            }
            let Some(why) = offence(&file, role, root) else {
                continue;
            };
            let (action, q, error) = match quarantine(&file) {
                Ok(q) => (RevertAction::Quarantined, Some(q), None),
                Err(e) => (RevertAction::Failed, None, Some(e)),
            };
            out.push(Revert {
                path: file,
                action,
                quarantined_to: q,
                error,
                earlier_run,
                why: Some(why),
            });
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let st = Command::new("sh")
            .args(["-c", script])
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()
            .unwrap();
        assert!(st.success(), "{script}");
    }

    /// The gitlink list comes from git once, then from the cache while the
    /// index is unchanged (a planted entry with the index's stamp is
    /// believed: proof the second call did not ask git), and from git again
    /// once the index changed.
    #[test]
    fn gitlinks_are_read_again_only_when_the_index_changed() {
        let t = tempfile::tempdir().unwrap();
        let (root, cache) = (t.path().join("ws"), t.path().join("cache"));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        sh(&root, "git init -q . && git -C sub init -q && git -C sub -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git add sub");
        assert_eq!(gitlinks(&root, Some(&cache)), vec![PathBuf::from("sub")]);
        let f = std::fs::read_dir(&cache)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut c: Cached = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        c.links = vec![PathBuf::from("planted")];
        std::fs::write(&f, serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!(
            gitlinks(&root, Some(&cache)),
            vec![PathBuf::from("planted")]
        );
        // Without a cache the index is read every time.
        assert_eq!(gitlinks(&root, None), vec![PathBuf::from("sub")]);
        // A changed index is listed again.
        std::fs::create_dir_all(root.join("sub2")).unwrap();
        sh(&root, "git -C sub2 init -q && git -C sub2 -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git add sub2");
        let mut now = gitlinks(&root, Some(&cache));
        now.sort();
        assert_eq!(now, vec![PathBuf::from("sub"), PathBuf::from("sub2")]);
    }

    #[test]
    fn the_index_read_in_process_names_the_gitlinks_git_lists() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ws");
        for d in ["a/b/sub", "a/x", "libs/two"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        sh(&root, "git init -q . && for s in a/b/sub libs/two; do git -C $s init -q && git -C $s -c user.name=t -c user.email=t@t commit -q --allow-empty -m x; done && echo f > a/x/f && echo g > 'a/x/g h' && git add a libs");
        let index = root.join(".git/index");
        let by_git = |root: &Path| {
            let o = git(root)
                .unwrap()
                .args(["ls-files", "--stage", "-z"])
                .output()
                .unwrap();
            gitlinks_of_stage(&o.stdout)
        };
        let want = vec![PathBuf::from("a/b/sub"), PathBuf::from("libs/two")];
        assert_eq!(by_git(&root), want);
        assert_eq!(gitlinks_of_index(&index), Some(want.clone()));
        // Index version 4 (prefix-compressed paths) reads the same.
        sh(&root, "git update-index --index-version 4");
        assert_eq!(gitlinks_of_index(&index), Some(want.clone()));
        // A SHA-256 repository's index is not read in process: git answers.
        let r256 = t.path().join("r256");
        std::fs::create_dir_all(r256.join("sub")).unwrap();
        sh(&r256, "git init -q --object-format=sha256 . && git -C sub init -q --object-format=sha256 && git -C sub -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git add sub");
        assert_eq!(gitlinks_of_index(&r256.join(".git/index")), None);
        assert_eq!(gitlinks(&r256, None), vec![PathBuf::from("sub")]);
        // A sparse index: its collapsed directory `a/` holds the gitlink
        // `a/b/sub`, which only git's expanded listing names.
        sh(&root, "git -c user.name=t -c user.email=t@t commit -q -m x && git config index.sparse true && git sparse-checkout set --cone libs");
        assert_eq!(gitlinks_of_index(&index), None);
        let mut listed = gitlinks(&root, None);
        listed.sort();
        assert_eq!(listed, want);
        // A file that is not an index: no answer from either.
        std::fs::write(&index, b"DIRC garbage").unwrap();
        assert_eq!(gitlinks_of_index(&index), None);
        assert_eq!(gitlinks(&root, None), Vec::<PathBuf>::new());
    }

    #[test]
    fn keys_that_name_programs_are_not_allowed() {
        for k in [
            "core.fsmonitor",
            "core.hookspath",
            "core.sshcommand",
            "core.pager",
            "core.editor",
            "include.path",
            "includeif.gitdir:/x/.path",
            "submodule.a.update",
            "filter.lfs.process",
            "diff.x.textconv",
            "alias.st",
            "credential.helper",
            "remote.origin.uploadpack",
            "remote.origin.receivepack",
            "uploadpack.packobjectshook",
        ] {
            assert!(!config_key_allowed(k), "{k}");
        }
        for k in [
            "core.repositoryformatversion",
            "core.bare",
            "core.worktree",
            "remote.origin.url",
            "remote.origin.fetch",
            "branch.main.merge",
            "submodule.libs/a.url",
            "submodule.a.active",
            "extensions.objectformat",
            "user.email",
        ] {
            assert!(config_key_allowed(k), "{k}");
        }
        // A subsection where none belongs, or none where one does.
        assert!(!config_key_allowed("core.x.bare"));
        assert!(!config_key_allowed("remote.url"));
    }

    #[test]
    fn list_and_stage_outputs_parse() {
        let list = b"core.bare\nfalse\0remote.origin.url\nhttps://x/y\0core.fsmonitor\nrm -rf ~\0";
        assert_eq!(
            keys_of_list(list),
            ["core.bare", "remote.origin.url", "core.fsmonitor"]
        );
        let stage = b"100644 aa 0\tsrc/a b.rs\x00160000 bb 0\tlibs/sub\x00120000 cc 0\tl\x00";
        assert_eq!(gitlinks_of_stage(stage), [PathBuf::from("libs/sub")]);
    }

    #[test]
    fn pointers_resolve_relative_to_their_directory() {
        let p = Path::new("/w/sub/.git");
        assert_eq!(
            pointer_target(p, "gitdir: ../.git/modules/sub\n"),
            Some(PathBuf::from("/w/sub/../.git/modules/sub"))
        );
        assert_eq!(
            pointer_target(p, "gitdir: /elsewhere"),
            Some(PathBuf::from("/elsewhere"))
        );
        assert_eq!(pointer_target(p, "nonsense"), None);
    }
}
