//! The first run: what the UI does when no provider key is usable, and the
//! steps of the state machine for the `/provider` picker and the one
//! question about a local Ollama.
//!
//! The decision is the one `exec` makes
//! ([`crate::agent::models::may_use_local`]: no provider asked for or
//! configured, no key for the default). `exec` then uses a local Ollama
//! that serves a chat model and says so on stderr; the UI asks first,
//! once: "Use local Ollama model X? y/N" (default No). The answer is kept
//! in `$CODEWHALE_HOME/tui-state.json` ([`STATE_FILE`]), never in the
//! repository, so it is not asked again:
//!
//! * yes: turns run with exec's fallback (the model exec would pick: the
//!   first chat model of `GET /api/tags`, at `OLLAMA_HOST`, the
//!   `[providers.ollama] base_url`, or the default address);
//! * no: the thread is pinned to the default provider (so no turn falls
//!   back) and the picker opens.

use super::provider_picker::{Outcome, Picker, Row};
use super::state::{Effect, Key, State};
use crate::provider::auth::ApiKey;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the UI remembers its answers, under `$CODEWHALE_HOME`.
pub const STATE_FILE: &str = "tui-state.json";

/// The remembered answer to "Use local Ollama model X?".
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LocalAnswer {
    /// `true`: yes, use it.
    pub use_local: bool,
    /// What was offered (for the user reading the file).
    pub root: String,
    pub model: String,
    /// RFC 3339 UTC.
    pub answered_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid UI state ({what}); fix or delete it")]
    Parse { path: PathBuf, what: String },
}

pub fn state_path(home: &Path) -> PathBuf {
    home.join(STATE_FILE)
}

fn read_object(path: &Path) -> Result<Map<String, Value>, StateFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(source) => {
            return Err(StateFileError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(StateFileError::Parse {
            path: path.to_path_buf(),
            what: "not a JSON object".into(),
        }),
        Err(e) => Err(StateFileError::Parse {
            path: path.to_path_buf(),
            what: e.to_string(),
        }),
    }
}

/// The remembered answer, if the question was answered.
pub fn load_local(home: &Path) -> Result<Option<LocalAnswer>, StateFileError> {
    let path = state_path(home);
    let m = read_object(&path)?;
    match m.get("local_ollama") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| StateFileError::Parse {
                path,
                what: format!("key `local_ollama`: {e}"),
            }),
    }
}

/// Remember the answer (other keys of the file are kept), written via a
/// temporary file and a rename so a crash leaves the old file or the new.
pub fn save_local(home: &Path, a: &LocalAnswer) -> Result<PathBuf, StateFileError> {
    let path = state_path(home);
    let io = |source| StateFileError::Io {
        path: path.clone(),
        source,
    };
    let mut m = read_object(&path)?;
    m.insert(
        "local_ollama".into(),
        serde_json::to_value(a).map_err(|e| StateFileError::Parse {
            path: path.clone(),
            what: e.to_string(),
        })?,
    );
    std::fs::create_dir_all(home).map_err(io)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tui-state.json.")
        .tempfile_in(home)
        .map_err(io)?;
    let text = serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default();
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.write_all(b"\n").map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(&path).map_err(|e| io(e.error))?;
    Ok(path)
}

/// The question on screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalAsk {
    /// The Ollama address that answered.
    pub root: String,
    /// The model exec would pick there.
    pub model: String,
}

/// What the UI does at start when no key is usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// A provider is usable: nothing to do.
    Ready,
    /// Ask once.
    Ask(LocalAsk),
    /// Answered yes before and Ollama answers: use it.
    UseLocal(LocalAsk),
    /// Open the picker, saying why.
    Offer(String),
}

/// The pure first-run decision. `probe` looks for a local Ollama with a
/// chat model (exec's fallback, without using it); it is only called when
/// its answer matters.
pub fn plan(
    needs_provider: bool,
    remembered: Option<&LocalAnswer>,
    probe: impl FnOnce() -> Option<LocalAsk>,
) -> Start {
    if !needs_provider {
        return Start::Ready;
    }
    match remembered {
        Some(a) if !a.use_local => Start::Offer(format!(
            "no provider key is set up (you chose not to use the local Ollama on {}): \
             pick a provider and enter its key",
            a.answered_at
        )),
        Some(_) => match probe() {
            Some(l) => Start::UseLocal(l),
            None => Start::Offer(
                "no provider key is set up and the local Ollama you chose does not answer \
                 with a chat model: pick a provider"
                    .into(),
            ),
        },
        None => match probe() {
            Some(l) => Start::Ask(l),
            None => {
                Start::Offer("no provider key is set up: pick a provider and enter its key".into())
            }
        },
    }
}

impl State {
    /// A key while the local-Ollama question is up: `y` uses it; `n`,
    /// Enter (the default), Esc and Ctrl-C decline. Nothing else answers.
    pub(super) fn ask_key(&mut self, key: Key) -> Vec<Effect> {
        let Some(ask) = &self.ask else {
            return Vec::new();
        };
        let use_local = match key {
            Key::Char('y') | Key::Char('Y') => true,
            Key::Char('n') | Key::Char('N') | Key::Enter | Key::Esc | Key::CtrlC => false,
            Key::CtrlD => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            _ => return Vec::new(),
        };
        let (root, model) = (ask.root.clone(), ask.model.clone());
        self.ask = None;
        let mut fx = vec![Effect::AnswerLocal {
            use_local,
            root,
            model,
        }];
        if !use_local {
            fx.push(Effect::Provider);
        }
        fx
    }

    /// A key while the picker is up.
    pub(super) fn picker_key(&mut self, key: Key) -> Vec<Effect> {
        let Some(p) = &mut self.picker else {
            return Vec::new();
        };
        match p.key(key) {
            Outcome::Stay => Vec::new(),
            Outcome::Close => {
                self.picker = None;
                self.notice(
                    false,
                    format!(
                        "provider {} unchanged (/provider to pick one)",
                        self.footer.provider
                    ),
                );
                Vec::new()
            }
            Outcome::Choose(id) => {
                self.picker = None;
                vec![Effect::ChooseProvider(id)]
            }
            Outcome::StoreKey { provider, key } => vec![Effect::StoreKey { provider, key }],
        }
    }

    /// The app built the rows: open the picker on them.
    pub(super) fn open_picker(&mut self, rows: Vec<Row>) {
        self.picker = Some(Picker::new(rows, &self.footer.provider));
    }

    /// The key was stored: switch to its provider.
    pub(super) fn key_stored(&mut self, provider: String) -> Vec<Effect> {
        self.picker = None;
        self.notice(
            false,
            format!("stored a key for {provider} (as `codewhale auth set` does)"),
        );
        vec![Effect::ChooseProvider(provider)]
    }

    /// The thread's provider (and model) changed for the next turn.
    pub(super) fn provider_switched(&mut self, provider: String, model: String) {
        self.notice(
            false,
            format!("provider {provider} · model {model} for the next turn"),
        );
        self.footer.set_model(&provider, &model);
    }
}

/// The effect of storing a key, for the app: kept here so the key's path
/// from the field to the store is in one place.
pub fn store_key(home: &Path, provider: &str, key: &ApiKey) -> anyhow::Result<PathBuf> {
    let store = crate::provider::auth::AuthStore::new(home);
    store.store_key(provider, key.expose())?;
    Ok(store.path().to_path_buf())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "first_run_tests.rs"]
mod tests;
