//! In-process enforcement of the sandbox policy for the file tools, so a
//! file tool is never a way around the sandbox a command would run in.
//!
//! Both the lexical path and the symlink-resolved path are checked (the
//! longest existing ancestor is canonicalised, the rest appended), against
//! the same [`ResolvedPolicy`] the OS backends plan from:
//! - read: denied under any deny-read entry (or its symlink target) and for
//!   workspace `.env`-style names, even ones created after resolution;
//! - write: `read-only` writes nothing; `workspace-write` writes only under
//!   a writable root and never under a write-protected entry or a deny-read
//!   one; `danger-full-access` / `external-sandbox` add no local checks
//!   (that is what those modes mean; the label says so).
//!
//! The checks above name the paths as they are *before* the open. On Linux
//! the tools then open through [`FsGuard::open_read`],
//! [`FsGuard::open_write`] and [`FsGuard::remove`], which cannot be
//! redirected by a concurrent process: the open resolves beneath a
//! directory fd of the writable root (see [`super::beneath`]), and the
//! kernel's name for what was opened is checked again before a byte is read
//! or written. A path swapped for a symlink between the check and the open
//! is refused ([`GuardError::Moved`], or the denial of where it now leads).
//! Elsewhere (macOS, Windows) the open follows the check, with that window
//! (documented in `docs/EXEC.md`).

use crate::policy::resolve::{normalize, ResolvedPolicy};
use crate::policy::{tables, SandboxMode};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuardError {
    #[error("{path}: unreadable under the sandbox policy ({reason})")]
    DenyRead { path: PathBuf, reason: String },
    #[error("{path}: write-protected ({reason})")]
    WriteProtected { path: PathBuf, reason: String },
    #[error("{path}: outside the writable roots of workspace-write")]
    OutsideWritable { path: PathBuf },
    #[error("{path}: the sandbox is read-only")]
    ReadOnly { path: PathBuf },
    /// The path changed between the check and the open so that it now
    /// leads out of its writable root (a symlink swapped in).
    #[error("{path}: changed while it was being opened (it now leads out of the writable root); nothing was read or written")]
    Moved { path: PathBuf },
}

/// Why a guarded open failed: the policy refused it, or the file system did.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Denied(#[from] GuardError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OpenError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        OpenError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A file opened through the guard, and the path that was checked for it
/// (after the open on Linux: the kernel's own name for the handle).
#[derive(Debug)]
pub struct Opened {
    pub file: std::fs::File,
    pub path: PathBuf,
}

/// How [`FsGuard::open_write`] opens its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOpen {
    /// Read and write, created (with missing parent directories) if
    /// absent (read: the text it had, for the edit's diff). Nothing is
    /// truncated by the open: the caller truncates the handle once the open
    /// has been checked.
    Create,
    /// Read and write an existing file (`edit_file`).
    Edit,
}

/// Checks paths against a resolved policy.
#[derive(Clone, Debug)]
pub struct FsGuard {
    mode: SandboxMode,
    workspace: PathBuf,
    writable: Vec<PathBuf>,
    /// The writable roots that are single files (a scoped writer's
    /// `write_scope` naming a file): opened beneath their directory, which
    /// is not itself writable, so only that name is.
    file_roots: Vec<PathBuf>,
    protected: Vec<(PathBuf, String)>,
    deny_read: Vec<(PathBuf, String)>,
}

fn with_targets(entries: &[crate::policy::resolve::PathEntry]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in entries {
        out.push((e.path.clone(), e.reason.clone()));
        if let Some(t) = &e.target {
            out.push((t.clone(), e.reason.clone()));
        }
    }
    out
}

impl FsGuard {
    pub fn new(r: &ResolvedPolicy) -> Self {
        FsGuard {
            mode: r.mode,
            workspace: r.workspace.clone(),
            writable: r.writable_roots.iter().map(|e| e.path.clone()).collect(),
            file_roots: r
                .writable_roots
                .iter()
                .filter(|e| e.kind != crate::policy::resolve::PathKind::Dir)
                .map(|e| e.path.clone())
                .collect(),
            protected: with_targets(&r.protected),
            deny_read: with_targets(&r.deny_read),
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// (lexical absolute path, symlink-resolved path).
    pub fn locate(&self, raw: &str) -> (PathBuf, PathBuf) {
        let p = Path::new(raw);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.workspace.join(p)
        };
        let lexical = normalize(&abs);
        (lexical.clone(), real_path(&lexical))
    }

    fn deny_read_hit(&self, paths: [&Path; 2]) -> Option<String> {
        if self.mode == SandboxMode::DangerFullAccess {
            return None;
        }
        for p in paths {
            if let Some((_, why)) = self.deny_read.iter().find(|(d, _)| p.starts_with(d)) {
                return Some(why.clone());
            }
            let env_name = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(tables::is_env_file_name);
            if env_name && crate::policy::paths::inside_workspace(p, &self.workspace) {
                return Some(tables::ENV_FILE_REASON.to_string());
            }
        }
        None
    }

    /// The path to open for reading, or why not.
    pub fn check_read(&self, raw: &str) -> Result<PathBuf, GuardError> {
        let (lexical, real) = self.locate(raw);
        match self.deny_read_hit([&lexical, &real]) {
            Some(reason) => Err(GuardError::DenyRead {
                path: lexical,
                reason,
            }),
            None => Ok(real),
        }
    }

    /// The path to write, or why not.
    pub fn check_write(&self, raw: &str) -> Result<PathBuf, GuardError> {
        let (lexical, real) = self.locate(raw);
        self.write_verdict(&lexical, &real)?;
        Ok(real)
    }

    /// The write rules for a path known both as written (`lexical`) and
    /// resolved (`real`); errors name `lexical`.
    fn write_verdict(&self, lexical: &Path, real: &Path) -> Result<(), GuardError> {
        if let Some(reason) = self.deny_read_hit([lexical, real]) {
            return Err(GuardError::DenyRead {
                path: lexical.to_path_buf(),
                reason,
            });
        }
        match self.mode {
            SandboxMode::DangerFullAccess | SandboxMode::ExternalSandbox => return Ok(()),
            SandboxMode::ReadOnly => {
                return Err(GuardError::ReadOnly {
                    path: lexical.to_path_buf(),
                })
            }
            SandboxMode::WorkspaceWrite => {}
        }
        for p in [lexical, real] {
            if let Some((_, why)) = self.protected.iter().find(|(d, _)| p.starts_with(d)) {
                return Err(GuardError::WriteProtected {
                    path: lexical.to_path_buf(),
                    reason: why.clone(),
                });
            }
        }
        if !self.writable.iter().any(|w| real.starts_with(w)) {
            return Err(GuardError::OutsideWritable {
                path: lexical.to_path_buf(),
            });
        }
        Ok(())
    }

    /// True when the guard checks nothing (the modes that mean so).
    fn unchecked(&self) -> bool {
        matches!(
            self.mode,
            SandboxMode::DangerFullAccess | SandboxMode::ExternalSandbox
        )
    }

    /// The directory to resolve `real` beneath: the longest writable root
    /// it lies under, or for a single-file root, that file's directory
    /// (the file is then the only name the write rules admit there).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn writable_root_of(&self, real: &Path) -> Option<&Path> {
        let root = self
            .writable
            .iter()
            .filter(|w| real.starts_with(w))
            .max_by_key(|w| w.as_os_str().len())?;
        if self.file_roots.contains(root) {
            return root.parent();
        }
        Some(root.as_path())
    }

    /// Make the directory `raw` (and its missing parents) under the write
    /// rules, as the file tools would create a file's parents: beneath its
    /// writable root on Linux. Used to create a scoped writer's missing
    /// `write_scope` directory before the writer starts.
    pub fn make_dir(&self, raw: &str) -> Result<PathBuf, OpenError> {
        let (lexical, _) = self.locate(raw);
        let real = self.check_write(raw)?;
        #[cfg(target_os = "linux")]
        if !self.unchecked() {
            return self.make_dir_checked(&lexical, &real);
        }
        std::fs::create_dir_all(&real).map_err(|e| OpenError::io(&lexical, e))?;
        Ok(real)
    }

    /// Open `raw` for reading under the read rules.
    pub fn open_read(&self, raw: &str) -> Result<Opened, OpenError> {
        let (lexical, _) = self.locate(raw);
        let real = self.check_read(raw)?;
        if self.mode == SandboxMode::DangerFullAccess {
            let file = std::fs::File::open(&real).map_err(|e| OpenError::io(&lexical, e))?;
            return Ok(Opened { file, path: real });
        }
        self.open_read_checked(&lexical, &real)
    }

    /// Open `raw` for writing under the write rules (see [`WriteOpen`]).
    pub fn open_write(&self, raw: &str, how: WriteOpen) -> Result<Opened, OpenError> {
        let (lexical, _) = self.locate(raw);
        let real = self.check_write(raw)?;
        if self.unchecked() {
            return open_write_plain(&lexical, real, how);
        }
        self.open_write_checked(&lexical, &real, how)
    }

    /// Remove the file `raw` under the write rules; the path removed.
    pub fn remove(&self, raw: &str) -> Result<PathBuf, OpenError> {
        let (lexical, _) = self.locate(raw);
        let real = self.check_write(raw)?;
        if self.unchecked() {
            std::fs::remove_file(&real).map_err(|e| OpenError::io(&lexical, e))?;
            return Ok(real);
        }
        self.remove_checked(&lexical, &real)
    }
}

/// Open for writing by path (modes without local checks, and platforms
/// without a beneath-open).
fn open_write_plain(lexical: &Path, real: PathBuf, how: WriteOpen) -> Result<Opened, OpenError> {
    let mut o = std::fs::OpenOptions::new();
    match how {
        WriteOpen::Create => {
            if let Some(parent) = real.parent() {
                std::fs::create_dir_all(parent).map_err(|e| OpenError::io(parent, e))?;
            }
            o.read(true).write(true).create(true);
        }
        WriteOpen::Edit => {
            o.read(true).write(true);
        }
    }
    let file = o.open(&real).map_err(|e| OpenError::io(lexical, e))?;
    Ok(Opened { file, path: real })
}

#[cfg(target_os = "linux")]
mod race_free {
    //! The Linux opens: beneath the writable root's fd, checked again on
    //! the kernel's name for the handle.
    use super::{FsGuard, GuardError, OpenError, Opened, WriteOpen};
    use crate::agent::tools::beneath::{
        fd_path, make_dirs_beneath, open_beneath, open_root, Resolver,
    };
    use nix::errno::Errno;
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{fstat, Mode, SFlag};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::{Path, PathBuf};

    /// The resolver the tools use (tests switch it to the fallback walk).
    pub(crate) fn resolver() -> Resolver {
        #[cfg(test)]
        if FORCE_WALK.with(|f| f.get()) {
            return Resolver::Walk;
        }
        Resolver::Kernel
    }

    #[cfg(test)]
    thread_local! {
        /// Test seam: this thread's guarded opens use the `O_NOFOLLOW` walk.
        pub(crate) static FORCE_WALK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    fn io(lexical: &Path, e: Errno) -> OpenError {
        if e == Errno::EXDEV {
            return OpenError::Denied(GuardError::Moved {
                path: lexical.to_path_buf(),
            });
        }
        OpenError::io(lexical, std::io::Error::from(e))
    }

    fn named(lexical: &Path, fd: &OwnedFd) -> Result<PathBuf, OpenError> {
        fd_path(fd).map_err(|e| OpenError::io(lexical, e))
    }

    fn regular(lexical: &Path, fd: OwnedFd, path: PathBuf) -> Result<Opened, OpenError> {
        let st = fstat(fd.as_raw_fd()).map_err(|e| io(lexical, e))?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(OpenError::io(
                lexical,
                std::io::Error::other("not a regular file"),
            ));
        }
        Ok(Opened {
            file: std::fs::File::from(fd),
            path,
        })
    }

    /// `root`'s fd and `real` relative to it.
    fn anchor<'a>(
        lexical: &Path,
        root: &Path,
        real: &'a Path,
    ) -> Result<(OwnedFd, &'a Path), OpenError> {
        let rel = real.strip_prefix(root).map_err(|_| {
            OpenError::Denied(GuardError::OutsideWritable {
                path: lexical.to_path_buf(),
            })
        })?;
        let fd = open_root(root).map_err(|e| io(root, e))?;
        Ok((fd, rel))
    }

    impl FsGuard {
        pub(super) fn open_read_checked(
            &self,
            lexical: &Path,
            real: &Path,
        ) -> Result<Opened, OpenError> {
            let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
            let fd = match self.writable_root_of(real) {
                // Where a sandboxed process can write, it can swap: resolve
                // beneath the root.
                Some(root) => {
                    let (root_fd, rel) = anchor(lexical, root, real)?;
                    open_beneath(&root_fd, rel, flags, Mode::empty(), resolver())
                        .map_err(|e| io(lexical, e))?
                }
                // Elsewhere the checked path is opened; what was opened is
                // still checked below.
                None => {
                    let raw =
                        openat(None, real, flags, Mode::empty()).map_err(|e| io(lexical, e))?;
                    // SAFETY: `raw` was just returned by a successful
                    // openat and is owned by nothing else.
                    unsafe { OwnedFd::from_raw_fd(raw) }
                }
            };
            let path = named(lexical, &fd)?;
            if let Some(reason) = self.deny_read_hit([&path, &path]) {
                return Err(GuardError::DenyRead { path, reason }.into());
            }
            regular(lexical, fd, path)
        }

        pub(super) fn open_write_checked(
            &self,
            lexical: &Path,
            real: &Path,
            how: WriteOpen,
        ) -> Result<Opened, OpenError> {
            let p = self.parent_beneath(lexical, real, how == WriteOpen::Create)?;
            let (root_fd, rel, dir, name) = (p.root_fd, p.rel, p.dir, p.name.as_os_str());
            let flags = match how {
                WriteOpen::Create => OFlag::O_RDWR | OFlag::O_CREAT,
                WriteOpen::Edit => OFlag::O_RDWR,
            } | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            let fd = match openat(
                Some(dir.as_raw_fd()),
                name,
                flags,
                Mode::from_bits_truncate(0o666),
            ) {
                // SAFETY: `raw` was just returned by a successful openat and
                // is owned by nothing else.
                Ok(raw) => unsafe { OwnedFd::from_raw_fd(raw) },
                // The file is a symlink: follow it, beneath the root only,
                // and never create through it.
                Err(Errno::ELOOP) => {
                    let flags = flags & !(OFlag::O_CREAT | OFlag::O_NOFOLLOW);
                    open_beneath(&root_fd, &rel, flags, Mode::empty(), resolver())
                        .map_err(|e| io(lexical, e))?
                }
                Err(e) => return Err(io(lexical, e)),
            };
            let path = named(lexical, &fd)?;
            self.write_verdict(&path, &path)?;
            regular(lexical, fd, path)
        }

        pub(super) fn remove_checked(
            &self,
            lexical: &Path,
            real: &Path,
        ) -> Result<PathBuf, OpenError> {
            let p = self.parent_beneath(lexical, real, false)?;
            nix::unistd::unlinkat(
                Some(p.dir.as_raw_fd()),
                p.name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            )
            .map_err(|e| io(lexical, e))?;
            Ok(p.target)
        }

        pub(super) fn make_dir_checked(
            &self,
            lexical: &Path,
            real: &Path,
        ) -> Result<PathBuf, OpenError> {
            let root = self.writable_root_of(real).ok_or_else(|| {
                OpenError::Denied(GuardError::OutsideWritable {
                    path: lexical.to_path_buf(),
                })
            })?;
            let (root_fd, rel) = anchor(lexical, root, real)?;
            let dir = make_dirs_beneath(&root_fd, rel, resolver()).map_err(|e| io(lexical, e))?;
            let made = named(lexical, &dir)?;
            self.write_verdict(&made, &made)?;
            Ok(made)
        }

        /// The step writes and removals share: the writable root holding
        /// `real` opened, the file's directory opened beneath it (made,
        /// one `mkdirat` at a time, when `create`), and the file's place
        /// in it checked against the write rules. The directory is pinned
        /// by its fd, so the place is checked before anything is created.
        fn parent_beneath(
            &self,
            lexical: &Path,
            real: &Path,
            create: bool,
        ) -> Result<Parent, OpenError> {
            let root = self.writable_root_of(real).ok_or_else(|| {
                OpenError::Denied(GuardError::OutsideWritable {
                    path: lexical.to_path_buf(),
                })
            })?;
            let (root_fd, rel) = anchor(lexical, root, real)?;
            let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
                return Err(OpenError::io(
                    lexical,
                    std::io::Error::other("a writable root is not a file"),
                ));
            };
            let name = name.to_os_string();
            let dir = if create {
                make_dirs_beneath(&root_fd, parent, resolver())
            } else {
                open_beneath(
                    &root_fd,
                    parent,
                    OFlag::O_PATH | OFlag::O_DIRECTORY,
                    Mode::empty(),
                    resolver(),
                )
            }
            .map_err(|e| io(lexical, e))?;
            let target = named(lexical, &dir)?.join(&name);
            self.write_verdict(&target, &target)?;
            Ok(Parent {
                root_fd,
                rel: rel.to_path_buf(),
                dir,
                name,
                target,
            })
        }
    }

    /// What [`FsGuard::parent_beneath`] opened and checked.
    struct Parent {
        root_fd: OwnedFd,
        rel: PathBuf,
        dir: OwnedFd,
        name: std::ffi::OsString,
        target: PathBuf,
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
pub(crate) use race_free::FORCE_WALK;

#[cfg(not(target_os = "linux"))]
impl FsGuard {
    // No beneath-open here: the checked path is opened (the window between
    // the two is the documented residual risk on these platforms).
    fn open_read_checked(&self, lexical: &Path, real: &Path) -> Result<Opened, OpenError> {
        let file = std::fs::File::open(real).map_err(|e| OpenError::io(lexical, e))?;
        Ok(Opened {
            file,
            path: real.to_path_buf(),
        })
    }

    fn open_write_checked(
        &self,
        lexical: &Path,
        real: &Path,
        how: WriteOpen,
    ) -> Result<Opened, OpenError> {
        open_write_plain(lexical, real.to_path_buf(), how)
    }

    fn remove_checked(&self, lexical: &Path, real: &Path) -> Result<PathBuf, OpenError> {
        std::fs::remove_file(real).map_err(|e| OpenError::io(lexical, e))?;
        Ok(real.to_path_buf())
    }
}

/// Canonicalise the longest existing ancestor and append the rest, so a
/// path that does not exist yet still resolves through symlinked parents.
fn real_path(lexical: &Path) -> PathBuf {
    let mut existing = lexical.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return lexical.to_path_buf(),
        }
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "guard_tests.rs"]
mod tests;
