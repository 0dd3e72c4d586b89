//! Opening a path beneath a directory so that no concurrent process can
//! redirect the open out of it (Linux).
//!
//! The file tools run in codewhale's own, unsandboxed process while
//! sandboxed processes (MCP servers, background commands, sub-agents) may
//! change the workspace under them. A check of a path followed by an open of
//! the same path leaves a window in which a component can be swapped for a
//! symlink. Here the kernel resolves the whole path at once with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a directory fd of
//! the root: a symlink that stays inside the root is followed, one that
//! leaves it (absolute, or `..` past the root) fails with `EXDEV`. Kernels
//! without `openat2` (before 5.6, or a seccomp filter that answers
//! `ENOSYS`) get the same semantics from a component-by-component walk in
//! which every step is an `openat(…, O_NOFOLLOW)` relative to the previous
//! step's fd and every symlink is resolved here, by the same rules.
//!
//! What was opened is then named by [`fd_path`] (the kernel's own name for
//! the fd), which the guard checks again: that check cannot be raced either,
//! because the fd no longer depends on the path.

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fstat, mkdirat, Mode, SFlag};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Symlinks followed in one resolution before giving up (the kernel's own
/// limit, `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Set once `openat2` answered `ENOSYS`: every later open walks.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How a path is resolved beneath its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2`, falling back to the walk where the kernel lacks it.
    Kernel,
    /// The component-by-component `O_NOFOLLOW` walk (the fallback; tests
    /// run it on kernels that have `openat2` too).
    Walk,
}

fn owned(fd: std::os::fd::RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open call of this
    // module and is owned by nobody else; OwnedFd closes it exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Open `root` itself as the anchor of a resolution. The root is a
/// configured writable root (canonical, outside the sandbox's reach).
pub fn open_root(root: &Path) -> nix::Result<OwnedFd> {
    openat(
        None,
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map(owned)
}

/// Open `rel` (relative, no leading `/`) beneath `root` with `flags` (and
/// `mode` when creating). Fails with `EXDEV` when resolution would leave the
/// root, `ELOOP` past [`MAX_LINKS`] symlinks.
pub fn open_beneath(
    root: &OwnedFd,
    rel: &Path,
    flags: OFlag,
    mode: Mode,
    resolver: Resolver,
) -> nix::Result<OwnedFd> {
    let flags = flags | OFlag::O_CLOEXEC;
    if resolver == Resolver::Kernel && !NO_OPENAT2.load(Ordering::Relaxed) {
        match kernel(root, rel, flags, mode) {
            Err(Errno::ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            other => return other,
        }
    }
    walk(root, rel, flags, mode)
}

fn kernel(root: &OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    use nix::fcntl::{openat2, OpenHow, ResolveFlag};
    let rel: &Path = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let how = OpenHow::new()
        .flags(flags)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    loop {
        match openat2(root.as_raw_fd(), rel, how) {
            // openat2 answers EAGAIN when a concurrent rename elsewhere on
            // the system might have confused `..` checks: try again.
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => continue,
            r => return r.map(owned),
        }
    }
}

fn push_front_components(queue: &mut VecDeque<OsString>, path: &Path) -> nix::Result<()> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_os_string()),
            Component::ParentDir => parts.push(OsString::from("..")),
            Component::CurDir => {}
            // An absolute path (or a Windows prefix) leaves the root.
            Component::RootDir | Component::Prefix(_) => return Err(Errno::EXDEV),
        }
    }
    for p in parts.into_iter().rev() {
        queue.push_front(p);
    }
    Ok(())
}

fn is_symlink(fd: &OwnedFd) -> nix::Result<bool> {
    let st = fstat(fd.as_raw_fd())?;
    Ok(SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// The fallback: one `O_NOFOLLOW` step at a time from the root, with a stack
/// of directory fds so `..` goes back to the fd it came from (and past the
/// root is refused, as `RESOLVE_BENEATH` refuses it).
fn walk(root: &OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let mut queue = VecDeque::new();
    push_front_components(&mut queue, rel)?;
    let mut stack: Vec<OwnedFd> = vec![root.try_clone().map_err(|_| Errno::EMFILE)?];
    let mut links = 0usize;
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            if stack.len() == 1 {
                return Err(Errno::EXDEV);
            }
            stack.pop();
            continue;
        }
        let dir = stack.last().ok_or(Errno::EXDEV)?.as_raw_fd();
        let last = queue.is_empty();
        let step_flags = if last {
            flags | OFlag::O_NOFOLLOW
        } else {
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
        };
        let fd = match openat(Some(dir), name.as_os_str(), step_flags, mode) {
            Ok(fd) => owned(fd),
            // The last component is a symlink (O_NOFOLLOW refuses it): read
            // it and resolve its target instead.
            Err(first @ (Errno::ELOOP | Errno::ENOTDIR)) if last => {
                let target = match readlinkat(Some(dir), name.as_os_str()) {
                    Ok(t) => t,
                    // Not a symlink after all: the original error stands.
                    Err(Errno::EINVAL) => return Err(first),
                    Err(e) => return Err(e),
                };
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::ELOOP);
                }
                push_front_components(&mut queue, Path::new(&target))?;
                continue;
            }
            Err(e) => return Err(e),
        };
        if last {
            if flags.contains(OFlag::O_PATH) && is_symlink(&fd)? {
                // O_PATH | O_NOFOLLOW opens the link itself: resolve it.
                let target = readlinkat(Some(fd.as_raw_fd()), OsStr::new(""))?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::ELOOP);
                }
                push_front_components(&mut queue, Path::new(&target))?;
                continue;
            }
            return Ok(fd);
        }
        if is_symlink(&fd)? {
            let target = readlinkat(Some(fd.as_raw_fd()), OsStr::new(""))?;
            links += 1;
            if links > MAX_LINKS {
                return Err(Errno::ELOOP);
            }
            push_front_components(&mut queue, Path::new(&target))?;
            continue;
        }
        stack.push(fd);
    }
    // Nothing left to open: the path named the root (or came back to a
    // directory on the stack).
    let dir = stack.last().ok_or(Errno::EXDEV)?.as_raw_fd();
    openat(Some(dir), ".", flags, mode).map(owned)
}

/// Create every missing directory of `rel` beneath `root` (each one with
/// `mkdirat` in the directory fd resolved just before it) and return the
/// innermost one, opened as an `O_PATH` directory.
pub fn make_dirs_beneath(root: &OwnedFd, rel: &Path, resolver: Resolver) -> nix::Result<OwnedFd> {
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
    let mut current = open_beneath(root, Path::new(""), dir_flags, Mode::empty(), resolver)?;
    let mut prefix = PathBuf::new();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(Errno::EXDEV);
        };
        prefix.push(name);
        current = match open_beneath(root, &prefix, dir_flags, Mode::empty(), resolver) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => {
                match mkdirat(
                    Some(current.as_raw_fd()),
                    name,
                    Mode::from_bits_truncate(0o777),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e),
                }
                open_beneath(root, &prefix, dir_flags, Mode::empty(), resolver)?
            }
            Err(e) => return Err(e),
        };
    }
    Ok(current)
}

/// The kernel's name for what `fd` refers to (`/proc/self/fd/N`), the path
/// the guard checks after the open. Fails (and so refuses the operation)
/// where `/proc` is not mounted, or for a file deleted since the open.
pub fn fd_path(fd: &OwnedFd) -> std::io::Result<PathBuf> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let p = std::fs::read_link(link)?;
    if !p.is_absolute() || p.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the file was removed while it was opened",
        ));
    }
    Ok(p)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn both() -> [Resolver; 2] {
        [Resolver::Kernel, Resolver::Walk]
    }

    fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(t.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("a/b/f.txt"), "in").unwrap();
        fs::write(outside.join("secret"), "out").unwrap();
        symlink("b/f.txt", root.join("a/inside")).unwrap();
        symlink("../a/b", root.join("a/updown")).unwrap();
        symlink(outside.join("secret"), root.join("abs")).unwrap();
        symlink("../../outside/secret", root.join("a/rel_out")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        (t, root, outside)
    }

    fn read(fd: OwnedFd) -> String {
        std::io::read_to_string(fs::File::from(fd)).unwrap()
    }

    #[test]
    fn symlinks_inside_the_root_resolve_with_both_resolvers() {
        let (_t, root, _) = fixture();
        let r = open_root(&root).unwrap();
        for res in both() {
            for p in ["a/b/f.txt", "a/inside", "a/updown/f.txt", "a/../a/b/f.txt"] {
                let fd = open_beneath(&r, Path::new(p), OFlag::O_RDONLY, Mode::empty(), res)
                    .unwrap_or_else(|e| panic!("{res:?} {p}: {e}"));
                assert_eq!(fd_path(&fd).unwrap(), root.join("a/b/f.txt"), "{res:?} {p}");
                assert_eq!(read(fd), "in");
            }
        }
    }

    #[test]
    fn leaving_the_root_is_refused_with_both_resolvers() {
        let (_t, root, _) = fixture();
        let r = open_root(&root).unwrap();
        for res in both() {
            for p in [
                "abs",
                "a/rel_out",
                "../outside/secret",
                "a/../../outside/secret",
            ] {
                let e = open_beneath(&r, Path::new(p), OFlag::O_RDONLY, Mode::empty(), res)
                    .unwrap_err();
                assert_eq!(e, Errno::EXDEV, "{res:?} {p}");
            }
            let e = open_beneath(&r, Path::new("loop"), OFlag::O_RDONLY, Mode::empty(), res)
                .unwrap_err();
            assert_eq!(e, Errno::ELOOP, "{res:?}");
            // A create through a symlink that leaves makes nothing outside.
            let e = open_beneath(
                &r,
                Path::new("a/rel_out"),
                OFlag::O_WRONLY | OFlag::O_CREAT,
                Mode::from_bits_truncate(0o644),
                res,
            )
            .unwrap_err();
            assert_eq!(e, Errno::EXDEV, "{res:?}");
        }
    }

    #[test]
    fn make_dirs_creates_inside_and_refuses_to_leave() {
        let (_t, root, outside) = fixture();
        let r = open_root(&root).unwrap();
        for (i, res) in both().into_iter().enumerate() {
            let rel = PathBuf::from(format!("new{i}/x/y"));
            let fd = make_dirs_beneath(&r, &rel, res).unwrap();
            assert_eq!(fd_path(&fd).unwrap(), root.join(&rel));
            symlink(&outside, root.join(format!("out{i}"))).unwrap();
            let e = make_dirs_beneath(&r, Path::new(&format!("out{i}/made")), res).unwrap_err();
            assert_eq!(e, Errno::EXDEV, "{res:?}");
            assert!(!outside.join("made").exists());
        }
    }
}
