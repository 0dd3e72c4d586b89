//! The journal keeper (issue 29): a run's change journal that outlives the
//! run, so the next run's first snapshot adds only what changed since the
//! last snapshot instead of a `git add -A` over the whole workspace.
//!
//! One small process per store (`codewhale __snapshot-keeper`), started by
//! the first run that wants a journal, found by later runs through
//! [`SOCKET`] in the store directory. That directory is under
//! `~/.codewhale`, deny-read for every sandboxed command. Under bwrap the
//! mask leaves no socket to connect to, but Landlock does not govern
//! `connect(2)` to a socket file: a sandboxed command with the network on
//! reaches it there (`tests/real_snapshot_journal.rs` found that). So
//! every request carries the keeper's key, 256 random bits the keeper
//! writes to [`KEY`] (`0600`) before it binds the socket: a file, which
//! the deny-read rule does keep every sandboxed command from reading, in
//! both tiers. The keeper also answers only its own user (`SO_PEERCRED`).
//! It holds one [`Journal`] and answers requests, which the store makes
//! only while it holds the store's lock:
//!
//! - `take`: the paths changed since the last acknowledged take — with
//!   those taken but never acknowledged, so a client that died between its
//!   take and its snapshot loses nothing;
//! - `ack`: the last take's paths are in a snapshot;
//! - `reset`: a full snapshot is about to look at everything; what changed
//!   before it is in that snapshot (every later change is a later event);
//! - `ping`: is anybody there.
//!
//! The journal's invariant is the run's: the side index matches the
//! workspace at every path the keeper does not hold. Every other writer of
//! the side index keeps it (a full `add -A` makes the index current; a
//! restore's `read-tree -u` writes the files it changes, which are events).
//!
//! It leaves, removing its socket, when its journal loses track (the same
//! reasons as in a run: [`super::journal`]), when more than [`MAX_PENDING`]
//! paths wait (a full look is cheaper), when the workspace goes, after
//! [`IDLE`] without a request or [`MAX_AGE`] in all, and — without
//! touching the socket — when
//! its socket is removed or replaced. A client that finds no keeper, or
//! gets no answer, takes a full snapshot as before and starts a new keeper
//! first.
//!
//! Linux only (inotify); elsewhere every request fails and runs take full
//! snapshots.

#[cfg(target_os = "linux")]
use super::journal::collapse;
use super::journal::Changed;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The keeper's socket, in the store directory.
pub const SOCKET: &str = "journal.sock";

/// Why the last keeper left, in the store directory (what the next run's
/// snapshot names as the reason it was a full one).
pub const LEFT: &str = "journal-left";

/// The key every request must carry (hex), in the store directory.
pub const KEY: &str = "journal.key";

/// How long a keeper waits for the next request before it leaves.
pub const IDLE: Duration = Duration::from_secs(30 * 60);

/// A keeper leaves this long after it started even when busy: what
/// inotify never reports (a write through a hard link outside the
/// workspace, a shared `mmap` never closed) is taken by a full look at
/// least this often (the new keeper's first).
pub const MAX_AGE: Duration = Duration::from_secs(8 * 60 * 60);

/// More waiting paths than this and the keeper leaves: the next snapshot
/// would be a full one anyway (the store names at most 1,000 paths), and
/// the keeper's memory stays bounded whatever happens in the workspace.
pub const MAX_PENDING: usize = 10_000;

/// The first word of every request: a keeper of another build answers
/// nothing it does not speak.
#[cfg(target_os = "linux")]
const PROTOCOL: &str = "cw-journal-2";

/// The codewhale executable that runs keepers, once the CLI named it.
static EXE: OnceLock<PathBuf> = OnceLock::new();

/// Name the executable that runs keepers (`codewhale __snapshot-keeper`).
/// The CLI registers itself at start; a process that never does (the
/// library in tests that do not ask for one) keeps each run's journal in
/// process, as before keepers.
pub fn register_exe(exe: PathBuf) {
    let _ = EXE.set(exe);
}

/// The registered executable, if any.
pub fn exe() -> Option<&'static Path> {
    EXE.get().map(PathBuf::as_path)
}

/// A live keeper of one store (found or started).
#[derive(Debug)]
pub struct Keeper {
    dir: PathBuf,
    /// The key read from [`KEY`] when the keeper was found.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    key: String,
}

#[cfg(target_os = "linux")]
/// A reply's body: `ok\n` then NUL-terminated paths, or `err REASON\n`.
fn parse_reply(buf: &[u8]) -> Result<&[u8], String> {
    if let Some(rest) = buf.strip_prefix(b"ok\n") {
        return Ok(rest);
    }
    if let Some(reason) = buf.strip_prefix(b"err ") {
        return Err(String::from_utf8_lossy(reason).trim_end().to_string());
    }
    Err("the journal keeper gave no answer".into())
}

#[cfg(target_os = "linux")]
/// The paths of a `take` reply.
fn parse_paths(body: &[u8]) -> Changed {
    use std::os::unix::ffi::OsStrExt;
    body.split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
        .collect()
}

#[cfg(target_os = "linux")]
pub use linux::serve;

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use crate::snapshot::journal::Journal;
    use std::collections::BTreeSet;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// How long a client waits for an answer.
    const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
    /// How long a client waits for a new keeper to be watching.
    const START_TIMEOUT: Duration = Duration::from_secs(30);
    /// How often an idle keeper checks its socket is still its own.
    const CHECK_EVERY: Duration = Duration::from_secs(2);

    /// `sun_path` holds 108 bytes; a longer path is reached through a
    /// descriptor of its directory (`/proc/self/fd/N/journal.sock`).
    fn connect(dir: &Path) -> std::io::Result<UnixStream> {
        let path = dir.join(SOCKET);
        if path.as_os_str().len() < 100 {
            return UnixStream::connect(&path);
        }
        let d = std::fs::File::open(dir)?;
        UnixStream::connect(format!("/proc/self/fd/{}/{SOCKET}", d.as_raw_fd()))
    }

    impl Keeper {
        /// The live keeper of the store at `dir`, if one answers.
        pub fn find(dir: &Path) -> Option<Keeper> {
            let key = std::fs::read_to_string(dir.join(KEY)).ok()?;
            let k = Keeper {
                dir: dir.to_path_buf(),
                key: key.trim_end().to_string(),
            };
            k.ask("ping").ok().map(|_| k)
        }

        /// Start a keeper for the store at `dir` and wait until its
        /// journal watches `workspace` (so a full snapshot taken after this
        /// returns is covered). Found instead when one is already there.
        pub fn start(
            exe: &Path,
            dir: &Path,
            workspace: &Path,
            codewhale_home: &Path,
        ) -> Result<Keeper, String> {
            let mut cmd = Command::new(exe);
            cmd.arg("__snapshot-keeper")
                .arg("--store")
                .arg(dir)
                .arg("--workspace")
                .arg(workspace)
                // Nothing of the run's environment (keys, tokens): the
                // journal reads only the `.env` scan's cache, found from
                // these two.
                .env_clear()
                .env("CODEWHALE_HOME", codewhale_home)
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            if let Some(home) = std::env::var_os("HOME") {
                cmd.env("HOME", home);
            }
            // SAFETY: the closure runs between fork and exec and calls only
            // setsid(2), which is async-signal-safe; it touches no memory
            // of the parent. Its own session keeps the keeper out of the
            // terminal's signals (Ctrl-C, hang-up) and the run's group.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("starting the journal keeper: {e}"))?;
            let Some(out) = child.stdout.take() else {
                return Err("the journal keeper has no output".into());
            };
            // Reaped whenever it leaves (it is not waited for here).
            let _ = std::thread::Builder::new()
                .name("journal-keeper-reaper".into())
                .spawn(move || child.wait());
            let line = first_line(out, START_TIMEOUT)?;
            match line.as_str() {
                "ready" | "busy" => Keeper::find(dir)
                    .ok_or_else(|| "the journal keeper does not answer".to_string()),
                other => Err(other
                    .strip_prefix("err ")
                    .unwrap_or("the journal keeper did not start")
                    .to_string()),
            }
        }

        /// The paths changed since the last acknowledged take.
        pub fn take(&self) -> Result<Changed, String> {
            self.ask("take").map(|body| parse_paths(&body))
        }

        /// The last take's paths are in a snapshot.
        pub fn ack(&self) -> Result<(), String> {
            self.ask("ack").map(drop)
        }

        /// A full snapshot is about to start.
        pub fn reset(&self) -> Result<(), String> {
            self.ask("reset").map(drop)
        }

        fn ask(&self, verb: &str) -> Result<Vec<u8>, String> {
            // A keeper that left (even while this request was on its way)
            // wrote why first.
            let no = |e: std::io::Error| match std::fs::read_to_string(self.dir.join(LEFT)) {
                Ok(why) => format!("the journal keeper left: {}", why.trim_end()),
                Err(_) => format!("the journal keeper: {e}"),
            };
            let mut s = connect(&self.dir).map_err(no)?;
            s.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(no)?;
            s.set_write_timeout(Some(ANSWER_TIMEOUT)).map_err(no)?;
            s.write_all(format!("{PROTOCOL} {} {verb}\n", self.key).as_bytes())
                .map_err(no)?;
            s.shutdown(std::net::Shutdown::Write).map_err(no)?;
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).map_err(no)?;
            parse_reply(&buf).map(<[u8]>::to_vec)
        }
    }

    /// A new key in [`KEY`] (in the current directory, the store): 32
    /// bytes of the kernel's randomness as hex, written `0600` whole.
    fn new_key() -> Result<String, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut raw = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut raw))
            .map_err(|e| format!("/dev/urandom: {e}"))?;
        let key = hex::encode(raw);
        let tmp = format!("{KEY}.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(format!("{key}\n").as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, KEY))
            .map_err(|e| format!("{KEY}: {e}"))?;
        Ok(key)
    }

    /// The first line `out` prints, waiting at most `limit`.
    fn first_line(out: std::process::ChildStdout, limit: Duration) -> Result<String, String> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let ms = u16::try_from(limit.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(out.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => return Err("the journal keeper did not start in time".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("waiting for the journal keeper: {e}")),
        }
        // It writes its one line at once and then closes its output.
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| format!("reading the journal keeper: {e}"))?;
        Ok(line.trim_end().to_string())
    }

    /// `codewhale __snapshot-keeper`: keep the journal of `workspace` for
    /// the store at `dir` (see the module docs). The exit code is 0 when
    /// it left as it should, 1 when it could not start.
    pub fn serve(dir: &Path, workspace: &Path) -> i32 {
        // Descriptors the run inherited from whoever started it are not
        // the keeper's to hold open (a pipe someone waits on to close).
        // SAFETY: close_range(2) on descriptors this process has not
        // opened yet (only 0–2 are ours at this point); no Rust object
        // owns any of them.
        unsafe {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        }
        let mut out = std::io::stdout();
        match Served::start(dir, workspace) {
            Ok(None) => {
                let _ = writeln!(out, "busy");
                0
            }
            Ok(Some(mut s)) => {
                let _ = writeln!(out, "ready");
                let _ = out.flush();
                // Nobody reads more: let go of the starter's pipe.
                if let Ok(null) = std::fs::File::open("/dev/null") {
                    // SAFETY: dup2 onto this process's own stdout, which no
                    // Rust object other than `Stdout` refers to (flushed).
                    unsafe {
                        libc::dup2(null.as_raw_fd(), 1);
                    }
                }
                let why = s.run();
                s.leave(&why);
                0
            }
            Err(why) => {
                let _ = writeln!(out, "err {why}");
                1
            }
        }
    }

    struct Served {
        listener: UnixListener,
        /// The socket file's (device, inode): when another file is there,
        /// this keeper was replaced.
        ident: (u64, u64),
        journal: Journal,
        /// What every request must carry ([`KEY`]).
        key: String,
        /// Taken but not acknowledged.
        taken: BTreeSet<PathBuf>,
        last_request: Instant,
        started: Instant,
    }

    impl Served {
        /// `Ok(None)` when a keeper already answers for this store.
        fn start(dir: &Path, workspace: &Path) -> Result<Option<Served>, String> {
            // Bound by a short relative name (see `connect`).
            std::env::set_current_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            if Keeper::find(dir).is_some() {
                return Ok(None);
            }
            // A socket nobody answers on is a dead keeper's.
            let _ = std::fs::remove_file(SOCKET);
            let _ = std::fs::remove_file(LEFT);
            // The key before the socket: whoever finds the socket finds
            // this keeper's key.
            let key = new_key()?;
            let listener = UnixListener::bind(SOCKET).map_err(|e| format!("{SOCKET}: {e}"))?;
            let _ = std::fs::set_permissions(SOCKET, std::fs::Permissions::from_mode(0o600));
            listener
                .set_nonblocking(true)
                .map_err(|e| format!("{SOCKET}: {e}"))?;
            let meta = std::fs::symlink_metadata(SOCKET).map_err(|e| format!("{SOCKET}: {e}"))?;
            let journal = match Journal::start(workspace) {
                Ok(j) => j,
                Err(why) => {
                    let _ = std::fs::remove_file(SOCKET);
                    return Err(why);
                }
            };
            Ok(Some(Served {
                listener,
                ident: (meta.dev(), meta.ino()),
                journal,
                key,
                taken: BTreeSet::new(),
                last_request: Instant::now(),
                started: Instant::now(),
            }))
        }

        fn still_ours(&self) -> bool {
            std::fs::symlink_metadata(SOCKET).is_ok_and(|m| (m.dev(), m.ino()) == self.ident)
        }

        /// Serve until a reason to leave: the reason.
        fn run(&mut self) -> String {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            loop {
                let idle = self.last_request.elapsed();
                if idle >= IDLE {
                    return format!("no run asked for {} minutes", IDLE.as_secs() / 60);
                }
                if self.started.elapsed() >= MAX_AGE {
                    return format!(
                        "it had watched for {} hours (a full look at least that often)",
                        MAX_AGE.as_secs() / 3600
                    );
                }
                if !self.still_ours() {
                    return "its socket was removed or replaced".into();
                }
                let wait = (IDLE - idle).min(CHECK_EVERY);
                let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
                let (jr, lr) = {
                    let mut fds = [
                        PollFd::new(self.journal.fd(), PollFlags::POLLIN),
                        PollFd::new(self.listener.as_fd(), PollFlags::POLLIN),
                    ];
                    match poll(&mut fds, PollTimeout::from(ms)) {
                        Ok(_) => {}
                        Err(nix::errno::Errno::EINTR) => continue,
                        Err(e) => return format!("waiting for events: {e}"),
                    }
                    let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
                    (ready(&fds[0]), ready(&fds[1]))
                };
                if jr {
                    if let Err(why) = self.journal.pump() {
                        return why;
                    }
                    if self.journal.pending() + self.taken.len() > MAX_PENDING {
                        return format!("more than {MAX_PENDING} paths changed");
                    }
                }
                if lr {
                    while let Ok((stream, _)) = self.listener.accept() {
                        self.last_request = Instant::now();
                        if let Some(why) = self.answer(stream) {
                            return why;
                        }
                    }
                }
            }
        }

        /// Answer one request; why the keeper must leave after it, if so.
        fn answer(&mut self, mut stream: UnixStream) -> Option<String> {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT));
            let _ = stream.set_write_timeout(Some(ANSWER_TIMEOUT));
            let mine =
                nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
                    .is_ok_and(|c| c.uid() == nix::unistd::getuid().as_raw());
            if !mine {
                return None;
            }
            let mut line = String::new();
            if BufReader::new(&stream)
                .take(256)
                .read_line(&mut line)
                .is_err()
            {
                return None;
            }
            let verb = line
                .trim_end()
                .strip_prefix(PROTOCOL)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|rest| rest.split_once(' '))
                .and_then(|(key, verb)| {
                    use subtle::ConstantTimeEq;
                    bool::from(key.as_bytes().ct_eq(self.key.as_bytes())).then_some(verb)
                });
            let (reply, leave): (Vec<u8>, Option<String>) = match verb {
                Some("ping") => (b"ok\n".to_vec(), None),
                Some("ack") => {
                    self.taken.clear();
                    (b"ok\n".to_vec(), None)
                }
                Some("reset") => match self.journal.take() {
                    Ok(_) => {
                        self.taken.clear();
                        (b"ok\n".to_vec(), None)
                    }
                    Err(why) => (format!("err {why}\n").into_bytes(), Some(why)),
                },
                Some("take") => match self.journal.take() {
                    Ok(paths) => {
                        self.taken.extend(paths);
                        let mut r = b"ok\n".to_vec();
                        for p in collapse(&self.taken) {
                            r.extend_from_slice(p.as_os_str().as_encoded_bytes());
                            r.push(0);
                        }
                        (r, None)
                    }
                    Err(why) => (format!("err {why}\n").into_bytes(), Some(why)),
                },
                _ => (
                    format!("err not a {PROTOCOL} request with this keeper's key\n").into_bytes(),
                    None,
                ),
            };
            let _ = stream.write_all(&reply);
            leave
        }

        /// Say why in [`LEFT`] and remove the socket, if it is still this
        /// keeper's.
        fn leave(self, why: &str) {
            if self.still_ours() {
                let _ = std::fs::write(LEFT, format!("{why}\n"));
                let _ = std::fs::remove_file(SOCKET);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Keeper {
    pub fn find(_dir: &Path) -> Option<Keeper> {
        None
    }

    pub fn start(
        _exe: &Path,
        _dir: &Path,
        _workspace: &Path,
        _codewhale_home: &Path,
    ) -> Result<Keeper, String> {
        Err("no journal keeper on this system".into())
    }

    pub fn take(&self) -> Result<Changed, String> {
        let _ = &self.dir;
        Err("no journal keeper on this system".into())
    }

    pub fn ack(&self) -> Result<(), String> {
        Err("no journal keeper on this system".into())
    }

    pub fn reset(&self) -> Result<(), String> {
        Err("no journal keeper on this system".into())
    }
}

/// `codewhale __snapshot-keeper` on a system without inotify.
#[cfg(not(target_os = "linux"))]
pub fn serve(_dir: &Path, _workspace: &Path) -> i32 {
    println!("err no journal keeper on this system");
    1
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn collapse_keeps_a_directory_for_what_is_below_it() {
        let set: std::collections::BTreeSet<PathBuf> = ["a/b", "a/b/c", "a/bc", "d", "d/e/f"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(
            collapse(&set),
            ["a/b", "a/bc", "d"]
                .iter()
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn replies_parse_or_name_the_reason() {
        assert_eq!(parse_reply(b"ok\n"), Ok(&b""[..]));
        assert_eq!(
            parse_reply(b"err the inotify queue overflowed\n"),
            Err("the inotify queue overflowed".to_string())
        );
        assert!(parse_reply(b"").is_err());
        assert!(parse_reply(b"okay").is_err());
        assert_eq!(
            parse_paths(b"a/b\0c\0"),
            vec![PathBuf::from("a/b"), PathBuf::from("c")]
        );
    }
}
