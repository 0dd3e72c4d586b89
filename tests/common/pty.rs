//! The one PTY harness of the TUI tests and the keypress bench: a program
//! (the real `codewhale` binary, or `cat` for the bench's baseline) in a
//! real pseudo-terminal (portable-pty), its output parsed by a terminal
//! emulator's parser (vt100) on a reader thread that answers
//! cursor-position queries as a terminal would (ratatui asks, and a query
//! nobody answers stalls it), and waits on what the screen shows.
//!
//! [`FreshHome`] is the fresh machine each TUI run gets: its own empty
//! HOME, CODEWHALE_HOME, TMPDIR, XDG_RUNTIME_DIR and workspace, with only
//! the user config written. Used by tests/real_tui_pty.rs,
//! tests/real_tui_first_run.rs and (through `#[path]`) benches/tui_pty.rs.
#![allow(dead_code)]

use portable_pty::{native_pty_system, Child, CommandBuilder, ExitStatus, MasterPty, PtySize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A user config whose default provider is an OpenAI- or Anthropic-wire
/// server at `base_url` (the scripted model of the tests).
pub fn provider_config(kind: &str, base_url: &str) -> String {
    format!(
        "provider = \"custom\"\n[providers.custom]\nkind = \"{kind}\"\nbase_url = \"{base_url}\"\napi_key = \"test-key\"\nmodel = \"scripted\"\n"
    )
}

/// One user's fresh machine (removed on drop).
pub struct FreshHome {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub cw_home: PathBuf,
    pub ws: PathBuf,
    /// The whole environment a command gets here (nothing inherited but
    /// PATH: no provider key, no OLLAMA_HOST).
    pub env: Vec<(String, String)>,
}

impl FreshHome {
    /// The directories, `config` as `<cw_home>/config.toml`.
    pub fn new(config: &str) -> FreshHome {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (home, cw_home, ws) = (root.join("home"), root.join("cwhome"), root.join("ws"));
        for d in [&home, &cw_home, &ws, &root.join("tmp"), &root.join("run")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(cw_home.join("config.toml"), config).unwrap();
        let env = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), home.display().to_string()),
            ("CODEWHALE_HOME".into(), cw_home.display().to_string()),
            ("TMPDIR".into(), root.join("tmp").display().to_string()),
            (
                "XDG_RUNTIME_DIR".into(),
                root.join("run").display().to_string(),
            ),
            ("TERM".into(), "xterm-256color".into()),
        ];
        FreshHome {
            _dir: dir,
            root,
            home,
            cw_home,
            ws,
            env,
        }
    }

    /// `program` in the workspace with exactly this environment.
    pub fn command(&self, program: &Path) -> CommandBuilder {
        let mut cmd = CommandBuilder::new(program);
        cmd.env_clear();
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.cwd(&self.ws);
        cmd
    }

    /// `codewhale ARGS` run to its end outside the pty (e.g. `receipts`),
    /// as the user would run it in the workspace; panics unless it
    /// succeeds. stdout, then stderr.
    pub fn run(&self, program: &Path, args: &[&str]) -> (Vec<u8>, String) {
        let out = std::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.ws)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {args:?}: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        (
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// What the emulated terminal saw besides the screen.
#[derive(Default)]
pub struct Seen {
    pub titles: Vec<Vec<u8>>,
    pub clipboard: Vec<Vec<u8>>,
    /// Cursor-position queries not answered yet.
    dsr: usize,
}

impl vt100::Callbacks for Seen {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.titles.push(title.to_vec());
    }
    fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _ty: &[u8], data: &[u8]) {
        self.clipboard.push(data.to_vec());
    }
    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        _i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if c == 'n' && params.first().and_then(|p| p.first()) == Some(&6) {
            self.dsr += 1;
        }
    }
}

/// What the reader waits for (the screen and the bytes read so far) and
/// whom it tells the moment it first holds (the bench's paint stamp).
pub type Want = Box<dyn Fn(&vt100::Screen, u64) -> bool + Send>;

struct Watch {
    want: Want,
    tx: mpsc::Sender<Instant>,
}

/// A program in a pty, read by the emulator.
pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    /// The one writer (portable-pty hands it out once): keys and the
    /// emulator's replies share it.
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    pub child: Box<dyn Child + Send + Sync>,
    pub parser: Arc<Mutex<vt100::Parser<Seen>>>,
    /// Every byte the program wrote, in order.
    pub raw: Arc<Mutex<Vec<u8>>>,
    watch: Arc<Mutex<Option<Watch>>>,
}

impl Pty {
    pub fn spawn(cmd: CommandBuilder, rows: u16, cols: u16) -> Pty {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let child = pty.slave.spawn_command(cmd).unwrap();
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let writer = Arc::new(Mutex::new(pty.master.take_writer().unwrap()));
        let parser = Arc::new(Mutex::new(vt100::Parser::new_with_callbacks(
            rows,
            cols,
            0,
            Seen::default(),
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let watch: Arc<Mutex<Option<Watch>>> = Arc::new(Mutex::new(None));
        let (p, r, w, answer) = (parser.clone(), raw.clone(), watch.clone(), writer.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let total = {
                    let mut r = r.lock().unwrap();
                    r.extend_from_slice(&buf[..n]);
                    r.len() as u64
                };
                let mut p = p.lock().unwrap();
                p.process(&buf[..n]);
                let mut w = w.lock().unwrap();
                if w.as_ref().is_some_and(|x| (x.want)(p.screen(), total)) {
                    let _ = w.take().unwrap().tx.send(Instant::now());
                }
                drop(w);
                // Answer cursor-position queries as a terminal does.
                while p.callbacks().dsr > 0 {
                    p.callbacks_mut().dsr -= 1;
                    let (row, col) = p.screen().cursor_position();
                    let mut a = answer.lock().unwrap();
                    let _ = write!(a, "\x1b[{};{}R", row + 1, col + 1);
                    let _ = a.flush();
                }
            }
        });
        Pty {
            master: pty.master,
            writer,
            child,
            parser,
            raw,
            watch,
        }
    }

    pub fn screen(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Bytes the program wrote so far.
    pub fn bytes(&self) -> u64 {
        self.raw.lock().unwrap().len() as u64
    }

    pub fn send(&self, bytes: &[u8]) {
        let mut w = self.writer.lock().unwrap();
        w.write_all(bytes).unwrap();
        w.flush().unwrap();
    }

    /// Type text as keys (one write per key: not a paste).
    pub fn type_text(&self, text: &str) {
        for c in text.chars() {
            let mut b = [0u8; 4];
            self.send(c.encode_utf8(&mut b).as_bytes());
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The screen once it contains `what`; panics with it after `timeout`.
    pub fn wait_for(&self, what: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("`{what}` not on screen within {timeout:?}:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until the TUI's turn has ended (the "working…" line is gone).
    pub fn wait_idle(&self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if !s.contains("Esc to stop") && !s.contains("stopping…") {
                return s;
            }
            if Instant::now() > deadline {
                panic!("the turn did not end within {timeout:?}:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The program's exit status; killed (and a panic) after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the program did not exit:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The emulator and the pty change size together (as a terminal's
    /// window and its pty do).
    pub fn resize(&self, rows: u16, cols: u16) {
        let mut p = self.parser.lock().unwrap();
        p.screen_mut().set_size(rows, cols);
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
    }

    /// Write `key`; milliseconds until the screen (or the byte count)
    /// satisfies `want`, stamped by the reader the moment it parsed it.
    pub fn sample(&self, key: &[u8], want: Want) -> f64 {
        let (tx, rx) = mpsc::channel();
        *self.watch.lock().unwrap() = Some(Watch { want, tx });
        let t0 = Instant::now();
        self.send(key);
        let t1 = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no paint for {key:?} within 10 s:\n{}", self.screen()));
        (t1 - t0).as_secs_f64() * 1e3
    }

    /// After the program left: the terminal modes it must have restored.
    pub fn assert_terminal_restored(&self) {
        let p = self.parser.lock().unwrap();
        assert!(!p.screen().alternate_screen(), "alternate screen left on");
        assert!(!p.screen().bracketed_paste(), "bracketed paste left on");
        assert!(!self.raw_mode(), "raw mode left on");
    }

    /// Whether the terminal is in raw mode (no canonical input, no echo):
    /// on Linux `tcgetattr` on the master reads the slave's settings.
    pub fn raw_mode(&self) -> bool {
        let fd = self.master.as_raw_fd().expect("the pty's master fd");
        // SAFETY: a zeroed termios is a valid out-parameter; fd is the
        // master this Pty owns.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut t) }, 0, "tcgetattr");
        t.c_lflag & (libc::ICANON | libc::ECHO) != (libc::ICANON | libc::ECHO)
    }
}

impl Drop for Pty {
    /// A test that failed half-way leaves no program behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
