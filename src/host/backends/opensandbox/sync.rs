//! Workspace sync between the host and the sandbox's copy of it.
//!
//! Up (before every command): one tar archive of the workspace — minus
//! deny-read paths, `.gitignore`d files and files over the size cap —
//! uploaded with `POST /files/upload`, then unpacked with `tar -x` through
//! `POST /command`. The first upload of a sandbox empties the remote
//! workdir first; later ones carry only files whose hash differs from what
//! the sandbox is known to hold, and remove files deleted locally since
//! the last upload (edits made on the host between commands, e.g. by the
//! agent's own file tools, reach the sandbox). The archive is built in
//! memory and bounded by `max_upload_bytes`.
//!
//! Back (after each command, except in `read-only`): a remote manifest
//! (`find -type f` + `sha256sum`, one line per file) is compared with the
//! baseline (the hashes of what the sandbox last had); new and changed
//! files are downloaded one by one with `GET /files/download` and written
//! through the [`WriteGuard`]; files that disappeared remotely are deleted
//! locally through the same guard. Only regular files travel back: remote
//! symlinks, empty directories, permission changes other than the
//! executable bit, and paths the manifest cannot express (a newline or
//! backslash in the name) are not synced.

use super::guard::WriteGuard;
use crate::policy::ResolvedPolicy;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the sandbox holds, as we last saw it: relative path → sha256 hex.
pub type Baseline = BTreeMap<String, String>;

/// The upload archive and what went into it.
#[derive(Debug, Default)]
pub struct UploadArchive {
    pub tar: Vec<u8>,
    /// Hashes of every regular file the walk accepted (in the archive or
    /// already identical remotely).
    pub hashes: Baseline,
    /// Regular files in the archive.
    pub files: usize,
    /// Paths left out, with why (over the size cap, deny-read, unreadable).
    pub skipped: Vec<(PathBuf, String)>,
}

/// Whether `p` is (or is under) a deny-read path or its symlink target.
fn denied(resolved: &ResolvedPolicy, p: &Path) -> bool {
    resolved
        .deny_read
        .iter()
        .any(|e| p.starts_with(&e.path) || e.target.as_deref().is_some_and(|t| p.starts_with(t)))
}

/// Walk the workspace (gitignore-aware, symlinks not followed) and build
/// the archive; files whose hash equals `known` (what the sandbox holds)
/// are left out.
pub fn build_upload(
    resolved: &ResolvedPolicy,
    max_file: u64,
    max_total: u64,
    known: Option<&Baseline>,
) -> Result<UploadArchive, String> {
    let ws = &resolved.workspace;
    let mut out = UploadArchive::default();
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let walker = ignore::WalkBuilder::new(ws)
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_global(false)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .build();
    let mut total = 0u64;
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                out.skipped.push((PathBuf::new(), format!("walk: {e}")));
                continue;
            }
        };
        let path = entry.path();
        if path == ws.as_path() {
            continue;
        }
        let Ok(rel) = path.strip_prefix(ws) else {
            continue;
        };
        if denied(resolved, path) {
            out.skipped.push((rel.to_path_buf(), "deny-read".into()));
            continue;
        }
        let Some(ft) = entry.file_type() else {
            continue;
        };
        let append = if ft.is_dir() {
            builder.append_dir(rel, path)
        } else if ft.is_symlink() {
            builder.append_path_with_name(path, rel)
        } else if ft.is_file() {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if size > max_file {
                out.skipped.push((
                    rel.to_path_buf(),
                    format!("{size} bytes is over the {max_file}-byte cap"),
                ));
                continue;
            }
            let bytes = match std::fs::read(path) {
                Ok(b) => b,
                Err(e) => {
                    out.skipped
                        .push((rel.to_path_buf(), format!("unreadable: {e}")));
                    continue;
                }
            };
            let key = rel_key(rel);
            let hash = sha256_hex(&bytes);
            let same = known.is_some_and(|k| k.get(&key) == Some(&hash));
            out.hashes.insert(key, hash);
            if same {
                continue;
            }
            total += bytes.len() as u64;
            if total > max_total {
                return Err(format!(
                    "the workspace upload exceeds max_upload_bytes ({max_total}); add build output to .gitignore or raise the cap"
                ));
            }
            out.files += 1;
            let meta = entry
                .metadata()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let mut header = tar::Header::new_gnu();
            header.set_metadata(&meta);
            header.set_size(bytes.len() as u64);
            builder.append_data(&mut header, rel, bytes.as_slice())
        } else {
            out.skipped.push((
                rel.to_path_buf(),
                "not a regular file, directory or symlink".into(),
            ));
            continue;
        };
        append.map_err(|e| format!("archiving {}: {e}", rel.display()))?;
    }
    out.tar = builder
        .into_inner()
        .map_err(|e| format!("finishing the archive: {e}"))?;
    Ok(out)
}

/// `./a/b` and `a/b` both become `a/b` (the manifest's and the walk's spelling).
pub fn rel_key(rel: &Path) -> String {
    let s = rel.to_string_lossy().replace('\\', "/");
    s.strip_prefix("./").unwrap_or(&s).to_string()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// POSIX single-quote a string for the remote `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Remote script: (on the first upload) empty the workdir, unpack the
/// archive, remove files deleted locally, remove the archive.
pub fn extract_command(archive: &str, workdir: &str, fresh: bool, removed: &[String]) -> String {
    let (a, w) = (sh_quote(archive), sh_quote(workdir));
    let reset = if fresh {
        format!("rm -rf {w} && ")
    } else {
        String::new()
    };
    let mut script = format!("{reset}mkdir -p {w} && tar -xf {a} -C {w}");
    if !removed.is_empty() {
        let list: Vec<String> = removed
            .iter()
            .map(|r| sh_quote(&format!("./{r}")))
            .collect();
        script.push_str(&format!(" && (cd {w} && rm -f -- {})", list.join(" ")));
    }
    format!("{script}; rc=$?; rm -f {a}; exit $rc")
}

/// Remote script: one `sha256  ./path` line per regular file, then a
/// marker, then the executable files.
pub fn manifest_command(workdir: &str) -> String {
    let w = sh_quote(workdir);
    format!(
        "cd {w} && find . -type f -exec sha256sum {{}} + && echo {EXEC_MARKER} && find . -type f -perm -u+x -print"
    )
}

const EXEC_MARKER: &str = "--codewhale-exec--";

/// A parsed remote manifest.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub files: BTreeMap<String, String>,
    pub executable: BTreeSet<String>,
    /// Lines that could not be read (names with newlines or backslashes).
    pub unreadable: Vec<String>,
}

pub fn parse_manifest(lines: &[String]) -> Manifest {
    let mut m = Manifest::default();
    let mut in_exec = false;
    for line in lines {
        if line == EXEC_MARKER {
            in_exec = true;
            continue;
        }
        if in_exec {
            m.executable.insert(rel_key(Path::new(line)));
            continue;
        }
        // sha256sum escapes odd names with a leading backslash.
        let parsed = line
            .split_once("  ")
            .filter(|(h, _)| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        match parsed {
            Some((h, p)) => {
                m.files
                    .insert(rel_key(Path::new(p)), h.to_ascii_lowercase());
            }
            None => m.unreadable.push(line.clone()),
        }
    }
    m
}

/// What to do after one command.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BackPlan {
    pub write: Vec<String>,
    pub delete: Vec<String>,
    /// Refused by the write guard: (path, reason).
    pub refused: Vec<(String, String)>,
    /// Not synced for a non-security reason (gitignored).
    pub skipped: Vec<(String, String)>,
}

/// Compare `remote` with `baseline` and sort each difference.
pub fn plan_back(
    baseline: &Baseline,
    remote: &Manifest,
    guard: &WriteGuard,
    ignored: &dyn Fn(&str) -> bool,
) -> BackPlan {
    let mut plan = BackPlan::default();
    for (path, hash) in &remote.files {
        if baseline.get(path) == Some(hash) {
            continue;
        }
        if let Err(why) = guard.check(path) {
            plan.refused.push((path.clone(), why));
        } else if ignored(path) {
            plan.skipped.push((path.clone(), "gitignored".into()));
        } else {
            plan.write.push(path.clone());
        }
    }
    for path in baseline.keys() {
        if remote.files.contains_key(path) {
            continue;
        }
        match guard.check(path) {
            Err(why) => plan
                .refused
                .push((path.clone(), format!("deletion refused: {why}"))),
            Ok(_) => plan.delete.push(path.clone()),
        }
    }
    plan
}

/// Matcher for the workspace's root `.gitignore` and `.git/info/exclude`.
pub fn root_gitignore(workspace: &Path) -> ignore::gitignore::Gitignore {
    let mut b = ignore::gitignore::GitignoreBuilder::new(workspace);
    for f in [".gitignore", ".git/info/exclude"] {
        let p = workspace.join(f);
        if p.is_file() {
            // A malformed line only drops that line; the rest still applies.
            let _ = b.add(p);
        }
    }
    b.build()
        .unwrap_or_else(|_| ignore::gitignore::Gitignore::empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "sync_tests.rs"]
mod tests;
