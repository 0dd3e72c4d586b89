//! Branch and head of a workspace, read from its `.git` files (no git
//! process). `dirty` is not computed (it needs an index walk): always null.

use std::path::Path;

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
        dirty: None,
    }
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
        assert!(none.branch.is_none() && none.head.is_none());
    }
}
