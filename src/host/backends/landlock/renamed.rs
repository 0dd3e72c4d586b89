//! After a `carve+opener` run: deny-read files the command renamed inside
//! their directory are renamed back.
//!
//! In the fallback Landlock grants the carved directory's entries, so the
//! command may rename `.env` there (`mv .env e2`: same directory, no right
//! gained; the opener keeps the content unreadable by inode). The rename
//! itself is a change to the user's file, so when the command's tree is
//! gone each such file is looked up by its inode in its own directory (one
//! listing; never a tree walk) and renamed back with `RENAME_NOREPLACE`:
//! nothing is ever overwritten or deleted. What cannot be put back (moved
//! elsewhere, or a new file now at the name) is reported as `failed` with
//! the reason, both files left where they are. The `mask` strategy needs
//! none of this (a mount point cannot be renamed).
//!
//! A run whose codewhale is SIGKILLed never gets to its after-run step, so
//! the watched list is also written into the run's integrity directory
//! ([`persist`]) before the command starts; the crash recovery of a dead
//! run ([`recover`]) renames back from those lists exactly as the run
//! would have (a renamed secret would otherwise stay readable under its
//! new name in later runs: the resolver only withholds deny-read names).

use crate::host::enforcement::{Revert, RevertAction};
use crate::policy::resolve::{PathKind, ResolvedPolicy};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One deny-read file inside a writable root, as it was when the run
/// started.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Watched {
    /// The file's path when the run started (symlinks resolved).
    pub path: PathBuf,
    dev: u64,
    ino: u64,
}

/// The deny-read files inside `policy`'s writable roots (symlinks resolved
/// in their directories, as the planner carves them).
pub fn record(policy: &ResolvedPolicy) -> Vec<Watched> {
    policy
        .deny_read
        .iter()
        .filter(|e| e.kind == PathKind::File)
        .filter_map(|e| {
            let real = super::complement::real_location(&e.path);
            let inside = policy
                .writable_roots
                .iter()
                .any(|r| real.starts_with(&r.path) && real != r.path);
            let m = std::fs::symlink_metadata(&real).ok()?;
            (inside && m.is_file()).then(|| Watched {
                path: real,
                dev: m.dev(),
                ino: m.ino(),
            })
        })
        .collect()
}

/// The name of a run's persisted list in its integrity directory.
const PREFIX: &str = "renamed-";

/// Write `watched` into the run's integrity directory `run_dir` for the
/// crash recovery (nothing when empty). The file to drop after the run.
pub fn persist(run_dir: &Path, watched: &[Watched]) -> Result<Option<PathBuf>, String> {
    if watched.is_empty() {
        return Ok(None);
    }
    let name = format!(
        "{PREFIX}{}-{}.json",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let path = run_dir.join(name);
    let bytes = serde_json::to_vec(watched).map_err(|e| e.to_string())?;
    std::fs::write(&path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(Some(path))
}

/// The crash recovery of a dead run in `run_dir`: rename back what each
/// persisted list names, drop the lists; the reverts, marked as an earlier
/// run's.
pub fn recover(run_dir: &Path) -> Vec<Revert> {
    let Ok(rd) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let p = e.path();
        if let Ok(w) = std::fs::read(&p)
            .map_err(|_| ())
            .and_then(|b| serde_json::from_slice::<Vec<Watched>>(&b).map_err(|_| ()))
        {
            out.extend(restore(&w).into_iter().map(|mut r| {
                r.earlier_run = true;
                r
            }));
        }
        let _ = std::fs::remove_file(&p);
    }
    out
}

fn same(m: &std::fs::Metadata, w: &Watched) -> bool {
    m.dev() == w.dev && m.ino() == w.ino
}

/// Put back every watched file the run renamed; one [`Revert`] per file
/// that was not where it started.
pub fn restore(watched: &[Watched]) -> Vec<Revert> {
    watched.iter().filter_map(restore_one).collect()
}

fn revert(w: &Watched, action: RevertAction, why: Option<String>, error: Option<String>) -> Revert {
    Revert {
        path: w.path.clone(),
        action,
        quarantined_to: None,
        error,
        earlier_run: false,
        why,
    }
}

fn restore_one(w: &Watched) -> Option<Revert> {
    let now = std::fs::symlink_metadata(&w.path);
    if now.as_ref().is_ok_and(|m| same(m, w)) {
        return None;
    }
    let dir = w.path.parent()?;
    let found = find_inode(dir, w);
    let occupied = now.is_ok();
    Some(match found {
        Some(other) => match rename_noreplace(&other, &w.path) {
            Ok(()) => revert(
                w,
                RevertAction::MovedBack,
                Some(format!("renamed to {}", other.display())),
                None,
            ),
            Err(e) => revert(
                w,
                RevertAction::Failed,
                Some(format!("renamed to {}", other.display())),
                Some(if occupied {
                    format!(
                        "a new file now has its name; both left as they are (nothing is \
                         overwritten): {e}"
                    )
                } else {
                    format!("renaming it back failed: {e}")
                }),
            ),
        },
        None => revert(
            w,
            RevertAction::Failed,
            None,
            Some(format!(
                "{} during the run and not found in {} (moved elsewhere or removed); nothing \
                 was changed",
                if occupied { "replaced" } else { "renamed" },
                dir.display()
            )),
        ),
    })
}

/// The entry of `dir` that is `w`'s inode (a regular file), if any.
fn find_inode(dir: &Path, w: &Watched) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).ok()?;
        (m.is_file() && same(&m, w)).then_some(p)
    })
}

fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: renameat2 on two NUL-terminated paths we own.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::fs;

    fn watch(p: &Path) -> Watched {
        let m = fs::symlink_metadata(p).unwrap();
        Watched {
            path: p.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    #[test]
    fn a_renamed_file_is_moved_back_and_nothing_is_overwritten() {
        let t = tempfile::tempdir().unwrap();
        let env = t.path().join(".env");
        fs::write(&env, "SECRET").unwrap();
        let w = watch(&env);
        // Control: untouched, nothing to report.
        assert!(restore(std::slice::from_ref(&w)).is_empty());
        // Renamed: moved back.
        fs::rename(&env, t.path().join("e2")).unwrap();
        let r = restore(std::slice::from_ref(&w));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].action, RevertAction::MovedBack, "{r:?}");
        assert_eq!(fs::read_to_string(&env).unwrap(), "SECRET");
        assert!(!t.path().join("e2").exists());
        // Renamed and a new file written at the name: both kept.
        fs::rename(&env, t.path().join("e3")).unwrap();
        fs::write(&env, "NEW").unwrap();
        let r = restore(std::slice::from_ref(&w));
        assert_eq!(r[0].action, RevertAction::Failed, "{r:?}");
        assert_eq!(fs::read_to_string(&env).unwrap(), "NEW");
        assert_eq!(fs::read_to_string(t.path().join("e3")).unwrap(), "SECRET");
        // Moved out of its directory: reported, nothing touched.
        fs::remove_file(&env).unwrap();
        fs::create_dir(t.path().join("sub")).unwrap();
        fs::rename(t.path().join("e3"), t.path().join("sub/x")).unwrap();
        let r = restore(std::slice::from_ref(&w));
        assert_eq!(r[0].action, RevertAction::Failed);
        assert!(r[0].error.as_deref().unwrap().contains("not found"));
        assert!(t.path().join("sub/x").exists() && !env.exists());
    }
}
