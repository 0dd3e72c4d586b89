//! The TUI's event loop: terminal keys, runtime envelopes and the commit
//! clock go into the state machine; its effects are carried out here
//! against the in-process runtime ([`Driver`] starts and interrupts turns,
//! [`Runtime::settle`] answers approvals) and the same library calls the
//! CLI makes (`undo`, `restore`, `receipts`). Nothing here decides what a
//! key means.

use super::first_run::{self, LocalAnswer, LocalAsk, Start};
use super::provider_picker::{Presence, Row};
use super::render;
use super::state::{Choice, Effect, Event, FooterInfo, Key, State};
use super::terminal::TerminalGuard;
use crate::authz::{Approval, Mode};
use crate::config::effort::ReasoningEffort;
use crate::config::{ConfigPaths, LoadOptions, RulesFile, SandboxContext, SandboxFlags, TurnAsk};
use crate::provider::auth::AuthStore;
use crate::provider::config::ExecConfig;
use crate::provider::registry::{self, KeySource};
use crate::receipt;
use crate::runtime::driver::Driver;
use crate::runtime::{Answer, NewThread, RequestKind, Runtime, Settlement, ThreadPatch};
use crate::session::sessions_dir;
use crate::snapshot::{report as snapshot_report, SnapshotStore, UndoScope};
use anyhow::Context;
use ratatui::crossterm::event::{
    self as ct, Event as CtEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers,
};
use ratatui_textarea::TextArea;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a question waits for the person at the keyboard before the
/// runtime denies it as `no response` (the card stays on screen until then).
const APPROVAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// The commit clock for streamed text.
const TICK: Duration = Duration::from_millis(16);
/// At most this many queued inputs are handled between two frames.
const DRAIN_MAX: usize = 512;

/// What the app was started with (resolved like `exec`).
pub struct Setup {
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub footer: FooterInfo,
    pub permission: Approval,
    /// Said once in the transcript at start (missing key, Ollama, ...).
    pub notes: Vec<String>,
    /// The provider slice of the user config (the picker's rows).
    pub cfg: ExecConfig,
    /// What the first run does (ask about Ollama, offer `/provider`).
    pub start: Start,
    /// The thread's provider at creation: the default one, pinned while
    /// no usable key is set up and the local Ollama was not accepted, so
    /// no turn falls back to it without a yes.
    pub pin_provider: Option<String>,
}

/// Resolve the user's config, the project override, the provider and
/// the sandbox selection exactly as `exec` does (the same loaders).
pub fn setup(workspace: Option<PathBuf>) -> anyhow::Result<Setup> {
    let paths = ConfigPaths::from_env();
    let home = paths.codewhale_home.clone();
    let ws = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    // The configured posture is where Shift+Tab starts; a configured
    // `never-run` stays for every turn (the driver keeps it).
    let permission = SandboxContext::load_with(
        &mut LoadOptions::new(&ws),
        &SandboxFlags::default(),
        RulesFile::Load,
    )?
    .settings
    .approval;
    // The footer previews turns exactly as the driver will start them
    // (the one function: `SandboxContext::load_for_turn`).
    let preview = |permission: Approval| {
        SandboxContext::load_for_turn(
            &mut LoadOptions::new(&ws),
            &TurnAsk {
                mode: Mode::Work,
                permission: Some(permission),
                auto: false,
                headless: false,
                flag: None,
            },
        )
    };
    // What Full Access would really run under (settings may cap it).
    let full = preview(Approval::FullAccess)?.1.mode();
    let full_access_capped = full.is_sandboxed().then(|| full.to_string());
    // The first turn's sandbox.
    let (_, ctx, _) = preview(permission)?;
    let cfg = ExecConfig::from_settings(&ctx.settings)?;
    let store = AuthStore::new(&home);
    let env = |n: &str| std::env::var(n).ok();
    let mut notes = Vec::new();
    let mut pin_provider = None;
    let (mut provider, mut model, start) = match registry::select(None, None, &cfg, &store, &env) {
        Ok(ps) => {
            let needs = crate::agent::models::may_use_local(&ps, None, &cfg);
            let start = match first_run::load_local(&home) {
                Ok(remembered) => first_run::plan(needs, remembered.as_ref(), || {
                    probe_ollama(&cfg, &store, &env)
                }),
                Err(e) => Start::Offer(format!("{e}; not asking about a local Ollama")),
            };
            if ps.key_source == KeySource::Missing && !needs {
                notes.push(format!(
                    "no API key for provider {}: run `codewhale auth set --provider {}` (or /provider)",
                    ps.id, ps.id
                ));
            }
            if needs && !matches!(start, Start::UseLocal(_)) {
                pin_provider = Some(ps.id.clone());
            }
            (ps.id.clone(), ps.model.clone(), start)
        }
        Err(e) => (
            String::from("none"),
            String::from("none"),
            Start::Offer(format!("no provider: {e}")),
        ),
    };
    match &start {
        Start::UseLocal(l) => {
            notes.push(format!(
                "no provider key is set up; using the local Ollama at {} with model {}                  (you said yes before; kept in {})",
                l.root,
                l.model,
                first_run::state_path(&home).display()
            ));
            provider = "ollama".into();
            model = l.model.clone();
        }
        Start::Offer(why) => notes.push(why.clone()),
        Start::Ready | Start::Ask(_) => {}
    }
    let (backend, level) = match crate::host::expected(&ctx.policy, &ctx.host) {
        Ok(e) => (e.backend.as_str().to_string(), e.level().to_string()),
        Err(e) => {
            notes.push(format!("sandbox: {e}"));
            ("none".to_string(), "unavailable".to_string())
        }
    };
    Ok(Setup {
        home,
        workspace: ws,
        footer: {
            let mut f = FooterInfo {
                selected: (backend.clone(), level.clone()),
                backend,
                level,
                full_access_capped,
                ..Default::default()
            };
            f.set_model(&provider, &model);
            f
        },
        permission,
        notes,
        cfg,
        start,
        pin_provider,
    })
}

/// exec's Ollama fallback without using it: the address and model it
/// would pick (`None`: no Ollama answering with a chat model).
fn probe_ollama(
    cfg: &ExecConfig,
    store: &AuthStore,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<LocalAsk> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let s = crate::agent::models::ollama_fallback(cfg, store, env, &rt, &mut |_| {})
        .ok()
        .flatten()?;
    Some(LocalAsk {
        root: crate::provider::discovery::ollama_root(&s.base_url),
        model: s.model,
    })
}

enum Input {
    Term(CtEvent),
    Runtime(Vec<Value>),
    TermGone,
}

/// Run the UI until the user quits; returns the exit code.
pub fn run(setup: Setup) -> anyhow::Result<i32> {
    let (rt, _report) = Runtime::open(&setup.home)?;
    let thread = rt.create_thread(NewThread {
        model: String::new(),
        provider: setup.pin_provider.clone(),
        workspace: setup.workspace.clone(),
        mode: crate::runtime::ThreadMode::Agent,
        allow_shell: true,
        title: Some("tui".into()),
        ..Default::default()
    })?;
    let driver = Driver::new(rt.clone(), &setup.home, APPROVAL_TIMEOUT);
    let mut st = State::new(&thread.id, setup.permission, setup.footer.clone());
    st.workspace = setup.workspace.display().to_string();
    let header = st.startup_header();
    st.update(Event::Output {
        error: false,
        text: header,
    });
    for n in &setup.notes {
        st.update(Event::Output {
            error: true,
            text: n.clone(),
        });
    }
    let exec = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut guard = TerminalGuard::enter()?;
    let res = exec.block_on(event_loop(&mut guard, &rt, &driver, &setup, st));
    drop(guard);
    let (code, sessions, transcript) = res?;
    // The alternate screen is gone with the guard: the conversation goes
    // to the normal screen, so the terminal's own scrollback holds it
    // after the UI has left (as plain, already sanitised text).
    if !transcript.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = std::io::Write::write_all(&mut out, transcript.as_bytes());
        let _ = std::io::Write::flush(&mut out);
    }
    if let Some(s) = sessions.last() {
        println!(
            "codewhale: conversation {} — receipts: codewhale receipts {s}",
            thread.id
        );
    }
    Ok(code)
}

struct App<'a> {
    rt: &'a Runtime,
    driver: &'a Driver,
    setup: &'a Setup,
    input: TextArea<'static>,
    /// Session ids of this conversation's turns, oldest first.
    sessions: Vec<String>,
    started: Instant,
    /// `/memory` asked for the user's editor on this file: run by the
    /// event loop, which owns the terminal.
    edit: Option<std::path::PathBuf>,
}

async fn event_loop(
    guard: &mut TerminalGuard,
    rt: &Runtime,
    driver: &Driver,
    setup: &Setup,
    mut st: State,
) -> anyhow::Result<(i32, Vec<String>, String)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Input>();
    // Keys: crossterm's reader on its own thread. It polls with a short
    // timeout instead of blocking in `read`, so the reader lock is free
    // between polls for ratatui's cursor-position query (`clear` asks the
    // terminal where the cursor is; a blocked `read` would starve it).
    let ktx = tx.clone();
    // Paused while the user's editor has the terminal (`/memory`): the
    // reader must not take the editor's keys.
    let keys = KeyPause::default();
    let kp = keys.clone();
    std::thread::Builder::new()
        .name("tui-keys".into())
        .spawn(move || loop {
            if ktx.is_closed() {
                return;
            }
            if kp.paused.load(Ordering::SeqCst) {
                kp.idle.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            match ct::poll(Duration::from_millis(20)) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(_) => {
                    let _ = ktx.send(Input::TermGone);
                    return;
                }
            }
            match ct::read() {
                Ok(ev) => {
                    if ktx.send(Input::Term(ev)).is_err() {
                        return;
                    }
                }
                Err(_) => {
                    let _ = ktx.send(Input::TermGone);
                    return;
                }
            }
        })
        .context("starting the key reader")?;
    // The thread's events, from the runtime (as a remote client sees them).
    let mut sub = rt.subscribe(&st.thread_id, 0, None);
    let rtx = tx.clone();
    tokio::spawn(async move {
        while let Some(batch) = sub.next().await {
            if rtx.send(Input::Runtime(batch)).is_err() {
                return;
            }
        }
    });
    let mut app = App {
        rt,
        driver,
        setup,
        input: new_input(),
        sessions: Vec::new(),
        started: Instant::now(),
        edit: None,
    };
    // The first run: ask about a local Ollama, or offer the picker.
    match &setup.start {
        Start::Ask(l) => {
            st.update(Event::AskLocal(l.clone()));
        }
        Start::Offer(_) => app.perform(&mut st, vec![Effect::Provider], None),
        Start::Ready | Start::UseLocal(_) => {}
    }
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut term = super::terminal::sigterm()?;
    // The transcript's rows, kept from frame to frame (a streaming answer
    // is parsed once per finished block, not on every frame).
    let mut rows = render::TranscriptCache::default();
    'run: loop {
        if st.dirty {
            guard
                .terminal
                .draw(|f| render::draw_cached(f, &st, &app.input, &mut rows))
                .context("drawing the screen")?;
            st.dirty = false;
        }
        if st.quit {
            break;
        }
        let first = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => Some(m),
                None => break,
            },
            _ = tick.tick() => {
                st.update(Event::Tick);
                None
            }
            _ = term.recv() => {
                // SIGTERM: stop the turn (its sandboxed tree is killed),
                // then leave; the guard restores the terminal.
                if let Some(t) = st.turn.clone() {
                    let _ = driver.interrupt_by(
                        &st.thread_id,
                        &t,
                        crate::agent::InterruptCause::Sigterm,
                    );
                    // Give the loop a moment to record why it stopped
                    // (bounded: SIGTERM must still end the process).
                    let until = Instant::now() + Duration::from_secs(3);
                    while driver.running() > 0 && Instant::now() < until {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                return Ok((
                    super::terminal::SIGTERM_EXIT,
                    app.sessions,
                    transcript_text(&st),
                ));
            }
        };
        // Everything already queued (keys, runtime events) is handled
        // before the next frame, whichever branch woke the loop: a key
        // never waits behind a frame drawn for what came before it, and
        // one frame shows all of it.
        // (Bounded, so a flood of events still lets a frame through.)
        let mut next = first.or_else(|| rx.try_recv().ok());
        let mut budget = DRAIN_MAX;
        while let Some(ev) = next.take() {
            match ev {
                Input::TermGone => break 'run,
                Input::Runtime(batch) => {
                    for env in batch {
                        let started = st.turns_started;
                        let fx = st.update(Event::Runtime(env));
                        // A turn of this thread started: its session file.
                        if st.turns_started != started {
                            if let Some(s) = &st.last_session {
                                app.sessions.push(s.clone());
                            }
                        }
                        app.perform(&mut st, fx, None);
                    }
                }
                Input::Term(CtEvent::Key(k)) => {
                    if k.kind != KeyEventKind::Release {
                        let key = map_key(&k);
                        let at_ms = app.started.elapsed().as_millis() as u64;
                        let fx = st.update(Event::Key { key, at_ms });
                        app.perform(&mut st, fx, Some(k));
                    }
                }
                Input::Term(CtEvent::Paste(p)) => {
                    let fx = st.update(Event::Paste(p));
                    app.perform(&mut st, fx, None);
                }
                Input::Term(CtEvent::Resize(_, _)) => {
                    // Repaint everything: output written for the old size
                    // may have landed after the terminal changed, and a diff
                    // against the old frame would keep it on screen.
                    // (`resize`, not `clear`: clearing asks the terminal
                    // for the cursor position, which some never answer.)
                    let size = guard.terminal.size().context("reading the terminal size")?;
                    guard
                        .terminal
                        .resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))
                        .context("resizing")?;
                    // The draft shows from its start again where it fits.
                    super::draft::rewind_view(&mut app.input);
                    st.update(Event::Resize);
                }
                Input::Term(_) => {}
            }
            budget -= 1;
            if !st.quit && budget > 0 {
                next = rx.try_recv().ok();
            }
        }
        if let Some(path) = app.edit.take() {
            let ev = edit_in_terminal(guard, &keys, &path, &app.setup.workspace);
            st.update(ev);
            st.dirty = true;
        }
    }
    Ok((crate::exit::OK, app.sessions, transcript_text(&st)))
}

/// The transcript as plain text, cell by cell as the screen draws it
/// (without colours), for the normal screen's scrollback on exit.
pub fn transcript_text(st: &State) -> String {
    let mut out = String::new();
    for cell in &st.transcript {
        for line in render::cell_lines(cell) {
            for span in &line.spans {
                out.push_str(&span.content);
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

fn new_input() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_block(
        ratatui::widgets::Block::default()
            .borders(ratatui::widgets::Borders::ALL)
            .border_style(ratatui::style::Style::default().fg(ratatui::style::Color::DarkGray)),
    );
    t.set_placeholder_text("Ask codewhale… (Enter sends, Alt+Enter new line, /help)");
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}

/// crossterm's key → the state machine's.
pub fn map_key(k: &KeyEvent) -> Key {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    let plain = !k
        .modifiers
        .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT | KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Char('c') if ctrl => Key::CtrlC,
        KeyCode::Char('d') if ctrl => Key::CtrlD,
        KeyCode::Char('o') if ctrl => Key::CtrlO,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::Tab if k.modifiers.contains(KeyModifiers::SHIFT) => Key::BackTab,
        KeyCode::Tab => Key::Tab,
        KeyCode::Esc => Key::Esc,
        KeyCode::Enter if plain => Key::Enter,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Char(c) if !ctrl => Key::Char(c),
        _ => Key::Other,
    }
}

impl App<'_> {
    fn perform(&mut self, st: &mut State, fx: Vec<Effect>, key: Option<KeyEvent>) {
        for e in fx {
            let follow = self.effect(st, e, key);
            for ev in follow {
                let more = st.update(ev);
                self.perform(st, more, None);
            }
        }
    }

    /// Carry out one effect; what it produced goes back as events.
    fn effect(&mut self, st: &State, e: Effect, key: Option<KeyEvent>) -> Vec<Event> {
        match e {
            Effect::PassToEditor => {
                if let Some(k) = key {
                    if k.code == KeyCode::Enter {
                        // Alt/Shift+Enter: a new line in the same request.
                        self.input.insert_newline();
                    } else {
                        self.input.input(k);
                    }
                }
                vec![Event::DraftChanged {
                    empty: self.input.is_empty(),
                }]
            }
            Effect::TakeDraft => {
                let text = self.input.lines().join("\n");
                self.input = new_input();
                vec![Event::Submit(text)]
            }
            Effect::InsertDraft(s) => {
                self.input.insert_str(s);
                vec![Event::DraftChanged {
                    empty: self.input.is_empty(),
                }]
            }
            Effect::ClearDraft => {
                self.input = new_input();
                vec![Event::DraftChanged { empty: true }]
            }
            Effect::StartTurn {
                prompt,
                mode,
                permission,
            } => {
                // Test seam: the pty test of the panic path (the terminal
                // must come back from a panic as from a normal exit).
                if crate::seams::tui_panic(&prompt) {
                    panic!(
                        "{}: the test asked the TUI to panic",
                        crate::seams::TUI_PANIC
                    );
                }
                // Off the async loop's thread: preparing a turn may build
                // (and drop) an async runtime of its own (model discovery).
                let driver = self.driver;
                let thread = st.thread_id.as_str();
                let started = std::thread::scope(|s| {
                    s.spawn(move || driver.start_with(thread, prompt, mode, Some(permission)))
                        .join()
                });
                match started {
                    Ok(Ok(_)) => Vec::new(),
                    Ok(Err(e)) => vec![error(e)],
                    Err(_) => vec![error("starting the turn panicked")],
                }
            }
            Effect::ResumeAutoReview => match self.driver.resume_auto_review(&st.thread_id) {
                Ok(_) => Vec::new(),
                Err(e) => vec![error(e)],
            },
            Effect::Interrupt { turn_id, cause } => {
                match self.driver.interrupt_by(&st.thread_id, &turn_id, cause) {
                    Ok(()) => Vec::new(),
                    Err(e) => vec![error(e)],
                }
            }
            Effect::Answer {
                approval_id,
                choice,
            } => {
                let how = Settlement::Answered(Answer::Approval {
                    allow: choice != Choice::Deny,
                    remember: choice == Choice::Session,
                });
                match self.rt.settle(
                    &approval_id,
                    Some(RequestKind::Approval),
                    Some(&st.thread_id),
                    None,
                    how,
                ) {
                    Ok(()) => Vec::new(),
                    Err(e) => vec![error(e)],
                }
            }
            Effect::Undo { session } => {
                let Some(session) = session else {
                    return vec![Event::Output {
                        error: true,
                        text: "/undo: nothing to undo in this conversation yet".into(),
                    }];
                };
                let scope = UndoScope::Session(session);
                vec![report(snapshot_store(&self.setup.workspace).and_then(
                    |mut store| Ok(snapshot_report::undo(&mut store, &scope)?),
                ))]
            }
            Effect::Restore(n) => {
                // The state machine checked /trust or Full Access.
                vec![report(snapshot_store(&self.setup.workspace).and_then(
                    |mut store| Ok(snapshot_report::restore(&mut store, n)?),
                ))]
            }
            Effect::Receipts { turn, json } => vec![report(
                self.receipt(turn, json)
                    .map(|r| with_compactions(r, json, &st.compactions)),
            )],
            Effect::SetModel { id, effort } => {
                let switched = self.set_model(st, &id);
                match (effort, &switched) {
                    (Some(e), Event::ProviderSwitched { provider, model }) => {
                        let note = self.set_effort(st, provider, model, e);
                        vec![switched.clone(), note]
                    }
                    (Some(e), Event::Output { error: false, .. }) => {
                        let note = self.set_effort(st, &st.footer.provider, &id, e);
                        vec![switched, note]
                    }
                    _ => vec![switched],
                }
            }
            Effect::Mcp { reload: false } => vec![Event::Output {
                error: false,
                text: self.driver.mcp_status(&self.setup.workspace),
            }],
            Effect::Mcp { reload: true } => {
                vec![match self.driver.mcp_reload(&self.setup.workspace) {
                    Ok(text) => Event::Output { error: false, text },
                    Err(e) => error(format!("/mcp reload: {e}")),
                }]
            }
            Effect::Skills(change) => {
                let paths = crate::config::ConfigPaths::from_env();
                vec![
                    match crate::skills::command(&paths, &self.setup.workspace, change) {
                        Ok(text) => Event::Output { error: false, text },
                        Err(e) => error(format!("/skills: {e}")),
                    },
                ]
            }
            Effect::Memory(None) if super::editor::command().is_some() => {
                let paths = crate::config::ConfigPaths::from_env();
                self.edit = Some(crate::memory::path(&paths.codewhale_home));
                Vec::new()
            }
            Effect::Memory(add) => {
                let paths = crate::config::ConfigPaths::from_env();
                let home = &paths.codewhale_home;
                let enabled = crate::config::LoadOptions::new(&self.setup.workspace);
                let enabled = crate::config::load(&enabled)
                    .map(|s| s.user.memory.enabled)
                    .unwrap_or(false);
                let added = match &add {
                    Some(text) => {
                        crate::memory::append(home, text).map(|l| format!("added: {l}\n"))
                    }
                    None => Ok(String::new()),
                };
                vec![
                    match added.and_then(|a| Ok(a + &crate::memory::show(home, enabled)?)) {
                        Ok(text) => Event::Output { error: false, text },
                        Err(e) => error(format!("/memory: {e}")),
                    },
                ]
            }
            Effect::ImportClaude => {
                let paths = crate::config::ConfigPaths::from_env();
                let Some(home) = paths.home.clone() else {
                    return vec![error("/import-claude: no HOME")];
                };
                let loc = crate::claude_import::Locations {
                    home,
                    codewhale_home: paths.codewhale_home,
                    workspace: self.setup.workspace.clone(),
                };
                let proposal = crate::claude_import::propose(&loc)
                    .and_then(|p| crate::claude_import::render(&p, &loc));
                vec![match proposal {
                    Ok(text) => Event::Output {
                        error: false,
                        text: format!(
                            "{text}\n(apply from a shell: codewhale import claude --apply)"
                        ),
                    },
                    Err(e) => error(format!("/import-claude: {e}")),
                }]
            }
            Effect::Provider => match self.picker_rows() {
                Ok(rows) => vec![Event::PickerRows(rows)],
                Err(e) => vec![error(format!("/provider: {e}"))],
            },
            Effect::ChooseProvider(id) => vec![self.choose_provider(st, &id)],
            Effect::StoreKey { provider, key } => {
                match first_run::store_key(&self.setup.home, &provider, &key) {
                    Ok(_) => vec![Event::KeyStored { provider }],
                    Err(e) => vec![Event::KeyRefused(format!("not stored: {e}"))],
                }
            }
            Effect::AnswerLocal {
                use_local,
                root,
                model,
            } => self.answer_local(st, use_local, root, model),
            Effect::Quit => Vec::new(),
        }
    }

    /// One turn's receipt (`codewhale receipts` of its session file).
    fn receipt(&self, turn: Option<u32>, json: bool) -> anyhow::Result<String> {
        let session = match turn {
            Some(n) => self
                .sessions
                .get((n as usize).wrapping_sub(1))
                .with_context(|| {
                    format!(
                        "/receipts {n}: this conversation has {} turn(s)",
                        self.sessions.len()
                    )
                })?,
            None => self
                .sessions
                .last()
                .context("/receipts: no turn in this conversation yet")?,
        };
        let path = receipt::find_session(&sessions_dir(&self.setup.home), session)?;
        let r = receipt::from_file(&path, None)?;
        Ok(if json {
            serde_json::to_string_pretty(&r)?
        } else {
            receipt::render_markdown(&r)
        })
    }

    fn set_model(&self, st: &State, m: &str) -> Event {
        if m.is_empty() {
            return Event::Output {
                error: false,
                text: match st.footer.context_window {
                    Some(w) => format!(
                        "model {} (provider {}; context window {w} tokens, {} used)",
                        st.footer.model,
                        st.footer.provider,
                        st.footer.context_tokens.unwrap_or(0)
                    ),
                    None => format!(
                        "model {} (provider {}; context window not in the catalogue)",
                        st.footer.model, st.footer.provider
                    ),
                },
            };
        }
        let patch = ThreadPatch {
            model: Some(m.to_string()),
            ..Default::default()
        };
        match self.rt.update_thread(&st.thread_id, patch) {
            Ok(_) if m == "auto" => Event::Output {
                error: false,
                text: "model auto for the next turns: the [router] of your config picks per turn \
                       (each choice and its reason are in the turn record)"
                    .into(),
            },
            // The footer shows the new model (and its window) at once, at
            // the thread's provider (not one the router answered from).
            Ok(t) => Event::ProviderSwitched {
                provider: t
                    .provider
                    .unwrap_or_else(|| self.setup.footer.provider.clone()),
                model: m.to_string(),
            },
            Err(e) => error(e),
        }
    }

    /// `/model ID EFFORT`: the thread's next turns ask for `effort`; says
    /// whether the model takes one (the catalogue's data, or a custom
    /// provider's `thinking`), so an effort that is not sent is not a
    /// silent no-op.
    fn set_effort(&self, st: &State, provider: &str, model: &str, e: ReasoningEffort) -> Event {
        self.driver.set_effort(&st.thread_id, e);
        let store = AuthStore::new(&self.setup.home);
        let env = |n: &str| std::env::var(n).ok();
        let takes = registry::select(Some(provider), Some(model), &self.setup.cfg, &store, &env)
            .map(|s| s.reasoning.is_some());
        Event::Output {
            error: false,
            text: match takes {
                Ok(true) | Err(_) if model == "auto" => format!(
                    "reasoning effort {e} for the next turns (sent to the models that take one)"
                ),
                Ok(true) => format!("reasoning effort {e} for the next turns of {model}"),
                Ok(false) => format!(
                    "reasoning effort {e} kept for this conversation, but {model} takes none                      (not a reasoning model in the catalogue; `thinking = true` in                      [providers.{provider}] for your own): nothing is sent for it"
                ),
                Err(_) => format!("reasoning effort {e} for the next turns"),
            },
        }
    }

    /// The providers `/provider` knows: every catalogue id, then the
    /// user's own `[providers.*]`.
    fn known_providers(&self) -> Vec<String> {
        let custom = self
            .setup
            .cfg
            .providers
            .keys()
            .filter(|id| registry::builtin(id).is_none());
        crate::provider::catalogue::ids()
            .map(str::to_string)
            .chain(custom.cloned())
            .collect()
    }

    /// The picker's rows: [`App::known_providers`], with key presence as
    /// `auth list` finds it.
    fn picker_rows(&self) -> anyhow::Result<Vec<Row>> {
        let cfg = &self.setup.cfg;
        let store = AuthStore::new(&self.setup.home);
        let env = |n: &str| std::env::var(n).ok();
        let mut rows = Vec::new();
        for id in self.known_providers() {
            let (key, source) = registry::find_key(&id, cfg.providers.get(&id), &store, &env)?;
            let row = registry::builtin(&id);
            let key = match (key, source) {
                (Some(_), _) => Presence::Set,
                (None, KeySource::NotNeeded) => Presence::NotNeeded,
                (None, _) => Presence::Missing,
            };
            rows.push(Row {
                name: row
                    .map(|r| r.name.to_string())
                    .unwrap_or_else(|| format!("[providers.{id}] in your config")),
                local: row.is_some_and(|r| r.local) || key == Presence::NotNeeded,
                key,
                id,
            });
        }
        Ok(rows)
    }

    /// Switch the thread's provider for its next turn, as a remote client
    /// would (`PATCH /v1/threads/{id}` with `provider`): the turn's setup
    /// then resolves it exactly as `exec --provider ID` does.
    fn choose_provider(&self, st: &State, id: &str) -> Event {
        let known = self.known_providers();
        if !known.iter().any(|k| k == id) {
            return error(format!(
                "/provider {id}: unknown provider; known: {}",
                known.join(", ")
            ));
        }
        let cfg = &self.setup.cfg;
        let store = AuthStore::new(&self.setup.home);
        let env = |n: &str| std::env::var(n).ok();
        let s = match registry::select(Some(id), None, cfg, &store, &env) {
            Ok(s) => s,
            Err(e) => return error(format!("/provider {id}: {e}")),
        };
        if s.key_source == KeySource::Missing {
            return error(format!(
                "/provider {id}: no key (choose it in /provider to enter one)"
            ));
        }
        let model = if s.model.is_empty() {
            // A local runtime: the model its server lists first, as the
            // turn's setup picks it (off this async thread).
            let (pid, base) = (s.id.clone(), s.base_url.clone());
            let found = std::thread::scope(|sc| {
                sc.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| e.to_string())?;
                    rt.block_on(crate::provider::discovery::local_models(&pid, &base))
                })
                .join()
            });
            match found {
                Ok(Ok(m)) if !m.is_empty() => m[0].clone(),
                Ok(Ok(_)) => format!("(none listed at {})", s.base_url),
                Ok(Err(e)) => format!("(picked at the next turn; {e})"),
                Err(_) => "(picked at the next turn)".into(),
            }
        } else {
            s.model.clone()
        };
        let patch = ThreadPatch {
            provider: Some(id.to_string()),
            ..Default::default()
        };
        match self.rt.update_thread(&st.thread_id, patch) {
            Ok(_) => Event::ProviderSwitched {
                provider: id.to_string(),
                model,
            },
            Err(e) => error(format!("/provider {id}: {e}")),
        }
    }

    /// Remember the answer to the local-Ollama question; yes lets the
    /// thread's turns use exec's fallback (the pin is lifted).
    fn answer_local(&self, st: &State, use_local: bool, root: String, model: String) -> Vec<Event> {
        let answer = LocalAnswer {
            use_local,
            root,
            model: model.clone(),
            answered_at: crate::runtime::model::now_rfc3339(),
        };
        let mut out = vec![match first_run::save_local(&self.setup.home, &answer) {
            Ok(path) => Event::Output {
                error: false,
                text: format!(
                    "{} — remembered in {} (delete the `local_ollama` entry to be asked again)",
                    if use_local {
                        "using the local Ollama"
                    } else {
                        "not using the local Ollama"
                    },
                    path.display()
                ),
            },
            Err(e) => error(format!("the answer is not remembered: {e}")),
        }];
        if use_local {
            let patch = ThreadPatch {
                provider: Some(String::new()),
                ..Default::default()
            };
            out.push(match self.rt.update_thread(&st.thread_id, patch) {
                Ok(_) => Event::ProviderSwitched {
                    provider: "ollama".into(),
                    model,
                },
                Err(e) => error(e),
            });
        }
        out
    }
}

fn error(e: impl std::fmt::Display) -> Event {
    Event::Output {
        error: true,
        text: e.to_string(),
    }
}

/// The workspace's snapshot store, opened as `codewhale undo` opens it
/// (the user's `[sandbox]` deny-read paths left out of the pre-restore
/// snapshot).
fn snapshot_store(workspace: &Path) -> anyhow::Result<SnapshotStore> {
    let opts = snapshot_report::options()?;
    let settings = crate::config::load(&LoadOptions::new(workspace))?;
    Ok(snapshot_report::open_excluding(workspace, opts, |w| {
        settings
            .user
            .sandbox
            .policy(crate::policy::SandboxMode::WorkspaceWrite, w)
    })?)
}

fn report(r: anyhow::Result<String>) -> Event {
    match r {
        Ok(text) => Event::Output {
            error: false,
            text: text.trim_end().to_string(),
        },
        Err(e) => {
            let mut text = e.to_string();
            for c in e.chain().skip(1) {
                text.push_str(&format!("\n  caused by: {c}"));
            }
            Event::Output { error: true, text }
        }
    }
}

/// A turn's receipt, followed (as text) by the conversation's compactions:
/// each turn is a session file of its own, so one turn's receipt lists
/// only its own; this says where the others happened (`/receipts N`).
fn with_compactions(receipt: String, json: bool, c: &[super::state::Compacted]) -> String {
    if json || c.is_empty() {
        return receipt;
    }
    let mut s = receipt;
    s.push_str(&format!(
        "\nCompactions in this conversation: {}\n",
        c.len()
    ));
    for e in c {
        s.push_str(&format!("- {}\n", e.line()));
    }
    s
}

/// The key reader's pause switch and its answer (it is not reading).
#[derive(Clone, Default)]
struct KeyPause {
    paused: std::sync::Arc<AtomicBool>,
    idle: std::sync::Arc<AtomicBool>,
}

/// `/memory` with `$VISUAL`/`$EDITOR` set: hand the terminal to the
/// editor on `path` (the UI's screen, raw mode and bracketed paste undone,
/// the key reader paused), take it back after, and say what the file
/// holds now.
fn edit_in_terminal(
    guard: &mut TerminalGuard,
    keys: &KeyPause,
    path: &std::path::Path,
    workspace: &std::path::Path,
) -> Event {
    keys.idle.store(false, Ordering::SeqCst);
    keys.paused.store(true, Ordering::SeqCst);
    let until = Instant::now() + Duration::from_secs(1);
    while !keys.idle.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let ran = super::terminal::suspended(guard, || super::editor::edit(path));
    keys.paused.store(false, Ordering::SeqCst);
    let enabled = crate::config::load(&crate::config::LoadOptions::new(workspace))
        .map(|s| s.user.memory.enabled)
        .unwrap_or(false);
    let home = path.parent().unwrap_or(std::path::Path::new("."));
    match ran.and_then(|()| crate::memory::show(home, enabled).map_err(|e| e.to_string())) {
        Ok(text) => Event::Output {
            error: false,
            text: format!("edited {}\n{text}", path.display()),
        },
        Err(e) => Event::Output {
            error: true,
            text: format!("/memory: {e}"),
        },
    }
}
