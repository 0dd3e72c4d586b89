//! The one place that runs `git` for the snapshot store.
//!
//! Invariant: every invocation names the side repository and the workspace
//! explicitly (`--git-dir`, `--work-tree`) and uses the store's own index
//! file, with every inherited `GIT_*` variable removed, system and global
//! config switched off, and hooks, fsmonitor and auto-gc disabled on the
//! command line. So nothing of the user's repository — its `.git`, index,
//! hooks, config or attributes — is read for behaviour or written, and no
//! user-controlled program runs.

use super::error::SnapshotError;
use super::options::UserDirs;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `GIT_CONFIG_GLOBAL` value that means "no global config".
#[cfg(windows)]
const NULL_DEVICE: &str = "NUL";
#[cfg(not(windows))]
const NULL_DEVICE: &str = "/dev/null";

/// Config forced on every call. Each line is a behaviour a user or
/// repository setting could otherwise change.
const FORCED_CONFIG: &[&str] = &[
    // No hook ever runs (there are none in the side repo, but be explicit).
    "core.hooksPath=/dev/null",
    // No background or automatic gc: the store prunes on its own schedule.
    "gc.auto=0",
    "maintenance.auto=false",
    // No fsmonitor daemon (it is a program named by config).
    "core.fsmonitor=false",
    // The side repo belongs to codewhale; ownership checks are about
    // untrusted repositories' config, and ours has none that runs code.
    "safe.directory=*",
    // Byte-for-byte: no line-ending conversion on add or checkout.
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.quotePath=false",
    "core.logAllRefUpdates=false",
    "commit.gpgSign=false",
    "advice.addEmbeddedRepo=false",
    "advice.addIgnoredFile=false",
];

/// Remove every `GIT_*` variable this process has from `cmd`'s
/// environment: none of the caller's git settings (a `GIT_DIR`, a
/// `GIT_INDEX_FILE`, an alternate) may steer a command meant for another
/// repository.
pub fn scrub_git_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(&key);
        }
    }
}

/// An object id as git prints one: 40 (SHA-1) or 64 (SHA-256) hex digits.
pub fn is_object_id(s: &[u8]) -> bool {
    (s.len() == 40 || s.len() == 64) && s.iter().all(u8::is_ascii_hexdigit)
}

/// A SHA-1 object id (or pack checksum): 40 hex digits. The seed reads
/// only SHA-1 repositories (the side repository is one).
pub fn is_sha1_id(s: &[u8]) -> bool {
    s.len() == 40 && s.iter().all(u8::is_ascii_hexdigit)
}

/// A configured git runner for one store and one workspace.
#[derive(Clone, Debug)]
pub struct Git {
    bin: PathBuf,
    git_dir: PathBuf,
    work_tree: PathBuf,
    index: PathBuf,
    /// Another object directory read as an alternate (never written: see
    /// `seed`), for the commands of this runner only.
    alternate: Option<PathBuf>,
    /// Write the side index without its trailing SHA-1 (`index.skipHash`,
    /// git >= 2.40): hashing the 10 MB index of a 100k-file workspace on
    /// every `add` and `write-tree` was most of a journal snapshot's time
    /// (docs/PERFORMANCE.md). The index is ours and rewritten from the
    /// workspace at will; a torn one fails to parse like before.
    skip_hash: bool,
    /// The user's `$HOME` and `$XDG_CONFIG_HOME`, given to every command
    /// (see [`UserDirs`]).
    user_dirs: UserDirs,
}

/// What a successful call printed.
#[derive(Debug)]
pub struct GitOutput {
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl GitOutput {
    /// The first line of stdout, trimmed (for `write-tree`, `commit-tree`).
    pub fn line(&self) -> String {
        String::from_utf8_lossy(&self.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

impl Git {
    /// A runner whose commands are given `user_dirs` as the user's home
    /// and configuration directory (the store's [`super::SnapshotOptions`]
    /// own them: one source for the seed and the side repository).
    pub fn new(
        bin: PathBuf,
        git_dir: PathBuf,
        work_tree: PathBuf,
        index: PathBuf,
        user_dirs: UserDirs,
    ) -> Self {
        Git {
            bin,
            git_dir,
            work_tree,
            index,
            alternate: None,
            skip_hash: false,
            user_dirs,
        }
    }

    /// The user's directories this runner's commands are given.
    pub fn user_dirs(&self) -> &UserDirs {
        &self.user_dirs
    }

    /// This runner, writing the index with `index.skipHash` (see the field).
    pub fn with_skip_hash(mut self, on: bool) -> Git {
        self.skip_hash = on;
        self
    }

    /// This runner, reading `objects` as an alternate object directory
    /// (`GIT_ALTERNATE_OBJECT_DIRECTORIES`) — for read-only commands:
    /// a command that writes objects would touch ("freshen") the files
    /// of one found there.
    pub fn with_alternate(&self, objects: &Path) -> Git {
        Git {
            alternate: Some(objects.to_path_buf()),
            ..self.clone()
        }
    }

    /// This runner with no index at all, for a command that compares
    /// trees only: `diff-tree` reads the index it is given (all 100,000
    /// entries of a monorepo's side index, ~10 ms) without needing it.
    pub fn without_index(&self) -> Git {
        Git {
            index: self.git_dir.join("codewhale-no-index"),
            ..self.clone()
        }
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The git binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The side index file.
    pub fn index(&self) -> &Path {
        &self.index
    }

    /// The base command: explicit dirs, forced config, scrubbed environment
    /// (also for a process started and not waited for here: the seed's
    /// background blob copy).
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        scrub_git_env(&mut cmd);
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", NULL_DEVICE)
            .env("GIT_INDEX_FILE", &self.index)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "codewhale")
            .env("GIT_AUTHOR_EMAIL", "snapshots@codewhale.invalid")
            .env("GIT_COMMITTER_NAME", "codewhale")
            .env("GIT_COMMITTER_EMAIL", "snapshots@codewhale.invalid")
            .env("LC_ALL", "C");
        self.user_dirs.apply(&mut cmd);
        if let Some(a) = &self.alternate {
            cmd.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", a);
        }
        let mut dir = OsString::from("--git-dir=");
        dir.push(&self.git_dir);
        let mut wt = OsString::from("--work-tree=");
        wt.push(&self.work_tree);
        cmd.arg(dir).arg(wt);
        for c in FORCED_CONFIG {
            cmd.arg("-c").arg(c);
        }
        if self.skip_hash {
            cmd.arg("-c").arg("index.skipHash=true");
        }
        // Relative pathspecs are relative to the work tree root.
        cmd.current_dir(&self.work_tree);
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Run `git ARGS`; a non-zero exit is an error carrying git's stderr.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<GitOutput, SnapshotError> {
        self.run_with(args, None, false)
    }

    /// Run `git ARGS` with `input` on stdin.
    pub fn run_stdin<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: &[u8],
    ) -> Result<GitOutput, SnapshotError> {
        self.run_with(args, Some(input), false)
    }

    /// [`Self::run_stdin`], accepting a non-zero exit as
    /// [`Self::run_tolerant`] does.
    pub fn run_stdin_tolerant<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: &[u8],
    ) -> Result<GitOutput, SnapshotError> {
        self.run_with(args, Some(input), true)
    }

    /// Run `git ARGS`, accepting a non-zero exit as long as git reported no
    /// `fatal:` error (used for `add --ignore-errors`, which exits 1 when a
    /// single file was unreadable but indexed everything else).
    pub fn run_tolerant<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<GitOutput, SnapshotError> {
        self.run_with(args, None, true)
    }

    /// Start `git ARGS` with its stdin and stdout piped (stderr dropped),
    /// for a command fed and read a piece at a time (`mktree --batch`).
    pub fn spawn<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<std::process::Child, SnapshotError> {
        let mut cmd = self.command();
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd.spawn()
            .map_err(|e| SnapshotError::io("cannot run git at", self.bin.clone(), e))
    }

    fn run_with<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&[u8]>,
        tolerant: bool,
    ) -> Result<GitOutput, SnapshotError> {
        let shown = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = self.command();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| SnapshotError::io("cannot run git at", self.bin.clone(), e))?;
        if let Some(bytes) = input {
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(bytes).map_err(|e| {
                    SnapshotError::io("cannot write to git stdin for", &self.git_dir, e)
                })?;
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|e| SnapshotError::io("cannot wait for git on", &self.git_dir, e))?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let fatal = stderr.lines().any(|l| l.starts_with("fatal:"));
        if out.status.success() || (tolerant && !fatal) {
            return Ok(GitOutput {
                stdout: out.stdout,
                stderr,
            });
        }
        Err(SnapshotError::Git {
            args: shown,
            status: out.status.to_string(),
            stderr,
        })
    }
}

/// Whether `git --version`'s answer (`git version 2.47.3`, vendor
/// suffixes allowed) names a git that writes and reads an index without
/// its checksum (`index.skipHash`, git 2.40).
pub fn supports_skip_hash(version: &str) -> bool {
    let Some(v) = version.strip_prefix("git version ") else {
        return false;
    };
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    matches!((major, minor), (Some(ma), Some(mi)) if (ma, mi) >= (2, 40))
}

/// Whether the index file at `path` ends in a null checksum (written with
/// `index.skipHash`): a git older than 2.40 refuses such a file.
pub fn index_has_null_checksum(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let mut tail = [0u8; 20];
    f.seek(SeekFrom::End(-20)).is_ok()
        && f.read_exact(&mut tail).is_ok()
        && tail.iter().all(|b| *b == 0)
}

/// Run `git --version` to check that `bin` is a working git.
pub fn probe(bin: &Path) -> Result<String, String> {
    let out = Command::new(bin)
        .arg("--version")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!("{} --version exited {}", bin.display(), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_hash_needs_git_2_40() {
        assert!(supports_skip_hash("git version 2.47.3"));
        assert!(supports_skip_hash("git version 2.40.0"));
        assert!(supports_skip_hash("git version 3.0.1"));
        assert!(supports_skip_hash("git version 2.43.0.windows.1"));
        assert!(supports_skip_hash("git version 2.45.1 (Apple Git-154)"));
        assert!(!supports_skip_hash("git version 2.39.5"));
        assert!(!supports_skip_hash("git version 1.99.0"));
        assert!(!supports_skip_hash("git version"));
        assert!(!supports_skip_hash("hub version 2.50"));
    }

    #[test]
    fn a_null_checksum_is_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("index");
        let mut bytes = b"DIRC".to_vec();
        bytes.extend([0u8; 40]);
        std::fs::write(&p, &bytes).expect("write");
        assert!(index_has_null_checksum(&p));
        bytes.push(1);
        std::fs::write(&p, &bytes).expect("write");
        assert!(!index_has_null_checksum(&p));
        std::fs::write(&p, b"short").expect("write");
        assert!(!index_has_null_checksum(&p));
        assert!(!index_has_null_checksum(&dir.path().join("missing")));
    }

    #[test]
    fn object_ids_are_40_or_64_hex_digits() {
        let sha1 = "0123456789abcdefABCDEF0123456789abcdef01";
        let sha256 = "a".repeat(64);
        assert!(is_object_id(sha1.as_bytes()) && is_sha1_id(sha1.as_bytes()));
        assert!(is_object_id(sha256.as_bytes()) && !is_sha1_id(sha256.as_bytes()));
        for bad in [
            "",
            "abc",
            &"a".repeat(39),
            &"a".repeat(41),
            &format!("{}g", &sha1[..39]),
        ] {
            assert!(
                !is_object_id(bad.as_bytes()) && !is_sha1_id(bad.as_bytes()),
                "{bad:?}"
            );
        }
    }
}
