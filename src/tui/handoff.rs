//! Plan's hand-off: when a Plan turn finishes, the UI offers to carry the
//! plan out. A card asks "Work (Ask) / Work (Auto-Review) / keep
//! planning" with *keep planning* highlighted, so a stray Enter never
//! starts editing. Choosing Work switches mode and permission exactly as
//! Tab and Shift+Tab would and sends "go ahead" as the next prompt, so the
//! model that wrote the plan starts on it with its plan in context.
//!
//! Operate is not offered: it runs as Work until sub-agents exist, and a
//! choice that does what another choice does would mislead.
//!
//! Pure: [`State::handoff_key`] turns a key into the state change and the
//! effects, and [`lines`] / [`fallback`] draw it, so both are tested
//! without a terminal.

use super::state::{Effect, Key, State};
use crate::authz::{Approval, Mode};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// The prompt a Work choice sends (what a person would type).
pub const GO_AHEAD: &str = "go ahead";

/// The hand-off's answers, in display order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoffChoice {
    /// `w`: Work with Ask, then "go ahead".
    WorkAsk,
    /// `r`: Work with Auto-Review, then "go ahead".
    WorkAutoReview,
    /// `k`: stay in Plan (the highlighted default; also Esc).
    KeepPlanning,
}

impl HandoffChoice {
    pub const ALL: [HandoffChoice; 3] = [
        HandoffChoice::WorkAsk,
        HandoffChoice::WorkAutoReview,
        HandoffChoice::KeepPlanning,
    ];

    pub fn label(self) -> &'static str {
        match self {
            HandoffChoice::WorkAsk => "w Work (Ask)",
            HandoffChoice::WorkAutoReview => "r Work (Auto-Review)",
            HandoffChoice::KeepPlanning => "k keep planning",
        }
    }

    /// The permission a Work choice switches to.
    fn permission(self) -> Option<Approval> {
        match self {
            HandoffChoice::WorkAsk => Some(Approval::Ask),
            HandoffChoice::WorkAutoReview => Some(Approval::AutoReview),
            HandoffChoice::KeepPlanning => None,
        }
    }
}

/// The open hand-off card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    pub selected: HandoffChoice,
}

impl Default for Handoff {
    fn default() -> Self {
        Handoff {
            selected: HandoffChoice::KeepPlanning,
        }
    }
}

impl State {
    /// A key while the hand-off card is up. Only its own keys act; any
    /// other key is swallowed so nothing leaks into the draft.
    pub(super) fn handoff_key(&mut self, key: Key) -> Vec<Effect> {
        let Some(h) = &mut self.handoff else {
            return Vec::new();
        };
        let step = |i: usize, d: isize| -> HandoffChoice {
            let last = HandoffChoice::ALL.len() as isize - 1;
            HandoffChoice::ALL[(i as isize + d).clamp(0, last) as usize]
        };
        let at = HandoffChoice::ALL
            .iter()
            .position(|c| *c == h.selected)
            .unwrap_or(HandoffChoice::ALL.len() - 1);
        let pick = match key {
            Key::Char('w') | Key::Char('W') => HandoffChoice::WorkAsk,
            Key::Char('r') | Key::Char('R') => HandoffChoice::WorkAutoReview,
            Key::Char('k') | Key::Char('K') | Key::Esc | Key::CtrlC => HandoffChoice::KeepPlanning,
            Key::Enter => h.selected,
            Key::CtrlD => {
                // As on the first run's question: Ctrl-D still leaves.
                self.quit = true;
                return vec![Effect::Quit];
            }
            Key::Left | Key::BackTab => {
                h.selected = step(at, -1);
                return Vec::new();
            }
            Key::Right | Key::Tab => {
                h.selected = step(at, 1);
                return Vec::new();
            }
            _ => return Vec::new(),
        };
        self.handoff = None;
        let Some(permission) = pick.permission() else {
            return Vec::new();
        };
        self.set_mode(Mode::Work);
        self.set_permission(permission);
        self.submit(GO_AHEAD.to_string())
    }
}

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// The card's lines: the question, the choices (the selected one
/// highlighted), and what a Work choice will do.
pub fn lines(h: &Handoff) -> Vec<Line<'static>> {
    let mut choices = Vec::new();
    for c in HandoffChoice::ALL {
        if !choices.is_empty() {
            choices.push(Span::raw(" "));
        }
        let style = if c == h.selected {
            Style::default()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        choices.push(Span::styled(format!("[{}]", c.label()), style));
    }
    vec![
        Line::from(Span::styled(
            "The plan is ready. Carry it out?",
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(choices),
        Line::from(Span::styled(
            format!(
                "Work switches mode and permission and sends \"{GO_AHEAD}\" · Esc keeps planning"
            ),
            dim(),
        )),
    ]
}

/// The card in one line, for terminals too small for the box.
pub fn fallback(h: &Handoff) -> Line<'static> {
    Line::from(Span::styled(
        format!(
            "plan ready: w Work(Ask) · r Work(Auto-Review) · k keep planning [{}]",
            h.selected.label()
        ),
        Style::default().fg(Color::Black).bg(Color::Cyan),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::state::{Cell, Event, FooterInfo};
    use serde_json::json;

    /// A state whose Plan turn `t1` is running (started from the UI).
    fn planning() -> State {
        let mut st = State::new("th", Approval::Ask, FooterInfo::default());
        st.update(Event::Key {
            key: Key::Tab,
            at_ms: 0,
        }); // Work → Operate
        st.update(Event::Key {
            key: Key::Tab,
            at_ms: 0,
        }); // Operate → Plan
        assert_eq!(st.mode, Mode::Plan);
        let fx = st.update(Event::Submit("plan the refactor".into()));
        assert!(matches!(
            fx.as_slice(),
            [Effect::StartTurn {
                mode: Mode::Plan,
                ..
            }]
        ));
        st.update(Event::Runtime(json!({
            "thread_id": "th", "turn_id": "t1", "event": "turn.started",
            "payload": {"turn": {"session_id": "s1"}}
        })));
        st
    }

    fn completed(st: &mut State, status: &str) {
        st.update(Event::Runtime(json!({
            "thread_id": "th", "turn_id": "t1", "event": "turn.completed",
            "payload": {"turn": {"status": status}}
        })));
    }

    fn key(st: &mut State, k: Key) -> Vec<Effect> {
        st.update(Event::Key { key: k, at_ms: 0 })
    }

    #[test]
    fn a_finished_plan_turn_offers_the_hand_off_with_keep_planning_selected() {
        let mut st = planning();
        assert!(st.handoff.is_none(), "not while the turn runs");
        completed(&mut st, "completed");
        assert_eq!(
            st.handoff.as_ref().map(|h| h.selected),
            Some(HandoffChoice::KeepPlanning)
        );
        // Enter takes the default: nothing starts, Plan stays.
        assert!(key(&mut st, Key::Enter).is_empty());
        assert!(st.handoff.is_none());
        assert_eq!((st.mode, st.permission), (Mode::Plan, Approval::Ask));
    }

    #[test]
    fn w_switches_to_work_ask_and_sends_go_ahead() {
        let mut st = planning();
        completed(&mut st, "completed");
        let fx = key(&mut st, Key::Char('w'));
        assert_eq!(
            fx,
            vec![Effect::StartTurn {
                prompt: GO_AHEAD.into(),
                mode: Mode::Work,
                permission: Approval::Ask,
            }]
        );
        assert_eq!((st.mode, st.permission), (Mode::Work, Approval::Ask));
        assert!(matches!(st.transcript.last(), Some(Cell::User(p)) if p == GO_AHEAD));
    }

    #[test]
    fn r_and_the_arrows_choose_work_auto_review() {
        let mut st = planning();
        completed(&mut st, "completed");
        assert!(key(&mut st, Key::Left).is_empty());
        assert_eq!(
            st.handoff.as_ref().map(|h| h.selected),
            Some(HandoffChoice::WorkAutoReview)
        );
        let fx = key(&mut st, Key::Enter);
        assert!(matches!(
            fx.as_slice(),
            [Effect::StartTurn {
                mode: Mode::Work,
                permission: Approval::AutoReview,
                ..
            }]
        ));
        // The same through its letter.
        let mut st = planning();
        completed(&mut st, "completed");
        let fx = key(&mut st, Key::Char('r'));
        assert!(matches!(
            fx.as_slice(),
            [Effect::StartTurn {
                permission: Approval::AutoReview,
                ..
            }]
        ));
    }

    #[test]
    fn esc_and_other_keys_keep_planning_and_never_reach_the_draft() {
        let mut st = planning();
        completed(&mut st, "completed");
        assert!(key(&mut st, Key::Char('x')).is_empty(), "swallowed");
        assert!(st.handoff.is_some());
        assert!(st.update(Event::Paste("go".into())).is_empty());
        assert!(key(&mut st, Key::Esc).is_empty());
        assert!(st.handoff.is_none());
        assert_eq!(st.mode, Mode::Plan);
    }

    #[test]
    fn no_hand_off_after_a_failed_or_interrupted_plan_turn_or_a_work_turn() {
        for status in ["failed", "interrupted"] {
            let mut st = planning();
            completed(&mut st, status);
            assert!(st.handoff.is_none(), "{status}");
        }
        let mut st = State::new("th", Approval::Ask, FooterInfo::default());
        st.update(Event::Submit("do it".into()));
        st.update(Event::Runtime(json!({
            "thread_id": "th", "turn_id": "t1", "event": "turn.started",
            "payload": {"turn": {}}
        })));
        completed(&mut st, "completed");
        assert!(st.handoff.is_none(), "a Work turn has no hand-off");
    }

    #[test]
    fn the_card_names_its_choices_and_highlights_the_default() {
        let h = Handoff::default();
        let text: String = lines(&h)
            .iter()
            .flat_map(|l| l.spans.iter().map(|s| s.content.to_string()))
            .collect();
        for c in HandoffChoice::ALL {
            assert!(text.contains(c.label()), "{text}");
        }
        let chosen = lines(&h)[1]
            .spans
            .iter()
            .find(|s| s.style.bg == Some(Color::Cyan))
            .map(|s| s.content.to_string());
        assert_eq!(chosen.as_deref(), Some("[k keep planning]"));
        assert!(fallback(&h).spans[0].content.contains("keep planning"));
    }
}
