//! The breaker: when the reviewer keeps saying no (or cannot answer), the
//! turn stops instead of looping.
//!
//! Per agent (each sub-agent owns one), per session/thread. Trips on
//! - 3 reviewer denials in a row ([`DENY_STREAK`]); an allow resets the
//!   count, an unavailable answer does not touch it;
//! - 10 reviewer denials within the last 50 reviewer answers ([`WINDOW`],
//!   [`WINDOW_DENIES`]); unavailable answers are not reviews in this
//!   window (they are counted apart);
//! - 3 unavailable answers in a row ([`UNAVAILABLE_STREAK`]); any answer
//!   (allow or deny) resets it.
//!
//! A tripped breaker stays tripped (the owner drops the posture to Ask)
//! until [`Breaker::reset`], which the owner calls when the user selects
//! Auto-Review again.

use super::answer::ReviewVerdict;
use serde::Serialize;
use std::collections::VecDeque;

/// Reviewer denials in a row that stop the turn.
pub const DENY_STREAK: u32 = 3;
/// Unavailable answers in a row that stop the turn.
pub const UNAVAILABLE_STREAK: u32 = 3;
/// How many recent reviewer answers the windowed count looks at.
pub const WINDOW: usize = 50;
/// Reviewer denials within [`WINDOW`] answers that stop the turn.
pub const WINDOW_DENIES: u32 = 10;

/// Which limit tripped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TripKind {
    /// [`DENY_STREAK`] denials in a row.
    DeniesInARow,
    /// [`WINDOW_DENIES`] denials within the last [`WINDOW`] answers.
    DeniesInWindow,
    /// [`UNAVAILABLE_STREAK`] unavailable answers in a row.
    Unavailable,
}

/// A tripped breaker: the counts as they stood (the payload of
/// `auto_review.paused`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Trip {
    pub kind: TripKind,
    /// Reviewer denials in a row.
    pub consecutive_denies: u32,
    /// Reviewer denials within the window.
    pub window_denies: u32,
    /// Reviewer answers in the window (at most [`WINDOW`]).
    pub window_reviews: u32,
    /// Unavailable answers in a row.
    pub consecutive_unavailable: u32,
}

impl Trip {
    /// The turn's failure reason: `auto-review paused: …` or, for an
    /// outage, `reviewer unavailable: …`.
    pub fn reason(&self) -> String {
        match self.kind {
            TripKind::DeniesInARow => format!(
                "auto-review paused: {} reviewer denials in a row; the posture is Ask until you select Auto-Review again",
                self.consecutive_denies
            ),
            TripKind::DeniesInWindow => format!(
                "auto-review paused: {} reviewer denials within the last {} reviews; the posture is Ask until you select Auto-Review again",
                self.window_denies, self.window_reviews
            ),
            TripKind::Unavailable => format!(
                "reviewer unavailable: {} reviews in a row got no usable answer; auto-review paused, the posture is Ask until you select Auto-Review again",
                self.consecutive_unavailable
            ),
        }
    }
}

/// The counts of one agent's reviews.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Breaker {
    consecutive_denies: u32,
    consecutive_unavailable: u32,
    /// The last [`WINDOW`] reviewer answers, oldest first: `true` = deny.
    window: VecDeque<bool>,
    tripped: Option<Trip>,
}

impl Breaker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one review; the trip, when this review tripped the breaker.
    /// A breaker that already tripped stays tripped and reports no new
    /// trip.
    pub fn record(&mut self, v: &ReviewVerdict) -> Option<Trip> {
        if self.tripped.is_some() {
            return None;
        }
        match v {
            ReviewVerdict::Allow { .. } | ReviewVerdict::Deny { .. } => {
                let deny = matches!(v, ReviewVerdict::Deny { .. });
                self.consecutive_unavailable = 0;
                self.consecutive_denies = if deny { self.consecutive_denies + 1 } else { 0 };
                if self.window.len() == WINDOW {
                    self.window.pop_front();
                }
                self.window.push_back(deny);
            }
            ReviewVerdict::Unavailable { .. } => self.consecutive_unavailable += 1,
        }
        let kind = if self.consecutive_unavailable >= UNAVAILABLE_STREAK {
            TripKind::Unavailable
        } else if self.consecutive_denies >= DENY_STREAK {
            TripKind::DeniesInARow
        } else if self.window_denies() >= WINDOW_DENIES {
            TripKind::DeniesInWindow
        } else {
            return None;
        };
        let trip = Trip {
            kind,
            consecutive_denies: self.consecutive_denies,
            window_denies: self.window_denies(),
            window_reviews: self.window.len() as u32,
            consecutive_unavailable: self.consecutive_unavailable,
        };
        self.tripped = Some(trip.clone());
        Some(trip)
    }

    /// The trip that paused Auto-Review, if any.
    pub fn tripped(&self) -> Option<&Trip> {
        self.tripped.as_ref()
    }

    /// The user selected Auto-Review again: start counting afresh.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    fn window_denies(&self) -> u32 {
        self.window.iter().filter(|d| **d).count() as u32
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::answer::Risk;
    use super::*;
    use proptest::prelude::*;

    fn allow() -> ReviewVerdict {
        ReviewVerdict::Allow {
            risk: Risk::Low,
            reason: "ok".into(),
        }
    }
    fn deny() -> ReviewVerdict {
        ReviewVerdict::Deny {
            risk: Risk::High,
            reason: "no".into(),
        }
    }
    fn gone() -> ReviewVerdict {
        ReviewVerdict::unavailable("timeout")
    }

    /// Feed `seq`; the index and trip of the first trip.
    fn run(seq: &[ReviewVerdict]) -> Option<(usize, Trip)> {
        let mut b = Breaker::new();
        seq.iter()
            .enumerate()
            .find_map(|(i, v)| b.record(v).map(|t| (i, t)))
    }

    #[test]
    fn three_denials_in_a_row_trip() {
        let (i, t) = run(&[deny(), deny(), deny()]).unwrap();
        assert_eq!(i, 2);
        assert_eq!(t.kind, TripKind::DeniesInARow);
        assert!(t
            .reason()
            .starts_with("auto-review paused: 3 reviewer denials in a row"));
        // Positive control: two do not.
        assert!(run(&[deny(), deny()]).is_none());
    }

    #[test]
    fn an_allow_resets_the_deny_streak_an_unavailable_does_not() {
        assert!(run(&[deny(), deny(), allow(), deny(), deny()]).is_none());
        let (i, t) = run(&[deny(), deny(), gone(), deny()]).unwrap();
        assert_eq!((i, t.kind), (3, TripKind::DeniesInARow));
    }

    #[test]
    fn ten_denials_within_fifty_trip() {
        // deny, allow, deny, allow, …: never two in a row.
        let seq: Vec<_> = (0..20)
            .map(|i| if i % 2 == 0 { deny() } else { allow() })
            .collect();
        let (i, t) = run(&seq).unwrap();
        assert_eq!(i, 18);
        assert_eq!(t.kind, TripKind::DeniesInWindow);
        assert_eq!((t.window_denies, t.window_reviews), (10, 19));
        assert!(t
            .reason()
            .contains("10 reviewer denials within the last 19 reviews"));
    }

    #[test]
    fn ten_denials_spread_over_more_than_fifty_do_not() {
        // One deny every sixth review: at most 9 in any 50.
        let seq: Vec<_> = (0..200)
            .map(|i| if i % 6 == 0 { deny() } else { allow() })
            .collect();
        assert!(run(&seq).is_none());
        // Positive control: every fifth review is 10 in 50.
        let seq: Vec<_> = (0..200)
            .map(|i| if i % 5 == 0 { deny() } else { allow() })
            .collect();
        assert_eq!(run(&seq).unwrap().1.kind, TripKind::DeniesInWindow);
    }

    #[test]
    fn three_unavailable_in_a_row_trip_and_any_answer_resets() {
        let (i, t) = run(&[gone(), gone(), gone()]).unwrap();
        assert_eq!((i, t.kind), (2, TripKind::Unavailable));
        assert!(t.reason().starts_with("reviewer unavailable:"));
        assert!(run(&[gone(), gone(), allow(), gone(), gone()]).is_none());
        assert!(run(&[gone(), gone(), deny(), gone(), gone()]).is_none());
    }

    #[test]
    fn a_trip_holds_until_reset() {
        let mut b = Breaker::new();
        for _ in 0..3 {
            b.record(&deny());
        }
        assert!(b.tripped().is_some());
        assert!(b.record(&deny()).is_none(), "reported once");
        assert!(b.tripped().is_some());
        b.reset();
        assert!(b.tripped().is_none());
        assert!(b.record(&deny()).is_none());
    }

    #[test]
    fn two_breakers_count_alone() {
        let (mut parent, mut child) = (Breaker::new(), Breaker::new());
        parent.record(&deny());
        parent.record(&deny());
        assert!(child.record(&deny()).is_none());
        assert!(parent.record(&deny()).is_some());
        assert!(child.tripped().is_none());
    }

    /// The contract, evaluated naively over the whole history.
    fn reference(seq: &[u8]) -> Option<(usize, TripKind)> {
        let mut answers: Vec<bool> = Vec::new();
        let (mut dr, mut ur) = (0, 0);
        for (i, s) in seq.iter().enumerate() {
            match s {
                0 => {
                    answers.push(false);
                    dr = 0;
                    ur = 0;
                }
                1 => {
                    answers.push(true);
                    dr += 1;
                    ur = 0;
                }
                _ => ur += 1,
            }
            let start = answers.len().saturating_sub(WINDOW);
            let in_window = answers[start..].iter().filter(|d| **d).count() as u32;
            if ur >= UNAVAILABLE_STREAK {
                return Some((i, TripKind::Unavailable));
            }
            if dr >= DENY_STREAK {
                return Some((i, TripKind::DeniesInARow));
            }
            if in_window >= WINDOW_DENIES {
                return Some((i, TripKind::DeniesInWindow));
            }
        }
        None
    }

    proptest! {
        #[test]
        fn matches_the_reference(seq in proptest::collection::vec(0u8..3, 0..300)) {
            let vs: Vec<_> = seq.iter().map(|s| match s { 0 => allow(), 1 => deny(), _ => gone() }).collect();
            prop_assert_eq!(run(&vs).map(|(i, t)| (i, t.kind)), reference(&seq));
        }

        #[test]
        fn allows_never_trip(n in 0usize..500) {
            prop_assert!(run(&vec![allow(); n]).is_none());
        }
    }
}
