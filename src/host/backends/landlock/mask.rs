//! Masking deny-read items inside writable roots with mounts (the landlock
//! tier's `mask` strategy).
//!
//! Landlock cannot withhold one name inside a directory it grants as a
//! whole, and granting a root's children one by one (the `carve`) leaves
//! every entry the command creates there without rights: the opener serves
//! their reads, but `execve` needs Landlock's `execute` *and* `read-file`
//! on the file itself (`do_open_execat` in fs/exec.c opens with
//! `O_RDONLY | __FMODE_EXEC`, and `get_required_file_open_access` in
//! security/landlock/fs.c maps `FMODE_READ` to `READ_FILE` and
//! `__FMODE_EXEC` to `EXECUTE`; measured: either right alone gives
//! `EACCES`), which no supervisor can add to a running domain.
//!
//! So where the kernel lets us, the command gets a private mount namespace
//! (and, without `CAP_SYS_ADMIN`, a user namespace with an identity map of
//! its own uid and gid) in which every such item is covered by an empty,
//! read-only file or directory; the root is then granted whole. A mount
//! point cannot be renamed or removed (`EBUSY`), a hard link to it crosses
//! mounts (`EXDEV`), and the command can never undo a mask: Landlock denies
//! `mount`/`umount` to every restricted process (`hook_sb_mount`,
//! `hook_sb_umount` in security/landlock/fs.c; measured: `EPERM` even with
//! `CAP_SYS_ADMIN`), the seccomp table denies the mount family, and every
//! capability is dropped before `execve` (with no_new_privs, so `execve`
//! cannot give any back). Only the mount (and user) namespace changes: the
//! command stays in the host's pid, network, ipc and uts namespaces.
//!
//! The choice is [`choose`] (pure: probe result in, strategy out); the
//! probe and the mount step are Linux-only ([`probe`], and the stage's
//! `child::apply_mask`).

use crate::policy::HoleStrategy;
use serde::Serialize;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Test seam: `CODEWHALE_TEST_LANDLOCK_NO_MASK=1` makes the landlock tier
/// use the `carve+opener` fallback even where masking works, so the
/// fallback is tested on every machine. It can only weaken the choice
/// (documented in `docs/SANDBOX.md` as a test seam; read by
/// [`crate::seams`], only in test builds).
pub use crate::seams::LANDLOCK_NO_MASK as NO_MASK_ENV;

/// How deny-read items inside writable roots were held (defined with the
/// report, which every OS builds).
pub use crate::host::enforcement::DenyReadStrategy;

/// How the mount namespace is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaskVia {
    /// `unshare(CLONE_NEWNS)`: codewhale has `CAP_SYS_ADMIN` (root); the
    /// command keeps its uid and sees every owner as on the host.
    MountNs,
    /// `unshare(CLONE_NEWUSER | CLONE_NEWNS)` with the identity map of the
    /// caller's uid and gid only (setgroups denied).
    UserNs,
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The command can get a mount namespace this way.
    Available(MaskVia),
    /// Why not (e.g. `unshare: Operation not permitted`).
    Unavailable(String),
}

/// The mask decision for a run (pure): `Ok(via)` to mask, `Err(reason)`
/// to fall back to the carve and the opener.
pub fn choose(hole: HoleStrategy, probe: &Probe, seam_off: bool) -> Result<MaskVia, String> {
    if hole != HoleStrategy::Carve {
        return Err("deny_read_in_writable is not \"carve\"".into());
    }
    if seam_off {
        return Err(format!("disabled by the test seam {NO_MASK_ENV}=1"));
    }
    match probe {
        Probe::Available(v) => Ok(*v),
        Probe::Unavailable(why) => Err(why.clone()),
    }
}

/// Whether the test seam asks for the fallback (read once per process).
pub fn seam_off() -> bool {
    crate::seams::landlock_no_mask()
}

/// One item to mask (an existing file or directory, symlinks resolved).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MaskTarget {
    /// The item's real location.
    #[serde(serialize_with = "lossy")]
    pub path: PathBuf,
    /// Masked by an empty directory (else an empty file).
    pub is_dir: bool,
}

fn lossy<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// Everything the command's half needs to mask, laid out before any
/// clone (it can only make system calls).
pub struct MaskSpec {
    /// How the mount namespace is entered.
    pub via: MaskVia,
    /// `"U U 1\n"` and `"G G 1\n"` for [`MaskVia::UserNs`].
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    /// A directory that exists and that nothing uses during set-up (the
    /// run's own tmp directory): a scratch tmpfs holding the empty file
    /// and directory is mounted there, then detached again.
    pub scratch: CString,
    pub empty_file: CString,
    pub empty_dir: CString,
    /// `(target, is_dir)`.
    pub targets: Vec<(CString, bool)>,
}

/// Names of the empty file and directory on the scratch tmpfs.
const EMPTY_FILE: &str = "codewhale-mask-file";
const EMPTY_DIR: &str = "codewhale-mask-dir";

impl MaskSpec {
    /// `None` when a path contains a NUL byte (it cannot be mounted on).
    pub fn new(via: MaskVia, targets: &[MaskTarget], scratch: &Path) -> Option<MaskSpec> {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Some(MaskSpec {
            via,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            scratch: c(scratch)?,
            empty_file: c(&scratch.join(EMPTY_FILE))?,
            empty_dir: c(&scratch.join(EMPTY_DIR))?,
            targets: targets
                .iter()
                .map(|t| Some((c(&t.path)?, t.is_dir)))
                .collect::<Option<Vec<_>>>()?,
        })
    }
}

/// Whether this process can make the mask's namespace (probed once per
/// process in a forked child; cached).
pub fn probe() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(probe_uncached).clone()
}

fn has_sys_admin() -> bool {
    ::caps::has_cap(
        None,
        ::caps::CapSet::Effective,
        ::caps::Capability::CAP_SYS_ADMIN,
    )
    .unwrap_or(false)
}

/// The via this process would use.
pub fn wanted_via() -> MaskVia {
    if has_sys_admin() {
        MaskVia::MountNs
    } else {
        MaskVia::UserNs
    }
}

fn probe_uncached() -> Probe {
    let via = wanted_via();
    let Some(spec) = MaskSpec::new(via, &[], Path::new("/")) else {
        return Probe::Unavailable("no scratch path".into());
    };
    let Ok((r, w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        return Probe::Unavailable("creating the probe's pipe failed".into());
    };
    use std::os::fd::AsRawFd;
    let wfd = w.as_raw_fd();
    // SAFETY: fork in a multi-threaded process; the child only makes
    // system calls on memory prepared before (the spec) and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Probe::Unavailable("fork failed".into());
    }
    if pid == 0 {
        let rec = match enter_namespace(&spec) {
            Ok(()) => [0u8; 5],
            Err((what, errno)) => {
                let e = errno.to_le_bytes();
                [what, e[0], e[1], e[2], e[3]]
            }
        };
        // SAFETY: write of a stack buffer, then _exit (no handlers).
        unsafe {
            libc::write(wfd, rec.as_ptr().cast(), rec.len());
            libc::_exit(0)
        }
    }
    drop(w);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let mut rec = [0u8; 5];
    let n = nix::unistd::read(r.as_raw_fd(), &mut rec).unwrap_or(0);
    if n != 5 {
        return Probe::Unavailable("the probe died before reporting".into());
    }
    if rec[0] == 0 {
        return Probe::Available(via);
    }
    let errno = i32::from_le_bytes([rec[1], rec[2], rec[3], rec[4]]);
    Probe::Unavailable(format!(
        "{}: {}",
        step_name(rec[0]),
        std::io::Error::from_raw_os_error(errno)
    ))
}

fn step_name(b: u8) -> &'static str {
    match b {
        1 => "unshare of the mount (and user) namespace",
        2 => "writing the user namespace's id maps",
        3 => "making mount propagation private",
        4 => "mounting the scratch tmpfs",
        5 => "creating the empty file and directory",
        6 => "remounting the scratch tmpfs read-only",
        7 => "bind-mounting a mask",
        8 => "detaching the scratch tmpfs",
        _ => "an unknown step",
    }
}

/// Describe a failure of [`apply`] (`(step, errno)`) for a message.
pub fn describe(step: u8, errno: i32) -> String {
    format!(
        "{}: {}",
        step_name(step),
        std::io::Error::from_raw_os_error(errno)
    )
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

/// Write `data` to the file at `path` (system calls only).
fn write_file(path: &[u8], data: &[u8]) -> bool {
    // SAFETY: `path` is a NUL-terminated literal; open/write/close on our fd.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
        libc::close(fd);
        ok
    }
}

/// Step 1–3: the namespace(s), the id maps, private propagation. System
/// calls only (runs in a forked or `CLONE_VM` child).
fn enter_namespace(spec: &MaskSpec) -> Result<(), (u8, i32)> {
    let flags = match spec.via {
        MaskVia::MountNs => libc::CLONE_NEWNS,
        MaskVia::UserNs => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
    };
    // SAFETY: unshare with constant flags.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err((1, errno()));
    }
    if spec.via == MaskVia::UserNs
        && !(write_file(b"/proc/self/setgroups\0", b"deny")
            && write_file(b"/proc/self/uid_map\0", &spec.uid_map)
            && write_file(b"/proc/self/gid_map\0", &spec.gid_map))
    {
        return Err((2, errno()));
    }
    // SAFETY: mount with a literal path and null pointers where allowed.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err((3, errno()));
    }
    Ok(())
}

/// The whole mask, in the command's half before Landlock and seccomp:
/// namespace(s), a scratch tmpfs on `spec.scratch` holding an empty file
/// (0444) and directory (0555), remounted read-only, bound over each
/// target, then detached (the binds keep it alive). System calls only.
/// `Err((step, errno))` otherwise ([`describe`]).
pub fn apply(spec: &MaskSpec) -> Result<(), (u8, i32)> {
    enter_namespace(spec)?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: mount/open/mkdir/umount2 on NUL-terminated strings prepared
    // before; null pointers where the kernel allows them.
    unsafe {
        if libc::mount(
            c"tmpfs".as_ptr(),
            spec.scratch.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            c"mode=0755,size=16k".as_ptr().cast(),
        ) != 0
        {
            return Err((4, errno()));
        }
        let fd = libc::open(
            spec.empty_file.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0o444,
        );
        if fd < 0 {
            return Err((5, errno()));
        }
        libc::close(fd);
        if libc::mkdir(spec.empty_dir.as_ptr(), 0o555) != 0 {
            return Err((5, errno()));
        }
        if libc::mount(
            std::ptr::null(),
            spec.scratch.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_RDONLY | flags,
            std::ptr::null(),
        ) != 0
        {
            return Err((6, errno()));
        }
        for (target, is_dir) in &spec.targets {
            let src = if *is_dir {
                &spec.empty_dir
            } else {
                &spec.empty_file
            };
            if libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return Err((7, errno()));
            }
        }
        if libc::umount2(spec.scratch.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err((8, errno()));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn choice_follows_the_probe_the_seam_and_the_setting() {
        let ok = Probe::Available(MaskVia::UserNs);
        let no = Probe::Unavailable("unshare: Operation not permitted".into());
        assert_eq!(choose(HoleStrategy::Carve, &ok, false), Ok(MaskVia::UserNs));
        assert_eq!(
            choose(HoleStrategy::Carve, &no, false),
            Err("unshare: Operation not permitted".into())
        );
        let seam = choose(HoleStrategy::Carve, &ok, true).unwrap_err();
        assert!(seam.contains(NO_MASK_ENV), "{seam}");
        assert!(choose(HoleStrategy::Yield, &ok, false).is_err());
    }

    #[test]
    fn ids_are_stable() {
        for s in [
            DenyReadStrategy::None,
            DenyReadStrategy::Mask,
            DenyReadStrategy::CarveOpener,
            DenyReadStrategy::Yield,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }

    #[test]
    fn spec_maps_are_the_identity_of_the_caller() {
        let s = MaskSpec::new(
            MaskVia::UserNs,
            &[MaskTarget {
                path: "/w/.env".into(),
                is_dir: false,
            }],
            Path::new("/tmp/run"),
        )
        .unwrap();
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        assert_eq!(s.uid_map, format!("{uid} {uid} 1\n").into_bytes());
        assert_eq!(s.targets.len(), 1);
        assert_eq!(s.empty_file.to_bytes(), b"/tmp/run/codewhale-mask-file");
    }
}
