//! The scheduler's one clock seam. `CODEWHALE_SCHEDULER_NOW=<RFC 3339>`
//! starts the scheduler's clock at that instant, after which it advances in
//! real time; unset, it is the system clock. Tests move a process to "three
//! hours later" by restarting it with a later value instead of sleeping.
//! Only the scheduler reads it (which slots are due); task timestamps are
//! the system clock's. Harmless in release builds: it changes which
//! scheduled slots are due, nothing an automation could not be created to
//! do anyway.

use jiff::{SignedDuration, Timestamp};
use std::time::Instant;

/// The variable read by [`Clock::from_env`].
pub const SCHEDULER_NOW: &str = "CODEWHALE_SCHEDULER_NOW";

#[derive(Clone, Debug)]
pub struct Clock {
    base: Timestamp,
    started: Instant,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock::starting_at(Timestamp::now())
    }

    /// A clock at `base` now, advancing in real time.
    pub fn starting_at(base: Timestamp) -> Clock {
        Clock {
            base,
            started: Instant::now(),
        }
    }

    /// [`SCHEDULER_NOW`] if set (a bad value is an error naming it), else
    /// the system clock.
    pub fn from_env() -> Result<Clock, String> {
        match std::env::var(SCHEDULER_NOW) {
            Ok(v) => v
                .trim()
                .parse::<Timestamp>()
                .map(Clock::starting_at)
                .map_err(|e| {
                    format!("{SCHEDULER_NOW}: `{v}` is not an RFC 3339 time with an offset ({e})")
                }),
            Err(_) => Ok(Clock::system()),
        }
    }

    pub fn now(&self) -> Timestamp {
        let d = SignedDuration::try_from(self.started.elapsed()).unwrap_or(SignedDuration::ZERO);
        self.base.checked_add(d).unwrap_or(self.base)
    }
}
