//! Shared fixture and runners for the real-sandbox suites.
//!
//! The suites are parameterised over `(tier, mode)`: each [`Tier`] row
//! lists the catalogue items it claims; a test of an item a tier does not
//! claim asserts that the run's report lists it as partial instead.
#![allow(dead_code)]

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The codewhale binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_codewhale");

/// A backend tier and the escape-catalogue items it claims to enforce.
pub struct Tier {
    /// The backend the report must name (`enforcement.backend`).
    pub name: &'static str,
    /// `--backend` value.
    pub backend: &'static str,
    /// Catalogue numbers this tier enforces in every mode (others must be
    /// reported as partial, or are not applicable to the tier).
    pub claims: &'static [u32],
    /// Catalogue numbers enforced only in `read-only` mode (in
    /// `workspace-write` they are reported as not enforced).
    pub claims_read_only: &'static [u32],
    /// bwrap's namespaces: private `/tmp`, own pid space, bwrap is used.
    pub namespaces: bool,
}

/// The bubblewrap tier: everything in the catalogue.
pub const BWRAP: Tier = Tier {
    name: "bwrap",
    backend: "bwrap",
    claims: &[
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
        26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38,
    ],
    claims_read_only: &[],
    namespaces: true,
};

/// What the landlock tier claims. Not claimed, and why (each is asserted
/// to be listed as partial in the run's report instead):
/// - 3 (with `$HOME` a writable root), 4, 5, 6, 7, 9, 10, 11 in
///   workspace-write: write-protected paths inside a writable root are not
///   enforced in the default `yield` setting (carving them would forbid
///   creating files in the workspace root).
/// - 16 (the listing part): names inside deny-read directories stay
///   listable (read-dir is granted from `/`); contents are unreadable.
/// - 25: no pid namespace, host processes are visible in `/proc`
///   (signalling and ptrace are still denied).
/// - 33: not applicable (bwrap is not used).
const LANDLOCK_CLAIMS: &[u32] = &[
    1, 2, 8, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 30, 31, 32, 34, 35,
    36, 37, 38,
];
const LANDLOCK_CLAIMS_RO: &[u32] = &[3, 4, 5, 6, 7, 9, 10, 11];

/// The landlock tier, asked for explicitly.
pub const LANDLOCK: Tier = Tier {
    name: "landlock",
    backend: "landlock",
    claims: LANDLOCK_CLAIMS,
    claims_read_only: LANDLOCK_CLAIMS_RO,
    namespaces: false,
};

/// The landlock tier reached through `--backend auto` with bubblewrap
/// hidden from `PATH` (`CODEWHALE_TEST_NO_BWRAP=1`).
pub const LANDLOCK_VIA_AUTO: Tier = Tier {
    name: "landlock",
    backend: "auto",
    claims: LANDLOCK_CLAIMS,
    claims_read_only: LANDLOCK_CLAIMS_RO,
    namespaces: false,
};

/// Every tier under test: bwrap and landlock; with
/// `CODEWHALE_TEST_NO_BWRAP=1` only the landlock tier, reached through
/// `auto` with bwrap hidden from every codewhale invocation's `PATH`.
pub fn tiers() -> &'static [&'static Tier] {
    if no_bwrap() {
        &[&LANDLOCK_VIA_AUTO]
    } else {
        &[&BWRAP, &LANDLOCK]
    }
}

/// Whether CI asked for the run with bubblewrap made unavailable.
pub fn no_bwrap() -> bool {
    std::env::var_os("CODEWHALE_TEST_NO_BWRAP").is_some_and(|v| !v.is_empty() && v != "0")
}

/// A directory of symlinks to everything in `/usr/local/bin`, `/usr/bin`
/// and `/bin` except `bwrap`: a `PATH` on which bubblewrap does not exist.
/// One per user (`$TMPDIR/cw-nobwrap-UID`), built once and reused, so test
/// processes do not litter `/tmp`; it must be ours and bwrap-free.
pub fn path_without_bwrap() -> &'static Path {
    use std::os::unix::fs::MetadataExt;
    use std::sync::OnceLock;
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let dir = std::env::temp_dir().join(format!("cw-nobwrap-{uid}"));
        if !dir.join("sh").exists() {
            let tmp = std::env::temp_dir().join(format!("cw-nobwrap-{uid}-{}", std::process::id()));
            let _ = fs::create_dir_all(&tmp);
            let _ = fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755));
            for src in ["/usr/local/bin", "/usr/bin", "/bin"] {
                let Ok(rd) = fs::read_dir(src) else { continue };
                for e in rd.flatten() {
                    let name = e.file_name();
                    if name != "bwrap" {
                        let _ = std::os::unix::fs::symlink(e.path(), tmp.join(&name));
                    }
                }
            }
            // A concurrent test process may have won the race: keep theirs.
            if fs::rename(&tmp, &dir).is_err() {
                let _ = fs::remove_dir_all(&tmp);
            }
        }
        let meta = fs::symlink_metadata(&dir).unwrap();
        assert!(
            meta.is_dir() && meta.uid() == uid && meta.mode() & 0o022 == 0,
            "{} is not a directory owned by us and writable only by us",
            dir.display()
        );
        assert!(
            !dir.join("bwrap").exists() && dir.join("sh").exists(),
            "could not build a PATH without bwrap in {}",
            dir.display()
        );
        dir
    })
}

/// Whether `run`'s report lists a partial item containing every needle.
/// An item reads `<item> (<effect>) <path>: <reason>`, the effect being
/// `over-restricted` for that item and `not enforced` for every other.
pub fn reported_partial(r: &Run, needles: &[&str]) -> bool {
    r.enforcement()["partial"].as_array().is_some_and(|a| {
        a.iter()
            .map(|v| {
                let item = v["item"].as_str().unwrap_or("");
                let effect = if item == "over-restricted" {
                    "over-restricted"
                } else {
                    "not enforced"
                };
                format!(
                    "{item} ({effect}) {}: {}",
                    v["path"].as_str().unwrap_or(""),
                    v["reason"].as_str().unwrap_or("")
                )
            })
            .any(|line| needles.iter().all(|n| line.contains(n)))
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ro,
    Ww,
}

impl Mode {
    pub fn flag(self) -> &'static str {
        match self {
            Mode::Ro => "read-only",
            Mode::Ww => "workspace-write",
        }
    }
}

/// One `(tier, mode)` combination.
pub struct Case {
    pub tier: &'static Tier,
    pub mode: Mode,
}

impl Case {
    pub fn ww(&self) -> bool {
        self.mode == Mode::Ww
    }
    pub fn claims(&self, item: u32) -> bool {
        self.tier.claims.contains(&item)
            || (self.mode == Mode::Ro && self.tier.claims_read_only.contains(&item))
    }
    /// Assert that an item this case does not claim is reported as such.
    pub fn assert_partial(&self, r: &Run, needles: &[&str]) {
        assert_eq!(r.enforcement()["level"], "partial", "[{self}] {r:?}");
        assert!(
            reported_partial(r, needles),
            "[{self}] no partial item with {needles:?}: {}",
            r.enforcement()["partial"]
        );
    }
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.tier.name, self.mode.flag())
    }
}

/// All cases, for tests that run in both modes.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for tier in tiers() {
        for mode in [Mode::Ro, Mode::Ww] {
            out.push(Case { tier, mode });
        }
    }
    out
}

/// A temp tree: `home/` full of decoys, `ws/` (a git repo), `sibling/`.
pub struct Fx {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub ws: PathBuf,
    pub sibling: PathBuf,
}

pub const SSH_MARK: &str = "SSH-PRIVATE-KEY-MARK";
pub const AWS_MARK: &str = "AWS-SECRET-MARK";
pub const GH_MARK: &str = "GH-TOKEN-MARK";
pub const NETRC_MARK: &str = "NETRC-MARK";
pub const DOTENV_MARK: &str = "DOTENV-MARK";
pub const AGENT_MARK: &str = "AGENT-KEY-MARK";
pub const RC_MARK: &str = "RC-VISIBLE-MARK";

fn write(p: &Path, text: &str) {
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, text).unwrap();
}

impl Fx {
    pub fn new() -> Fx {
        let dir = tempfile::Builder::new()
            .prefix("cw-escape-")
            .tempdir()
            .unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let ws = root.join("ws");
        let sibling = root.join("sibling");
        for d in [&home, &ws, &sibling] {
            fs::create_dir_all(d).unwrap();
        }
        write(&home.join(".ssh/id_rsa"), SSH_MARK);
        write(&home.join(".aws/credentials"), AWS_MARK);
        write(&home.join(".config/gh/hosts.yml"), GH_MARK);
        write(&home.join(".netrc"), NETRC_MARK);
        write(&home.join(".codewhale/auth.json"), AGENT_MARK);
        write(&home.join(".bashrc"), RC_MARK);
        write(&home.join(".profile"), "# profile\n");
        write(&home.join(".zshrc"), "# zshrc\n");
        write(&sibling.join("target.txt"), "orig");
        write(&ws.join(".env"), DOTENV_MARK);
        write(&ws.join(".env.example"), "EXAMPLE-VISIBLE");
        write(&ws.join("README"), "readme");
        let fx = Fx {
            _dir: dir,
            root,
            home,
            ws,
            sibling,
        };
        fx.git(&fx.ws, &["init", "-q"]);
        fx.git(&fx.ws, &["add", "README"]);
        fx.git(&fx.ws, &["commit", "-qm", "init"]);
        fx
    }

    /// Run git on the host (setup and host-state checks).
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn read(&self, p: &Path) -> Option<String> {
        fs::read_to_string(p).ok()
    }

    /// A `sandbox run` command for `case` (HOME = the fixture home).
    pub fn command(&self, case: &Case, flags: &[&str], argv: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(["sandbox", "run", "--sandbox", case.mode.flag()]);
        if !flags.contains(&"--backend") {
            c.args(["--backend", case.tier.backend]);
        }
        c.arg("-C")
            .arg(&self.ws)
            .args(flags)
            .arg("--")
            .args(argv)
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // A fresh machine: no per-user codewhale directory exists yet
            // (a run must never depend on an earlier command making it).
            // Neither directory exists; the host creates what it needs.
            .env("TMPDIR", self.root.join("host-tmp"))
            .env("XDG_RUNTIME_DIR", self.root.join("host-runtime"))
            // Hermetic: no cache roots of the real user become writable.
            .env_remove("CARGO_HOME")
            .env_remove("XDG_CACHE_HOME")
            .stdin(Stdio::null());
        if no_bwrap() {
            c.env("PATH", path_without_bwrap());
        }
        c
    }

    /// Run in the sandbox; panics with a clear message when the sandbox
    /// itself could not be set up (a real-sandbox test never skips).
    pub fn run(&self, case: &Case, flags: &[&str], argv: &[&str]) -> Run {
        let r = self.run_raw(case, flags, argv);
        assert!(
            r.code != 125,
            "[{case}] the sandbox could not be set up (exit 125); this suite needs a working \
             bwrap with user namespaces and Landlock.\nstderr: {}",
            r.stderr
        );
        r
    }

    /// Run in the sandbox, whatever the exit code.
    pub fn run_raw(&self, case: &Case, flags: &[&str], argv: &[&str]) -> Run {
        let report = self.root.join(format!(
            "report-{}.json",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut fl: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        fl.push("--report-json".into());
        fl.push(report.to_string_lossy().into_owned());
        let fl: Vec<&str> = fl.iter().map(String::as_str).collect();
        let out = self.command(case, &fl, argv).output().unwrap();
        let report_v = fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let _ = fs::remove_file(&report);
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            report: report_v,
        }
    }

    /// `sh -c SCRIPT` in the sandbox.
    pub fn sh(&self, case: &Case, script: &str) -> Run {
        self.run(case, &[], &["sh", "-c", script])
    }

    /// `sh -c SCRIPT` without any sandbox, same HOME and cwd: the positive
    /// control showing an attack works when nothing stops it.
    pub fn unsandboxed(&self, script: &str) -> Run {
        let out = Command::new("sh")
            .args(["-c", script])
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            report: Value::Null,
        }
    }
}

/// What a sandboxed run returned.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub report: Value,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
    /// The enforcement report of the run.
    pub fn enforcement(&self) -> &Value {
        &self.report["enforcement"]
    }
}

/// Whether any live (non-zombie) process has `mark` in its command line.
pub fn process_with_mark(mark: &str) -> bool {
    !processes_with_mark(mark).is_empty()
}

/// `pid: cmdline` of every live (non-zombie) process with `mark` in its
/// command line.
pub fn processes_with_mark(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return found;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(mark) {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'));
            if !zombie {
                found.push(format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ));
            }
        }
    }
    found
}

/// Poll `f` for up to `ms` milliseconds.
pub fn eventually(ms: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether this process runs as root (some positive controls need privilege).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Fx {
    /// The run's directory in codewhale's integrity state (this fixture
    /// has one workspace, so one directory).
    pub fn integrity_run_dir(&self) -> PathBuf {
        let runs = self.home.join(".codewhale/integrity/runs");
        let mut dirs: Vec<_> = fs::read_dir(&runs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.pop().unwrap()
    }

    /// The next codewhale command after a killed run (`--version`, which
    /// like every command first recovers dead runs), as this fixture's user;
    /// asserts it succeeded and returns its output.
    pub fn next_command(&self) -> std::process::Output {
        let out = Command::new(BIN)
            .arg("--version")
            .env("HOME", &self.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        out
    }

    /// Wait (at most 10 s) until no process holds the run's lock: only
    /// then is a killed run's baseline a dead run's (the landlock stage
    /// holds it until it has reaped the tree). Panics naming `what`.
    pub fn wait_run_unlocked(&self, what: &str) {
        let active = fs::File::open(self.integrity_run_dir().join("active")).unwrap();
        let free = || {
            // SAFETY: flock on a file this fixture opened; the lock goes
            // when the file is closed.
            unsafe {
                libc::flock(
                    std::os::fd::AsRawFd::as_raw_fd(&active),
                    libc::LOCK_EX | libc::LOCK_NB,
                ) == 0
            }
        };
        assert!(eventually(10_000, free), "{what}: the run lock stayed held");
    }
}

/// A Rust toolchain this user can run, by its real binaries (not the
/// rustup proxy, which looks under `$HOME`, and the fixture has its own
/// `HOME`): the one running this suite when this user can execute it (root),
/// else the distribution's (`/usr/bin/cargo`; ci/setup installs Debian's
/// `cargo` for the unprivileged run, since rustup's toolchain under a 0700
/// `/root` is out of the unprivileged user's reach).
pub fn cargo_bin_dir() -> PathBuf {
    let runs = |c: &Path| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Some(cargo) = std::env::var_os("CARGO").map(PathBuf::from) {
        let cargo = fs::canonicalize(&cargo).unwrap_or(cargo);
        if runs(&cargo) {
            return cargo.parent().unwrap().to_path_buf();
        }
    }
    assert!(
        runs(Path::new("/usr/bin/cargo")),
        "no Rust toolchain this user (uid {}) can run: $CARGO is not executable here and \
         /usr/bin/cargo is missing; ci/setup installs Debian's cargo for the unprivileged run",
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    );
    PathBuf::from("/usr/bin")
}
