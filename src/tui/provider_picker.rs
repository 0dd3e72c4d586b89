//! `/provider`: the picker over the catalogue's ids (and the user's own
//! `[providers.*]`), filtered by typing, and the masked key field a hosted
//! id without a key opens. Pure: keys in, an [`Outcome`] out; the app
//! builds the rows (key presence from the same lookup `auth list` uses)
//! and carries out what is chosen.
//!
//! The key typed here lives only in a [`Secret`] (its `Debug` is
//! redacted) until Enter hands it to the app as an [`ApiKey`], which
//! stores it through `codewhale auth set`'s own function. It never enters
//! the draft, the transcript or an event.

use super::state::Key;
use crate::provider::auth::ApiKey;

/// Whether a provider has a key, as `auth list` says it (presence only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// From the environment, the key store or the config.
    Set,
    Missing,
    /// A local runtime (or a custom endpoint without a key setting).
    NotNeeded,
}

/// One provider in the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub name: String,
    pub local: bool,
    pub key: Presence,
}

/// Text that must never be shown: `Debug` prints its length only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// How many characters were typed (the field shows as many bullets).
    pub fn chars(&self) -> usize {
        self.0.chars().count()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(<{} chars>)", self.chars())
    }
}

/// The masked key field for one provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEntry {
    pub provider: String,
    pub secret: Secret,
    /// Said under the field (an empty Enter, a refused store).
    pub note: Option<String>,
}

/// The open picker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picker {
    pub rows: Vec<Row>,
    pub filter: String,
    /// Index into [`Picker::visible`].
    pub selected: usize,
    /// The thread's provider now (marked in the list).
    pub current: String,
    pub entry: Option<KeyEntry>,
}

/// What a key did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Stay,
    Close,
    /// Switch the thread to this provider for the next turn.
    Choose(String),
    /// Store this key (then choose the provider).
    StoreKey {
        provider: String,
        key: ApiKey,
    },
}

impl Picker {
    pub fn new(rows: Vec<Row>, current: &str) -> Self {
        let selected = rows.iter().position(|r| r.id == current).unwrap_or(0);
        Picker {
            rows,
            filter: String::new(),
            selected,
            current: current.to_string(),
            entry: None,
        }
    }

    /// The rows the filter lets through: a case-insensitive match on the
    /// id or the name; ids starting with the filter come first.
    pub fn visible(&self) -> Vec<&Row> {
        let f = self.filter.to_lowercase();
        if f.is_empty() {
            return self.rows.iter().collect();
        }
        let hit = |r: &&Row| r.id.to_lowercase().contains(&f) || r.name.to_lowercase().contains(&f);
        let (mut first, rest): (Vec<&Row>, Vec<&Row>) = self
            .rows
            .iter()
            .filter(hit)
            .partition(|r| r.id.to_lowercase().starts_with(&f));
        first.extend(rest);
        first
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.visible().get(self.selected).copied()
    }

    pub fn key(&mut self, key: Key) -> Outcome {
        if self.entry.is_some() {
            return self.entry_key(key);
        }
        match key {
            Key::Esc | Key::CtrlC => Outcome::Close,
            Key::Up => {
                self.selected = self.selected.saturating_sub(1);
                Outcome::Stay
            }
            Key::Down | Key::Tab => {
                let n = self.visible().len();
                if self.selected + 1 < n {
                    self.selected += 1;
                }
                Outcome::Stay
            }
            Key::PageUp => {
                self.selected = self.selected.saturating_sub(10);
                Outcome::Stay
            }
            Key::PageDown => {
                let n = self.visible().len();
                self.selected = (self.selected + 10).min(n.saturating_sub(1));
                Outcome::Stay
            }
            Key::Backspace => {
                self.filter.pop();
                self.selected = 0;
                Outcome::Stay
            }
            Key::Char(c) if !c.is_control() => {
                self.filter.push(c);
                self.selected = 0;
                Outcome::Stay
            }
            Key::Enter => match self.selected_row() {
                None => Outcome::Stay,
                Some(r) if r.key == Presence::Missing => {
                    self.entry = Some(KeyEntry {
                        provider: r.id.clone(),
                        secret: Secret::default(),
                        note: None,
                    });
                    Outcome::Stay
                }
                Some(r) => Outcome::Choose(r.id.clone()),
            },
            _ => Outcome::Stay,
        }
    }

    fn entry_key(&mut self, key: Key) -> Outcome {
        let Some(e) = &mut self.entry else {
            return Outcome::Stay;
        };
        match key {
            // Back to the list; what was typed is dropped.
            Key::Esc => {
                self.entry = None;
                Outcome::Stay
            }
            Key::CtrlC => Outcome::Close,
            Key::Backspace => {
                e.secret.0.pop();
                Outcome::Stay
            }
            Key::Char(c) if !c.is_control() => {
                e.secret.0.push(c);
                e.note = None;
                Outcome::Stay
            }
            Key::Enter => {
                let k = e.secret.0.trim().to_string();
                if k.is_empty() {
                    e.note = Some("empty key: type or paste it, Esc to go back".into());
                    return Outcome::Stay;
                }
                let provider = e.provider.clone();
                e.secret = Secret::default();
                Outcome::StoreKey {
                    provider,
                    key: ApiKey::new(k),
                }
            }
            _ => Outcome::Stay,
        }
    }

    /// A paste goes into the key field when it is open (a pasted key is
    /// the usual case; line breaks are dropped), else into the filter.
    pub fn paste(&mut self, text: &str) {
        let clean: String = text.chars().filter(|c| !c.is_control()).collect();
        match &mut self.entry {
            Some(e) => {
                e.secret.0.push_str(&clean);
                e.note = None;
            }
            None => {
                self.filter.push_str(&clean);
                self.selected = 0;
            }
        }
    }

    /// Storing the key failed: say so under the field (the key is gone;
    /// type it again or Esc).
    pub fn store_failed(&mut self, why: &str) {
        if let Some(e) = &mut self.entry {
            e.note = Some(why.to_string());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        let r = |id: &str, name: &str, local: bool, key| Row {
            id: id.into(),
            name: name.into(),
            local,
            key,
        };
        vec![
            r("deepseek", "DeepSeek", false, Presence::Missing),
            r("openai", "OpenAI", false, Presence::Set),
            r("openrouter", "OpenRouter", false, Presence::Missing),
            r("ollama", "Ollama", true, Presence::NotNeeded),
        ]
    }

    fn ids(p: &Picker) -> Vec<&str> {
        p.visible().iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn typing_filters_by_id_or_name_prefix_first() {
        let mut p = Picker::new(rows(), "deepseek");
        assert_eq!(p.selected_row().unwrap().id, "deepseek");
        for c in "open".chars() {
            assert_eq!(p.key(Key::Char(c)), Outcome::Stay);
        }
        assert_eq!(ids(&p), vec!["openai", "openrouter"]);
        p.key(Key::Backspace);
        p.key(Key::Backspace);
        p.key(Key::Backspace);
        p.key(Key::Backspace);
        assert_eq!(ids(&p).len(), 4);
        // Case-insensitive, name matches too; prefix hits first.
        for c in "LLAMA".chars() {
            p.key(Key::Char(c));
        }
        assert_eq!(ids(&p), vec!["ollama"]);
        for c in "x".chars() {
            p.key(Key::Char(c));
        }
        assert!(ids(&p).is_empty());
        assert_eq!(p.key(Key::Enter), Outcome::Stay, "nothing to choose");
    }

    #[test]
    fn arrows_move_within_the_visible_rows() {
        let mut p = Picker::new(rows(), "none");
        assert_eq!(p.selected, 0);
        p.key(Key::Up);
        assert_eq!(p.selected, 0);
        for _ in 0..10 {
            p.key(Key::Down);
        }
        assert_eq!(p.selected_row().unwrap().id, "ollama");
        p.key(Key::Char('o'));
        assert_eq!(p.selected, 0, "a new filter starts at the top");
    }

    #[test]
    fn a_row_with_a_key_or_a_local_one_is_chosen_at_once() {
        let mut p = Picker::new(rows(), "deepseek");
        p.key(Key::Down);
        assert_eq!(p.key(Key::Enter), Outcome::Choose("openai".into()));
        let mut p = Picker::new(rows(), "deepseek");
        p.key(Key::Char('o'));
        p.key(Key::Char('l'));
        assert_eq!(p.key(Key::Enter), Outcome::Choose("ollama".into()));
    }

    #[test]
    fn a_hosted_row_without_a_key_opens_the_masked_field() {
        let mut p = Picker::new(rows(), "deepseek");
        assert_eq!(p.key(Key::Enter), Outcome::Stay);
        let e = p.entry.as_ref().unwrap();
        assert_eq!(e.provider, "deepseek");
        // Enter on an empty field stores nothing.
        assert_eq!(p.key(Key::Enter), Outcome::Stay);
        assert!(p.entry.as_ref().unwrap().note.is_some());
        for c in "sk-tes".chars() {
            p.key(Key::Char(c));
        }
        p.key(Key::Backspace);
        p.paste("st-123\n");
        assert_eq!(p.entry.as_ref().unwrap().secret.chars(), 11);
        // The state's Debug never shows what was typed.
        let dbg = format!("{p:?}");
        assert!(!dbg.contains("sk-te"), "{dbg}");
        assert!(dbg.contains("11 chars"), "{dbg}");
        match p.key(Key::Enter) {
            Outcome::StoreKey { provider, key } => {
                assert_eq!(provider, "deepseek");
                assert_eq!(key.expose(), "sk-test-123");
            }
            o => panic!("{o:?}"),
        }
        // The field forgets the key once it is handed over.
        assert_eq!(p.entry.as_ref().unwrap().secret.chars(), 0);
    }

    #[test]
    fn esc_leaves_the_field_then_the_picker_and_drops_the_key() {
        let mut p = Picker::new(rows(), "deepseek");
        p.key(Key::Enter);
        p.key(Key::Char('s'));
        assert_eq!(p.key(Key::Esc), Outcome::Stay);
        assert!(p.entry.is_none());
        assert_eq!(p.key(Key::Esc), Outcome::Close);
        let mut p = Picker::new(rows(), "deepseek");
        p.key(Key::Enter);
        assert_eq!(p.key(Key::CtrlC), Outcome::Close);
    }

    #[test]
    fn a_paste_without_the_field_filters() {
        let mut p = Picker::new(rows(), "deepseek");
        p.paste("route");
        assert_eq!(ids(&p), vec!["openrouter"]);
    }

    #[test]
    fn a_failed_store_is_said_under_the_field() {
        let mut p = Picker::new(rows(), "deepseek");
        p.key(Key::Enter);
        p.store_failed("auth.json: permission denied");
        assert_eq!(
            p.entry.unwrap().note.as_deref(),
            Some("auth.json: permission denied")
        );
    }
}
