//! Where a workspace's store lives, and what is left out of snapshots.
//!
//! Store: `$CODEWHALE_HOME/snapshots/<project hash>/<worktree hash>/`, with
//! the side repository in `.git`, the side index in `index` and the records
//! in `snapshots.json`. The project hash names the user's repository (its
//! common git dir, so all worktrees of one repository sit together); the
//! worktree hash names the workspace directory itself.

use crate::policy::resolve::normalize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Directory names never snapshotted: build output, caches, virtualenvs and
/// dependency trees. Large, regenerable, and not what "undo" is for.
/// Written to the side repo's `info/exclude` (so a `.gitignore` negation in
/// the workspace can re-include one of them, as git's precedence says).
pub const BUILTIN_EXCLUDES: &[(&str, &str)] = &[
    ("node_modules/", "npm/yarn/pnpm dependencies"),
    ("target/", "Rust (cargo) and Maven build output"),
    ("build/", "generic build output"),
    ("dist/", "generic distribution output"),
    (".venv/", "Python virtualenv"),
    ("venv/", "Python virtualenv"),
    ("__pycache__/", "Python bytecode cache"),
    ("*.pyc", "Python bytecode"),
    (".pytest_cache/", "pytest cache"),
    (".mypy_cache/", "mypy cache"),
    (".ruff_cache/", "ruff cache"),
    (".tox/", "tox environments"),
    (".nox/", "nox environments"),
    (".gradle/", "Gradle cache"),
    (".next/", "Next.js build output"),
    (".nuxt/", "Nuxt build output"),
    (".turbo/", "Turborepo cache"),
    (".parcel-cache/", "Parcel cache"),
    (".cache/", "generic tool cache"),
    (".terraform/", "Terraform providers and modules"),
    (".DS_Store", "macOS Finder metadata"),
];

/// Secret files that are never snapshotted, as pathspec exclusions on
/// `git add` (a pathspec exclusion cannot be overridden by a `.gitignore`
/// negation, unlike `info/exclude`). Broader than the sandbox's `.env`
/// rule on purpose: `.env.example`-style templates are left out too,
/// because a glob cannot express "every `.env.*` except the templates".
/// The `/**` forms cover a directory of that name (a virtualenv called
/// `.env` is common): a glob pathspec does not match a directory's contents.
pub const SECRET_PATHSPECS: &[&str] = &[
    ":(exclude,glob)**/.env",
    ":(exclude,glob)**/.env/**",
    ":(exclude,glob)**/.env.*",
    ":(exclude,glob)**/.env.*/**",
];

/// Whether `rel` (relative to the workspace) is what [`SECRET_PATHSPECS`]
/// exclude: a component named `.env` or `.env.<anything>`, at any depth
/// (the file itself, or anything below such a directory). The journal's
/// snapshots name files one by one and leave these out before git sees
/// them: git 2.47 does not add a file of an untracked directory named by
/// pathspec when a `:(exclude,glob)**/…` pathspec is also given.
/// Compared as bytes: a name that is not UTF-8 (`.env.` and any bytes)
/// is a secret too, as git's glob sees it.
pub fn is_secret_path(rel: &Path) -> bool {
    rel.components()
        .any(|c| is_secret_name(c.as_os_str().as_encoded_bytes()))
}

/// The `.env` rule for one path component: `.env` or `.env.*`.
pub fn is_secret_name(name: &[u8]) -> bool {
    name == b".env" || name.starts_with(b".env.")
}

/// Whether the tracked file `path` (`/`-separated) is in what
/// [`BUILTIN_EXCLUDES`] leave out, judged by its names: a component that
/// is one of the directory names, or any component matching one of the
/// other patterns (`*.pyc`, `.DS_Store`: a pattern without a slash matches
/// a name at any depth, directory or file). A file named like one of the
/// directories counts too: that says "left out" of a file git would take
/// (its pattern matches directories only), which costs the seed a hash
/// (`add -A` takes it back), never a file; the other way, never.
pub fn builtin_excluded(path: &[u8]) -> bool {
    path.split(|b| *b == b'/').any(|name| {
        BUILTIN_EXCLUDES.iter().any(|(pat, _)| {
            let pat = pat.as_bytes();
            match (pat.strip_suffix(b"/"), pat.strip_prefix(b"*")) {
                (Some(dir), _) => name == dir,
                (None, Some(suffix)) => name.ends_with(suffix),
                (None, None) => name == pat,
            }
        })
    })
}

/// `info/attributes` of the side repo: it outranks every `.gitattributes`
/// in the workspace, so no text/eol conversion, filter or encoding change
/// applies and restore is byte-for-byte.
pub const ATTRIBUTES: &str = "* -text -filter -ident !eol !working-tree-encoding\n";

/// The text of the side repo's `info/exclude`.
pub fn exclude_file_text() -> String {
    let mut s = String::from("# Written by codewhale: never snapshotted (see docs/UNDO.md).\n");
    for (pat, why) in BUILTIN_EXCLUDES {
        s.push_str(&format!("# {why}\n{pat}\n"));
    }
    s
}

/// Short stable hash of a path (first 16 hex digits of its SHA-256).
pub fn path_hash(p: &Path) -> String {
    let digest = Sha256::digest(p.to_string_lossy().as_bytes());
    hex::encode(&digest[..8])
}

/// The user's repository identity for `workspace`: its common git dir when
/// `workspace/.git` is a directory or a `gitdir:` pointer (worktrees,
/// submodules), else the workspace itself. Read-only; nothing is run.
pub fn project_root(workspace: &Path) -> PathBuf {
    let dotgit = workspace.join(".git");
    if dotgit.is_dir() {
        return dotgit;
    }
    let Ok(text) = std::fs::read_to_string(&dotgit) else {
        return workspace.to_path_buf();
    };
    let Some(rel) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) else {
        return workspace.to_path_buf();
    };
    let gitdir = normalize(&workspace.join(rel.trim()));
    match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(common) => normalize(&gitdir.join(common.trim())),
        Err(_) => gitdir,
    }
}

/// The store directory for a canonical `workspace` under `home`.
pub fn store_dir(home: &Path, workspace: &Path) -> PathBuf {
    let project = project_root(workspace);
    let project = std::fs::canonicalize(&project).unwrap_or(project);
    home.join("snapshots")
        .join(path_hash(&project))
        .join(path_hash(workspace))
}

/// `$CODEWHALE_HOME`, else `~/.codewhale`. (The config module will own this
/// once it lands; the rule is the same.)
pub fn codewhale_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("CODEWHALE_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".codewhale"))
}

/// Turn deny-read paths into literal pathspec exclusions, keeping only
/// those inside `workspace` (the others cannot be snapshotted anyway).
pub fn deny_read_pathspecs(workspace: &Path, deny_read: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for p in deny_read {
        if let Ok(rel) = p.strip_prefix(workspace) {
            if rel.as_os_str().is_empty() {
                continue;
            }
            let rel = rel.to_string_lossy().replace('\\', "/");
            let spec = format!(":(exclude,literal){rel}");
            if !out.contains(&spec) {
                out.push(spec);
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_stable_and_short() {
        let a = path_hash(Path::new("/work/repo"));
        assert_eq!(a.len(), 16);
        assert_eq!(a, path_hash(Path::new("/work/repo")));
        assert_ne!(a, path_hash(Path::new("/work/repo2")));
    }

    #[test]
    fn worktrees_share_a_project_dir() {
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("main");
        let wt = t.path().join("wt");
        std::fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        std::fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let home = t.path().join("home");
        let a = store_dir(&home, &main);
        let b = store_dir(&home, &wt);
        assert_eq!(a.parent(), b.parent());
        assert_ne!(a, b);
        assert_eq!(project_root(&wt), main.join(".git"));
    }

    #[test]
    fn deny_read_outside_the_workspace_is_dropped() {
        let specs = deny_read_pathspecs(
            Path::new("/w"),
            &[
                PathBuf::from("/w/secret.txt"),
                PathBuf::from("/home/u/.ssh"),
                PathBuf::from("/w"),
                PathBuf::from("/w/a/b.key"),
            ],
        );
        assert_eq!(
            specs,
            vec![
                ":(exclude,literal)secret.txt".to_string(),
                ":(exclude,literal)a/b.key".to_string()
            ]
        );
    }

    #[test]
    fn secret_paths_are_the_secret_pathspecs() {
        for p in [
            ".env",
            "a/.env",
            ".env.local",
            "a/b/.env.example",
            ".env/x",
            "a/.env.d/y",
        ] {
            assert!(is_secret_path(Path::new(p)), "{p}");
        }
        for p in [
            "env",
            "a/x.env",
            ".envrc",
            "a/.environment/y",
            "b/env.local",
        ] {
            assert!(!is_secret_path(Path::new(p)), "{p}");
        }
        // A name that is not UTF-8 is still a secret (git's glob matches
        // bytes; a UTF-8-only check let it into journal snapshots).
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let name = std::ffi::OsStr::from_bytes(b".env.\xff\xfe");
            assert!(is_secret_path(&Path::new("a").join(name)));
            assert!(!is_secret_path(
                &Path::new("a").join(std::ffi::OsStr::from_bytes(b"x\xff"))
            ));
        }
    }

    #[test]
    fn builtin_patterns_have_the_shapes_builtin_excluded_reads() {
        for (pat, _) in BUILTIN_EXCLUDES {
            let body = pat.strip_suffix('/').unwrap_or(pat);
            let body = body.strip_prefix('*').unwrap_or(body);
            assert!(
                !body.is_empty() && !body.contains(['*', '?', '[', '/', '!', '\\']),
                "{pat}: builtin_excluded reads only NAME/, *SUFFIX and NAME"
            );
        }
        for p in [
            "node_modules/a.js",
            "a/target/x",
            "x.pyc",
            "a/b.pyc/c",
            ".DS_Store",
            "a/.DS_Store",
        ] {
            assert!(builtin_excluded(p.as_bytes()), "{p}");
        }
        for p in [
            "src/main.rs",
            "a/targets/x",
            "pyc",
            "a/x.pyc.txt",
            "nodemodules/x",
        ] {
            assert!(!builtin_excluded(p.as_bytes()), "{p}");
        }
    }

    /// Never less than git leaves out with the same patterns (the seed
    /// relies on it: a tracked file git ignores must be dropped).
    #[test]
    fn builtin_excluded_covers_what_git_ignores() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path();
        let paths = [
            "node_modules/a.js",
            "deep/er/node_modules/b/c.js",
            "a/target/debug/x",
            "target",
            "b.pyc",
            "d.pyc/inner.txt",
            ".DS_Store",
            "sub/.DS_Store",
            "venv/bin/python",
            ".cache/x",
            "keep.txt",
            "src/build.rs",
            "src/dist.txt",
        ];
        for p in paths {
            let f = ws.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, "x").unwrap();
        }
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(ws)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
            out.stdout
        };
        git(&["init", "-q"]);
        git(&["add", "-f", "--", "."]);
        let exclude = ws.join("builtin-exclude");
        std::fs::write(&exclude, exclude_file_text()).unwrap();
        let x = format!("--exclude-from={}", exclude.display());
        let ignored = git(&["ls-files", "-z", "-c", "-i", &x]);
        let ignored: Vec<&[u8]> = ignored
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .collect();
        assert!(ignored.len() >= 9, "{ignored:?}");
        for p in &ignored {
            assert!(builtin_excluded(p), "{}", String::from_utf8_lossy(p));
        }
        for p in ["keep.txt", "src/build.rs", "src/dist.txt"] {
            assert!(!builtin_excluded(p.as_bytes()), "{p}");
        }
    }

    #[test]
    fn exclude_text_lists_every_builtin() {
        let text = exclude_file_text();
        for (pat, _) in BUILTIN_EXCLUDES {
            assert!(text.lines().any(|l| l == *pat), "{pat}");
        }
    }
}
