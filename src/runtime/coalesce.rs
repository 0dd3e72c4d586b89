//! Agent-message delta coalescing: provider fragments are gathered until
//! the oldest is 32 ms old or about 16 KiB are waiting, then sequenced as
//! one `item.delta`, so a chatty provider does not cost an fsync per token.
//! Pure: the caller passes the clock in.

use std::time::{Duration, Instant};

pub const MAX_AGE: Duration = Duration::from_millis(32);
pub const MAX_BYTES: usize = 16 * 1024;

#[derive(Debug)]
pub struct Coalescer {
    buf: String,
    since: Option<Instant>,
    max_age: Duration,
    max_bytes: usize,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer::new(MAX_AGE, MAX_BYTES)
    }
}

impl Coalescer {
    pub fn new(max_age: Duration, max_bytes: usize) -> Self {
        Coalescer {
            buf: String::new(),
            since: None,
            max_age,
            max_bytes,
        }
    }

    /// Add a fragment; returns the text to publish now, if a bound is
    /// reached. A single fragment larger than the byte bound is published
    /// whole (it is indivisible).
    pub fn push(&mut self, fragment: &str, now: Instant) -> Option<String> {
        if fragment.is_empty() {
            return self.tick(now);
        }
        self.since.get_or_insert(now);
        self.buf.push_str(fragment);
        if self.buf.len() >= self.max_bytes {
            return self.take();
        }
        self.tick(now)
    }

    /// Publish what waits if its oldest fragment reached the age bound.
    pub fn tick(&mut self, now: Instant) -> Option<String> {
        match self.since {
            Some(t) if now.saturating_duration_since(t) >= self.max_age => self.take(),
            _ => None,
        }
    }

    /// When the waiting text must be published (for a timer), if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.since.map(|t| t + self.max_age)
    }

    /// Everything waiting (end of the message, or before another event).
    pub fn take(&mut self) -> Option<String> {
        self.since = None;
        (!self.buf.is_empty()).then(|| std::mem::take(&mut self.buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_wait_until_the_age_bound() {
        let t0 = Instant::now();
        let mut c = Coalescer::default();
        assert_eq!(c.push("a", t0), None);
        assert_eq!(c.push("b", t0 + Duration::from_millis(10)), None);
        assert_eq!(c.tick(t0 + Duration::from_millis(31)), None);
        assert_eq!(c.deadline(), Some(t0 + MAX_AGE));
        assert_eq!(c.tick(t0 + MAX_AGE).as_deref(), Some("ab"));
        assert_eq!(c.take(), None);
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn the_age_counts_from_the_oldest_waiting_fragment() {
        let t0 = Instant::now();
        let mut c = Coalescer::default();
        c.push("a", t0);
        let out = c.push("b", t0 + Duration::from_millis(40));
        assert_eq!(out.as_deref(), Some("ab"));
        // The next batch starts its own clock.
        assert_eq!(c.push("c", t0 + Duration::from_millis(41)), None);
        assert_eq!(c.deadline(), Some(t0 + Duration::from_millis(41) + MAX_AGE));
    }

    #[test]
    fn the_byte_bound_publishes_at_once_and_big_chunks_stay_whole() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(MAX_AGE, 8);
        assert_eq!(c.push("1234", t0), None);
        assert_eq!(c.push("5678", t0).as_deref(), Some("12345678"));
        let big = "x".repeat(20);
        assert_eq!(c.push(&big, t0).as_deref(), Some(big.as_str()));
    }

    #[test]
    fn many_small_fragments_become_few_deltas() {
        let t0 = Instant::now();
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        for i in 0..1000u64 {
            // One fragment per 0.1 ms: 100 ms of streaming.
            if let Some(s) = c.push("tok ", t0 + Duration::from_micros(i * 100)) {
                out.push(s);
            }
        }
        out.extend(c.take());
        assert_eq!(
            out.concat(),
            "tok ".repeat(1000),
            "nothing lost or reordered"
        );
        assert!(out.len() <= 4, "{} deltas", out.len());
    }
}
