#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Escape catalogue, process / kernel / network items (13, 14, 17–34, 36,
//! 37) and the exit-code map, against the real binary and a real sandbox,
//! for every `(tier, mode)`. Seccomp items use `codewhale __probe`, whose
//! arguments make the unfiltered call return something other than EPERM
//! (the control), so EPERM inside can only come from the filter.

mod common;

use common::sandbox::*;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Duration;

fn probe_outside(name: &str, userns: bool) -> String {
    let mut c = Command::new(BIN);
    c.arg("__probe").arg(name);
    if userns {
        c.arg("--userns");
    }
    let out = c.stdin(Stdio::null()).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// (probe, expected inside, control needs fresh namespaces when unprivileged)
const SECCOMP_PROBES: &[(&str, &str, bool)] = &[
    ("ptrace-attach", "err EPERM", false),      // 17
    ("process-vm-readv", "err EPERM", false),   // 17
    ("process-vm-writev", "err EPERM", false),  // 18
    ("mount", "err EPERM", false),              // 19
    ("umount2", "err EPERM", false),            // 19
    ("pivot-root", "err EPERM", true),          // 19
    ("unshare-user", "err EPERM", false),       // 20
    ("unshare-user-mount", "err EPERM", false), // 20
    ("clone-newuser", "err EPERM", false),      // 20
    ("clone3", "err ENOSYS", false),            // 20 (libc falls back to clone)
    ("setns", "err EPERM", false),              // 20
    ("io-uring-setup", "err EPERM", false),     // 21
    ("ioctl-tiocsti", "err EPERM", false),      // 23
    ("ioctl-tiocsti-high", "err EPERM", false), // 23
    ("ioctl-tioclinux", "err EPERM", false),    // 23
    ("socket-vsock", "err EPERM", false),       // 30
    ("keyctl", "err EPERM", false),             // 34
    ("add-key", "err EPERM", false),            // 34
    ("request-key", "err EPERM", false),        // 34
    ("bpf", "err EPERM", false),                // 34
    ("perf-event-open", "err EPERM", false),    // 34
    ("userfaultfd", "err EPERM", false),        // 34
    ("socket-inet", "err EPERM", false),        // 26
    ("socket-inet6", "err EPERM", false),       // 27
    ("socket-packet", "err EPERM", true),       // 27
    ("socket-netlink", "err EPERM", false),     // 27
    ("socket-unix", "err EPERM", false),        // 29
];

/// #17–21, #23, #30, #34 (+ socket families for #26, #27, #29).
#[test]
fn seccomp_denies_each_syscall_precisely() {
    for case in cases() {
        let fx = Fx::new();
        for (name, inside, needs_ns) in SECCOMP_PROBES {
            let control = probe_outside(name, *needs_ns && !is_root());
            assert_ne!(
                control, "err EPERM",
                "control for {name} is EPERM without any filter"
            );
            assert!(!control.is_empty(), "control for {name} printed nothing");
            let r = fx.run(&case, &[], &[BIN, "__probe", name]);
            // With a network namespace of its own (bwrap's; the landlock
            // tier's where namespaces are allowed) IP sockets stay allowed:
            // they reach only the command's own loopback (#26/#27 hold,
            // see c26/c27).
            let inside = if private_net(&r) && name.starts_with("socket-inet") {
                "ok"
            } else {
                inside
            };
            assert_eq!(r.stdout.trim(), inside, "[{case}] {name}: {r:?}");
        }
        // socketpair stays allowed (positive control inside the sandbox).
        let r = fx.run(&case, &[], &[BIN, "__probe", "socketpair-unix"]);
        assert_eq!(r.stdout.trim(), "ok", "[{case}] {r:?}");
        // With network on, inet sockets work but vsock stays denied.
        if case.ww() {
            let r = fx.run(&case, &["--network"], &[BIN, "__probe", "socket-inet"]);
            assert_eq!(r.stdout.trim(), "ok", "[{case}] {r:?}");
            let r = fx.run(&case, &["--network"], &[BIN, "__probe", "socket-vsock"]);
            assert_eq!(r.stdout.trim(), "err EPERM", "[{case}] {r:?}");
        }
    }
}

/// #17: the parent's memory through /proc.
#[test]
fn c17_proc_mem_of_others_is_unreadable() {
    for case in cases() {
        let fx = Fx::new();
        let r = fx.sh(&case, "head -c 16 /proc/1/mem >/dev/null && echo READ; head -c 16 /proc/self/status >/dev/null && echo SELF");
        assert!(!r.stdout.contains("READ"), "[{case}] {r:?}");
        assert!(r.stdout.contains("SELF"), "[{case}] {r:?}");
    }
}

/// #13: device nodes.
#[test]
fn c13_mknod_is_denied() {
    for case in cases() {
        let fx = Fx::new();
        let r = fx.sh(
            &case,
            "mknod node c 1 3; mknod /tmp/node c 1 3 && echo MADE; touch plain",
        );
        assert!(!fx.ws.join("node").exists(), "[{case}]");
        assert!(!r.stdout.contains("MADE"), "[{case}] {r:?}");
        assert_eq!(fx.ws.join("plain").exists(), case.ww(), "[{case}]");
    }
}

/// #14, #22: no privilege: NoNewPrivs, every capability set empty, sudo fails.
#[test]
fn c14_c22_no_privileges() {
    for case in cases() {
        let fx = Fx::new();
        let r = fx.sh(&case, "grep -E '^(Cap|NoNewPrivs)' /proc/self/status; sudo -n true && echo SUDO; su -c true root </dev/null && echo SU; id -u");
        assert!(r.stdout.contains("NoNewPrivs:\t1"), "[{case}] {r:?}");
        // Without a user namespace an unprivileged process cannot clear
        // its bounding set (no CAP_SETPCAP); the report says so, and
        // no_new_privs keeps it from mattering. The landlock tier's mask
        // (a `.env` in the workspace root) runs the command in a user
        // namespace of its own when it is not root: there it can, and the
        // report claims so — checked below like every other set.
        let userns = r.enforcement()["namespaces"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == "user"));
        let bnd_clearable = case.tier.namespaces || is_root() || userns;
        if !bnd_clearable {
            case.assert_partial(&r, &["bounding set is not cleared"]);
        }
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            if set == "CapBnd" && !bnd_clearable {
                continue;
            }
            assert!(
                r.stdout.contains(&format!("{set}:\t0000000000000000")),
                "[{case}] {set}: {}",
                r.stdout
            );
        }
        assert!(
            !r.stdout.contains("SUDO") && !r.stdout.contains("SU\n"),
            "[{case}] {r:?}"
        );
        // Control: outside, this test process's children are not no_new_privs.
        let c = fx.unsandboxed("grep NoNewPrivs /proc/self/status");
        assert!(c.stdout.contains("NoNewPrivs"), "{c:?}");
    }
}

/// #24: no survivors, after a normal exit and after a timeout.
#[test]
fn c24_no_survivors() {
    for case in cases() {
        let fx = Fx::new();
        let mark = format!(
            "cwmark{}x{}",
            std::process::id(),
            fx.root
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace(['-', '.'], "")
        );
        // Positive control: the detector sees such a process on the host.
        let mut ctl = Command::new("bash")
            .args(["-c", &format!("exec -a {mark}ctl sleep 30")])
            .spawn()
            .unwrap();
        assert!(eventually(3000, || process_with_mark(&format!(
            "{mark}ctl"
        ))));
        ctl.kill().unwrap();
        ctl.wait().unwrap();

        let script = format!(
            "(exec -a {mark}a sleep 1000) & setsid nohup bash -c 'exec -a {mark}b sleep 1000' >/dev/null 2>&1 & \
             sleep 0.3; echo started"
        );
        let r = fx.run(&case, &[], &["bash", "-c", &script]);
        assert!(r.stdout.contains("started"), "[{case}] {r:?}");
        assert!(
            eventually(2000, || !process_with_mark(&mark)),
            "[{case}] survivors after exit"
        );

        let script = format!("(exec -a {mark}c sleep 1000) & exec -a {mark}d sleep 1000");
        let t0 = std::time::Instant::now();
        let r = fx.run(&case, &["--timeout-ms", "700"], &["bash", "-c", &script]);
        assert_eq!(r.code, 124, "[{case}] {r:?}");
        assert_eq!(r.report["timed_out"], true);
        assert!(t0.elapsed() < Duration::from_secs(20));
        assert!(
            eventually(2000, || !process_with_mark(&mark)),
            "[{case}] survivors after timeout"
        );
    }
}

/// The whole sandbox dies with codewhale: killed (SIGKILL, so no cleanup
/// code runs) early, while bwrap is still setting up, and late, while the
/// command runs.
/// `codewhale sandbox run` of a `sleep` whose process name is `mark`
/// (so the test can find every process of that run by it), output dropped.
fn sleeper(fx: &Fx, case: &Case, mark: &str) -> std::process::Child {
    fx.command(
        case,
        &[],
        &["bash", "-c", &format!("exec -a {mark} sleep 1000")],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

#[test]
fn sandbox_dies_with_codewhale() {
    let fx = Fx::new();
    for case in cases() {
        for (i, early_ms) in [Some(5u64), Some(40), None].into_iter().enumerate() {
            let mark = format!("cwdie{}x{}x{i}", std::process::id(), case.mode.flag().len());
            let mut child = sleeper(&fx, &case, &mark);
            match early_ms {
                Some(ms) => std::thread::sleep(Duration::from_millis(ms)),
                None => {
                    let running = eventually(10_000, || {
                        processes_with_mark(&mark).iter().any(|p| {
                            p.split_once(": ")
                                .is_some_and(|(_, c)| c.starts_with(&mark))
                        })
                    });
                    assert!(running, "[{case}] the command never started");
                }
            }
            child.kill().unwrap();
            child.wait().unwrap();
            assert!(
                eventually(3000, || !process_with_mark(&mark)),
                "[{case}] kill after {early_ms:?}: sandbox outlived codewhale: {:?}",
                processes_with_mark(&mark)
            );
        }
    }
}

/// The same at every moment of start-up, in half-millisecond steps from 0
/// to 6 ms: that is where a SIGKILL of codewhale can land while bwrap is
/// between arming its parent-death signal and releasing its child, which
/// then stays blocked for ever. A first version of the go-ahead used
/// bwrap's `--info-fd`, which bwrap writes inside that window: 8 of 60
/// such kills as root and 14 of 60 as cwtest left a child behind (with a
/// failing write), 10 of 1,000 under load (without). Each kill must leave
/// nothing behind.
#[test]
fn a_kill_at_any_moment_of_start_up_leaves_no_sandbox() {
    let fx = Fx::new();
    for case in cases() {
        let mut left = Vec::new();
        for i in 0..36u64 {
            let mark = format!(
                "cwstart{}x{}x{i}",
                std::process::id(),
                case.mode.flag().len()
            );
            let mut child = sleeper(&fx, &case, &mark);
            std::thread::sleep(Duration::from_micros((i % 13) * 500));
            child.kill().unwrap();
            child.wait().unwrap();
            if !eventually(3000, || !process_with_mark(&mark)) {
                left.push((i, processes_with_mark(&mark)));
                for p in processes_with_mark(&mark) {
                    if let Some(pid) = p
                        .split_once(':')
                        .and_then(|(p, _)| p.trim().parse::<i32>().ok())
                    {
                        // SAFETY: kill of a leftover the test made (so the
                        // next cases do not trip over it).
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
        }
        assert!(
            left.is_empty(),
            "[{case}] sandboxes outlived codewhale: {left:?}"
        );
    }
}

/// #25: host processes are invisible and unsignalable.
#[test]
fn c25_host_processes_are_invisible() {
    for case in cases() {
        let fx = Fx::new();
        let me = std::process::id();
        // Control: this pid exists on the host.
        assert!(std::path::Path::new(&format!("/proc/{me}")).exists());
        let r = fx.sh(&case, &format!("ls /proc | grep -c '^[0-9]'; kill -0 {me} && echo SIGNALLED; test -e /proc/{me} && echo SEEN"));
        if !case.claims(25) {
            // No pid namespace: visible, but still not signalable (Landlock
            // signal scoping), and the report says what is missing.
            assert!(!r.stdout.contains("SIGNALLED"), "[{case}] {r:?}");
            assert!(r.stdout.contains("SEEN"), "[{case}] {r:?}");
            case.assert_partial(&r, &["PID namespace", "host processes are visible"]);
            continue;
        }
        let count: u32 = r
            .stdout
            .lines()
            .next()
            .unwrap_or("999")
            .trim()
            .parse()
            .unwrap_or(999);
        assert!(count < 10, "[{case}] sees {count} pids: {r:?}");
        assert!(
            !r.stdout.contains("SIGNALLED") && !r.stdout.contains("SEEN"),
            "[{case}] {r:?}"
        );
    }
}

/// #26, #28: TCP to a loopback listener the test started.
#[test]
fn c26_c28_tcp_to_host_loopback_is_blocked() {
    for case in cases() {
        let fx = Fx::new();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let r = fx.run(
            &case,
            &[],
            &[
                "bash",
                "-c",
                &format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo SENT"),
            ],
        );
        assert!(!r.ok() && !r.stdout.contains("SENT"), "[{case}] {r:?}");
        assert!(
            l.accept().is_err(),
            "[{case}] the listener received a connection"
        );
        let r = fx.run(
            &case,
            &[],
            &[
                "curl",
                "-s",
                "-m",
                "3",
                &format!("http://127.0.0.1:{port}/"),
            ],
        );
        assert!(!r.ok(), "[{case}] {r:?}");
        assert!(l.accept().is_err(), "[{case}] curl reached the listener");
        // Positive control: with network on (WW) the same connection lands.
        if case.ww() {
            let r = fx.run(
                &case,
                &["--network"],
                &[
                    "bash",
                    "-c",
                    &format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo SENT"),
                ],
            );
            assert!(r.stdout.contains("SENT"), "[{case}] {r:?}");
            l.set_nonblocking(false).unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut got = String::new();
            s.read_to_string(&mut got).unwrap();
            assert_eq!(got, "hi\n");
        }
    }
}

/// Whether the run had a network namespace of its own (network off).
fn private_net(r: &Run) -> bool {
    r.enforcement()["network_enforced_by"]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v == "netns"))
}

/// #27: UDP.
#[test]
fn c27_udp_is_blocked() {
    for case in cases() {
        let fx = Fx::new();
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let port = u.local_addr().unwrap().port();
        let script = format!("echo dgram > /dev/udp/127.0.0.1/{port} && echo SENT");
        let r = fx.run(&case, &[], &["bash", "-c", &script]);
        // In a private network namespace the datagram goes to the
        // command's own loopback (sent, and lost there); without one the
        // socket is refused. Either way the host's listener gets nothing.
        assert_eq!(r.stdout.contains("SENT"), private_net(&r), "[{case}] {r:?}");
        let mut buf = [0u8; 64];
        assert!(u.recv(&mut buf).is_err(), "[{case}] a datagram arrived");
        if case.ww() {
            let r = fx.run(&case, &["--network"], &["bash", "-c", &script]);
            assert!(r.stdout.contains("SENT"), "[{case}] {r:?}");
            u.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let n = u.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"dgram\n");
        }
    }
}

/// #29: a host unix socket (stand-in for docker.sock / ssh-agent).
#[test]
fn c29_host_unix_socket_is_blocked() {
    for case in cases() {
        let fx = Fx::new();
        let path = fx.home.join("agent.sock");
        let l = UnixListener::bind(&path).unwrap();
        l.set_nonblocking(true).unwrap();
        let p = path.to_string_lossy().into_owned();
        let r = fx.run(&case, &[], &[BIN, "__probe", "connect-unix", "--path", &p]);
        assert_eq!(r.stdout.trim(), "err EPERM", "[{case}] {r:?}");
        assert!(
            l.accept().is_err(),
            "[{case}] the socket received a connection"
        );
        // Positive control: outside the sandbox the connect works.
        let out = Command::new(BIN)
            .args(["__probe", "connect-unix", "--path", &p])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
        assert!(l.accept().is_ok());
        if case.ww() {
            let r = fx.run(
                &case,
                &["--network"],
                &[BIN, "__probe", "connect-unix", "--path", &p],
            );
            assert_eq!(r.stdout.trim(), "ok", "[{case}] {r:?}");
        }
    }
}

/// #31: secrets in the environment.
#[test]
fn c31_secret_env_is_scrubbed() {
    for case in cases() {
        let fx = Fx::new();
        let out = fx
            .command(&case, &[], &["env"])
            .env("OPENAI_API_KEY", "sk-ENVMARK")
            .env("GITHUB_TOKEN", "ghp_ENVMARK")
            .env("MY_SECRET", "ENVMARK")
            .env("DB_PASSWORD", "ENVMARK")
            .env("ANTHROPIC_API_KEY", "ENVMARK")
            .env("CW_BENIGN", "visible")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("ENVMARK"), "[{case}] {stdout}");
        assert!(
            stdout.contains("CW_BENIGN=visible"),
            "[{case}] positive control"
        );
    }
}

/// #32: no inherited descriptors beyond stdio.
#[test]
fn c32_no_inherited_fds() {
    for case in cases() {
        let fx = Fx::new();
        let check = "ls /proc/self/fd | tr '\\n' ' '";
        let ctl = fx.unsandboxed(&format!("exec 7</dev/null; exec 9>/dev/null; {check}"));
        assert!(
            ctl.stdout.contains(" 7 ") && ctl.stdout.contains(" 9 "),
            "control: {ctl:?}"
        );
        let cmd = fx.command(&case, &[], &["sh", "-c", check]);
        let argv: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let quoted: Vec<String> = argv
            .iter()
            .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
            .collect();
        let r = fx.unsandboxed(&format!(
            "exec 7</dev/null; exec 9>/dev/null; exec {BIN} {}",
            quoted.join(" ")
        ));
        // 0,1,2 and ls's own directory fd (3).
        let fds: Vec<&str> = r.stdout.split_whitespace().collect();
        assert_eq!(fds, ["0", "1", "2", "3"], "[{case}] {r:?}");
    }
}

/// #33: a fake bwrap in the workspace or early on PATH is not used.
#[test]
fn c33_fake_bwrap_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    for case in cases() {
        let fx = Fx::new();
        let marker = fx.root.join("FAKE-BWRAP-RAN");
        let fake = format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display());
        let tools = fx.root.join("tools");
        for dir in [fx.ws.join("bin"), tools.clone()] {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("bwrap"), &fake).unwrap();
            std::fs::set_permissions(dir.join("bwrap"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        // Control: the fake works when run.
        assert!(Command::new(fx.ws.join("bin/bwrap"))
            .status()
            .unwrap()
            .success());
        assert!(marker.exists());
        std::fs::remove_file(&marker).unwrap();
        let path = format!(
            "{}:{}:{}",
            fx.ws.join("bin").display(),
            tools.display(),
            std::env::var("PATH").unwrap()
        );
        let t = tools.to_string_lossy().into_owned();
        let out = fx
            .command(
                &case,
                &["--writable-root", &t],
                &["grep", "NoNewPrivs", "/proc/self/status"],
            )
            .env("PATH", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("NoNewPrivs:\t1"), "[{case}] {out:?}");
        assert!(!marker.exists(), "[{case}] the fake bwrap ran");
        // An explicit bwrap path inside the workspace is refused outright.
        let fake_in_ws = fx.ws.join("bin/bwrap").to_string_lossy().into_owned();
        let r = fx.run_raw(&case, &["--bwrap-path", &fake_in_ws], &["true"]);
        // (The landlock tier does not use bwrap; `auto` falls back to it.)
        if case.ww() && case.claims(33) {
            assert_eq!(r.code, 125, "[{case}] {r:?}");
            assert!(r.stderr.contains("writable root"), "[{case}] {}", r.stderr);
        }
        assert!(!marker.exists(), "[{case}] the fake bwrap ran");
    }
}

/// #36: an output flood stays bounded and the host stays responsive.
#[test]
fn c36_output_flood_is_bounded() {
    for case in cases() {
        let fx = Fx::new();
        let report = fx.root.join("flood.json");
        let r = report.to_string_lossy().into_owned();
        let t0 = std::time::Instant::now();
        let status = fx
            .command(
                &case,
                &["--timeout-ms", "1500", "--report-json", &r],
                &["yes"],
            )
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(124), "[{case}]");
        assert!(t0.elapsed() < Duration::from_secs(30));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let total = v["stdout"]["total"].as_u64().unwrap();
        let kept = v["stdout"]["bytes"].as_str().unwrap().len() as u64;
        assert!(
            total > 10 * 1024 * 1024,
            "[{case}] only {total} bytes flowed"
        );
        assert!(kept <= 1024 * 1024, "[{case}] kept {kept}");
        assert_eq!(v["stdout"]["truncated"], true);
        // Peak RSS of any child of this test process (codewhale included).
        // SAFETY: getrusage writes into the struct we pass.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a local struct.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
        assert!(
            ru.ru_maxrss < 300 * 1024,
            "[{case}] peak RSS {} KiB",
            ru.ru_maxrss
        );
    }
}

/// #37: a missing kernel feature is refused with an actionable message,
/// never run unsandboxed. bwrap tier: a bwrap that cannot create user
/// namespaces; landlock tier: no Landlock (the documented test seam
/// `CODEWHALE_LANDLOCK_MAX_ABI=0`).
#[test]
fn c37_missing_kernel_feature_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    for case in cases() {
        let fx = Fx::new();
        let dir = fx.root.join("fakebin");
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("bwrap");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = fake.to_string_lossy().into_owned();
        let (r, feature) = if case.tier.namespaces {
            let r = fx.run_raw(&case, &["--bwrap-path", &f], &["touch", "/tmp/x", "ran"]);
            (r, "user namespaces")
        } else {
            let out = fx
                .command(&case, &[], &["touch", "ran"])
                .env("CODEWHALE_LANDLOCK_MAX_ABI", "0")
                .output()
                .unwrap();
            let r = Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                report: serde_json::Value::Null,
            };
            (r, "Landlock")
        };
        assert_eq!(r.code, 125, "[{case}] {r:?}");
        assert!(r.stderr.contains(feature), "[{case}] {}", r.stderr);
        assert!(r.stderr.contains("fix:"), "[{case}] {}", r.stderr);
        assert!(!fx.ws.join("ran").exists());
        // Only an explicit request runs it unsandboxed, and it says so
        // (`auto` with bwrap broken and Landlock unavailable).
        let out = fx
            .command(
                &case,
                &[
                    "--backend",
                    "auto",
                    "--bwrap-path",
                    &f,
                    "--allow-unsandboxed",
                    "--report-json",
                    &fx.root.join("u.json").to_string_lossy(),
                ],
                &["sh", "-c", "grep NoNewPrivs /proc/self/status"],
            )
            .env("CODEWHALE_LANDLOCK_MAX_ABI", "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "[{case}] {out:?}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fx.root.join("u.json")).unwrap())
                .unwrap();
        assert_eq!(v["enforcement"]["level"], "unsandboxed", "[{case}] {v}");
        assert!(stderr.contains("UNSANDBOXED"), "[{case}] {stderr}");
        // Positive control: the real tier runs the same command.
        assert!(fx.run(&case, &[], &["true"]).ok());
    }
}

/// The exit-code map of `sandbox run`.
#[test]
fn exit_code_map() {
    use std::os::unix::fs::PermissionsExt;
    for case in cases() {
        let fx = Fx::new();
        assert_eq!(fx.sh(&case, "exit 0").code, 0);
        assert_eq!(fx.sh(&case, "exit 3").code, 3, "[{case}]");
        assert_eq!(fx.sh(&case, "kill -TERM $$").code, 143, "[{case}]");
        assert_eq!(
            fx.run(&case, &["--timeout-ms", "300"], &["sleep", "30"])
                .code,
            124,
            "[{case}]"
        );
        let r = fx.run(&case, &[], &["no-such-command-cw"]);
        assert_eq!(r.code, 127, "[{case}] {r:?}");
        std::fs::write(fx.ws.join("notexec.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(
            fx.ws.join("notexec.sh"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let r = fx.run(&case, &[], &["./notexec.sh"]);
        assert_eq!(r.code, 126, "[{case}] {r:?}");
        if case.tier.namespaces {
            let r = fx.run_raw(&case, &["--bwrap-path", "/bin/false"], &["true"]);
            assert_eq!(r.code, 125, "[{case}] {r:?}");
        } else {
            let out = fx
                .command(&case, &[], &["true"])
                .env("CODEWHALE_LANDLOCK_MAX_ABI", "0")
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(125), "[{case}] {out:?}");
        }
    }
}

/// The library entry point (`host::run`) from a multi-threaded tokio
/// runtime with short-lived blocking threads: concurrent runs are sandboxed
/// and captured. (That a retiring thread cannot kill a sandbox is shown
/// directly in `supervise_tests::a_finished_thread_does_not_kill_the_child`.)
#[test]
fn host_run_from_a_multi_thread_runtime() {
    use codewhale::host::{self, BackendChoice, ExecRequest, HostSettings};
    use codewhale::policy::{SandboxMode, SandboxPolicy};
    let fx = Fx::new();
    std::env::set_var("HOME", &fx.home);
    // Hermetic like the CLI runs: no cache root of the real user becomes a
    // writable root shared with every other concurrent test.
    std::env::remove_var("CARGO_HOME");
    std::env::remove_var("XDG_CACHE_HOME");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .thread_keep_alive(Duration::from_millis(10))
        .enable_all()
        .build()
        .unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &fx.ws);
    for tier in tiers() {
        let (backend, kind) = match tier.backend {
            "bwrap" => (BackendChoice::Bwrap, codewhale::host::BackendKind::Bwrap),
            "landlock" => (
                BackendChoice::Landlock,
                codewhale::host::BackendKind::Landlock,
            ),
            _ => (BackendChoice::Auto, codewhale::host::BackendKind::Landlock),
        };
        let settings = HostSettings {
            backend,
            helper_exe: Some(BIN.into()),
            // `auto` in the no-bwrap run: a bwrap that does not exist.
            bwrap_path: no_bwrap().then(|| "/nonexistent/bwrap".into()),
            ..HostSettings::default()
        };
        let outcomes = rt.block_on(async {
            let mut handles = Vec::new();
            for i in 0..3u64 {
                let (policy, settings) = (policy.clone(), settings.clone());
                handles.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(30 * i)).await;
                    let mut req = ExecRequest::new(vec![
                        "sh".into(),
                        "-c".into(),
                        "sleep 0.4; echo done".into(),
                    ]);
                    req.timeout = Some(Duration::from_secs(30));
                    host::run(&policy, &settings, req).await
                }));
            }
            let mut out = Vec::new();
            for h in handles {
                out.push(h.await.unwrap());
            }
            out
        });
        for o in outcomes {
            let o = o.unwrap();
            assert_eq!(o.exit, codewhale::host::ExitKind::Code(0), "{o:?}");
            assert_eq!(o.stdout.bytes, b"done\n");
            assert!(o.enforcement.is_sandboxed());
            assert_eq!(o.enforcement.backend, kind);
        }
    }
}

/// Many runs started at the same moment in one writable root (parallel tool
/// calls; doctor's concurrent probes) all get sandboxed: the placeholders
/// they add and remove make plans go stale, and the host re-plans with a
/// growing back-off instead of failing. Each run also writes a file, so a
/// run that silently did nothing cannot pass.
#[test]
fn simultaneous_runs_in_one_root_all_succeed() {
    use codewhale::host::{self, BackendChoice, ExecRequest, HostSettings};
    use codewhale::policy::{SandboxMode, SandboxPolicy};
    let fx = Fx::new();
    std::fs::create_dir_all(fx.ws.join("sub")).unwrap();
    std::env::set_var("HOME", &fx.home);
    std::env::remove_var("CARGO_HOME");
    std::env::remove_var("XDG_CACHE_HOME");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(8)
        .enable_all()
        .build()
        .unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &fx.ws);
    let settings = HostSettings {
        backend: if no_bwrap() {
            BackendChoice::Landlock
        } else {
            BackendChoice::Bwrap
        },
        helper_exe: Some(BIN.into()),
        ..HostSettings::default()
    };
    let outcomes = rt.block_on(async {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (policy, settings) = (policy.clone(), settings.clone());
                tokio::spawn(async move {
                    let req = ExecRequest::new(vec![
                        "sh".into(),
                        "-c".into(),
                        format!("echo {i} > sub/par-{i}.txt"),
                    ]);
                    host::run(&policy, &settings, req).await
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    for (i, o) in outcomes.into_iter().enumerate() {
        let o = o.unwrap_or_else(|e| panic!("run {i} was not sandboxed: {e}"));
        assert_eq!(o.exit, codewhale::host::ExitKind::Code(0), "run {i}: {o:?}");
        assert!(o.enforcement.is_sandboxed());
        let f = fx.ws.join(format!("sub/par-{i}.txt"));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), format!("{i}\n"));
    }
}
