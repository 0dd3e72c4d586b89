//! The opener's pure decisions: which calls it looks at, which path a call
//! names, whether that path lies beneath a carved root, and the flags of
//! its own open. No system calls here: `serve` does those.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// One open-family call, as its registers give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// `AT_FDCWD` for `open`/`creat`.
    pub dirfd: i32,
    /// Address of the path in the caller's memory.
    pub path: u64,
    /// `openat2`: address and size of its `struct open_how` (flags, mode
    /// and resolve are read from there).
    pub how: Option<(u64, u64)>,
    pub flags: u64,
    pub mode: u64,
}

/// Decode the registers of syscall `nr`; `None` for anything else.
pub fn parse(nr: i64, args: [u64; 6]) -> Option<Call> {
    let call = |dirfd: u64, path, flags, mode| Call {
        // The kernel reads dirfd as an int: only the low 32 bits count.
        dirfd: dirfd as u32 as i32,
        path,
        how: None,
        flags,
        mode,
    };
    #[cfg(target_arch = "x86_64")]
    {
        if nr == libc::SYS_open {
            return Some(call(
                libc::AT_FDCWD as u32 as u64,
                args[0],
                args[1],
                args[2],
            ));
        }
        if nr == libc::SYS_creat {
            let flags = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
            return Some(call(libc::AT_FDCWD as u32 as u64, args[0], flags, args[1]));
        }
    }
    if nr == libc::SYS_openat {
        return Some(call(args[0], args[1], args[2], args[3]));
    }
    if nr == libc::SYS_openat2 {
        let mut c = call(args[0], args[1], 0, 0);
        c.how = Some((args[2], args[3]));
        return Some(c);
    }
    None
}

/// What an open with `flags` could need from the opener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Nothing: Landlock's answer is already the right one (`O_PATH`, and
    /// write-only opens, which new entries inherit from a writable root).
    Nothing,
    /// A read; `write` when it also writes, truncates or creates.
    Read { write: bool },
}

/// See [`Need`]. Flags are the open's own (the kernel's int, low 32 bits).
pub fn need(flags: u64) -> Need {
    let f = flags as u32 as i32;
    if f & libc::O_PATH != 0 {
        return Need::Nothing;
    }
    match f & libc::O_ACCMODE {
        libc::O_WRONLY => Need::Nothing,
        acc => Need::Read {
            write: acc == libc::O_RDWR || f & (libc::O_TRUNC | libc::O_CREAT) != 0,
        },
    }
}

/// The absolute path a call names: `path` as is when absolute, else
/// joined to `base` (the directory `dirfd` or the cwd is). `None` for an
/// empty path, a `..` anywhere (which only the kernel's walk can resolve
/// through symlinks) or a relative path without a base: the opener then
/// stays out of the way.
pub fn absolute(base: Option<&Path>, path: &[u8]) -> Option<PathBuf> {
    if path.is_empty() {
        return None;
    }
    let p = Path::new(OsStr::from_bytes(path));
    let mut out = if p.is_absolute() {
        PathBuf::from("/")
    } else {
        let b = base?;
        if !b.is_absolute() {
            return None;
        }
        clean(b)?
    };
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn clean(p: &Path) -> Option<PathBuf> {
    absolute(None, p.as_os_str().as_bytes())
}

/// The longest root `abs` lies strictly beneath, and the rest of the path.
pub fn pick_root<'a>(
    abs: &Path,
    roots: impl IntoIterator<Item = &'a Path>,
) -> Option<(usize, PathBuf)> {
    roots
        .into_iter()
        .enumerate()
        .filter(|(_, r)| abs != *r && abs.starts_with(r))
        .max_by_key(|(_, r)| r.components().count())
        .map(|(i, r)| (i, abs.strip_prefix(r).unwrap_or(abs).to_path_buf()))
}

/// Whether `p` is, or lies beneath, one of `deny` — or any of its names is
/// a `.env` secret file name (one created after the policy was resolved,
/// e.g. by the user during the run, is held as well).
pub fn names_denied(p: &Path, deny: &[PathBuf]) -> bool {
    deny.iter().any(|d| p.starts_with(d))
        || p.components().any(|c| match c {
            Component::Normal(n) => n
                .to_str()
                .is_some_and(crate::policy::tables::is_env_file_name),
            _ => false,
        })
}

/// The opener's own flags for a call's `flags`: never a controlling
/// terminal, close-on-exec for our copy, non-blocking so a FIFO swapped in
/// cannot stall the supervisor (the status flags are restored before the
/// fd is handed over, see [`status_flags`]).
pub fn our_flags(flags: u64) -> u64 {
    let f = flags as u32 as i32;
    let f = (f & !libc::O_CLOEXEC) | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
    f as u32 as u64
}

/// The file status flags `fcntl(F_SETFL)` should leave on the opened file,
/// as the caller asked for them.
pub fn status_flags(flags: u64) -> i32 {
    let f = flags as u32 as i32;
    f & (libc::O_APPEND | libc::O_NONBLOCK | libc::O_DIRECT | libc::O_NOATIME | libc::O_ASYNC)
}

/// `openat2` resolve flags the opener keeps from the caller's own (its
/// `RESOLVE_BENEATH`/`RESOLVE_IN_ROOT` are relative to the caller's dirfd,
/// which the opener does not reproduce: such calls are left to the kernel).
pub fn resolve_flags(caller: u64) -> Option<u64> {
    if caller & (libc::RESOLVE_BENEATH | libc::RESOLVE_IN_ROOT) != 0 {
        return None;
    }
    let keep = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_XDEV | libc::RESOLVE_NO_MAGICLINKS;
    Some(libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | (caller & keep))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn calls_decode_per_syscall() {
        let c = parse(libc::SYS_openat, [3, 0x1000, 2, 0o644, 0, 0]).unwrap();
        assert_eq!((c.dirfd, c.path, c.flags, c.mode), (3, 0x1000, 2, 0o644));
        // dirfd is an int: AT_FDCWD with garbage in the high half.
        let c = parse(libc::SYS_openat, [0xdead_0000_ffff_ff9c, 1, 0, 0, 0, 0]).unwrap();
        assert_eq!(c.dirfd, libc::AT_FDCWD);
        let c = parse(libc::SYS_openat2, [5, 0x2000, 0x3000, 24, 0, 0]).unwrap();
        assert_eq!(c.how, Some((0x3000, 24)));
        #[cfg(target_arch = "x86_64")]
        {
            let c = parse(libc::SYS_creat, [0x1000, 0o600, 0, 0, 0, 0]).unwrap();
            assert_eq!(c.dirfd, libc::AT_FDCWD);
            assert_eq!(need(c.flags), Need::Nothing, "creat is write-only");
            let c = parse(libc::SYS_open, [0x1000, 0, 0, 0, 0, 0]).unwrap();
            assert_eq!(c.dirfd, libc::AT_FDCWD);
        }
        assert!(parse(libc::SYS_read, [0; 6]).is_none());
    }

    #[test]
    fn only_reads_need_the_opener() {
        assert_eq!(need(libc::O_RDONLY as u64), Need::Read { write: false });
        assert_eq!(need(libc::O_RDWR as u64), Need::Read { write: true });
        assert_eq!(
            need((libc::O_RDONLY | libc::O_CREAT) as u64),
            Need::Read { write: true }
        );
        assert_eq!(need((libc::O_WRONLY | libc::O_CREAT) as u64), Need::Nothing);
        assert_eq!(need((libc::O_PATH | libc::O_RDWR) as u64), Need::Nothing);
    }

    #[test]
    fn paths_are_joined_and_dotdot_is_left_to_the_kernel() {
        let ws = Path::new("/w/ws");
        assert_eq!(
            absolute(Some(ws), b"a/./b").unwrap(),
            Path::new("/w/ws/a/b")
        );
        assert_eq!(absolute(Some(ws), b"/etc//x").unwrap(), Path::new("/etc/x"));
        assert_eq!(absolute(None, b"/x").unwrap(), Path::new("/x"));
        assert!(absolute(None, b"x").is_none());
        assert!(absolute(Some(ws), b"../ws/.env").is_none());
        assert!(absolute(Some(Path::new("/w/../ws")), b"x").is_none());
        assert!(absolute(Some(ws), b"").is_none());
        assert!(absolute(Some(Path::new("rel")), b"x").is_none());
    }

    #[test]
    fn the_longest_root_wins_and_a_root_itself_is_not_beneath() {
        let roots = [
            PathBuf::from("/w"),
            PathBuf::from("/w/ws"),
            PathBuf::from("/x"),
        ];
        let r = |p: &str| pick_root(Path::new(p), roots.iter().map(PathBuf::as_path));
        assert_eq!(r("/w/ws/target/a"), Some((1, PathBuf::from("target/a"))));
        assert_eq!(r("/w/other"), Some((0, PathBuf::from("other"))));
        assert_eq!(r("/w/ws"), Some((0, PathBuf::from("ws"))));
        assert_eq!(r("/w"), None);
        assert_eq!(r("/wx/a"), None, "components, not string prefixes");
    }

    #[test]
    fn deny_names_hold_beneath_and_for_new_env_files() {
        let deny = [PathBuf::from("/w/ws/.env"), PathBuf::from("/w/ws/secrets")];
        assert!(names_denied(Path::new("/w/ws/.env"), &deny));
        assert!(names_denied(Path::new("/w/ws/secrets/k"), &deny));
        assert!(names_denied(Path::new("/w/ws/d/.env.local"), &deny));
        assert!(!names_denied(Path::new("/w/ws/.env.example"), &deny));
        assert!(!names_denied(Path::new("/w/ws/.envrc"), &deny));
        assert!(!names_denied(Path::new("/w/ws/target/x"), &deny));
    }

    #[test]
    fn our_flags_keep_the_callers_and_never_block() {
        let f = our_flags((libc::O_RDWR | libc::O_APPEND | libc::O_CREAT) as u64) as i32;
        assert_eq!(f & libc::O_ACCMODE, libc::O_RDWR);
        assert!(f & libc::O_APPEND != 0 && f & libc::O_CREAT != 0);
        assert!(f & libc::O_CLOEXEC != 0 && f & libc::O_NOCTTY != 0 && f & libc::O_NONBLOCK != 0);
        assert_eq!(status_flags(libc::O_RDONLY as u64) & libc::O_NONBLOCK, 0);
        assert_ne!(status_flags(libc::O_NONBLOCK as u64) & libc::O_NONBLOCK, 0);
    }

    #[test]
    fn callers_beneath_flags_are_left_to_the_kernel() {
        assert_eq!(resolve_flags(libc::RESOLVE_BENEATH), None);
        assert_eq!(resolve_flags(libc::RESOLVE_IN_ROOT), None);
        let r = resolve_flags(libc::RESOLVE_NO_SYMLINKS).unwrap();
        assert_ne!(r & libc::RESOLVE_BENEATH, 0);
        assert_ne!(r & libc::RESOLVE_NO_MAGICLINKS, 0);
        assert_ne!(r & libc::RESOLVE_NO_SYMLINKS, 0);
    }
}
