//! The first snapshot of a repository at the speed of the user's own git.
//!
//! Without help, a store's first snapshot hashes and writes every file of
//! the workspace into the side repository, although the user's `.git`
//! already holds every committed blob and its index already knows each
//! file's stat data and blob id. So, when the store has no index yet and
//! the workspace is the top of a git worktree, the side index starts as a
//! copy of the user's index (the file's mtime kept, so git's racy-entry
//! rule sees what the user's git saw): `git add -A` then hashes only the
//! files that changed since the user's git looked at them, and
//! `write-tree --missing-ok` names blobs the side store does not hold yet.
//!
//! `write-tree` reuses every directory whose cache-tree entry in the
//! copied index is still valid, but only when that tree object is in the
//! side store: without it, it would write all ~1,100 trees of a 100k-file
//! tree as loose objects (0.7 s here, more than `git status`). So those
//! trees (the copy's cache-tree, read with `gix-index` as its entries are)
//! are copied in, as one pack, while the look runs (`add -u` and
//! `ls-files -o` read no tree; `write-tree` waits for the pack) — the
//! trees only, those the user's store holds, and none that contains (at
//! any depth) an entry the store leaves out (`.env`, deny-read, ignored).
//! The pack is made only once the seed is used, so an unused seed never
//! leaves one (a run that dies during the look may). That pack stays: it is where
//! the snapshot's reused trees live; the few `write-tree` writes
//! (directories changed since the user's git wrote its cache-tree) are
//! loose objects, as every later snapshot's are. (A tree of that pack the
//! snapshot does not reach — a directory changed since — stays there
//! unreachable: a tree the user's index named, never one naming a
//! left-out entry.)
//!
//! The seeded entries' blobs are copied from the user's object store into
//! one pack of the side store (`pack-objects` on their ids, with the
//! user's objects as an alternate for that read-only command only, through
//! `GIT_ALTERNATE_OBJECT_DIRECTORIES`: git reuses the compressed data,
//! nothing is hashed again). The copy starts once the look on the seeded
//! index is taken and runs in the background, in a process of its own
//! that outlives the run ([`super::blobcopy`]), settled before anything
//! reads those blobs (a restore, the store's `gc`) and redone at the next
//! open when it was cut short. So every snapshot comes to hold all its
//! objects itself: a later `git gc --prune=now` in the user's repository
//! (after an amend or a rebase) cannot break a restore, and the user's
//! history and its secrets stay out of the side store. (Besides
//! the unreached trees above, the one kind of object copied that no
//! snapshot may reach: the user's staged version of a file changed or
//! deleted since their git last looked — never one the store leaves out.)
//! No alternates file is written: `git add` freshens (touches) an object
//! it finds in an alternate store, which would write the user's `.git`.
//!
//! Byte-exactness: the side repository stores raw bytes (`* -text
//! -filter`). A blob id from the user's index is the raw content only
//! when the user's git converted nothing, so the seed is used only when
//! no conversion can apply: no attributes anywhere (`.gitattributes` in
//! the index, `info/attributes`, `core.attributesFile`, the per-user and
//! system attribute files) and `core.autocrlf` unset or false. Entries
//! git would not look at again (assume-unchanged, skip-worktree) also
//! turn the seed down, and so does anything unexpected (a split index, a
//! blob the user's store lacks): the snapshot is then taken as before,
//! hashing everything.

use super::git::Git;
use super::options::UserDirs;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The user's repository, when the workspace is the top of its worktree.
#[derive(Debug)]
pub struct UserRepo {
    /// The worktree's git dir (its `index` lives there).
    gitdir: PathBuf,
    /// The common dir (`objects`, `config`, `info`).
    common: PathBuf,
}

impl UserRepo {
    /// `workspace/.git` as a directory or a `gitdir:` file; `None` when
    /// the workspace is not the top of a worktree.
    pub fn find(workspace: &Path) -> Option<UserRepo> {
        let dotgit = workspace.join(".git");
        let meta = std::fs::symlink_metadata(&dotgit).ok()?;
        let gitdir = if meta.is_dir() {
            dotgit
        } else if meta.is_file() {
            let text = std::fs::read_to_string(&dotgit).ok()?;
            let rel = text.lines().next()?.strip_prefix("gitdir:")?.trim();
            crate::policy::resolve::normalize(&workspace.join(rel))
        } else {
            return None;
        };
        let common = match std::fs::read_to_string(gitdir.join("commondir")) {
            Ok(c) => crate::policy::resolve::normalize(&gitdir.join(c.trim())),
            Err(_) => gitdir.clone(),
        };
        Some(UserRepo { gitdir, common })
    }

    /// The worktree's index file.
    pub fn index(&self) -> PathBuf {
        self.gitdir.join("index")
    }
}

/// Why the seed was not used (said in `docs/UNDO.md`; kept for tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoSeed {
    NotARepositoryTop,
    NoIndex,
    Conversions(String),
    BorrowedObjects,
    Index(String),
    UnusualEntries,
    Copy(String),
}

/// Attribute files git reads besides the worktree's `.gitattributes`.
fn attribute_files(repo: &UserRepo, user: &UserDirs) -> Vec<PathBuf> {
    let mut v = vec![
        repo.common.join("info/attributes"),
        PathBuf::from("/etc/gitattributes"),
    ];
    if let Some(dir) = user.git_config_dir() {
        v.push(dir.join("attributes"));
    }
    v
}

/// What the user's git would convert: `Err(reason)` when anything may (or
/// when the repository does not use SHA-1 object ids).
/// Reads the user's configuration as their git does (system, global,
/// repository), running no program it names.
fn no_conversions(bin: &Path, repo: &UserRepo, user: &UserDirs) -> Result<(), String> {
    if let Some(f) = attribute_files(repo, user).into_iter().find(|f| f.exists()) {
        return Err(format!("attributes in {}", f.display()));
    }
    let out = user_git(
        bin,
        repo,
        user,
        &[
            "config",
            "-z",
            "--get-regexp",
            r"^(core\.(autocrlf|attributesfile)|extensions\.objectformat)$",
        ],
    )
    .map_err(|e| format!("git config: {e}"))?;
    // Exit 1: none of the keys is set.
    if out.status.code() == Some(1) {
        return Ok(());
    }
    if !out.status.success() {
        return Err(format!("git config exited {}", out.status));
    }
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let text = String::from_utf8_lossy(rec);
        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
        // The side repository uses SHA-1 ids: another format's index
        // cannot be read as its own.
        let off = (key == "core.autocrlf" && value.eq_ignore_ascii_case("false"))
            || (key == "extensions.objectformat" && value.eq_ignore_ascii_case("sha1"));
        if !off {
            return Err(format!("{key} = {value}"));
        }
    }
    Ok(())
}

/// A read-only git command on the user's repository: its git dir named,
/// `GIT_*` scrubbed, the user's home and configuration directory given,
/// no stdin, stderr dropped.
fn user_git(
    bin: &Path,
    repo: &UserRepo,
    user: &UserDirs,
    args: &[&str],
) -> std::io::Result<std::process::Output> {
    let mut c = Command::new(bin);
    super::git::scrub_git_env(&mut c);
    user.apply(&mut c);
    c.arg("--git-dir")
        .arg(&repo.gitdir)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
}

/// Copy `from` to `to` keeping its mtime (git's racy-entry rule compares
/// each entry's mtime with the index file's).
fn copy_with_mtime(from: &Path, to: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(from).map_err(|e| format!("{}: {e}", from.display()))?;
    let mtime = meta
        .modified()
        .map_err(|e| format!("{}: {e}", from.display()))?;
    let tmp = to.with_extension("seed");
    std::fs::copy(from, &tmp).map_err(|e| format!("{}: {e}", from.display()))?;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.set_modified(mtime)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))
}

/// Positive forms of the store's `:(exclude…)` pathspecs.
fn positive(excludes: &[String]) -> Vec<String> {
    excludes
        .iter()
        .filter_map(|e| {
            let (magic, path) = e.strip_prefix(":(")?.split_once(')')?;
            let magic: Vec<&str> = magic.split(',').filter(|m| *m != "exclude").collect();
            Some(format!(":({}){path}", magic.join(",")))
        })
        .collect()
}

/// The copy's entries, each checked: `Err` for what turns the seed down
/// (assume-unchanged, skip-worktree — also every entry of a sparse index,
/// whose directory entries are skip-worktree too — and attributes in the
/// tree).
fn entries_of(copied: &gix_index::File) -> Result<Vec<Entry<'_>>, NoSeed> {
    use gix_index::entry::{Flags, Mode};
    let mut entries: Vec<Entry> = Vec::with_capacity(copied.entries().len());
    for e in copied.entries() {
        let path: &[u8] = e.path(copied);
        if e.flags
            .intersects(Flags::ASSUME_VALID | Flags::SKIP_WORKTREE)
            || e.mode == Mode::DIR
        {
            return Err(NoSeed::UnusualEntries);
        }
        if path == b".gitattributes" || path.ends_with(b"/.gitattributes") {
            return Err(NoSeed::Conversions(".gitattributes in the index".into()));
        }
        let oid = <super::present::Oid>::try_from(e.id.as_slice())
            .map_err(|_| NoSeed::Index("an unexpected index entry".into()))?;
        if path.is_empty() {
            return Err(NoSeed::Index("an index entry without a path".into()));
        }
        entries.push(Entry {
            gitlink: e.mode == Mode::COMMIT,
            oid,
            path,
        });
    }
    Ok(entries)
}

/// Which of the copy's blobs (every entry's but a gitlink's) and valid
/// cache-tree trees the user's store lacks, sorted: one merge with its
/// pack indexes (see `present`). Checked before the entries the store
/// drops are known: a blob only a dropped entry names counts only if
/// kept ([`seed_inner`]). `Err` when an entry turns the seed down or a
/// pack index is not version 2.
fn lacking(objects: &Path, copied: &gix_index::File) -> Result<Vec<super::present::Oid>, NoSeed> {
    let mut ids: Vec<super::present::Oid> = entries_of(copied)?
        .iter()
        .filter(|e| !e.gitlink)
        .map(|e| e.oid)
        .collect();
    if let Some(tree) = copied.tree() {
        ids.extend(index_trees(tree, &[]));
    }
    super::present::sort_ids(&mut ids);
    super::present::missing(objects, &ids).ok_or_else(|| {
        NoSeed::Copy(format!(
            "a pack index in {} is not version 2",
            objects.display()
        ))
    })
}

/// The copied index, read with `gix-index`: ~10 ms at 100k entries
/// against ~100 ms for `git ls-files -s -v` and the parse of its 7 MB of
/// text. An index it cannot read (a split index, whose shared part stays
/// in the user's `.git`; a torn file) turns the seed down. Its checksum is
/// not verified here: the look's `git add -u` reads this same copy and
/// verifies it, and a copy git refuses there abandons the seed.
fn read_index(index: &Path) -> Result<gix_index::File, NoSeed> {
    gix_index::File::at(
        index,
        gix_index::hash::Kind::Sha1,
        true,
        gix_index::decode::Options::default(),
    )
    .map_err(|e| NoSeed::Index(format!("{}: {e}", index.display())))
}

/// Whether `objects` belongs to a partial clone (a `.promisor` file
/// beside its packs).
fn has_promisor_pack(objects: &Path) -> bool {
    std::fs::read_dir(objects.join("pack")).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().as_encoded_bytes().ends_with(b".promisor"))
    })
}

/// The excludes file git reads for the side repository's commands when
/// no `core.excludesFile` is set (they run without a global config):
/// `$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`, of the
/// user's directories the side repository's commands are given.
fn per_user_excludes(user: &UserDirs) -> Option<PathBuf> {
    let f = user.git_config_dir()?.join("ignore");
    f.is_file().then_some(f)
}

/// A side index seeded and checked, its blobs not copied yet: what
/// [`prepare`] leaves, for [`Prepared::copy`] once the store may copy
/// (the workspace passed the size limits and the look was taken).
#[derive(Debug)]
pub struct Prepared {
    objects: PathBuf,
    /// The blob ids to copy, one a line.
    list: Vec<u8>,
    /// The copy's clean cache-tree trees the user's store holds, one id a
    /// line ([`Prepared::copy_trees`]).
    trees: Vec<u8>,
}

impl Prepared {
    /// Copy the seeded index's clean cache-tree trees into one pack of the
    /// side store, beside the look (`add -u` and `ls-files -o` read no
    /// tree; only `write-tree` needs them, and waits): the pack's name, or
    /// `None` when there was none to copy or the copy failed — only a
    /// shortcut, `write-tree` then writes those trees itself. The pack
    /// stays, as the home of the trees the snapshot's `write-tree` reuses;
    /// [`drop_pack`] it only when the seed is abandoned.
    pub fn copy_trees(&self, git: &Git) -> Option<String> {
        if self.trees.is_empty() {
            return None;
        }
        pack_into_store(&git.with_alternate(&self.objects), &self.trees).ok()
    }

    /// Copy the seeded entries' blobs into the store at `store_dir`, once
    /// the look on the seeded index is taken: in the background when it
    /// can be ([`super::blobcopy`]; the caller holds the store lock), else
    /// here. `Err` (only from a copy here: a blob the user's store lacks,
    /// say) means the seed must be abandoned.
    pub fn copy(&self, git: &Git, store_dir: &Path) -> Result<(), NoSeed> {
        if self.list.is_empty()
            || super::blobcopy::start(git, store_dir, &self.objects, &self.list).is_ok()
        {
            return Ok(());
        }
        copy_blobs(git, &self.objects, &self.list)
    }

    /// Not used after all: the side index goes (its trees are copied only
    /// once it is used).
    pub fn abandon(self, git: &Git) {
        let _ = std::fs::remove_file(git.index());
    }
}

/// Seed the side index (see the module docs). `Ok` when the side index
/// is now a checked copy of the user's; `Err` leaves no side index behind.
pub fn prepare(
    git: &Git,
    bin: &Path,
    workspace: &Path,
    excludes: &[String],
) -> Result<Prepared, NoSeed> {
    let index = git.index();
    let r = seed_inner(git, bin, workspace, index, excludes);
    if r.is_err() {
        let _ = std::fs::remove_file(index);
    }
    r
}

fn seed_inner(
    git: &Git,
    bin: &Path,
    workspace: &Path,
    index: &Path,
    excludes: &[String],
) -> Result<Prepared, NoSeed> {
    let repo = UserRepo::find(workspace).ok_or(NoSeed::NotARepositoryTop)?;
    let user_index = repo.index();
    if !user_index.is_file() {
        return Err(NoSeed::NoIndex);
    }
    let objects = repo.common.join("objects");
    // Objects kept elsewhere: another store's, or a promisor remote's (a
    // partial clone's blobs may be missing until fetched).
    if objects.join("info/alternates").exists() || has_promisor_pack(&objects) {
        return Err(NoSeed::BorrowedObjects);
    }
    let user = git.user_dirs();
    no_conversions(bin, &repo, user).map_err(NoSeed::Conversions)?;
    copy_with_mtime(&user_index, index).map_err(NoSeed::Index)?;
    let index_err = |e: super::SnapshotError| NoSeed::Index(e.to_string());

    // Entries git would not look at again, and attributes in the tree,
    // read from the copy with `gix-index`; beside it, the tracked files the
    // workspace's ignore rules leave out (git's answer: it reads the index
    // only).
    let mut ignored_args = vec![
        OsString::from("ls-files"),
        "-z".into(),
        "-c".into(),
        "-i".into(),
        "--exclude-per-directory=.gitignore".into(),
    ];
    if let Some(f) = per_user_excludes(user) {
        let mut a = OsString::from("--exclude-from=");
        a.push(f);
        ignored_args.push(a);
    }
    // Beside it, on this thread: the copy read, its entries checked, and
    // which of their blobs and cache-tree trees the user's store lacks
    // (one pass over its pack indexes for both).
    let (checked, ignored) = std::thread::scope(|s| {
        let ignored = s.spawn(|| git.run(&ignored_args));
        let checked = read_index(index).and_then(|copied| {
            let gone = lacking(&objects, &copied)?;
            // Still beside `ls-files -i`: what is dropped by name.
            let by_name = dropped_by_name(&entries_of(&copied)?, excludes);
            Ok((copied, gone, by_name))
        });
        let ignored = match ignored.join() {
            Ok(r) => r.map_err(index_err),
            Err(_) => Err(NoSeed::Index("the `ls-files -i` thread panicked".into())),
        };
        (checked, ignored)
    });
    let ((copied, gone, by_name), ignored) = (checked?, ignored?);
    let entries = entries_of(&copied)?;
    // What the store never snapshots but the user's index holds: ignored
    // by the store's rules (git's answer for the workspace's `.gitignore`
    // files and the per-user excludes file: 0.03 s at 100k files; by name
    // for the built-in ones), secrets, deny-read paths
    // ([`dropped_by_name`]; git's answer to the pathspecs when an
    // exclusion is not a literal path).
    let mut dropped: Vec<&[u8]> = Vec::new();
    dropped.extend(ignored.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()));
    let secrets_by_git;
    match &by_name {
        Some(paths) => dropped.extend(paths.iter().map(Vec::as_slice)),
        None => {
            let mut args: Vec<String> = ["ls-files", "-z", "-c", "--"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(positive(excludes));
            secrets_by_git = git.run(&args).map_err(index_err)?;
            dropped.extend(
                secrets_by_git
                    .stdout
                    .split(|b| *b == 0)
                    .filter(|r| !r.is_empty()),
            );
            dropped.extend(builtin_dropped(&entries));
        }
    }
    dropped.sort_unstable();
    dropped.dedup();
    let mut drop: Vec<u8> = Vec::new();
    for p in &dropped {
        drop.extend_from_slice(b":(literal)");
        drop.extend_from_slice(p);
        drop.push(0);
    }
    // Most repositories have none: the index is then left as copied.
    if !drop.is_empty() {
        git.run_stdin(
            &[
                "rm",
                "--cached",
                "-f",
                "-q",
                "--ignore-unmatch",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &drop,
        )
        .map_err(index_err)?;
    }
    // The blobs of what stays (a gitlink names a commit of another
    // repository: nothing to copy), copied from here on beside the rest.
    // (`dropped` is sorted; `pack-objects` takes an id given twice once.)
    let kept: Vec<&Entry> = entries
        .iter()
        .filter(|e| !e.gitlink && dropped.binary_search(&e.path).is_err())
        .collect();
    let mut list = Vec::with_capacity(kept.len() * 41);
    for e in &kept {
        let mut hex = [0u8; 40];
        // Infallible: 40 bytes hold 20 bytes' hex.
        let _ = hex::encode_to_slice(e.oid, &mut hex);
        list.extend_from_slice(&hex);
        list.push(b'\n');
    }
    // The copy runs after the snapshot is committed: every blob must be
    // there to copy, or the files are taken the long way (see `present`).
    let lost: Vec<&Entry> = kept
        .iter()
        .copied()
        .filter(|e| gone.binary_search(&e.oid).is_ok())
        .collect();
    if let Some(first) = lost.first() {
        return Err(NoSeed::Copy(format!(
            "{} blob(s) your index names are not in {} (the first: {})",
            lost.len(),
            objects.display(),
            hex::encode(first.oid)
        )));
    }
    // Copied beside the look ([`Prepared::copy_trees`]).
    let trees = copied
        .tree()
        .map(|tree| index_tree_list(tree, &dropped, &gone))
        .unwrap_or_default();
    Ok(Prepared {
        objects,
        list,
        trees,
    })
}

/// The entries the side repository's built-in excludes (`info/exclude`)
/// leave out, matched by name over the listing, because git's `ls-files
/// -i` spends ~0.2 s at 100k files on one directory pattern
/// (`layout::builtin_excluded`, never less than git's answer; more only
/// where a `.gitignore` negation re-includes, and the seeded look's
/// `ls-files -o` then finds that file untracked and not ignored). The
/// listing is sorted, so a directory's files come in a row: its path is
/// judged once, each file's own name every time.
fn builtin_dropped<'a>(entries: &[Entry<'a>]) -> Vec<&'a [u8]> {
    let mut dropped = Vec::new();
    let mut dir_judged: (&[u8], bool) = (b"", false);
    for e in entries {
        let (dir, name) = match e.path.iter().rposition(|b| *b == b'/') {
            Some(i) => (&e.path[..i], &e.path[i + 1..]),
            None => (&b""[..], e.path),
        };
        if dir != dir_judged.0 {
            dir_judged = (dir, super::layout::builtin_excluded(dir));
        }
        if dir_judged.1 || super::layout::builtin_excluded(name) {
            dropped.push(e.path);
        }
    }
    dropped
}

/// What the store leaves out of the user's index by name: the built-in
/// excludes ([`builtin_dropped`]) and, when every exclusion is a literal
/// path, secrets and deny-read paths (`layout::is_secret_path` is the
/// `.env` pathspecs' rule, as in the journal's index way). `None` when an
/// exclusion is not a literal path: git answers for those (and the
/// built-in ones are matched then). Owned, and few: it is computed beside
/// `ls-files -i`, before the index it borrows from is handed on.
fn dropped_by_name(entries: &[Entry<'_>], excludes: &[String]) -> Option<Vec<Vec<u8>>> {
    let left = super::treebuild::LeftOut::new(excludes).ok()?;
    let mut dropped: Vec<Vec<u8>> = builtin_dropped(entries)
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect();
    dropped.extend(
        entries
            .iter()
            .map(|e| e.path)
            .filter(|p| left.contains_git(p))
            .map(<[u8]>::to_vec),
    );
    Some(dropped)
}

/// One entry of the copied index.
#[derive(Debug)]
struct Entry<'a> {
    /// Mode 160000: it names a commit of another repository.
    gitlink: bool,
    oid: super::present::Oid,
    path: &'a [u8],
}

/// The trees of the copied index's cache-tree (git's `TREE` extension)
/// that `write-tree` may reuse and the side store may hold: every valid
/// one (it has an entry count) whose directory holds no left-out path.
/// A tree above a left-out path names it; those directories are taken
/// out of the side index, which invalidates them there anyway.
fn index_trees(tree: &gix_index::extension::Tree, left_out: &[&[u8]]) -> Vec<super::present::Oid> {
    // Every directory above a left-out path (and the root, "").
    let mut tainted: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for p in left_out {
        tainted.insert(b"");
        for (i, b) in p.iter().enumerate() {
            if *b == b'/' {
                tainted.insert(&p[..i]);
            }
        }
    }
    let mut ids = Vec::new();
    // (node, its directory's path): the root has no name.
    let mut todo: Vec<(&gix_index::extension::Tree, Vec<u8>)> = vec![(tree, Vec::new())];
    while let Some((node, path)) = todo.pop() {
        let id = node.id.as_slice();
        if node.num_entries.is_some() && !node.id.is_null() && !tainted.contains(&path[..]) {
            if let Ok(id) = <super::present::Oid>::try_from(id) {
                ids.push(id);
            }
        }
        for child in &node.children {
            let mut p = path.clone();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(&child.name);
            todo.push((child, p));
        }
    }
    ids
}

/// The copied index's clean cache-tree trees (see [`index_trees`]) that
/// the user's store holds (`gone`: the ids it lacks, sorted, from
/// [`lacking`]), one id a line: what [`Prepared::copy_trees`] packs. A
/// tree the user's store lacks (a cache-tree git filled without writing
/// its objects) is left for `write-tree` to write.
fn index_tree_list(
    tree: &gix_index::extension::Tree,
    left_out: &[&[u8]],
    gone: &[super::present::Oid],
) -> Vec<u8> {
    let ids = index_trees(tree, left_out);
    let mut list = Vec::with_capacity(ids.len() * 41);
    for id in ids.iter().filter(|id| gone.binary_search(id).is_err()) {
        list.extend_from_slice(hex::encode(id).as_bytes());
        list.push(b'\n');
    }
    list
}

/// Delete the side store's pack `name` (its `.pack`, `.idx` and any
/// `.rev`); best effort: a leftover pack holds only trees.
pub fn drop_pack(git: &Git, name: &str) {
    let dir = git.git_dir().join("objects/pack");
    for ext in ["idx", "pack", "rev"] {
        let _ = std::fs::remove_file(dir.join(format!("pack-{name}.{ext}")));
    }
}

/// `git pack-objects -q --window=0` into a new pack of the side store,
/// fed the object ids `input` (one a line): the new pack's name.
fn pack_into_store(git: &Git, input: &[u8]) -> Result<String, NoSeed> {
    let args = super::blobcopy::pack_args(git);
    let name = git
        .run_stdin(&args, input)
        .map_err(|e| NoSeed::Copy(e.to_string()))?
        .line();
    if super::git::is_sha1_id(name.as_bytes()) {
        Ok(name)
    } else {
        Err(NoSeed::Copy(format!("pack-objects printed {name:?}")))
    }
}

/// Copy the blobs `list` names (one id a line) from the user's object
/// directory `objects` into one new pack of the side store: git reuses
/// the compressed data, nothing is hashed again.
fn copy_blobs(git: &Git, objects: &Path, list: &[u8]) -> Result<(), NoSeed> {
    if list.is_empty() {
        return Ok(());
    }
    pack_into_store(&git.with_alternate(objects), list).map(drop)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use gix_index::extension::Tree;

    fn node(name: &str, id: u8, valid: bool, children: Vec<Tree>) -> Tree {
        Tree {
            name: name.as_bytes().into(),
            id: gix_index::hash::ObjectId::from_bytes_or_panic(&[id; 20]),
            num_entries: valid.then_some(1),
            children,
        }
    }

    #[test]
    fn cache_trees_above_a_left_out_path_or_invalid_are_not_copied() {
        // root(f) { src(a) { conf(b), lib(d) }, docs(c), old(e, invalid) }
        let tree = node(
            "",
            0xff,
            true,
            vec![
                node(
                    "src",
                    0xaa,
                    true,
                    vec![
                        node("conf", 0xbb, true, vec![]),
                        node("lib", 0xdd, true, vec![]),
                    ],
                ),
                node("docs", 0xcc, true, vec![]),
                node("old", 0xee, false, vec![]),
            ],
        );
        let sorted = |mut v: Vec<[u8; 20]>| {
            v.sort();
            v
        };
        // `src/conf/.env` left out: the root, src and src/conf name it.
        let ids = sorted(index_trees(&tree, &[&b"src/conf/.env"[..]]));
        assert_eq!(ids, vec![[0xcc; 20], [0xdd; 20]]);
        // Nothing left out: every valid tree; never the invalid one.
        let ids = sorted(index_trees(&tree, &[]));
        assert_eq!(
            ids,
            vec![[0xaa; 20], [0xbb; 20], [0xcc; 20], [0xdd; 20], [0xff; 20]]
        );
        // A name that is only a prefix of a tainted one stays clean; a
        // nested path is matched whole (`src/lib`, not `lib`).
        let ids = sorted(index_trees(&tree, &[&b"srcx/.env"[..], &b"lib/x"[..]]));
        assert_eq!(ids, vec![[0xaa; 20], [0xbb; 20], [0xcc; 20], [0xdd; 20]]);
    }

    #[test]
    fn exclusions_turn_positive() {
        assert_eq!(
            positive(&[
                ":(exclude,glob)**/.env".into(),
                ":(exclude,literal)a b/secret".into()
            ]),
            vec![
                ":(glob)**/.env".to_string(),
                ":(literal)a b/secret".to_string()
            ]
        );
    }
}
