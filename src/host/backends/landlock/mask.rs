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
    /// Masked by an empty directory (else a file, see `form`).
    pub is_dir: bool,
    /// What a file's mask holds.
    #[serde(skip_serializing_if = "MaskForm::is_empty")]
    pub form: MaskForm,
}

/// What a file mask shows (`policy::git_view` decides).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaskForm {
    /// An empty read-only file.
    #[default]
    Empty,
    /// A file no one may read (mode 0; every capability is dropped before
    /// the command runs): git must fail on it rather than add it.
    Unreadable,
    /// A read-only file with these bytes (a tracked file's indexed version,
    /// an extended `info/exclude`); never serialised.
    Content(#[serde(skip)] Vec<u8>),
}

impl MaskForm {
    fn is_empty(&self) -> bool {
        *self == MaskForm::Empty
    }
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
    /// The mode-0 file (for [`MaskForm::Unreadable`]).
    pub closed_file: CString,
    /// `(target, source)`: the source is one of the three above or a file
    /// of [`MaskSpec::contents`].
    pub targets: Vec<(CString, CString)>,
    /// `(file on the scratch tmpfs, its bytes)`.
    pub contents: Vec<(CString, Vec<u8>)>,
    /// The scratch tmpfs's `size=` option (its files and some room).
    pub scratch_opts: CString,
    /// Also a network namespace of the command's own, its loopback up
    /// (see [`MaskSpec::with_net`]).
    pub net: bool,
}

/// Names of the empty file and directory on the scratch tmpfs.
const EMPTY_FILE: &str = "codewhale-mask-file";
const EMPTY_DIR: &str = "codewhale-mask-dir";
const CLOSED_FILE: &str = "codewhale-mask-closed";

impl MaskSpec {
    /// `None` when a path contains a NUL byte (it cannot be mounted on).
    pub fn new(via: MaskVia, targets: &[MaskTarget], scratch: &Path) -> Option<MaskSpec> {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let empty_file = c(&scratch.join(EMPTY_FILE))?;
        let empty_dir = c(&scratch.join(EMPTY_DIR))?;
        let closed_file = c(&scratch.join(CLOSED_FILE))?;
        let mut contents = Vec::new();
        let mut list = Vec::with_capacity(targets.len());
        for t in targets {
            let src = match (&t.form, t.is_dir) {
                (_, true) => empty_dir.clone(),
                (MaskForm::Empty, false) => empty_file.clone(),
                (MaskForm::Unreadable, false) => closed_file.clone(),
                (MaskForm::Content(bytes), false) => {
                    let name = c(&scratch.join(format!("codewhale-mask-{}", contents.len())))?;
                    contents.push((name.clone(), bytes.clone()));
                    name
                }
            };
            list.push((c(&t.path)?, src));
        }
        // tmpfs rounds each file up to a page; 16 KiB for the fixed entries.
        let bytes: usize = contents
            .iter()
            .map(|(_, b)| b.len().div_ceil(4096) * 4096 + 4096)
            .sum();
        let size = 16 * 1024 + bytes;
        Some(MaskSpec {
            via,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            scratch: c(scratch)?,
            empty_file,
            empty_dir,
            closed_file,
            targets: list,
            contents,
            scratch_opts: CString::new(format!("mode=0755,size={size}")).ok()?,
            net: false,
        })
    }

    /// Enter a network namespace of the command's own as well, whose only
    /// interface is its loopback, brought up: with the network off a test
    /// server the command starts is reachable from the command and from
    /// nothing else, and the host's loopback services are in another
    /// namespace. Unix sockets named in the filesystem are not namespaced
    /// and stay denied by seccomp.
    pub fn with_net(mut self, net: bool) -> MaskSpec {
        self.net = net;
        self
    }
}

/// Whether this process can make the mask's namespace (probed once per
/// process in a forked child; cached).
pub fn probe() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| probe_uncached(false)).clone()
}

/// Whether this process can also give the command a network namespace of
/// its own with its loopback up (probed once per process; cached).
pub fn probe_net() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| probe_uncached(true)).clone()
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

fn probe_uncached(net: bool) -> Probe {
    let via = wanted_via();
    let Some(spec) = MaskSpec::new(via, &[], Path::new("/")) else {
        return Probe::Unavailable("no scratch path".into());
    };
    let spec = spec.with_net(net);
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
        9 => "bringing up the private network namespace's loopback",
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

/// Create `path` with `mode` holding `data` (system calls only).
fn make_file(path: &CString, mode: libc::mode_t, data: &[u8]) -> bool {
    // SAFETY: open/write/close on a NUL-terminated path prepared before
    // and on the fd just opened; `data` outlives the calls.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            mode,
        );
        if fd < 0 {
            return false;
        }
        let mut done = 0;
        while done < data.len() {
            let n = libc::write(fd, data[done..].as_ptr().cast(), data.len() - done);
            if n <= 0 {
                libc::close(fd);
                return false;
            }
            done += n as usize;
        }
        libc::close(fd) == 0
    }
}

/// Step 1–3: the namespace(s), the id maps, private propagation. System
/// calls only (runs in a forked or `CLONE_VM` child).
fn enter_namespace(spec: &MaskSpec) -> Result<(), (u8, i32)> {
    let mut flags = match spec.via {
        MaskVia::MountNs => libc::CLONE_NEWNS,
        MaskVia::UserNs => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
    };
    if spec.net {
        flags |= libc::CLONE_NEWNET;
    }
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
    if spec.net && !loopback_up() {
        return Err((9, errno()));
    }
    Ok(())
}

/// Set `IFF_UP` on `lo` in the current network namespace (system calls
/// only; a new namespace's loopback starts down).
fn loopback_up() -> bool {
    // SAFETY: socket/ioctl/close with a zeroed `ifreq` on our stack whose
    // name is the NUL-terminated "lo"; the fd is ours and closed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return false;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        let mut ok = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) == 0;
        if ok {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            ok = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) == 0;
        }
        libc::close(fd);
        ok
    }
}

/// The whole mask, in the command's half before Landlock and seccomp:
/// namespace(s), a scratch tmpfs on `spec.scratch` holding an empty file
/// (0444), a mode-0 file, an empty directory (0555) and the content files
/// (0444), remounted read-only, bound over each target, then detached
/// (the binds keep it alive). System calls only.
/// `Err((step, errno))` otherwise ([`describe`]).
pub fn apply(spec: &MaskSpec) -> Result<(), (u8, i32)> {
    enter_namespace(spec)?;
    if spec.targets.is_empty() {
        // Only the network namespace was wanted.
        return Ok(());
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: mount/open/mkdir/umount2 on NUL-terminated strings prepared
    // before; null pointers where the kernel allows them.
    unsafe {
        if libc::mount(
            c"tmpfs".as_ptr(),
            spec.scratch.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            spec.scratch_opts.as_ptr().cast(),
        ) != 0
        {
            return Err((4, errno()));
        }
        if !make_file(&spec.empty_file, 0o444, b"") || !make_file(&spec.closed_file, 0, b"") {
            return Err((5, errno()));
        }
        for (name, bytes) in &spec.contents {
            if !make_file(name, 0o444, bytes) {
                return Err((5, errno()));
            }
        }
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
        for (target, src) in &spec.targets {
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
                form: MaskForm::Empty,
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
