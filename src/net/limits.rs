//! Per-command limits on the egress proxy: a byte budget over every
//! connection (both directions), and a connection rate limit. They do not
//! stop a small exfiltration through an allowed host; they stop a bulk one
//! from going unnoticed and make it show up as refusals in the report.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The limits of one command's proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Bytes (up + down, all connections) before every relay is cut.
    pub max_bytes: u64,
    /// Connections admitted in a burst.
    pub burst: u32,
    /// Connections per second refilled after the burst.
    pub per_second: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 1 << 30,
            burst: 256,
            per_second: 32,
        }
    }
}

/// The shared byte budget. `take` is called for every chunk relayed.
#[derive(Debug)]
pub struct ByteBudget {
    cap: u64,
    used: AtomicU64,
    exceeded: AtomicBool,
}

impl ByteBudget {
    pub fn new(cap: u64) -> Self {
        ByteBudget {
            cap,
            used: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
        }
    }

    /// Account `n` bytes; false once the total passes the cap (the chunk
    /// that crossed it is not relayed, and from then on nothing is).
    pub fn take(&self, n: u64) -> bool {
        if self.exceeded.load(Ordering::Relaxed) {
            return false;
        }
        let before = self.used.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) > self.cap {
            self.exceeded.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }

    pub fn used(&self) -> u64 {
        self.used
            .load(Ordering::Relaxed)
            .min(self.cap.saturating_add(1))
    }

    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }

    pub fn cap(&self) -> u64 {
        self.cap
    }
}

/// A token bucket over connection attempts.
#[derive(Debug)]
pub struct RateLimiter {
    burst: f64,
    per_second: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(burst: u32, per_second: u32) -> Self {
        RateLimiter {
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Admit one connection now?
    pub fn admit(&self) -> bool {
        self.admit_at(Instant::now())
    }

    /// Admit one connection at `now` (the clock is a parameter for tests).
    pub fn admit_at(&self, now: Instant) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        let elapsed = now.saturating_duration_since(st.1);
        let tokens = (st.0 + elapsed.as_secs_f64() * self.per_second).min(self.burst);
        if tokens >= 1.0 {
            *st = (tokens - 1.0, now);
            true
        } else {
            *st = (tokens, now);
            false
        }
    }

    /// How long until the next connection would be admitted (for messages).
    pub fn refill_interval(&self) -> Duration {
        if self.per_second <= 0.0 {
            Duration::MAX
        } else {
            Duration::from_secs_f64(1.0 / self.per_second)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_cuts_at_the_cap_and_stays_cut() {
        let b = ByteBudget::new(10);
        assert!(b.take(6));
        assert!(b.take(4));
        assert!(!b.exceeded());
        assert!(!b.take(1));
        assert!(b.exceeded());
        assert!(!b.take(0));
    }

    #[test]
    fn bucket_admits_a_burst_then_the_rate() {
        let r = RateLimiter::new(3, 2);
        let t0 = Instant::now();
        assert!(r.admit_at(t0));
        assert!(r.admit_at(t0));
        assert!(r.admit_at(t0));
        assert!(!r.admit_at(t0));
        assert!(!r.admit_at(t0 + Duration::from_millis(100)));
        assert!(r.admit_at(t0 + Duration::from_millis(600)));
        assert!(!r.admit_at(t0 + Duration::from_millis(600)));
        // Never more than the burst, however long it idles.
        let later = t0 + Duration::from_secs(100);
        assert!(r.admit_at(later) && r.admit_at(later) && r.admit_at(later));
        assert!(!r.admit_at(later));
        assert_eq!(r.refill_interval(), Duration::from_millis(500));
    }
}
