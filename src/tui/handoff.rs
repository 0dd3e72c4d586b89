//! Plan's hand-off: when a Plan turn finishes, the UI offers to carry the
//! plan out. A card asks "Work (Ask) / Work (Auto-Review) / Operate (Ask)
//! / keep planning" with *keep planning* highlighted, so a stray Enter
//! never starts editing. Choosing Work or Operate switches mode and
//! permission exactly as Tab and Shift+Tab would and sends "go ahead" as
//! the next prompt, so the model that wrote the plan starts on it with its
//! plan in context (Operate: as a goal, docs/OPERATE.md).
//!
//! Pure: [`Handoff::key`] turns a key into an [`Outcome`] (the state
//! machine applies it: `State::handoff_key`), and [`lines`] /
//! [`fallback`] draw it, so both are tested without a terminal.

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
    /// `o`: Operate with Ask (the plan carried out as a goal), then "go
    /// ahead".
    OperateAsk,
    /// `k`: stay in Plan (the highlighted default; also Esc).
    KeepPlanning,
}

impl HandoffChoice {
    pub const ALL: [HandoffChoice; 4] = [
        HandoffChoice::WorkAsk,
        HandoffChoice::WorkAutoReview,
        HandoffChoice::OperateAsk,
        HandoffChoice::KeepPlanning,
    ];

    pub fn label(self) -> &'static str {
        match self {
            HandoffChoice::WorkAsk => "w Work (Ask)",
            HandoffChoice::WorkAutoReview => "r Work (Auto-Review)",
            HandoffChoice::OperateAsk => "o Operate (Ask)",
            HandoffChoice::KeepPlanning => "k keep planning",
        }
    }

    /// The mode and permission a carry-it-out choice switches to.
    fn target(self) -> Option<(Mode, Approval)> {
        match self {
            HandoffChoice::WorkAsk => Some((Mode::Work, Approval::Ask)),
            HandoffChoice::WorkAutoReview => Some((Mode::Work, Approval::AutoReview)),
            HandoffChoice::OperateAsk => Some((Mode::Operate, Approval::Ask)),
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

/// A key as the hand-off sees it (the state machine maps its keys, so
/// this module needs nothing of the state's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoffKey {
    Char(char),
    Enter,
    Esc,
    CtrlC,
    CtrlD,
    Prev,
    Next,
    Other,
}

/// What a key did to the card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still open (a move, or a key that does nothing here: swallowed so
    /// nothing leaks into the draft).
    Open,
    /// Closed: stay in Plan.
    KeepPlanning,
    /// Closed: switch to this mode (Work or Operate) and permission and
    /// send [`GO_AHEAD`].
    Go(Mode, Approval),
    /// Ctrl-D: leave, as on the first run's question.
    Quit,
}

impl Handoff {
    /// One key on the open card.
    pub fn key(&mut self, key: HandoffKey) -> Outcome {
        let at = HandoffChoice::ALL
            .iter()
            .position(|c| *c == self.selected)
            .unwrap_or(HandoffChoice::ALL.len() - 1);
        let last = HandoffChoice::ALL.len() - 1;
        let pick = match key {
            HandoffKey::Char('w' | 'W') => HandoffChoice::WorkAsk,
            HandoffKey::Char('r' | 'R') => HandoffChoice::WorkAutoReview,
            HandoffKey::Char('o' | 'O') => HandoffChoice::OperateAsk,
            HandoffKey::Char('k' | 'K') | HandoffKey::Esc | HandoffKey::CtrlC => {
                HandoffChoice::KeepPlanning
            }
            HandoffKey::Enter => self.selected,
            HandoffKey::CtrlD => return Outcome::Quit,
            HandoffKey::Prev => {
                self.selected = HandoffChoice::ALL[at.saturating_sub(1)];
                return Outcome::Open;
            }
            HandoffKey::Next => {
                self.selected = HandoffChoice::ALL[(at + 1).min(last)];
                return Outcome::Open;
            }
            HandoffKey::Char(_) | HandoffKey::Other => return Outcome::Open,
        };
        match pick.target() {
            Some((m, p)) => Outcome::Go(m, p),
            None => Outcome::KeepPlanning,
        }
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
                "w/r/o switch mode and permission and send \"{GO_AHEAD}\" · Esc keeps planning"
            ),
            dim(),
        )),
    ]
}

/// The card in one line, for terminals too small for the box.
pub fn fallback(h: &Handoff) -> Line<'static> {
    Line::from(Span::styled(
        format!(
            "plan ready: w Work(Ask) · r Work(Auto-Review) · o Operate(Ask) · k keep planning [{}]",
            h.selected.label()
        ),
        Style::default().fg(Color::Black).bg(Color::Cyan),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_move_pick_and_default_to_keep_planning() {
        let mut h = Handoff::default();
        assert_eq!(h.key(HandoffKey::Enter), Outcome::KeepPlanning);
        let mut h = Handoff::default();
        assert_eq!(h.key(HandoffKey::Prev), Outcome::Open);
        assert_eq!(h.selected, HandoffChoice::OperateAsk);
        assert_eq!(h.key(HandoffKey::Prev), Outcome::Open);
        assert_eq!(h.selected, HandoffChoice::WorkAutoReview);
        assert_eq!(h.key(HandoffKey::Prev), Outcome::Open);
        assert_eq!(h.key(HandoffKey::Prev), Outcome::Open);
        assert_eq!(h.selected, HandoffChoice::WorkAsk, "stops at the first");
        assert_eq!(
            h.key(HandoffKey::Enter),
            Outcome::Go(Mode::Work, Approval::Ask)
        );
        let mut h = Handoff::default();
        assert_eq!(h.key(HandoffKey::Next), Outcome::Open);
        assert_eq!(h.selected, HandoffChoice::KeepPlanning, "stops at the last");
        assert_eq!(
            h.key(HandoffKey::Char('r')),
            Outcome::Go(Mode::Work, Approval::AutoReview)
        );
        assert_eq!(
            h.key(HandoffKey::Char('W')),
            Outcome::Go(Mode::Work, Approval::Ask)
        );
        assert_eq!(
            h.key(HandoffKey::Char('o')),
            Outcome::Go(Mode::Operate, Approval::Ask)
        );
        assert_eq!(h.key(HandoffKey::Char('x')), Outcome::Open);
        assert_eq!(h.key(HandoffKey::Other), Outcome::Open);
        assert_eq!(h.key(HandoffKey::Esc), Outcome::KeepPlanning);
        assert_eq!(h.key(HandoffKey::CtrlC), Outcome::KeepPlanning);
        assert_eq!(h.key(HandoffKey::Char('k')), Outcome::KeepPlanning);
        assert_eq!(h.key(HandoffKey::CtrlD), Outcome::Quit);
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
