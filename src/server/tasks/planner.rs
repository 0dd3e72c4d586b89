//! The schedule math of automations, pure (no clock, no files): parse a
//! `schedule` (`RRULE:` subset or `CRON:` five fields), print it back in
//! one canonical form, and list its slots (the instants it fires at) in an
//! IANA time zone.
//!
//! Cron matching is the `croner` crate's and every time-zone fact (offsets,
//! daylight-saving gaps and folds) is `jiff`'s. The supported RRULE subset
//! is translated to a croner pattern, so both spellings share one matcher:
//! croner walks *civil* (wall-clock) times, and each civil match is then
//! placed on the time line in the zone:
//!
//! - a civil time that does not exist (spring-forward gap) is **skipped**;
//! - a civil time that exists twice (fall-back fold) fires **once**, at
//!   the earlier instant.
//!
//! `HOURLY;INTERVAL=n` fires at the hours of the day divisible by `n`
//! (0, n, 2n, … civil), not every `n` elapsed hours from a start.

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;
use std::fmt;

/// Why a `schedule` or `timezone` is refused (the message names the part).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

fn bad(msg: impl Into<String>) -> ScheduleError {
    ScheduleError(msg.into())
}

/// The RRULE frequencies of the subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freq {
    Hourly,
    Daily,
    Weekly,
}

impl Freq {
    fn as_str(self) -> &'static str {
        match self {
            Freq::Hourly => "HOURLY",
            Freq::Daily => "DAILY",
            Freq::Weekly => "WEEKLY",
        }
    }
}

/// RFC 5545 weekday codes in cron's numbering (SU = 0).
const DAYS: [&str; 7] = ["SU", "MO", "TU", "WE", "TH", "FR", "SA"];

/// A recurring RRULE of the subset, kept as parsed (its canonical text is
/// printed from these fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rrule {
    pub freq: Freq,
    /// HOURLY only (1–23).
    pub interval: u8,
    /// Cron weekday numbers (0 = Sunday), sorted, unique; empty: every day.
    pub byday: Vec<u8>,
    /// Sorted, unique; empty (HOURLY only): every hour.
    pub byhour: Vec<u8>,
    /// Sorted, unique, never empty.
    pub byminute: Vec<u8>,
}

/// A parsed `schedule`.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// `RRULE:FREQ=ONCE;AT=<RFC 3339 with offset>`: one slot.
    Once(Timestamp),
    /// A recurring RRULE, matched by its croner translation.
    Rule(Rrule, Cron),
    /// `CRON:<minute hour day-of-month month day-of-week>`.
    Cron(String, Cron),
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

fn list(key: &str, v: &str, lo: u8, hi: u8) -> Result<Vec<u8>, ScheduleError> {
    let mut out = Vec::new();
    for part in v.split(',') {
        let n: u8 = part
            .trim()
            .parse()
            .map_err(|_| bad(format!("{key}: `{part}` is not a number")))?;
        if !(lo..=hi).contains(&n) {
            return Err(bad(format!("{key}: {n} is not between {lo} and {hi}")));
        }
        out.push(n);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn days(v: &str) -> Result<Vec<u8>, ScheduleError> {
    let mut out = Vec::new();
    for part in v.split(',') {
        let p = part.trim().to_ascii_uppercase();
        let n = DAYS.iter().position(|d| *d == p).ok_or_else(|| {
            bad(format!(
                "BYDAY: `{part}` is not one of MO,TU,WE,TH,FR,SA,SU"
            ))
        })?;
        out.push(n as u8);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

fn joined(v: &[u8]) -> String {
    v.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

impl Rrule {
    /// The croner pattern matching exactly this rule's civil times.
    fn pattern(&self) -> String {
        let hours: Vec<u8> = (0..24u8)
            .filter(|h| h % self.interval == 0)
            .filter(|h| self.byhour.is_empty() || self.byhour.contains(h))
            .collect();
        let dow = if self.byday.is_empty() {
            "*".to_string()
        } else {
            joined(&self.byday)
        };
        format!("{} {} * * {}", joined(&self.byminute), joined(&hours), dow)
    }
}

impl Schedule {
    /// Parse a `schedule` value; the error names the part at fault.
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let t = text.trim();
        if let Some(rest) = strip_prefix_ci(t, "CRON:") {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.len() != 5 {
                return Err(bad(format!(
                    "CRON: needs 5 fields (minute hour day-of-month month day-of-week), got {}",
                    fields.len()
                )));
            }
            let canon = fields.join(" ");
            let cron = cron_parser()
                .parse(&canon)
                .map_err(|e| bad(format!("CRON: {e}")))?;
            return Ok(Schedule::Cron(canon, cron));
        }
        let Some(rest) = strip_prefix_ci(t, "RRULE:") else {
            return Err(bad(
                "must start with `RRULE:` (e.g. RRULE:FREQ=DAILY;BYHOUR=9;BYMINUTE=0) or `CRON:` (e.g. CRON:0 9 * * 1-5)",
            ));
        };
        let mut parts: Vec<(String, &str)> = Vec::new();
        for p in rest.split(';').filter(|p| !p.trim().is_empty()) {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| bad(format!("RRULE: `{p}` is not KEY=VALUE")))?;
            let k = k.trim().to_ascii_uppercase();
            if parts.iter().any(|(seen, _)| *seen == k) {
                return Err(bad(format!("RRULE: {k} given twice")));
            }
            parts.push((k, v.trim()));
        }
        let get = |k: &str| parts.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        let freq = get("FREQ").ok_or_else(|| bad("RRULE: FREQ is missing"))?;
        let allowed: &[&str] = match freq.to_ascii_uppercase().as_str() {
            "ONCE" => &["FREQ", "AT"],
            "HOURLY" => &["FREQ", "INTERVAL", "BYDAY", "BYHOUR", "BYMINUTE"],
            "DAILY" => &["FREQ", "BYDAY", "BYHOUR", "BYMINUTE"],
            "WEEKLY" => &["FREQ", "BYDAY", "BYHOUR", "BYMINUTE"],
            other => {
                return Err(bad(format!(
                    "RRULE: FREQ `{other}` is not one of ONCE, HOURLY, DAILY, WEEKLY"
                )))
            }
        };
        if let Some((k, _)) = parts.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            return Err(bad(format!(
                "RRULE: {k} is not supported with FREQ={} (allowed: {})",
                freq.to_ascii_uppercase(),
                allowed[1..].join(", ")
            )));
        }
        let freq = match freq.to_ascii_uppercase().as_str() {
            "ONCE" => {
                let at = get("AT")
                    .ok_or_else(|| bad("RRULE: FREQ=ONCE needs AT=<RFC 3339 time with offset>"))?;
                let ts: Timestamp = at.parse().map_err(|e| {
                    bad(format!(
                        "RRULE: AT `{at}` is not an RFC 3339 time with an offset ({e})"
                    ))
                })?;
                return Ok(Schedule::Once(ts));
            }
            "HOURLY" => Freq::Hourly,
            "DAILY" => Freq::Daily,
            _ => Freq::Weekly,
        };
        let interval = match get("INTERVAL") {
            None => 1,
            Some(v) => {
                let n = list("INTERVAL", v, 1, 23)?;
                match n.as_slice() {
                    [n] => *n,
                    _ => return Err(bad("RRULE: INTERVAL takes one number")),
                }
            }
        };
        let byday = get("BYDAY").map(days).transpose()?.unwrap_or_default();
        let byhour = get("BYHOUR")
            .map(|v| list("BYHOUR", v, 0, 23))
            .transpose()?
            .unwrap_or_default();
        let byminute = get("BYMINUTE")
            .map(|v| list("BYMINUTE", v, 0, 59))
            .transpose()?
            .unwrap_or_else(|| vec![0]);
        if freq != Freq::Hourly && byhour.is_empty() {
            return Err(bad(format!("RRULE: FREQ={} needs BYHOUR", freq.as_str())));
        }
        if freq == Freq::Weekly && byday.is_empty() {
            return Err(bad("RRULE: FREQ=WEEKLY needs BYDAY"));
        }
        let rule = Rrule {
            freq,
            interval,
            byday,
            byhour,
            byminute,
        };
        if !(0..24u8)
            .any(|h| h % rule.interval == 0 && (rule.byhour.is_empty() || rule.byhour.contains(&h)))
        {
            return Err(bad(
                "RRULE: no hour of the day matches both INTERVAL and BYHOUR",
            ));
        }
        let cron = cron_parser()
            .parse(&rule.pattern())
            .map_err(|e| bad(format!("RRULE: {e}")))?;
        Ok(Schedule::Rule(rule, cron))
    }

    /// Whether this schedule has one slot only.
    pub fn is_once(&self) -> bool {
        matches!(self, Schedule::Once(_))
    }

    /// The first slot strictly after `after` in zone `tz`.
    pub fn next_after(&self, tz: &TimeZone, after: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Once(at) => (*at > after).then_some(*at),
            Schedule::Rule(_, c) | Schedule::Cron(_, c) => next_civil(c, tz, after),
        }
    }

    /// The slots in `(after, until]`, oldest first, at most `max` of them
    /// (the newest `max` are not kept: callers that need "the last missed
    /// one" ask [`Schedule::last_in`]).
    pub fn slots_between(
        &self,
        tz: &TimeZone,
        after: Timestamp,
        until: Timestamp,
        max: usize,
    ) -> Vec<Timestamp> {
        let mut out = Vec::new();
        let mut cur = after;
        while out.len() < max {
            match self.next_after(tz, cur) {
                Some(t) if t <= until => {
                    out.push(t);
                    cur = t;
                }
                _ => break,
            }
        }
        out
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// How many civil matches in a row may fall into gaps or before `after`
/// (a fold) before the search gives up: a real zone has at most a few.
const MAX_SKIPS: usize = 64;

fn next_civil(c: &Cron, tz: &TimeZone, after: Timestamp) -> Option<Timestamp> {
    let mut civil: DateTime = after.to_zoned(tz.clone()).datetime();
    for _ in 0..MAX_SKIPS {
        civil = c.find_next_occurrence(&civil, false).ok()?;
        let instant = match tz.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(civil).ok()?,
            // The wall clock jumps over this time: it never happens.
            AmbiguousOffset::Gap { .. } => continue,
            // The wall clock passes this time twice: once, the first time.
            AmbiguousOffset::Fold { before, .. } => before.to_timestamp(civil).ok()?,
        };
        if instant > after {
            return Some(instant);
        }
    }
    None
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Once(at) => write!(f, "RRULE:FREQ=ONCE;AT={at}"),
            Schedule::Cron(text, _) => write!(f, "CRON:{text}"),
            Schedule::Rule(r, _) => {
                write!(f, "RRULE:FREQ={}", r.freq.as_str())?;
                if r.interval != 1 {
                    write!(f, ";INTERVAL={}", r.interval)?;
                }
                if !r.byday.is_empty() {
                    let d: Vec<&str> = r.byday.iter().map(|d| DAYS[*d as usize]).collect();
                    write!(f, ";BYDAY={}", d.join(","))?;
                }
                if !r.byhour.is_empty() {
                    write!(f, ";BYHOUR={}", joined(&r.byhour))?;
                }
                write!(f, ";BYMINUTE={}", joined(&r.byminute))
            }
        }
    }
}

/// The zone of a `timezone` value: an IANA name (`America/New_York`,
/// `UTC`); absent: the machine's.
pub fn zone(name: Option<&str>) -> Result<(String, TimeZone), ScheduleError> {
    match name {
        Some(n) => TimeZone::get(n)
            .map(|tz| (n.to_string(), tz))
            .map_err(|e| bad(format!("`{n}` is not an IANA time zone name ({e})"))),
        None => {
            let tz = TimeZone::system();
            Ok(match tz.iana_name() {
                Some(n) => (n.to_string(), tz.clone()),
                // A zone without a name could not be stored and read back.
                None => ("UTC".to_string(), TimeZone::UTC),
            })
        }
    }
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
