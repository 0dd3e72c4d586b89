//! Refusals: workspaces that must not be snapshotted.
//!
//! Two checks, both before the store is created: a pure path check (`/`,
//! homes and their ancestors, system directories, codewhale's own state)
//! and a bounded walk that counts entries and bytes with the same ignore
//! rules `git add` will apply (`.gitignore` plus the built-in excludes).
//! The walk stops as soon as a limit is crossed, so a huge tree costs at
//! most `max_entries` directory entries.

use super::error::Disabled;
use super::layout::BUILTIN_EXCLUDES;
use std::path::{Path, PathBuf};

/// System directories refused as workspaces (on top of `/`, homes and
/// their ancestors).
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
    "/private",
    "/private/tmp",
    "/private/var",
    "/Applications",
    "/Library",
    "/System",
    "/Users",
    "/Volumes",
    "/home",
];

/// Refuse `/`, any filesystem root, any home directory or an ancestor of
/// one, the system directories, and anything inside or containing
/// `codewhale_home` (the store must never snapshot itself).
pub fn check_path(
    workspace: &Path,
    homes: &[PathBuf],
    codewhale_home: &Path,
) -> Result<(), Disabled> {
    let refuse = |why: &str| {
        Err(Disabled::RefusedPath {
            path: workspace.to_path_buf(),
            why: why.to_string(),
        })
    };
    if workspace.parent().is_none() {
        return refuse("a filesystem root");
    }
    for home in homes {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.clone());
        if home == workspace {
            return refuse("your home directory");
        }
        if home.starts_with(workspace) {
            return refuse("a directory that contains your home directory");
        }
    }
    if SYSTEM_DIRS.iter().any(|d| Path::new(d) == workspace) {
        return refuse("a system directory");
    }
    let cw = std::fs::canonicalize(codewhale_home).unwrap_or_else(|_| codewhale_home.to_path_buf());
    if workspace.starts_with(&cw) {
        return refuse("inside codewhale's own state directory");
    }
    if cw.starts_with(workspace) {
        return refuse("a directory that contains codewhale's state directory ($CODEWHALE_HOME)");
    }
    Ok(())
}

/// Directory names skipped by the size walk: the built-in excludes that
/// name directories, plus `.git` (never snapshotted).
pub fn skipped_dir(name: &str) -> bool {
    name == ".git"
        || BUILTIN_EXCLUDES
            .iter()
            .any(|(pat, _)| pat.strip_suffix('/') == Some(name))
}

/// Count entries and bytes under `workspace` (respecting `.gitignore` and
/// the built-in excludes) and refuse when either limit is crossed.
pub fn check_size(workspace: &Path, max_entries: u64, max_bytes: u64) -> Result<(), Disabled> {
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && e.file_name().to_str().is_some_and(skipped_dir))
        })
        .build();
    let mut entries = 0u64;
    let mut bytes = 0u64;
    for entry in walker.flatten() {
        if entry.depth() == 0 {
            continue;
        }
        entries += 1;
        if entries > max_entries {
            return Err(Disabled::TooManyEntries {
                path: workspace.to_path_buf(),
                limit: max_entries,
            });
        }
        if entry.file_type().is_some_and(|t| t.is_file()) {
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
            if bytes > max_bytes {
                return Err(Disabled::TooLarge {
                    path: workspace.to_path_buf(),
                    limit_mb: max_bytes / (1024 * 1024),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn refused(ws: &str, homes: &[&str], cw: &str) -> bool {
        let homes: Vec<PathBuf> = homes.iter().map(PathBuf::from).collect();
        check_path(Path::new(ws), &homes, Path::new(cw)).is_err()
    }

    #[test]
    fn path_refusals() {
        let h = ["/nonexistent-home/u"];
        let cw = "/nonexistent-home/u/.codewhale";
        assert!(refused("/", &h, cw));
        assert!(refused("/nonexistent-home/u", &h, cw));
        assert!(refused("/nonexistent-home", &h, cw));
        assert!(refused("/usr", &h, cw));
        assert!(refused("/tmp", &h, cw));
        assert!(refused("/nonexistent-home/u/.codewhale/snapshots", &h, cw));
        assert!(!refused("/nonexistent-home/u/src/project", &h, cw));
        assert!(!refused("/tmp/project", &h, cw));
        // A workspace that contains the store would snapshot the store.
        assert!(refused("/srv/x", &["/elsewhere"], "/srv/x/state"));
    }

    #[test]
    fn size_limits_count_after_ignores() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path();
        for i in 0..10 {
            std::fs::write(ws.join(format!("f{i}")), vec![b'x'; 100]).unwrap();
        }
        std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
        for i in 0..50 {
            std::fs::write(ws.join(format!("node_modules/pkg/{i}")), "x").unwrap();
        }
        std::fs::create_dir_all(ws.join("ignored")).unwrap();
        for i in 0..50 {
            std::fs::write(ws.join(format!("ignored/{i}")), "x").unwrap();
        }
        std::fs::write(ws.join(".gitignore"), "ignored/\n").unwrap();
        // 10 files + .gitignore = 11 entries, ~1000 bytes.
        assert!(check_size(ws, 11, 10_000).is_ok());
        assert!(matches!(
            check_size(ws, 10, 10_000),
            Err(Disabled::TooManyEntries { limit: 10, .. })
        ));
        assert!(matches!(
            check_size(ws, 1000, 500),
            Err(Disabled::TooLarge { .. })
        ));
    }
}
