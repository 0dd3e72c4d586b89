//! A journal snapshot's tree built from the last look's tree and the
//! changed paths, without the side index (issue 29).
//!
//! Why: every git command that reads the side index parses all of it —
//! 100,000 entries, ~10 MB, 15–25 ms — even to add one path, and a journal
//! snapshot through the index needs two or three of them (`rm --cached`,
//! `add`, `write-tree`). Building the new tree instead touches only the
//! trees on the changed paths: one `cat-file --batch` reads them, one
//! `check-ignore --no-index` asks about new files, one `hash-object -w`
//! stores the changed files, one `mktree --batch` writes the new trees.
//! None of them reads the index, so the cost follows the change, not the
//! workspace.
//!
//! The result is the tree the index way ([`super::store`]'s
//! `add_paths_and_write_tree`) gives for the same paths, by construction:
//! a gone path or a (re)made directory leaves the tree whole (`rm --cached
//! -r`); a file is taken when it is in the tree already (tracked: `add`
//! updates it whatever the ignore rules say) or when git would not ignore
//! it (untracked); `.env` paths and deny-read paths are never taken.
//! `tests/it/snapshot_treebuild.rs` checks that equality on random changes.
//!
//! Whatever this module is not sure to do the same way declines, with the
//! reason, and the caller takes the index way: a path under a symlinked
//! directory, a nested repository or a submodule entry, a FIFO or socket,
//! a name with a newline, a side repository whose `core.filemode`,
//! `core.symlinks` or `core.ignorecase` is not git's Linux default, and any
//! git failure (an unreadable file, a file gone between the look and the
//! hash).
//!
//! The side index is then behind the tree: the store records which tree
//! the last look took and how ([`LastLook`]), and brings the index up to
//! it (`read-tree -m`, which keeps the stat data of unchanged entries)
//! before anything that reads the index again.

use super::error::SnapshotError;
use super::git::Git;
use super::layout;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// Why the tree builder did not build: the caller takes the index way.
pub type Decline = String;

/// A path in git's form: components joined by `/`, bytes as on disk.
type GitPath = Vec<u8>;

const MODE_TREE: u32 = 0o040000;
const MODE_FILE: u32 = 0o100644;
const MODE_EXEC: u32 = 0o100755;
const MODE_SYMLINK: u32 = 0o120000;
const MODE_GITLINK: u32 = 0o160000;

/// One entry of a tree object. `oid` is empty for a tree this build
/// creates and has not written yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    mode: u32,
    oid: String,
}

impl Entry {
    fn is_tree(&self) -> bool {
        self.mode == MODE_TREE
    }
    fn kind(&self) -> &'static str {
        match self.mode {
            MODE_TREE => "tree",
            MODE_GITLINK => "commit",
            _ => "blob",
        }
    }
}

/// A file to take as it is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Regular { exec: bool },
    Symlink,
}

impl FileKind {
    fn mode(self) -> u32 {
        match self {
            FileKind::Regular { exec: true } => MODE_EXEC,
            FileKind::Regular { exec: false } => MODE_FILE,
            FileKind::Symlink => MODE_SYMLINK,
        }
    }
}

/// What the changed paths mean for the tree (the index way's `gone` and
/// `here` lists).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Edits {
    /// Entries (a file or a whole subtree) that go: gone from the
    /// workspace.
    pub remove: Vec<GitPath>,
    /// Files and symlinks to take as they are now, `.env` paths left out.
    pub files: Vec<(GitPath, FileKind)>,
    /// Directories listed again (their files are in `files`): what the
    /// tree holds below them and is no longer there goes too.
    pub relisted: Vec<GitPath>,
}

impl Edits {
    fn named(&self) -> usize {
        self.remove.len() + self.files.len() + self.relisted.len()
    }
}

/// The tree the store's last look took, and whether the side index holds
/// it (a full look, the index way, a restore) or is behind it (built
/// here). Kept in the store directory, so every process sharing the store
/// and its keeper continues from the same tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastLook {
    pub tree: String,
    pub index_holds_it: bool,
    /// The side index file's identity ([`index_identity`]) when it was
    /// left holding `tree`: while it is the same, so is its tree (git
    /// writes an index by renaming a new file over it), and a full look
    /// whose `add -A` wrote nothing needs no `write-tree`.
    pub index_file: Option<String>,
}

/// Inode, modification time (ns) and size of the file at `path`.
pub fn index_identity(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    let mtime = m
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0u64;
    Some(format!("{ino}-{mtime}-{}", m.len()))
}

impl LastLook {
    const FILE: &'static str = "last-look";

    /// The record in `store_dir`, if there is a readable one.
    pub fn load(store_dir: &Path) -> Option<LastLook> {
        let text = std::fs::read_to_string(store_dir.join(Self::FILE)).ok()?;
        let mut fields = text.trim_end().split(' ');
        let (tree, how, file) = (fields.next()?, fields.next()?, fields.next());
        let index_holds_it = match how {
            "index" => true,
            "built" if file.is_none() => false,
            _ => return None,
        };
        (super::git::is_object_id(tree.as_bytes()) && fields.next().is_none()).then(|| LastLook {
            tree: tree.to_string(),
            index_holds_it,
            index_file: file.map(str::to_string),
        })
    }

    /// Write the record (whole or not at all).
    pub fn save(&self, store_dir: &Path) -> Result<(), SnapshotError> {
        let how = match (self.index_holds_it, &self.index_file) {
            (true, Some(id)) => format!("index {id}"),
            (true, None) => "index".to_string(),
            (false, _) => "built".to_string(),
        };
        let path = store_dir.join(Self::FILE);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{} {how}\n", self.tree))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| SnapshotError::io("cannot write", &path, e))
    }

    /// Forget it (the index and the last tree are not known to agree).
    pub fn clear(store_dir: &Path) {
        let _ = std::fs::remove_file(store_dir.join(Self::FILE));
    }
}

/// Build the tree of the workspace from `base` (the last look's tree) and
/// the journal's `paths`: `Ok(tree)`, or why not (take the index way).
/// `missing_ok`: the trees may name blobs the store does not hold yet
/// (the seed's copy is not settled: [`super::blobcopy`]).
pub fn build(
    git: &Git,
    workspace: &Path,
    base: &str,
    paths: &[PathBuf],
    excludes: &[String],
    max_named: usize,
    missing_ok: bool,
) -> Result<String, Decline> {
    side_config_is_default(git.git_dir())?;
    let literal = literal_excludes(excludes)?;
    let mut edits = classify(workspace, paths)?;
    let left_out = |p: &[u8]| literal.iter().any(|e| under(p, e));
    if !edits.relisted.is_empty() {
        // As `add -A` of the directory: a tracked file still there stays
        // tracked (ignored or not); one no longer there goes.
        let here: BTreeSet<&[u8]> = edits.files.iter().map(|(p, _)| p.as_slice()).collect();
        let gone: Vec<GitPath> = tracked_below(git, base, &edits.relisted)?
            .into_iter()
            .filter(|k| !here.contains(k.as_slice()) && !left_out(k))
            .filter(|k| !layout::is_secret_path(&from_git(k)))
            .collect();
        edits.remove.extend(gone);
    }
    if edits.named() > max_named {
        return Err(format!(
            "more than {max_named} paths changed: a full look is cheaper"
        ));
    }
    let mut model = Model::default();
    model.load(git, base, &edits)?;
    for p in &edits.remove {
        model.remove(p);
    }
    let mut take = Vec::new();
    let mut untracked = Vec::new();
    for (p, kind) in &edits.files {
        if left_out(p) {
            continue;
        }
        match model.tracked(p)? {
            true => take.push((p.clone(), *kind)),
            false => untracked.push((p.clone(), *kind)),
        }
    }
    let ignored = ignored(git, untracked.iter().map(|(p, _)| p.as_slice()))?;
    take.extend(untracked.into_iter().filter(|(p, _)| !ignored.contains(p)));
    let oids = hash(git, workspace, &take)?;
    for ((p, kind), oid) in take.iter().zip(oids) {
        model.set(
            p,
            Entry {
                mode: kind.mode(),
                oid,
            },
        )?;
    }
    let mut writer = MkTree::start(git, missing_ok)?;
    let tree = model.write(base, &mut writer)?;
    writer.finish()?;
    Ok(tree)
}

/// The side repository's config, as `git init` wrote it, must leave git's
/// defaults for modes, symlinks and case alone: this module takes
/// executable bits and symlinks from `lstat` and compares names as bytes.
fn side_config_is_default(git_dir: &Path) -> Result<(), Decline> {
    let text = std::fs::read_to_string(git_dir.join("config"))
        .map_err(|e| format!("cannot read the side repository's config ({e})"))?;
    let squeezed: String = text
        .to_ascii_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    for bad in ["filemode=false", "symlinks=false", "ignorecase=true"] {
        if squeezed.contains(bad) {
            return Err(format!("the side repository has core.{bad}"));
        }
    }
    Ok(())
}

/// The deny-read exclusions as git paths; the `.env` globs are applied
/// when the paths are classified.
pub fn literal_excludes(excludes: &[String]) -> Result<Vec<GitPath>, Decline> {
    let mut out = Vec::new();
    for e in excludes {
        if let Some(rel) = e.strip_prefix(":(exclude,literal)") {
            out.push(rel.as_bytes().to_vec());
        } else if !layout::SECRET_PATHSPECS.contains(&e.as_str()) {
            return Err(format!("an exclusion this build does not apply: {e}"));
        }
    }
    Ok(out)
}

/// What the store leaves out, judged by name: `.env` paths
/// (`layout::is_secret_path`, the rule of the `.env` pathspecs) and the
/// deny-read paths. Only when every exclusion is a literal path
/// ([`literal_excludes`]); otherwise only git can judge them.
#[derive(Debug)]
pub struct LeftOut(Vec<GitPath>);

impl LeftOut {
    pub fn new(excludes: &[String]) -> Result<LeftOut, Decline> {
        literal_excludes(excludes).map(LeftOut)
    }

    /// Whether `rel` (relative to the workspace) is left out.
    pub fn contains(&self, rel: &Path) -> bool {
        let bytes = rel.as_os_str().as_encoded_bytes();
        layout::is_secret_path(rel) || self.0.iter().any(|d| under(bytes, d))
    }

    /// [`contains`](Self::contains) for a path as git prints it
    /// (`/`-separated, normalized), without making a `Path` of it: the
    /// seed asks this of every one of 100,000 index entries.
    pub fn contains_git(&self, p: &[u8]) -> bool {
        p.split(|b| *b == b'/').any(layout::is_secret_name) || self.0.iter().any(|d| under(p, d))
    }
}

/// Whether `p` is `dir` or below it (a literal pathspec's match).
pub fn under(p: &[u8], dir: &[u8]) -> bool {
    p == dir || (p.starts_with(dir) && p.get(dir.len()) == Some(&b'/'))
}

/// `rel` in git's form, or why it cannot be named that way.
fn git_path(rel: &Path) -> Result<GitPath, Decline> {
    let mut out = Vec::new();
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return Err(format!("{} is not a plain relative path", rel.display()));
        };
        let name = name.as_encoded_bytes();
        if name == b".git" || name.contains(&b'\n') || name.contains(&b'/') {
            return Err(format!("{} has a name git treats apart", rel.display()));
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(name);
    }
    if out.is_empty() {
        return Err("the workspace root itself changed".into());
    }
    Ok(out)
}

/// Every file, symlink and submodule entry of `base` at or below the
/// `dirs` (one `ls-tree -r`; literal pathspecs). A submodule declines.
fn tracked_below(git: &Git, base: &str, dirs: &[GitPath]) -> Result<Vec<GitPath>, Decline> {
    let mut args: Vec<std::ffi::OsString> =
        ["--literal-pathspecs", "ls-tree", "-r", "-z", base, "--"]
            .iter()
            .map(Into::into)
            .collect();
    args.extend(dirs.iter().map(|d| from_git(d).into_os_string()));
    let out = git
        .run(&args)
        .map_err(|e| format!("listing the last tree failed: {e}"))?;
    let mut known = Vec::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let tab = rec
            .iter()
            .position(|b| *b == b'\t')
            .ok_or_else(|| "unexpected git ls-tree output".to_string())?;
        if rec.starts_with(b"160000 ") {
            return Err(format!(
                "a submodule at {}",
                String::from_utf8_lossy(&rec[tab + 1..])
            ));
        }
        known.push(rec[tab + 1..].to_vec());
    }
    Ok(known)
}

/// The parent directory and the name of a git path (root: empty).
fn split(p: &[u8]) -> (&[u8], &[u8]) {
    match p.iter().rposition(|b| *b == b'/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => (&[], p),
    }
}

/// Every proper ancestor of `p`, the root (empty) first.
fn ancestors(p: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::once(&p[..0]).chain(
        p.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(move |(i, _)| &p[..i]),
    )
}

/// The journal's paths as edits, as the index way reads the workspace:
/// gone (or below a file now) → removed; a directory → removed, and every
/// file below it taken; a file or symlink → taken. `.env` paths are never
/// taken.
pub fn classify(workspace: &Path, paths: &[PathBuf]) -> Result<Edits, Decline> {
    let mut edits = Edits::default();
    let mut symlinked: HashMap<PathBuf, bool> = HashMap::new();
    for rel in paths {
        let p = git_path(rel)?;
        // A path below a symlink: `lstat` would follow it, git refuses it.
        let mut dir = PathBuf::new();
        for c in rel.parent().into_iter().flat_map(Path::components) {
            dir.push(c);
            let is_link = *symlinked.entry(dir.clone()).or_insert_with(|| {
                std::fs::symlink_metadata(workspace.join(&dir))
                    .is_ok_and(|m| m.file_type().is_symlink())
            });
            if is_link {
                return Err(format!("{} is below a symlink", rel.display()));
            }
        }
        match std::fs::symlink_metadata(workspace.join(rel)) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                edits.remove.push(p)
            }
            Err(e) => return Err(format!("cannot look at {} ({e})", rel.display())),
            Ok(m) if m.is_dir() => {
                edits.relisted.push(p);
                files_below(workspace, rel, &mut edits.files)?;
            }
            Ok(m) => {
                let kind = file_kind(&m).ok_or_else(|| {
                    format!(
                        "{} is neither a file, a symlink nor a directory",
                        rel.display()
                    )
                })?;
                if !layout::is_secret_path(rel) {
                    edits.files.push((p, kind));
                }
            }
        }
    }
    Ok(edits)
}

#[cfg(unix)]
fn file_kind(m: &std::fs::Metadata) -> Option<FileKind> {
    use std::os::unix::fs::PermissionsExt;
    if m.file_type().is_symlink() {
        Some(FileKind::Symlink)
    } else if m.is_file() {
        // git's rule (`ce_mode_from_stat`): the owner's execute bit.
        Some(FileKind::Regular {
            exec: m.permissions().mode() & 0o100 != 0,
        })
    } else {
        None
    }
}

#[cfg(not(unix))]
fn file_kind(_m: &std::fs::Metadata) -> Option<FileKind> {
    // No journal here, so never called: decline rather than guess modes.
    None
}

/// Every file and symlink below the directory `rel`, as the index way's
/// walk finds them (directories git never snapshots are not entered), `.env`
/// paths left out; declines at a nested repository.
fn files_below(
    workspace: &Path,
    rel: &Path,
    out: &mut Vec<(GitPath, FileKind)>,
) -> Result<(), Decline> {
    let walk = walkdir::WalkDir::new(workspace.join(rel))
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir()
                    && e.file_name()
                        .to_str()
                        .is_some_and(|n| n != ".git" && super::guard::skipped_dir(n)))
        });
    for e in walk {
        let e = match e {
            Ok(e) => e,
            Err(e)
                if e.io_error().map(std::io::Error::kind) == Some(std::io::ErrorKind::NotFound) =>
            {
                return Err("a file went away while the tree was built".into())
            }
            Err(e) => return Err(format!("cannot list below {} ({e})", rel.display())),
        };
        if e.file_name() == ".git" {
            return Err(format!(
                "a nested repository at {}",
                e.path().parent().unwrap_or(e.path()).display()
            ));
        }
        if e.file_type().is_dir() {
            continue;
        }
        let Ok(r) = e.path().strip_prefix(workspace) else {
            continue;
        };
        if layout::is_secret_path(r) {
            continue;
        }
        let m = e
            .metadata()
            .map_err(|err| format!("cannot look at {} ({err})", r.display()))?;
        let kind = file_kind(&m).ok_or_else(|| {
            format!(
                "{} is neither a file, a symlink nor a directory",
                r.display()
            )
        })?;
        out.push((git_path(r)?, kind));
    }
    Ok(())
}

/// The part of the last tree this build reads and changes: the
/// directories on the changed paths, by path.
#[derive(Debug, Default)]
struct Model {
    /// A directory's entries by name; empty for one that is not a tree in
    /// the base (new, or a file there).
    dirs: HashMap<GitPath, BTreeMap<Vec<u8>, Entry>>,
    /// Directories whose tree must be written again.
    dirty: BTreeSet<GitPath>,
}

impl Model {
    /// Read every directory on the way to each edited path from `base`
    /// (one `cat-file --batch`).
    fn load(&mut self, git: &Git, base: &str, edits: &Edits) -> Result<(), Decline> {
        let mut wanted: BTreeSet<&[u8]> = BTreeSet::new();
        for p in edits
            .remove
            .iter()
            .chain(edits.files.iter().map(|(p, _)| p))
        {
            wanted.extend(ancestors(p));
        }
        let wanted: Vec<&[u8]> = wanted.into_iter().collect();
        let mut input = Vec::new();
        for d in &wanted {
            input.extend_from_slice(base.as_bytes());
            if !d.is_empty() {
                input.push(b':');
                input.extend_from_slice(d);
            }
            input.push(b'\n');
        }
        let out = git
            .run_stdin(&["cat-file", "--batch"], &input)
            .map_err(|e| format!("reading the last tree failed: {e}"))?;
        let listed = parse_batch(&out.stdout, wanted.len())?;
        for (d, raw) in wanted.into_iter().zip(listed) {
            let entries = match raw {
                Some(raw) => parse_tree(raw, base.len() / 2)?,
                None => BTreeMap::new(),
            };
            self.dirs.insert(d.to_vec(), entries);
        }
        Ok(())
    }

    fn entries(&mut self, dir: &[u8]) -> &mut BTreeMap<Vec<u8>, Entry> {
        self.dirs.entry(dir.to_vec()).or_default()
    }

    /// Empty every loaded directory at or below `p` (its entry is gone or
    /// is a file now).
    fn forget_below(&mut self, p: &[u8]) {
        for (d, entries) in self.dirs.iter_mut() {
            if under(d, p) {
                entries.clear();
            }
        }
    }

    /// `rm --cached -r p`.
    fn remove(&mut self, p: &[u8]) {
        let (dir, name) = split(p);
        if self.entries(dir).remove(name).is_some() {
            self.mark(dir);
        }
        self.forget_below(p);
    }

    /// Whether the file `p` is in the tree now (the index way: tracked,
    /// so `add` takes it whatever the ignore rules say).
    fn tracked(&mut self, p: &[u8]) -> Result<bool, Decline> {
        for a in ancestors(p).skip(1) {
            let (dir, name) = split(a);
            match self.entries(dir).get(name) {
                Some(e) if e.mode == MODE_GITLINK => {
                    return Err(format!("{} is in a submodule", String::from_utf8_lossy(p)))
                }
                Some(e) if e.is_tree() => {}
                _ => return Ok(false),
            }
        }
        let (dir, name) = split(p);
        match self.entries(dir).get(name) {
            Some(e) if e.mode == MODE_GITLINK => {
                Err(format!("{} is a submodule", String::from_utf8_lossy(p)))
            }
            Some(e) => Ok(!e.is_tree()),
            None => Ok(false),
        }
    }

    /// `add p`: the file's entry, with every directory above it a tree
    /// (a file in the way goes, as git replaces it).
    fn set(&mut self, p: &[u8], entry: Entry) -> Result<(), Decline> {
        for a in ancestors(p).skip(1) {
            let (dir, name) = split(a);
            let here = self.entries(dir).get(name).cloned();
            match here {
                Some(e) if e.is_tree() => {}
                Some(e) if e.mode == MODE_GITLINK => {
                    return Err(format!("{} is in a submodule", String::from_utf8_lossy(p)))
                }
                _ => {
                    self.entries(dir).insert(
                        name.to_vec(),
                        Entry {
                            mode: MODE_TREE,
                            oid: String::new(),
                        },
                    );
                    self.forget_below(a);
                }
            }
        }
        let (dir, name) = split(p);
        if self.entries(dir).get(name).is_some_and(Entry::is_tree) {
            self.forget_below(p);
        }
        self.entries(dir).insert(name.to_vec(), entry);
        self.mark(dir);
        Ok(())
    }

    /// `dir` and every directory above it must be written again.
    fn mark(&mut self, dir: &[u8]) {
        self.dirty.insert(dir.to_vec());
        for a in ancestors(dir) {
            self.dirty.insert(a.to_vec());
        }
    }

    /// Write the changed directories, deepest first, into their parents;
    /// the root's tree (`base` when nothing changed). A directory left
    /// empty is dropped from its parent: git stores no empty trees.
    fn write(&mut self, base: &str, writer: &mut dyn WriteTree) -> Result<String, Decline> {
        if self.dirty.is_empty() {
            return Ok(base.to_string());
        }
        let mut order: Vec<GitPath> = self.dirty.iter().cloned().collect();
        let depth = |d: &GitPath| {
            if d.is_empty() {
                0
            } else {
                1 + d.iter().filter(|b| **b == b'/').count()
            }
        };
        order.sort_by_key(|d| std::cmp::Reverse(depth(d)));
        let mut root = None;
        for d in order {
            let entries = self.dirs.remove(&d).unwrap_or_default();
            if entries.values().any(|e| e.oid.is_empty()) {
                return Err(format!(
                    "internal: an unwritten tree below {}",
                    String::from_utf8_lossy(&d)
                ));
            }
            let written = if entries.is_empty() && !d.is_empty() {
                None
            } else {
                Some(writer.write(&entries)?)
            };
            if d.is_empty() {
                root = written;
                continue;
            }
            let (parent, name) = split(&d);
            let parent_entries = self.entries(parent);
            if !parent_entries.get(name).is_some_and(Entry::is_tree) {
                // Removed, or a file there now: not part of the tree.
                continue;
            }
            match written {
                Some(oid) => {
                    parent_entries.insert(
                        name.to_vec(),
                        Entry {
                            mode: MODE_TREE,
                            oid,
                        },
                    );
                }
                None => {
                    parent_entries.remove(name);
                }
            }
        }
        root.ok_or_else(|| "internal: the root tree was not written".to_string())
    }
}

/// Writes one tree object (its entries by name) and names it.
trait WriteTree {
    fn write(&mut self, entries: &BTreeMap<Vec<u8>, Entry>) -> Result<String, Decline>;
}

/// One `git mktree --batch -z`, fed a tree at a time (it prints each
/// tree's id as soon as the tree's empty record ends it).
struct MkTree {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl MkTree {
    fn start(git: &Git, missing_ok: bool) -> Result<MkTree, Decline> {
        let args: &[&str] = if missing_ok {
            &["mktree", "--batch", "-z", "--missing"]
        } else {
            &["mktree", "--batch", "-z"]
        };
        let mut child = git
            .spawn(args)
            .map_err(|e| format!("cannot start git mktree: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| "git mktree has no stdout".to_string())?;
        Ok(MkTree {
            child,
            stdout: BufReader::new(stdout),
        })
    }

    /// Close its input and check how it ended.
    fn finish(mut self) -> Result<(), Decline> {
        drop(self.child.stdin.take());
        let status = self.child.wait().map_err(|e| format!("git mktree: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("git mktree exited {status}"))
        }
    }
}

impl Drop for MkTree {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl WriteTree for MkTree {
    fn write(&mut self, entries: &BTreeMap<Vec<u8>, Entry>) -> Result<String, Decline> {
        let mut input = Vec::new();
        for (name, e) in entries {
            input.extend_from_slice(format!("{:06o} {} {}\t", e.mode, e.kind(), e.oid).as_bytes());
            input.extend_from_slice(name);
            input.push(0);
        }
        // The empty record that ends this tree.
        input.push(0);
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| "git mktree's input is closed".to_string())?;
        stdin
            .write_all(&input)
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to git mktree: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("reading from git mktree: {e}"))?;
        let oid = line.trim().to_string();
        if super::git::is_object_id(oid.as_bytes()) {
            Ok(oid)
        } else {
            Err(format!("git mktree answered {line:?}"))
        }
    }
}

/// Split `cat-file --batch` output into `n` answers: a tree's raw
/// content, or `None` (missing, or not a tree).
fn parse_batch(out: &[u8], n: usize) -> Result<Vec<Option<&[u8]>>, Decline> {
    let bad = |why: &str| format!("unexpected git cat-file output: {why}");
    let mut rest = out;
    let mut answers = Vec::with_capacity(n);
    for _ in 0..n {
        let nl = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| bad("a header without a newline"))?;
        let header = std::str::from_utf8(&rest[..nl]).map_err(|_| bad("a header not UTF-8"))?;
        rest = &rest[nl + 1..];
        if header.ends_with(" missing") || header.ends_with(" ambiguous") {
            answers.push(None);
            continue;
        }
        let mut f = header.split(' ');
        let (Some(_), Some(kind), Some(size), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad(header));
        };
        let size: usize = size.parse().map_err(|_| bad(header))?;
        if rest.len() < size + 1 || rest[size] != b'\n' {
            return Err(bad("a short object"));
        }
        answers.push((kind == "tree").then_some(&rest[..size]));
        rest = &rest[size + 1..];
    }
    if !rest.is_empty() {
        return Err(bad("more answers than questions"));
    }
    Ok(answers)
}

/// A raw tree object's entries (`<octal mode> <name>\0<raw id>`…).
fn parse_tree(raw: &[u8], id_len: usize) -> Result<BTreeMap<Vec<u8>, Entry>, Decline> {
    let bad = || "a tree object this build cannot read".to_string();
    let mut out = BTreeMap::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let sp = rest.iter().position(|b| *b == b' ').ok_or_else(bad)?;
        let mode = std::str::from_utf8(&rest[..sp]).map_err(|_| bad())?;
        let mode = u32::from_str_radix(mode, 8).map_err(|_| bad())?;
        rest = &rest[sp + 1..];
        let nul = rest.iter().position(|b| *b == 0).ok_or_else(bad)?;
        let name = rest[..nul].to_vec();
        rest = &rest[nul + 1..];
        if rest.len() < id_len {
            return Err(bad());
        }
        let oid = hex::encode(&rest[..id_len]);
        rest = &rest[id_len..];
        out.insert(name, Entry { mode, oid });
    }
    Ok(out)
}

/// Which of the untracked `paths` git ignores (`check-ignore --no-index`:
/// the same rules `add` applies — `.gitignore` files, the side repo's
/// `info/exclude`, a directory ignored above — without reading the index).
fn ignored<'a>(
    git: &Git,
    paths: impl Iterator<Item = &'a [u8]>,
) -> Result<BTreeSet<GitPath>, Decline> {
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p);
        input.push(0);
    }
    if input.is_empty() {
        return Ok(BTreeSet::new());
    }
    // Exit 1: none ignored; a `fatal:` is an error.
    let out = git
        .run_stdin_tolerant(&["check-ignore", "--no-index", "-z", "--stdin"], &input)
        .map_err(|e| format!("git check-ignore failed: {e}"))?;
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// Store every file of `take` as a blob (`hash-object -w`, no filters:
/// the side repo's attributes switch them all off anyway); their ids in
/// order. A symlink's blob is its target, written to a scratch file first.
fn hash(git: &Git, workspace: &Path, take: &[(GitPath, FileKind)]) -> Result<Vec<String>, Decline> {
    if take.is_empty() {
        return Ok(Vec::new());
    }
    let scratch = tempfile::tempdir_in(git.git_dir())
        .map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let mut input = Vec::new();
    for (i, (p, kind)) in take.iter().enumerate() {
        let on_disk = workspace.join(from_git(p));
        let name = match kind {
            FileKind::Regular { .. } => on_disk,
            FileKind::Symlink => {
                let target = std::fs::read_link(&on_disk)
                    .map_err(|e| format!("cannot read the link {} ({e})", on_disk.display()))?;
                let f = scratch.path().join(i.to_string());
                std::fs::write(&f, target.as_os_str().as_encoded_bytes())
                    .map_err(|e| format!("cannot write {} ({e})", f.display()))?;
                f
            }
        };
        // Absolute, so never read as a C-quoted name (a leading `"`).
        let bytes = name.as_os_str().as_encoded_bytes();
        if bytes.contains(&b'\n') || !name.is_absolute() {
            return Err(format!(
                "{} cannot be named to git hash-object",
                name.display()
            ));
        }
        input.extend_from_slice(bytes);
        input.push(b'\n');
    }
    let out = git
        .run_stdin(
            &["hash-object", "-w", "--no-filters", "--stdin-paths"],
            &input,
        )
        .map_err(|e| format!("git hash-object failed: {e}"))?;
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    if ids.len() != take.len() {
        return Err(format!(
            "git hash-object named {} of {} files",
            ids.len(),
            take.len()
        ));
    }
    Ok(ids)
}

/// A git path (`/`-separated bytes, as git prints it) as a relative path
/// on this system.
pub fn from_git(p: &[u8]) -> PathBuf {
    p.split(|b| *b == b'/').map(os_name).collect()
}

#[cfg(unix)]
fn os_name(b: &[u8]) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b).to_os_string()
}

#[cfg(not(unix))]
fn os_name(b: &[u8]) -> std::ffi::OsString {
    String::from_utf8_lossy(b).into_owned().into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The byte form judges every path as the `Path` form does.
        #[test]
        fn left_out_by_bytes_is_left_out_by_path(
            names in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "src", ".env", ".env.local", ".envrc", "x.env", "creds", "creds2", "node_modules",
                ]),
                1..5,
            ),
        ) {
            let left = LeftOut::new(&[
                layout::SECRET_PATHSPECS[0].to_string(),
                ":(exclude,literal)creds".to_string(),
                ":(exclude,literal)src/creds".to_string(),
            ])
            .unwrap();
            let git = names.join("/");
            proptest::prop_assert_eq!(
                left.contains_git(git.as_bytes()),
                left.contains(&from_git(git.as_bytes())),
                "{}", git
            );
        }
    }

    /// Writes trees as text, so a test can read what was written.
    #[derive(Default)]
    struct Texts(Vec<String>);

    impl WriteTree for Texts {
        fn write(&mut self, entries: &BTreeMap<Vec<u8>, Entry>) -> Result<String, Decline> {
            let text: Vec<String> = entries
                .iter()
                .map(|(n, e)| format!("{:o}:{}:{}", e.mode, String::from_utf8_lossy(n), e.oid))
                .collect();
            self.0.push(text.join(","));
            Ok(format!("{:040x}", self.0.len()))
        }
    }

    fn blob(oid: char) -> Entry {
        Entry {
            mode: MODE_FILE,
            oid: oid.to_string().repeat(40),
        }
    }

    fn tree(oid: char) -> Entry {
        Entry {
            mode: MODE_TREE,
            oid: oid.to_string().repeat(40),
        }
    }

    fn model(dirs: &[(&str, &[(&str, Entry)])]) -> Model {
        let mut m = Model::default();
        for (d, entries) in dirs {
            m.dirs.insert(
                d.as_bytes().to_vec(),
                entries
                    .iter()
                    .map(|(n, e)| (n.as_bytes().to_vec(), e.clone()))
                    .collect(),
            );
        }
        m
    }

    #[test]
    fn paths_and_their_parents() {
        assert_eq!(split(b"a/b/c"), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(b"c"), (&b""[..], &b"c"[..]));
        let a: Vec<&[u8]> = ancestors(b"a/b/c").collect();
        assert_eq!(a, vec![&b""[..], b"a", b"a/b"]);
        assert!(under(b"a/b", b"a") && under(b"a", b"a") && !under(b"ab", b"a"));
        assert_eq!(git_path(Path::new("a/b.txt")).unwrap(), b"a/b.txt");
        assert!(git_path(Path::new("a/.git/config")).is_err());
        assert!(git_path(Path::new("../x")).is_err());
    }

    #[test]
    fn nothing_changed_is_the_base() {
        let mut m = model(&[("", &[("a", blob('1'))])]);
        let mut w = Texts::default();
        assert_eq!(
            m.write("b".repeat(40).as_str(), &mut w).unwrap(),
            "b".repeat(40)
        );
        assert!(w.0.is_empty());
    }

    #[test]
    fn a_changed_file_rewrites_its_directories_only() {
        let mut m = model(&[
            ("", &[("src", tree('s')), ("README", blob('r'))]),
            ("src", &[("main.rs", blob('m')), ("lib.rs", blob('l'))]),
        ]);
        assert!(m.tracked(b"src/main.rs").unwrap());
        assert!(!m.tracked(b"src/new.rs").unwrap());
        m.set(b"src/main.rs", blob('n')).unwrap();
        let mut w = Texts::default();
        let root = m.write("0".repeat(40).as_str(), &mut w).unwrap();
        assert_eq!(w.0.len(), 2);
        assert!(w.0[0].contains(&format!("100644:main.rs:{}", "n".repeat(40))));
        assert!(w.0[0].contains(&format!("100644:lib.rs:{}", "l".repeat(40))));
        assert!(w.0[1].contains(&format!("40000:src:{:040x}", 1)));
        assert!(w.0[1].contains(&format!("100644:README:{}", "r".repeat(40))));
        assert_eq!(root, format!("{:040x}", 2));
    }

    #[test]
    fn a_directory_emptied_leaves_its_parent() {
        let mut m = model(&[
            ("", &[("a", tree('a')), ("x", blob('x'))]),
            ("a", &[("b", tree('b'))]),
            ("a/b", &[("only", blob('o'))]),
        ]);
        m.remove(b"a/b/only");
        let mut w = Texts::default();
        m.write("0".repeat(40).as_str(), &mut w).unwrap();
        // a/b and a are empty: only the root is written, without `a`.
        assert_eq!(w.0, vec![format!("100644:x:{}", "x".repeat(40))]);
    }

    #[test]
    fn a_file_in_the_way_of_a_directory_goes_and_back() {
        // `a` was a file; now `a/f` is one.
        let mut m = model(&[("", &[("a", blob('a'))]), ("a", &[])]);
        assert!(!m.tracked(b"a/f").unwrap());
        m.set(b"a/f", blob('f')).unwrap();
        let mut w = Texts::default();
        m.write("0".repeat(40).as_str(), &mut w).unwrap();
        assert_eq!(w.0[0], format!("100644:f:{}", "f".repeat(40)));
        assert_eq!(w.0[1], format!("40000:a:{:040x}", 1));
        // And a directory replaced by a file.
        let mut m = model(&[("", &[("d", tree('d'))]), ("d", &[("g", blob('g'))])]);
        assert!(!m.tracked(b"d").unwrap());
        m.set(b"d", blob('e')).unwrap();
        let mut w = Texts::default();
        m.write("0".repeat(40).as_str(), &mut w).unwrap();
        assert_eq!(w.0, vec![format!("100644:d:{}", "e".repeat(40))]);
    }

    #[test]
    fn a_removed_directory_made_again_starts_empty() {
        let mut m = model(&[
            ("", &[("d", tree('d'))]),
            ("d", &[("old", blob('o')), ("keep", blob('k'))]),
        ]);
        m.remove(b"d");
        assert!(!m.tracked(b"d/keep").unwrap());
        m.set(b"d/keep", blob('k')).unwrap();
        let mut w = Texts::default();
        m.write("0".repeat(40).as_str(), &mut w).unwrap();
        assert_eq!(w.0[0], format!("100644:keep:{}", "k".repeat(40)));
    }

    #[test]
    fn a_submodule_on_the_way_declines() {
        let gitlink = Entry {
            mode: MODE_GITLINK,
            oid: "c".repeat(40),
        };
        let mut m = model(&[("", &[("sub", gitlink)]), ("sub", &[])]);
        assert!(m.tracked(b"sub/x").is_err());
        assert!(m.set(b"sub/x", blob('x')).is_err());
        assert!(m.tracked(b"sub").is_err());
    }

    #[test]
    fn batch_answers_and_raw_trees_parse() {
        let id = [0xabu8; 20];
        let mut raw = b"100644 a.txt\0".to_vec();
        raw.extend(id);
        raw.extend(b"40000 dir\0");
        raw.extend(id);
        let mut out = format!("{} tree {}\n", "1".repeat(40), raw.len()).into_bytes();
        out.extend(&raw);
        out.extend(b"\nxyz:nope missing\n");
        out.extend(format!("{} blob 2\nhi\n", "2".repeat(40)).as_bytes());
        let answers = parse_batch(&out, 3).unwrap();
        assert_eq!(answers[0], Some(&raw[..]));
        assert_eq!(answers[1], None);
        assert_eq!(answers[2], None);
        let t = parse_tree(&raw, 20).unwrap();
        assert_eq!(t[&b"a.txt"[..]].mode, MODE_FILE);
        assert_eq!(
            t[&b"dir"[..]],
            Entry {
                mode: MODE_TREE,
                oid: "ab".repeat(20)
            }
        );
        assert!(parse_batch(&out, 2).is_err());
        assert!(parse_tree(&raw[..raw.len() - 1], 20).is_err());
    }

    #[test]
    fn last_look_round_trips_and_refuses_junk() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(LastLook::load(d.path()), None);
        for (index_holds_it, index_file) in [
            (false, None),
            (true, None),
            (true, Some("12-1700000000000000000-4096".to_string())),
        ] {
            let l = LastLook {
                tree: "a".repeat(40),
                index_holds_it,
                index_file,
            };
            l.save(d.path()).unwrap();
            assert_eq!(LastLook::load(d.path()), Some(l));
        }
        for junk in ["zz built\n", "x", &format!("{} built x\n", "a".repeat(40))] {
            std::fs::write(d.path().join("last-look"), junk).unwrap();
            assert_eq!(LastLook::load(d.path()), None, "{junk}");
        }
        LastLook::clear(d.path());
        assert_eq!(LastLook::load(d.path()), None);
    }

    #[test]
    fn deny_read_exclusions_are_read_and_others_declined() {
        let ex = vec![
            ":(exclude,glob)**/.env".to_string(),
            ":(exclude,literal)secret/key.pem".to_string(),
        ];
        assert_eq!(
            literal_excludes(&ex).unwrap(),
            vec![b"secret/key.pem".to_vec()]
        );
        assert!(literal_excludes(&[":(exclude)x".to_string()]).is_err());
    }
}
