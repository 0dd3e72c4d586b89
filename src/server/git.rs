//! Branch, head and dirtiness of a workspace. Branch and head are read
//! from its `.git` files; `dirty` (staged, unstaged or untracked changes,
//! as the contract defines it) asks `git status --porcelain` with
//! `GIT_OPTIONAL_LOCKS=0`, so the read never takes the index lock. `null`
//! when the workspace is not a repository or git cannot tell.

use std::path::Path;

#[derive(Clone, Debug)]
pub struct GitStatus {
    pub branch: Option<String>,
    pub head: Option<String>,
    pub dirty: Option<bool>,
}

pub fn status(ws: &Path) -> GitStatus {
    let git = ws.join(".git");
    let head = std::fs::read_to_string(git.join("HEAD")).ok();
    let head = head.as_deref().map(str::trim);
    let (branch, commit) = match head {
        Some(h) => match h.strip_prefix("ref: ") {
            Some(r) => {
                let branch = r.strip_prefix("refs/heads/").unwrap_or(r).to_string();
                (Some(branch), resolve_ref(&git, r))
            }
            None => (None, Some(h.to_string())),
        },
        None => (None, None),
    };
    GitStatus {
        branch,
        head: commit
            .filter(|c| c.len() >= 7 && c.chars().all(|ch| ch.is_ascii_hexdigit()))
            .map(|c| c[..7].to_string()),
        dirty: if git.exists() { dirty(ws) } else { None },
    }
}

/// Whether `git status` lists anything (ignored files do not count).
pub fn dirty(ws: &Path) -> Option<bool> {
    let git = which::which("git").ok()?;
    let out = std::process::Command::new(git)
        .arg("-C")
        .arg(ws)
        .args([
            "status",
            "--porcelain=v1",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
        ])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(!out.stdout.is_empty())
}

fn resolve_ref(git: &Path, r: &str) -> Option<String> {
    if r.contains("..") {
        return None;
    }
    if let Ok(s) = std::fs::read_to_string(git.join(r)) {
        return Some(s.trim().to_string());
    }
    let packed = std::fs::read_to_string(git.join("packed-refs")).ok()?;
    packed
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(_, name)| *name == r)
        .map(|(sha, _)| sha.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_and_short_head_from_files() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path().join(".git");
        std::fs::create_dir_all(g.join("refs/heads")).unwrap();
        std::fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            g.join("refs/heads/main"),
            "abcdef0123456789abcdef0123456789abcdef01\n",
        )
        .unwrap();
        let s = status(d.path());
        assert_eq!(s.branch.as_deref(), Some("main"));
        assert_eq!(s.head.as_deref(), Some("abcdef0"));
        std::fs::remove_file(g.join("refs/heads/main")).unwrap();
        std::fs::write(
            g.join("packed-refs"),
            "# pack\n1234567890123456789012345678901234567890 refs/heads/main\n",
        )
        .unwrap();
        assert_eq!(status(d.path()).head.as_deref(), Some("1234567"));
        let none = status(&d.path().join("nope"));
        assert!(none.branch.is_none() && none.head.is_none() && none.dirty.is_none());
    }

    #[test]
    fn dirty_follows_git_status() {
        if which::which("git").is_err() {
            panic!("git is needed (installed by ci/setup)");
        }
        let d = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .arg("-C")
                .arg(d.path())
                .args(args)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(o.status.success(), "{args:?}: {o:?}");
        };
        git(&["init", "-q"]);
        assert_eq!(
            status(d.path()).dirty,
            Some(false),
            "an empty repository is clean"
        );
        std::fs::write(d.path().join("a.txt"), "x").unwrap();
        assert_eq!(status(d.path()).dirty, Some(true), "an untracked file");
        git(&["add", "a.txt"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "a",
        ]);
        assert_eq!(status(d.path()).dirty, Some(false), "committed");
        std::fs::write(d.path().join("a.txt"), "y").unwrap();
        assert_eq!(status(d.path()).dirty, Some(true), "an unstaged change");
        assert!(!d.path().join(".git/index.lock").exists());
    }
}
