//! The opener's planning inputs on temp trees, and the kernel's answer when
//! no supervisor holds the listener.

use super::*;
use crate::host::backends::landlock::{plan, HoleStrategy, LandlockOptions, Tier};
use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};
use std::fs;
use std::os::unix::fs::MetadataExt;

struct Tree {
    _t: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

fn tree() -> Tree {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::create_dir_all(ws.join("config")).unwrap();
    fs::create_dir_all(&home).unwrap();
    fs::write(ws.join(".env"), "SECRET").unwrap();
    fs::write(ws.join("config/.env.local"), "SECRET2").unwrap();
    fs::write(ws.join("src/main.rs"), "fn main(){}").unwrap();
    Tree { _t: t, home, ws }
}

fn planned(t: &Tree, mode: SandboxMode) -> (crate::policy::ResolvedPolicy, LandlockPlan) {
    let facts = HostFacts {
        homes: vec![t.home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let r = resolve(&SandboxPolicy::new(mode, &t.ws), &facts).unwrap();
    let o = LandlockOptions {
        tier: Tier::NoNamespaces,
        kernel_abi: 7,
        max_abi: None,
        tmp_dir: None,
        deny_read_in_writable: HoleStrategy::Carve,
        protect_in_writable: HoleStrategy::Yield,
        connect_ports: Vec::new(),
        mask: None,
        mask_fallback: None,
        private_net: None,
        private_net_fallback: None,
    };
    let p = plan(&r, &o).unwrap();
    (r, p)
}

#[test]
fn opener_roots_are_the_carved_directories_inside_writable_roots() {
    let t = tree();
    let (_, p) = planned(&t, SandboxMode::WorkspaceWrite);
    assert_eq!(p.opener_dirs, vec![t.ws.clone(), t.ws.join("config")]);
    // Carved ancestors outside the writable root are not opener roots.
    assert!(p.carved_dirs.contains(&PathBuf::from("/")));
    assert!(!p.opener_dirs.contains(&PathBuf::from("/")));
    // Read-only: nothing can be created, no opener.
    let (_, ro) = planned(&t, SandboxMode::ReadOnly);
    assert!(ro.opener_dirs.is_empty(), "{:?}", ro.opener_dirs);
}

#[test]
fn the_spec_knows_granted_entries_and_deny_read_inodes() {
    let t = tree();
    let (r, p) = planned(&t, SandboxMode::WorkspaceWrite);
    let spec = Spec::build(&r, &p).unwrap().unwrap();
    let ino = |p: &Path| {
        let m = fs::symlink_metadata(p).unwrap();
        (m.dev(), m.ino())
    };
    let ws = spec.roots.iter().find(|x| x.path == t.ws).unwrap();
    assert!(
        ws.writable,
        "new entries inherit the workspace's write rights"
    );
    assert!(ws.known.contains(&ino(&t.ws.join("src"))));
    assert!(
        ws.known.contains(&ino(&t.ws.join("config"))),
        "carved: known"
    );
    assert!(!ws.known.contains(&ino(&t.ws.join(".env"))));
    assert!(spec.deny_inodes.contains(&ino(&t.ws.join(".env"))));
    assert!(spec
        .deny_inodes
        .contains(&ino(&t.ws.join("config/.env.local"))));
    assert!(!spec.deny_inodes.contains(&ino(&t.ws.join("src/main.rs"))));
    assert!(spec.deny_paths.contains(&t.ws.join(".env")));
    // No carve at all: no opener.
    fs::remove_file(t.ws.join(".env")).unwrap();
    fs::remove_file(t.ws.join("config/.env.local")).unwrap();
    let (r, p) = planned(&t, SandboxMode::WorkspaceWrite);
    assert!(Spec::build(&r, &p).unwrap().is_none());
}

#[test]
fn deny_read_directories_inside_writable_roots_are_recorded_whole() {
    let t = tree();
    let dir = t.ws.join("d");
    fs::create_dir_all(dir.join("sub")).unwrap();
    fs::write(dir.join("sub/key"), "k").unwrap();
    let mut into = HashSet::new();
    record_tree(&dir, &mut into).unwrap();
    let m = fs::metadata(dir.join("sub/key")).unwrap();
    assert!(into.contains(&(m.dev(), m.ino())));
    assert_eq!(into.len(), 3, "d, d/sub, d/sub/key");
}

/// With no supervisor holding the listener, a notified syscall fails with
/// ENOSYS at once (the sandboxed process is never left waiting), while
/// syscalls the program does not notify are untouched.
#[test]
fn without_a_listener_notified_opens_fail_with_enosys() {
    let prog = bpf::this_arch().unwrap();
    let fprog = libc::sock_fprog {
        len: prog.len() as libc::c_ushort,
        filter: prog.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    static PATH: &[u8] = b"/dev/null\0";
    // SAFETY: the child only makes raw syscalls on memory prepared before
    // the fork, then _exits; the parent waits for it.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            let before = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                PATH.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if before < 0 {
                libc::_exit(10);
            }
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            let l = libc::syscall(
                libc::SYS_seccomp,
                1 as libc::c_ulong,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &fprog as *const libc::sock_fprog,
            );
            if l < 0 {
                libc::_exit(11);
            }
            libc::close(l as libc::c_int);
            let after = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                PATH.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            let e = *libc::__errno_location();
            let other_ok = libc::getppid() > 0;
            libc::_exit(if after < 0 && e == libc::ENOSYS && other_ok {
                0
            } else {
                12
            });
        }
        let mut st = 0;
        assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        assert!(libc::WIFEXITED(st), "status {st:#x}");
        assert_eq!(
            libc::WEXITSTATUS(st),
            0,
            "10: control open failed, 11: install failed, 12: not ENOSYS"
        );
    }
}
