//! The TUI's state machine: `(state, event) -> (state, effects)`, with no
//! terminal, clock or runtime inside. Keys, runtime envelopes and command
//! results come in as [`Event`]s; what must happen outside (start a turn,
//! interrupt it, answer an approval, run `/undo`) goes out as [`Effect`]s
//! that the app performs. Everything a user can observe about the keys
//! (Tab, Shift+Tab, Esc, the approval card, Ctrl-C, Ctrl-D) is decided
//! here, so it is tested here without a terminal.

use super::first_run::LocalAsk;
use super::provider_picker::{Picker, Row};
use super::sanitize::sanitize;
use super::slash::{self, Slash};
use crate::agent::InterruptCause;
use crate::authz::reviewer::ReviewDecision;
use crate::authz::{Approval, Mode};
use crate::provider::auth::ApiKey;
use crate::runtime::item_meta::{ApprovalAsk, ToolItemMeta, ToolItemStart};
use crate::runtime::served::{ApprovalEnd, ItemEnd, ReviewDecided, Served, ServedEvent};
use crate::runtime::{ItemKind, TurnItemRecord, TurnRecord, TurnStatus};
use serde_json::Value;

/// A key as the state machine sees it (the app maps crossterm's events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Tab,
    BackTab,
    Esc,
    Enter,
    CtrlC,
    CtrlD,
    Left,
    Right,
    Up,
    Down,
    Backspace,
    PageUp,
    PageDown,
    /// Ctrl-O: expand (or collapse again) the latest reasoning cell.
    CtrlO,
    Char(char),
    /// Anything else: editing keys for the text area.
    Other,
}

/// The answers a card offers, in display order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// `y`: this call only.
    Once,
    /// `a`: this kind of call for the rest of the conversation.
    Session,
    /// `n`: deny (the highlighted default).
    Deny,
}

impl Choice {
    pub const ALL: [Choice; 3] = [Choice::Once, Choice::Session, Choice::Deny];

    pub fn label(self) -> &'static str {
        match self {
            Choice::Once => "y yes, once",
            Choice::Session => "a always this session",
            Choice::Deny => "n no",
        }
    }
}

/// A gate-8 question waiting for the user.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub approval_id: String,
    pub tool: String,
    /// The exact command line (shell) when there is one.
    pub command: Option<String>,
    /// The path a file tool names.
    pub path: Option<String>,
    /// The edit as a unified diff, when the call carries one.
    pub diff: Option<String>,
    pub cwd: String,
    pub posture: String,
    pub reason: String,
    /// A floor hold: `a` approves this call only.
    pub hold: bool,
    pub selected: Choice,
}

/// One entry of the transcript.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    User(String),
    /// Agent text: `text` is committed (whole lines, or everything once
    /// done); `pending` waits for the next commit tick.
    Agent {
        item_id: String,
        text: String,
        pending: String,
        done: bool,
    },
    Tool(Box<ToolCell>),
    /// The model's reasoning before a response: one line (`thinking …
    /// (N chars)`) until Ctrl-O expands the latest one.
    Reasoning {
        text: String,
        expanded: bool,
    },
    Notice {
        error: bool,
        text: String,
    },
}

/// A tool call as a compact cell.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ToolCell {
    pub item_id: String,
    pub call_id: String,
    pub tool: String,
    /// What it ran or touched, one line (`$ cmd`, `read_file a.txt`).
    pub title: String,
    /// A file edit's real change: the unified diff the tool made of the
    /// file before and after (the item's `diff`, set when it completes).
    pub diff: Option<String>,
    /// What the call proposes, from its arguments: shown on an approval
    /// card, before anything changed (never as the cell's diff).
    pub proposal: Option<String>,
    /// `None` while running.
    pub status: Option<String>,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<u64>,
    /// The verdict the runtime recorded for the call (its item's
    /// `approval`), shown as it is: never re-derived here.
    pub approval: Option<crate::session::Verdict>,
    /// The head/tail of the output (already sanitised), and how many
    /// lines were hidden between them.
    pub output: Option<(Vec<String>, Vec<String>, usize)>,
}

/// What the footer shows besides the posture.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FooterInfo {
    pub model: String,
    pub provider: String,
    /// `bwrap`, `landlock`, `seatbelt`, `opensandbox`, `none`.
    pub backend: String,
    /// The selected backend's tier: `full` (bwrap), `partial` (the
    /// Landlock-only tier, Seatbelt), `remote` (OpenSandbox), `off`.
    /// `codewhale doctor` measures what it really enforces.
    pub level: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// `None`: unknown price (shown as `cost ?`, never `$0`).
    pub cost_usd: Option<f64>,
    /// The sandbox mode Full Access still runs under when the user's
    /// settings cap it (`None`: Full Access really runs unsandboxed).
    pub full_access_capped: Option<String>,
    /// The backend and tier selected at startup. `backend`/`level` follow
    /// what each command really ran under; a permission change puts
    /// these back, so a Full Access command's `none off` never lingers
    /// into Ask.
    pub selected: (String, String),
    /// The latest model request's prompt plus answer (the runtime's
    /// `turn.context_tokens`); `None` before any request reported usage.
    pub context_tokens: Option<u64>,
    /// The model's context window from the catalogue (`None`: not known,
    /// e.g. a local model; the footer then shows tokens, not a percentage).
    pub context_window: Option<u32>,
}

impl FooterInfo {
    /// Switch the model shown, and the context window it has.
    pub fn set_model(&mut self, provider: &str, model: &str) {
        self.provider = provider.to_string();
        self.model = model.to_string();
        self.context_window = crate::provider::catalogue::get(provider)
            .and_then(|e| e.model(model))
            .and_then(|m| m.context_window);
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub mode: Mode,
    pub permission: Approval,
    /// Auto-Review's breaker tripped on this thread (the reason): the
    /// thread runs in Ask until the user selects Auto-Review again.
    pub auto_review_paused: Option<String>,
    pub thread_id: String,
    /// The running turn.
    pub turn: Option<String>,
    /// Esc was pressed and the turn has not ended yet.
    pub stopping: bool,
    pub card: Option<Card>,
    pub draft_empty: bool,
    pub transcript: Vec<Cell>,
    /// A one-line message above the footer ("Esc to stop first").
    pub flash: Option<String>,
    /// When Ctrl-C armed quitting (ms on the app's clock).
    pub quit_armed_at: Option<u64>,
    pub trust: bool,
    pub footer: FooterInfo,
    /// Cost of earlier turns of this session (the footer adds the live one).
    pub spent_usd: Option<f64>,
    pub quit: bool,
    /// Something visible changed since the last frame.
    pub dirty: bool,
    /// The session id of the latest turn (what `/undo` rolls back).
    pub last_session: Option<String>,
    /// Rows scrolled back from the bottom of the transcript.
    pub scroll: usize,
    /// The thread's workspace (the card's cwd).
    pub workspace: String,
    /// `/provider`'s picker (and its key field) when open.
    pub picker: Option<Picker>,
    /// The first run's "Use local Ollama model X?" when asked.
    pub ask: Option<LocalAsk>,
    /// Plan's hand-off card, offered when a Plan turn completes.
    pub handoff: Option<super::handoff::Handoff>,
    /// The model's latest to-do list (`todo.updated`), shown above the
    /// input; kept across turns (a goal spans them).
    pub todos: Vec<crate::runtime::served::TodoItem>,
    /// The mode the running turn was started in (the hand-off follows a
    /// Plan turn only).
    pub turn_mode: Option<Mode>,
    /// Turns of this conversation started so far (`/receipts N` numbers).
    pub turns_started: u32,
    /// The conversation's compactions, as the runtime reported them
    /// (`/receipts` lists them).
    pub compactions: Vec<Compacted>,
}

/// One compaction of the conversation, for `/receipts`.
#[derive(Clone, Debug, PartialEq)]
pub struct Compacted {
    /// The conversation's turn number (`/receipts N`).
    pub turn: u32,
    pub auto: bool,
    /// `threshold`, `context_length` or `manual`.
    pub reason: String,
    pub tokens_before: Option<u64>,
    pub tokens_after: Option<u64>,
    pub window: Option<u64>,
}

impl Compacted {
    /// One line: `turn 12: automatic (threshold), ~7.6k → ~1.1k tokens
    /// of a 9.0k window`.
    pub fn line(&self) -> String {
        let k = super::tokens::human;
        let sizes = match (self.tokens_before, self.tokens_after) {
            (Some(b), Some(a)) => format!(", ~{} → ~{} tokens", k(b), k(a)),
            _ => String::new(),
        };
        let window = self
            .window
            .map(|w| format!(" of a {} window", k(w)))
            .unwrap_or_default();
        format!(
            "turn {}: {} ({}){sizes}{window}",
            self.turn,
            if self.auto { "automatic" } else { "manual" },
            self.reason
        )
    }
}

/// What the app must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Give the key to the text area.
    PassToEditor,
    /// Take the draft out of the text area and send it back as
    /// [`Event::Submit`].
    TakeDraft,
    /// Insert pasted text into the draft (one draft, never a send).
    InsertDraft(String),
    ClearDraft,
    StartTurn {
        prompt: String,
        mode: Mode,
        permission: Approval,
    },
    /// The user selected Auto-Review again after its breaker paused it:
    /// the thread's breaker starts counting afresh.
    ResumeAutoReview,
    /// Stop the running turn; `cause` is recorded as why.
    Interrupt {
        turn_id: String,
        cause: InterruptCause,
    },
    Answer {
        approval_id: String,
        choice: Choice,
    },
    Undo {
        session: Option<String>,
    },
    Restore(u64),
    Receipts {
        turn: Option<u32>,
        json: bool,
    },
    /// `/model`: show, or switch the model (and the reasoning effort).
    SetModel {
        id: String,
        effort: Option<crate::config::effort::ReasoningEffort>,
    },
    /// Build the picker's rows (sent back as [`Event::PickerRows`]).
    Provider,
    /// Switch the thread's provider for the next turn (through the runtime).
    ChooseProvider(String),
    /// Store a key typed into the picker's field, as `auth set` does.
    StoreKey {
        provider: String,
        key: ApiKey,
    },
    /// Remember the answer to the local-Ollama question.
    AnswerLocal {
        use_local: bool,
        root: String,
        model: String,
    },
    /// `/mcp [reload]`: the MCP servers' status, or re-read and restart.
    Mcp {
        reload: bool,
    },
    /// `/skills [enable|disable NAME]`: list, or switch one and list.
    Skills(Option<(String, bool)>),
    /// `/memory [add TEXT]`: show the memory file, or append a line.
    Memory(Option<String>),
    /// `/import-claude`: the proposal of `codewhale import claude`.
    ImportClaude,
    Quit,
}

/// What happens to the state.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A key and the app's clock in ms (for the Ctrl-C window).
    Key {
        key: Key,
        at_ms: u64,
    },
    /// The text area changed (after the app gave it a key or a paste).
    DraftChanged {
        empty: bool,
    },
    Paste(String),
    /// The draft the app took after [`Effect::TakeDraft`].
    Submit(String),
    /// One runtime envelope of this thread.
    Runtime(Value),
    /// The commit clock (~16 ms): whole lines of streamed text appear.
    Tick,
    /// A command (undo, receipts, ...) finished: its text or its error.
    Output {
        error: bool,
        text: String,
    },
    /// The terminal changed size.
    Resize,
    /// The picker's rows (after [`Effect::Provider`]).
    PickerRows(Vec<Row>),
    /// Ask the first run's question.
    AskLocal(LocalAsk),
    /// A key from the picker's field was stored.
    KeyStored {
        provider: String,
    },
    /// Storing it failed (the field says why).
    KeyRefused(String),
    /// The thread's provider and model for the next turn.
    ProviderSwitched {
        provider: String,
        model: String,
    },
}

/// How long a second Ctrl-C has to quit.
pub const QUIT_WINDOW_MS: u64 = 1000;

/// Under an agent message the turn's interrupt cut short.
pub const INTERRUPTED_MESSAGE: &str = "(message interrupted: the rest was not received)";

pub const OPERATE_NOTE: &str =
    "Operate: the request is a goal — a to-do list, parallel sub-agents, background jobs, and a reviewer's verdict asked for before a multi-file change ends";
pub const AUTO_REVIEW_NOTE: &str =
    "Auto-Review: rules approve what they prove safe; other ordinary questions go to the model reviewer (it pauses after 3 denials in a row)";
pub const FULL_ACCESS_NOTE: &str = "Full Access: commands run without the codewhale sandbox; the safety floor, repository rules and rules-file denies still act";

impl State {
    pub fn new(thread_id: &str, permission: Approval, footer: FooterInfo) -> Self {
        State {
            mode: Mode::Work,
            permission,
            auto_review_paused: None,
            thread_id: thread_id.to_string(),
            turn: None,
            stopping: false,
            card: None,
            draft_empty: true,
            transcript: Vec::new(),
            flash: None,
            quit_armed_at: None,
            trust: false,
            footer,
            spent_usd: Some(0.0),
            quit: false,
            dirty: true,
            last_session: None,
            scroll: 0,
            workspace: String::new(),
            picker: None,
            ask: None,
            handoff: None,
            todos: Vec::new(),
            turn_mode: None,
            turns_started: 0,
            compactions: Vec::new(),
        }
    }

    /// The one-time header of a new conversation (a transcript notice, so
    /// it scrolls away like any line): version, workspace, provider and
    /// model, the sandbox backend and tier, and the keys a newcomer needs.
    pub fn startup_header(&self) -> String {
        let f = &self.footer;
        format!(
            "codewhale {} · {}
{} · {} · sandbox {} {}
Tab mode · Shift+Tab permission · /help",
            env!("CARGO_PKG_VERSION"),
            self.workspace,
            f.provider,
            f.model,
            f.backend,
            f.level
        )
    }

    /// The pure step: the next state and what to do.
    pub fn step(mut self, ev: Event) -> (State, Vec<Effect>) {
        let fx = self.update(ev);
        (self, fx)
    }

    /// [`State::step`] in place (the app's loop).
    pub fn update(&mut self, ev: Event) -> Vec<Effect> {
        match ev {
            Event::Key { key, at_ms } => {
                self.dirty = true;
                self.key(key, at_ms)
            }
            Event::DraftChanged { empty } => {
                self.draft_empty = empty;
                self.dirty = true;
                Vec::new()
            }
            Event::Paste(text) => {
                self.dirty = true;
                if let Some(p) = &mut self.picker {
                    // Into the key field or the filter, never the draft.
                    p.paste(&text);
                    return Vec::new();
                }
                if self.card.is_some() || self.ask.is_some() || self.handoff.is_some() {
                    // A paste must never answer a card.
                    return Vec::new();
                }
                vec![Effect::InsertDraft(
                    text.replace("\r\n", "\n").replace('\r', "\n"),
                )]
            }
            Event::Submit(text) => {
                self.dirty = true;
                self.submit(text)
            }
            Event::Runtime(env) => self.runtime(&env),
            Event::Tick => {
                if self.commit_lines() {
                    self.dirty = true;
                }
                Vec::new()
            }
            Event::Output { error, text } => {
                self.notice(error, text);
                Vec::new()
            }
            Event::Resize => {
                self.dirty = true;
                Vec::new()
            }
            Event::PickerRows(rows) => {
                self.dirty = true;
                self.open_picker(rows);
                Vec::new()
            }
            Event::AskLocal(a) => {
                self.dirty = true;
                self.ask = Some(a);
                Vec::new()
            }
            Event::KeyStored { provider } => {
                self.dirty = true;
                self.key_stored(provider)
            }
            Event::KeyRefused(why) => {
                self.dirty = true;
                if let Some(p) = &mut self.picker {
                    p.store_failed(&why);
                }
                Vec::new()
            }
            Event::ProviderSwitched { provider, model } => {
                self.dirty = true;
                self.provider_switched(provider, model);
                Vec::new()
            }
        }
    }

    pub(super) fn notice(&mut self, error: bool, text: impl Into<String>) {
        self.transcript.push(Cell::Notice {
            error,
            text: text.into(),
        });
        self.dirty = true;
    }

    fn key(&mut self, key: Key, at_ms: u64) -> Vec<Effect> {
        if key != Key::CtrlC {
            self.quit_armed_at = None;
        }
        if self.card.is_some() {
            return self.card_key(key);
        }
        self.flash = None;
        if self.ask.is_some() {
            return self.ask_key(key);
        }
        if self.picker.is_some() {
            return self.picker_key(key);
        }
        if self.handoff.is_some() {
            return self.handoff_key(key);
        }
        match key {
            Key::PageUp => {
                self.scroll += 10;
                Vec::new()
            }
            Key::PageDown => {
                self.scroll = self.scroll.saturating_sub(10);
                Vec::new()
            }
            Key::CtrlO => {
                let last = self.transcript.iter_mut().rev().find_map(|c| match c {
                    Cell::Reasoning { expanded, .. } => Some(expanded),
                    _ => None,
                });
                match last {
                    Some(e) => {
                        *e = !*e;
                        self.dirty = true;
                    }
                    None => self.flash = Some("no reasoning to expand".into()),
                }
                Vec::new()
            }
            Key::Esc => match &self.turn {
                Some(t) => {
                    self.stopping = true;
                    self.flash = Some("stopping…".into());
                    vec![Effect::Interrupt {
                        turn_id: t.clone(),
                        cause: InterruptCause::Esc,
                    }]
                }
                None => Vec::new(),
            },
            Key::Tab => {
                if !self.draft_empty {
                    return vec![Effect::PassToEditor];
                }
                if self.turn.is_some() {
                    self.flash = Some("Esc to stop first".into());
                    return Vec::new();
                }
                let next = match self.mode {
                    Mode::Plan => Mode::Work,
                    Mode::Work => Mode::Operate,
                    Mode::Operate => Mode::Plan,
                };
                self.set_mode(next);
                Vec::new()
            }
            Key::BackTab => {
                if self.turn.is_some() {
                    self.flash = Some("Esc to stop first".into());
                    return Vec::new();
                }
                let next = match self.permission {
                    Approval::Ask | Approval::NeverRun => Approval::AutoReview,
                    Approval::AutoReview => Approval::FullAccess,
                    Approval::FullAccess => Approval::Ask,
                };
                self.set_permission(next);
                if next == Approval::AutoReview && self.auto_review_paused.take().is_some() {
                    return vec![Effect::ResumeAutoReview];
                }
                Vec::new()
            }
            Key::Enter => {
                if self.draft_empty {
                    return Vec::new();
                }
                vec![Effect::TakeDraft]
            }
            Key::CtrlC => self.ctrl_c(at_ms),
            Key::CtrlD => {
                if self.draft_empty {
                    self.quit = true;
                    vec![Effect::Quit]
                } else {
                    vec![Effect::PassToEditor]
                }
            }
            Key::Left
            | Key::Right
            | Key::Up
            | Key::Down
            | Key::Backspace
            | Key::Char(_)
            | Key::Other => vec![Effect::PassToEditor],
        }
    }

    /// A key while Plan's hand-off card is up: the card decides, the
    /// state applies it (Work: mode and permission as Tab and Shift+Tab
    /// set them, then "go ahead" as the next prompt).
    fn handoff_key(&mut self, key: Key) -> Vec<Effect> {
        use super::handoff::{HandoffKey, Outcome, GO_AHEAD};
        let Some(h) = &mut self.handoff else {
            return Vec::new();
        };
        let k = match key {
            Key::Char(c) => HandoffKey::Char(c),
            Key::Enter => HandoffKey::Enter,
            Key::Esc => HandoffKey::Esc,
            Key::CtrlC => HandoffKey::CtrlC,
            Key::CtrlD => HandoffKey::CtrlD,
            Key::Left | Key::BackTab => HandoffKey::Prev,
            Key::Right | Key::Tab => HandoffKey::Next,
            _ => HandoffKey::Other,
        };
        match h.key(k) {
            Outcome::Open => Vec::new(),
            Outcome::KeepPlanning => {
                self.handoff = None;
                Vec::new()
            }
            Outcome::Quit => {
                self.handoff = None;
                self.quit = true;
                vec![Effect::Quit]
            }
            Outcome::Go(m, p) => {
                self.handoff = None;
                self.set_mode(m);
                self.set_permission(p);
                self.submit(GO_AHEAD.to_string())
            }
        }
    }

    fn ctrl_c(&mut self, at_ms: u64) -> Vec<Effect> {
        if let Some(t) = &self.turn {
            self.stopping = true;
            self.flash = Some("stopping…".into());
            return vec![Effect::Interrupt {
                turn_id: t.clone(),
                cause: InterruptCause::CtrlC,
            }];
        }
        if let Some(c) = self.card.take() {
            return vec![Effect::Answer {
                approval_id: c.approval_id,
                choice: Choice::Deny,
            }];
        }
        if !self.draft_empty {
            self.draft_empty = true;
            return vec![Effect::ClearDraft];
        }
        match self.quit_armed_at {
            Some(t) if at_ms.saturating_sub(t) <= QUIT_WINDOW_MS => {
                self.quit = true;
                vec![Effect::Quit]
            }
            _ => {
                self.quit_armed_at = Some(at_ms);
                self.flash = Some("Ctrl-C again to quit".into());
                Vec::new()
            }
        }
    }

    fn card_key(&mut self, key: Key) -> Vec<Effect> {
        let Some(card) = &mut self.card else {
            return Vec::new();
        };
        let pick = match key {
            Key::Char('y') | Key::Char('Y') => Some(Choice::Once),
            Key::Char('a') | Key::Char('A') => Some(Choice::Session),
            Key::Char('n') | Key::Char('N') => Some(Choice::Deny),
            Key::Enter => Some(card.selected),
            Key::Left => {
                let i = Choice::ALL
                    .iter()
                    .position(|c| *c == card.selected)
                    .unwrap_or(2);
                card.selected = Choice::ALL[i.saturating_sub(1)];
                None
            }
            Key::Right | Key::Tab => {
                let i = Choice::ALL
                    .iter()
                    .position(|c| *c == card.selected)
                    .unwrap_or(2);
                card.selected = Choice::ALL[(i + 1).min(2)];
                None
            }
            Key::Esc | Key::CtrlC => {
                // Esc aborts the turn (the runtime cancels the request).
                self.card = None;
                self.stopping = true;
                let cause = if key == Key::Esc {
                    InterruptCause::Esc
                } else {
                    InterruptCause::CtrlC
                };
                return match &self.turn {
                    Some(t) => vec![Effect::Interrupt {
                        turn_id: t.clone(),
                        cause,
                    }],
                    None => Vec::new(),
                };
            }
            // Nothing else answers or leaks into the draft.
            _ => None,
        };
        match pick {
            Some(choice) => {
                let approval_id = card.approval_id.clone();
                self.card = None;
                vec![Effect::Answer {
                    approval_id,
                    choice,
                }]
            }
            None => Vec::new(),
        }
    }

    fn set_mode(&mut self, m: Mode) {
        self.mode = m;
        if m == Mode::Operate {
            self.flash = Some(OPERATE_NOTE.into());
        }
    }

    fn set_permission(&mut self, p: Approval) {
        if p != self.permission && !self.footer.selected.0.is_empty() {
            (self.footer.backend, self.footer.level) = self.footer.selected.clone();
        }
        self.permission = p;
        self.flash = match p {
            Approval::AutoReview => Some(AUTO_REVIEW_NOTE.into()),
            Approval::FullAccess => Some(FULL_ACCESS_NOTE.into()),
            _ => None,
        };
    }

    fn submit(&mut self, text: String) -> Vec<Effect> {
        self.draft_empty = true;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        if trimmed.starts_with('/') {
            return match slash::parse(trimmed) {
                Ok(cmd) => self.slash(cmd),
                Err(e) => {
                    self.notice(true, e);
                    Vec::new()
                }
            };
        }
        if self.turn.is_some() {
            self.flash = Some("a turn is running: Esc to stop first".into());
            return vec![Effect::InsertDraft(text)];
        }
        self.transcript.push(Cell::User(text.clone()));
        self.turn_mode = Some(self.mode);
        vec![Effect::StartTurn {
            prompt: text,
            mode: self.mode,
            permission: self.permission,
        }]
    }

    fn slash(&mut self, cmd: Slash) -> Vec<Effect> {
        let busy = self.turn.is_some();
        let needs_idle = !matches!(
            cmd,
            Slash::Help | Slash::Quit | Slash::Receipts { .. } | Slash::Clear
        );
        if busy && needs_idle {
            self.flash = Some("Esc to stop first".into());
            return Vec::new();
        }
        match cmd {
            Slash::Help => {
                self.notice(false, slash::help());
                Vec::new()
            }
            Slash::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            Slash::Clear => {
                self.transcript.clear();
                Vec::new()
            }
            Slash::Mode(m) => {
                self.set_mode(m);
                if let Some(f) = self.flash.take() {
                    self.notice(false, f);
                }
                Vec::new()
            }
            Slash::Trust(on) => {
                self.trust = on;
                self.notice(
                    false,
                    if on {
                        "trust on: /restore may jump to any snapshot"
                    } else {
                        "trust off"
                    },
                );
                Vec::new()
            }
            Slash::Undo => vec![Effect::Undo {
                session: self.last_session.clone(),
            }],
            Slash::Restore(n) => {
                if self.trust || self.permission == Approval::FullAccess {
                    vec![Effect::Restore(n)]
                } else {
                    self.notice(
                        true,
                        "/restore is refused: turn trust on with /trust on (or use Full Access)",
                    );
                    Vec::new()
                }
            }
            Slash::Receipts { turn, json } => vec![Effect::Receipts { turn, json }],
            Slash::Model { id, effort } => vec![Effect::SetModel { id, effort }],
            Slash::Provider(None) => vec![Effect::Provider],
            Slash::Provider(Some(id)) => vec![Effect::ChooseProvider(id)],
            Slash::Mcp { reload } => vec![Effect::Mcp { reload }],
            Slash::Skills(change) => vec![Effect::Skills(change)],
            Slash::Memory(add) => vec![Effect::Memory(add)],
            Slash::ImportClaude => vec![Effect::ImportClaude],
        }
    }

    /// A served envelope, read as its typed event (never by key).
    fn runtime(&mut self, env: &Value) -> Vec<Effect> {
        let Some(ev) = Served::decode(env) else {
            return Vec::new();
        };
        if ev.thread_id.as_deref() != Some(self.thread_id.as_str()) {
            return Vec::new();
        }
        let item_id = ev.item_id.unwrap_or_default();
        match ev.event {
            ServedEvent::TurnStarted(turn) => {
                self.turns_started += 1;
                self.turn = ev.turn_id;
                self.stopping = false;
                self.last_session = turn.session_id.clone();
            }
            ServedEvent::TurnLifecycle(turn) => self.usage(&turn, false),
            ServedEvent::TurnCompleted(turn) => self.turn_completed(&turn),
            ServedEvent::ItemStarted(item) => {
                if !self.item_started(item_id, &item) {
                    return Vec::new();
                }
            }
            ServedEvent::ItemDelta { delta, .. } => {
                if let Some(Cell::Agent { pending, .. }) = self.agent_mut(&item_id) {
                    pending.push_str(&delta);
                }
                // Shown on the next tick: no frame per delta.
                return Vec::new();
            }
            ServedEvent::ItemFinished { end, item } => {
                if end == ItemEnd::Completed && item.kind == ItemKind::ContextCompaction {
                    self.compacted(&item.metadata)
                } else {
                    self.item_finished(end, &item_id, &item)
                }
            }
            ServedEvent::ApprovalRequired(ask) => self.approval_required(&item_id, &ask),
            ServedEvent::ApprovalSettled { approval_id, end } => {
                if self
                    .card
                    .as_ref()
                    .is_some_and(|c| c.approval_id == approval_id)
                {
                    self.card = None;
                }
                if end == ApprovalEnd::TimedOut {
                    self.notice(true, "no answer in time: denied (no response)");
                }
            }
            ServedEvent::ReviewDecided(d) => {
                let line = self.review_line(&item_id, &d);
                self.notice(d.decision != ReviewDecision::Allow, line);
            }
            ServedEvent::ReviewPaused(p) => match p.agent_id {
                // A sub-agent's own breaker stopped that child only.
                Some(agent) => self.notice(true, format!("sub-agent {agent}: {}", p.reason)),
                None => {
                    self.auto_review_paused = Some(p.reason.clone());
                    self.permission = Approval::Ask;
                    self.notice(true, p.reason);
                }
            },
            ServedEvent::ReviewResumed => {
                // Selected again here (Shift+Tab) or by another client.
                if self.auto_review_paused.take().is_some() {
                    self.permission = Approval::AutoReview;
                }
            }
            ServedEvent::SandboxDenied(d) => {
                let what = d
                    .path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .or(d.host)
                    .unwrap_or_default();
                let text = format!("sandbox denied {} {}: {}", d.tool, what, d.reason);
                self.notice(true, text);
            }
            ServedEvent::TodoUpdated(items) => self.todos = items,
            ServedEvent::Other(_) => return Vec::new(),
        }
        self.dirty = true;
        Vec::new()
    }

    /// `turn.completed`: the answer committed, the usage counted, a
    /// failure said; a finished Plan turn offers the hand-off.
    fn turn_completed(&mut self, turn: &TurnRecord) {
        self.commit_all();
        self.usage(turn, true);
        let status = turn.status;
        if status != TurnStatus::Completed {
            let text = match turn.error.as_deref().filter(|e| !e.is_empty()) {
                None => format!("turn {}", status.as_str()),
                Some(err) => format!("turn {}: {err}", status.as_str()),
            };
            self.notice(status == TurnStatus::Failed, text);
        }
        self.turn = None;
        self.card = None;
        self.stopping = false;
        self.flash = None;
        // A finished Plan turn offers to carry the plan out.
        if status == TurnStatus::Completed && self.turn_mode.take() == Some(Mode::Plan) {
            self.handoff = Some(super::handoff::Handoff::default());
        }
        self.turn_mode = None;
    }

    /// `item.started`: a message, a reasoning cell or a tool cell (false:
    /// an item kind the transcript does not show).
    fn item_started(&mut self, item_id: String, item: &TurnItemRecord) -> bool {
        match item.kind {
            ItemKind::AgentMessage => self.transcript.push(Cell::Agent {
                item_id,
                text: String::new(),
                pending: String::new(),
                done: false,
            }),
            ItemKind::Reasoning => self.transcript.push(Cell::Reasoning {
                text: item
                    .metadata
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                expanded: false,
            }),
            ItemKind::CommandExecution
            | ItemKind::ToolCall
            | ItemKind::FileChange
            | ItemKind::McpToolCall => {
                let meta = ToolItemMeta::of(&item.metadata).start;
                self.transcript
                    .push(Cell::Tool(Box::new(tool_cell(&item_id, &meta))));
            }
            _ => return false,
        }
        true
    }

    /// An automatic (or manual) compaction: a notice, kept for `/receipts`.
    fn compacted(&mut self, meta: &Value) {
        let m = crate::runtime::item_meta::CompactionMeta::of(meta);
        let c = Compacted {
            turn: self.turns_started,
            auto: m.auto,
            reason: m.reason.unwrap_or_else(|| "manual".to_string()),
            tokens_before: m.tokens_before,
            tokens_after: m.tokens_after,
            window: m.window,
        };
        self.notice(false, format!("context compacted: {}", c.line()));
        self.compactions.push(c);
    }

    /// `item.completed|failed|interrupted`: the message closed (and said
    /// cut when interrupted), or the tool cell filled from the item's
    /// typed metadata; the footer follows what the command ran under.
    fn item_finished(&mut self, end: ItemEnd, item_id: &str, item: &TurnItemRecord) {
        let meta = ToolItemMeta::of(&item.metadata).result;
        if let Some(i) = self.agent_index(item_id) {
            if let Cell::Agent {
                text,
                pending,
                done,
                ..
            } = &mut self.transcript[i]
            {
                text.push_str(pending);
                pending.clear();
                *done = true;
            }
            if end == ItemEnd::Interrupted {
                // The message was cut: say so under its text.
                self.transcript.insert(
                    i + 1,
                    Cell::Notice {
                        error: true,
                        text: INTERRUPTED_MESSAGE.into(),
                    },
                );
            }
        } else if let Some(c) = self.tool_mut(item_id) {
            c.status = Some(if meta.status.is_empty() {
                item.status.as_str().to_string()
            } else {
                meta.status.clone()
            });
            c.exit_code = meta.exit_code.map(i64::from);
            c.diff = meta.diff.clone();
            c.duration_ms = meta.duration_ms;
            c.approval = meta.approval.as_ref().map(|a| a.verdict.clone());
            // The head and tail the runtime kept on the item (what
            // any client sees); the session file is never read back.
            c.output = meta.output_preview.clone().map(|p| {
                let clean =
                    |v: Vec<String>| -> Vec<String> { v.iter().map(|l| sanitize(l)).collect() };
                (clean(p.head), clean(p.tail), p.hidden_lines)
            });
        }
        // The footer's sandbox part becomes what this command
        // really ran under (until then: the selected tier).
        if let Some(e) = &meta.enforced {
            self.footer.backend = e.backend.as_str().to_string();
            self.footer.level = e.level.as_str().to_string();
        }
    }

    /// `approval.required`: the card, with the call's proposal (a file
    /// tool's diff) when its cell has one.
    fn approval_required(&mut self, item_id: &str, ask: &ApprovalAsk) {
        let diff = self.tool_mut(item_id).and_then(|c| c.proposal.clone());
        let path = self
            .tool_mut(item_id)
            .and_then(|c| (c.tool != "shell").then(|| c.title.clone()));
        self.card = Some(Card {
            approval_id: ask.approval_id.clone(),
            tool: ask.tool.clone(),
            command: ask.command.clone(),
            path,
            diff,
            cwd: self.workspace.clone(),
            posture: format!("{} · {}", self.mode.label(), self.permission.label()),
            reason: ask.reason.clone(),
            hold: ask.hold,
            selected: Choice::Deny,
        });
    }

    fn usage(&mut self, turn: &TurnRecord, done: bool) {
        // The model that really answers (routing, `/model`, `/provider`).
        if let (Some(p), Some(m)) = (
            turn.effective_provider.as_deref(),
            turn.effective_model.as_deref(),
        ) {
            if !m.is_empty() && (p != self.footer.provider || m != self.footer.model) {
                self.footer.set_model(p, m);
            }
        }
        if let Some(c) = turn.context_tokens {
            self.footer.context_tokens = Some(c);
        }
        let live_in = turn.usage.input_tokens;
        let live_out = turn.usage.output_tokens;
        let cost = turn.cost_usd;
        if done {
            self.footer.input_tokens += live_in;
            self.footer.output_tokens += live_out;
            self.spent_usd = match (self.spent_usd, cost) {
                (Some(a), Some(b)) => Some(a + b),
                (Some(a), None) if live_in + live_out == 0 => Some(a),
                _ => None,
            };
            self.footer.cost_usd = self.spent_usd;
        } else {
            self.footer.cost_usd = match (self.spent_usd, cost) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
    }

    fn agent_index(&self, id: &str) -> Option<usize> {
        self.transcript
            .iter()
            .rposition(|c| matches!(c, Cell::Agent { item_id, .. } if item_id == id))
    }

    fn agent_mut(&mut self, id: &str) -> Option<&mut Cell> {
        self.agent_index(id).map(|i| &mut self.transcript[i])
    }

    /// One line per review: "reviewer allowed `cargo run` (low): …",
    /// "reviewer denied …", "reviewer unavailable for …: timeout".
    fn review_line(&mut self, item_id: &str, d: &ReviewDecided) -> String {
        let what = self
            .tool_mut(item_id)
            .map(|t| t.title.clone())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| d.tool.clone());
        let risk = d.risk.map(|r| r.as_str()).unwrap_or_default();
        let by = match &d.agent_id {
            Some(a) => format!("sub-agent {a}'s reviewer"),
            None => "reviewer".to_string(),
        };
        match d.decision {
            ReviewDecision::Allow => format!("{by} allowed `{what}` ({risk}): {}", d.reason),
            ReviewDecision::Deny => format!("{by} denied `{what}` ({risk}): {}", d.reason),
            ReviewDecision::Unavailable => {
                format!("{by} unavailable for `{what}`: {}", d.reason)
            }
        }
    }

    fn tool_mut(&mut self, id: &str) -> Option<&mut ToolCell> {
        self.transcript.iter_mut().rev().find_map(|c| match c {
            Cell::Tool(t) if t.item_id == id => Some(t.as_mut()),
            _ => None,
        })
    }

    /// Move whole lines of pending agent text into the transcript.
    fn commit_lines(&mut self) -> bool {
        let mut changed = false;
        for c in &mut self.transcript {
            if let Cell::Agent { text, pending, .. } = c {
                if let Some(i) = pending.rfind('\n') {
                    text.push_str(&pending[..=i]);
                    pending.drain(..=i);
                    changed = true;
                }
            }
        }
        changed
    }

    fn commit_all(&mut self) {
        for c in &mut self.transcript {
            if let Cell::Agent {
                text,
                pending,
                done,
                ..
            } = c
            {
                text.push_str(pending);
                pending.clear();
                *done = true;
            }
        }
    }
}

/// The cell of a tool call from its item's metadata (`tool`, `args`).
fn tool_cell(item_id: &str, meta: &ToolItemStart) -> ToolCell {
    let tool = if meta.tool.is_empty() {
        "tool".to_string()
    } else {
        meta.tool.clone()
    };
    let args = &meta.args;
    let arg = |k: &str| args[k].as_str().unwrap_or("").to_string();
    let title = match tool.as_str() {
        "shell" => arg("command"),
        _ => {
            let p = arg("path");
            if p.is_empty() {
                arg("pattern")
            } else {
                p
            }
        }
    };
    let proposal = match tool.as_str() {
        "edit_file" => Some(unified(
            &arg("path"),
            &arg("old_string"),
            &arg("new_string"),
        )),
        "write_file" => Some(unified(&arg("path"), "", &arg("content"))),
        _ => None,
    };
    ToolCell {
        item_id: item_id.to_string(),
        call_id: meta.call_id.clone(),
        tool,
        title,
        proposal,
        ..Default::default()
    }
}

/// A unified diff of the call's own arguments (for `edit_file` the
/// replaced span, for `write_file` the new content): the proposal an
/// approval card shows before anything ran.
fn unified(path: &str, old: &str, new: &str) -> String {
    let patch = diffy::create_patch(old, new);
    let body = patch.to_string();
    // diffy's header names `original`/`modified`: name the file instead.
    let body = body
        .lines()
        .skip_while(|l| l.starts_with("---") || l.starts_with("+++"))
        .collect::<Vec<_>>()
        .join("\n");
    format!("--- a/{path}\n+++ b/{path}\n{body}")
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
