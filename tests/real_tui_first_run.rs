#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The TUI's first run end to end: the real `codewhale` binary in a real
//! pseudo-terminal (portable-pty), read back by a terminal emulator's
//! parser (vt100, answering cursor-position queries), with an empty HOME
//! and CODEWHALE_HOME and no provider key anywhere.
//!
//! The local Ollama is the scripted model server of the exec tests on a
//! loopback port given by the user config (`[providers.ollama] base_url`),
//! never the real port 11434. It speaks Ollama's two surfaces codewhale
//! uses: `GET /api/tags` in the shape of Ollama's docs/api.md ("List Local
//! Models": `models[]` with `name`, `model`, `details.family`,
//! `details.families`; an embedding model listed first), and the OpenAI
//! compatibility endpoint `POST /v1/chat/completions` with the OpenAI
//! streaming chunks that Ollama's docs/openai.md says it serves.

mod common;

use common::pty::{FreshHome, Pty};
use common::scripted_model::{reply, ScriptedModel, Wire};
use std::path::{Path, PathBuf};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_codewhale");

const BOOT: Duration = Duration::from_secs(20);
const TURN: Duration = Duration::from_secs(30);
const QUICK: Duration = Duration::from_secs(5);

/// A fresh machine for one user (tests/common/pty.rs): HOME,
/// CODEWHALE_HOME, TMPDIR, XDG_RUNTIME_DIR and a workspace, all empty but
/// the user config; no provider key and no OLLAMA_HOST anywhere.
struct Machine {
    home: FreshHome,
    cw_home: PathBuf,
    ws: PathBuf,
}

impl Machine {
    fn new(config: &str) -> Machine {
        let home = FreshHome::new(config);
        Machine {
            cw_home: home.cw_home.clone(),
            ws: home.ws.clone(),
            home,
        }
    }

    fn start(&self) -> Tui {
        Tui(Pty::spawn(self.home.command(Path::new(BIN)), 30, 100))
    }

    /// Every file under CODEWHALE_HOME but the key store, with its bytes.
    fn files_but_auth(&self) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(d: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                let ft = e.file_type().unwrap();
                if ft.is_dir() {
                    walk(&p, out);
                } else if ft.is_file() && p.file_name().unwrap() != "auth.json" {
                    out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.cw_home, &mut out);
        out
    }

    fn codewhale(&self, args: &[&str]) -> String {
        let (out, err) = self.home.run(Path::new(BIN), args);
        String::from_utf8(out).unwrap() + &err
    }
}

struct Tui(Pty);

impl std::ops::Deref for Tui {
    type Target = Pty;
    fn deref(&self) -> &Pty {
        &self.0
    }
}

impl std::ops::DerefMut for Tui {
    fn deref_mut(&mut self) -> &mut Pty {
        &mut self.0
    }
}

impl Tui {
    /// Ctrl-D on an empty input; the exit is clean. Every byte it wrote.
    fn quit(mut self) -> Vec<u8> {
        self.send(b"\x04");
        let st = self.wait_exit(Duration::from_secs(10));
        assert!(st.success(), "exit {st:?}");
        std::thread::sleep(Duration::from_millis(100));
        let raw = self.raw.lock().unwrap().clone();
        raw
    }
}

fn ollama_config(m: &ScriptedModel) -> String {
    // The port goes to codewhale by config, as a user with Ollama on
    // another port would give it.
    format!("[providers.ollama]\nbase_url = \"{}\"\n", m.base_url())
}

fn remembered(m: &Machine) -> serde_json::Value {
    let p = m.cw_home.join("tui-state.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn asked_once_yes_runs_a_turn_on_the_local_ollama_and_is_not_asked_again() {
    let ollama = ScriptedModel::start(
        Wire::OpenAi,
        vec![reply("hi from ollama"), reply("again from ollama")],
    );
    let m = Machine::new(&ollama_config(&ollama));
    let t = m.start();
    // The first chat model of /api/tags (the embedding model is skipped).
    let s = t.wait_for("Use local Ollama model scripted-llama:latest? y/N", BOOT);
    assert!(s.contains("asked once"), "{s}");
    assert!(ollama.requests().is_empty(), "asking sends no chat request");
    t.send(b"y");
    let s = t.wait_for("remembered in", QUICK);
    assert!(s.contains("ollama"), "{s}");
    t.wait_for("Ask codewhale", QUICK);
    t.type_text("hello");
    t.send(b"\r");
    t.wait_for("hi from ollama", TURN);
    t.wait_idle(TURN);
    let reqs = ollama.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].body["model"], "scripted-llama:latest");
    let v = remembered(&m);
    assert_eq!(v["local_ollama"]["use_local"], true, "{v}");
    assert_eq!(v["local_ollama"]["model"], "scripted-llama:latest", "{v}");
    assert!(
        !m.ws.join("tui-state.json").exists() && std::fs::read_dir(&m.ws).unwrap().count() == 0,
        "nothing is written into the repository"
    );
    t.quit();

    // Second start: not asked; the turn runs on the same local model.
    let t = m.start();
    let s = t.wait_for("you said yes before", BOOT);
    assert!(!s.contains("y/N"), "{s}");
    t.wait_for("Ask codewhale", QUICK);
    t.type_text("and again");
    t.send(b"\r");
    t.wait_for("again from ollama", TURN);
    t.wait_idle(TURN);
    assert_eq!(ollama.requests().len(), 2);
    assert_eq!(ollama.requests()[1].body["model"], "scripted-llama:latest");
    t.quit();
}

#[test]
fn the_default_no_opens_the_picker_pins_the_provider_and_is_remembered() {
    let ollama = ScriptedModel::start(Wire::OpenAi, vec![reply("must not be used")]);
    let m = Machine::new(&ollama_config(&ollama));
    let t = m.start();
    t.wait_for("Use local Ollama model scripted-llama:latest? y/N", BOOT);
    // A reflexive Enter takes the default: no.
    t.send(b"\r");
    t.wait_for("not using the local Ollama", QUICK);
    t.wait_for("/provider", QUICK);
    t.wait_for("deepseek", QUICK);
    t.send(b"\x1b");
    t.wait_for("unchanged", QUICK);
    t.wait_for("Ask codewhale", QUICK);
    // A turn without a key fails saying so; it does not fall back.
    t.type_text("hello");
    t.send(b"\r");
    t.wait_for("no API key", TURN);
    t.wait_idle(TURN);
    assert!(ollama.requests().is_empty(), "{:?}", ollama.requests());
    assert_eq!(remembered(&m)["local_ollama"]["use_local"], false);
    t.quit();

    // Second start: not asked again; the picker is offered, saying why.
    let t = m.start();
    let s = t.wait_for("chose not to use the local Ollama", BOOT);
    assert!(!s.contains("y/N"), "{s}");
    t.wait_for("type to filter", QUICK);
    t.send(b"\x1b");
    t.wait_for("Ask codewhale", QUICK);
    t.quit();
    assert!(ollama.requests().is_empty());
}

#[test]
fn a_key_entered_in_provider_is_stored_0600_used_and_never_shown_or_recorded() {
    const SECRET: &str = "sk-test-FIRSTRUN-7f3a9c";
    // The catalogue's default OpenAI model reasons, so it speaks the
    // Responses wire (`POST /v1/responses`, docs/PROVIDERS.md).
    let model = ScriptedModel::start(Wire::Responses, vec![reply("hi with a key")]);
    // `openai` points at the scripted server; no Ollama answers (port 9,
    // discard, refused on loopback), so the picker opens at start.
    let m = Machine::new(&format!(
        "[providers.openai]\nbase_url = \"{}\"\n[providers.ollama]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        model.base_url()
    ));
    let t = m.start();
    let s = t.wait_for("no provider key is set up", BOOT);
    assert!(!s.contains("y/N"), "no Ollama: no question\n{s}");
    t.wait_for("type to filter", QUICK);
    t.type_text("openai");
    t.wait_for("› openai", QUICK);
    t.send(b"\r");
    t.wait_for("key for openai", QUICK);
    t.type_text(SECRET);
    let s = t.wait_for(&"•".repeat(SECRET.chars().count()), QUICK);
    assert!(!s.contains("FIRSTRUN"), "{s}");
    t.send(b"\r");
    t.wait_for("stored a key for openai", QUICK);
    t.wait_for("gpt-5.6", QUICK);
    t.wait_for("Ask codewhale", QUICK);
    t.type_text("hello");
    t.send(b"\r");
    t.wait_for("hi with a key", TURN);
    t.wait_idle(TURN);
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].authorization.as_deref(),
        Some(format!("Bearer {SECRET}").as_str()),
        "the next turn uses the stored key"
    );
    let raw = t.quit();

    // Stored as `auth set` stores it: auth.json, mode 0600.
    let auth = m.cw_home.join("auth.json");
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&auth).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode, 0o600);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&auth).unwrap()).unwrap();
    assert_eq!(v["providers"]["openai"]["api_key"], SECRET);
    let list = m.codewhale(&["auth", "list"]);
    let line = list.lines().find(|l| l.starts_with("openai ")).unwrap();
    assert!(
        line.contains("set") && line.contains("auth store"),
        "{list}"
    );
    assert!(!list.contains(SECRET));

    // Never on the terminal, nor in any other file (sessions, the
    // runtime's event log, the UI state), nor in the receipt.
    let needle = SECRET.as_bytes();
    assert!(
        !raw.windows(needle.len()).any(|w| w == needle),
        "the key reached the terminal"
    );
    let files = m.files_but_auth();
    assert!(
        files
            .iter()
            .any(|(p, _)| p.to_string_lossy().contains("sessions")),
        "a session file was written: {:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (p, bytes) in &files {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "the key is in {}",
            p.display()
        );
    }
    let receipt = m.codewhale(&["receipts"]);
    assert!(
        receipt.contains("hello") || receipt.contains("turn"),
        "{receipt}"
    );
    assert!(!receipt.contains(SECRET));
}
