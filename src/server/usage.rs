//! `GET /v1/usage`: tokens and cost over turns, bucketed by day, model,
//! provider or thread. Pure over the turn records.

use crate::runtime::TurnRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    Day,
    Model,
    Provider,
    Thread,
}

impl GroupBy {
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s.unwrap_or("day") {
            "day" => Ok(GroupBy::Day),
            "model" => Ok(GroupBy::Model),
            "provider" => Ok(GroupBy::Provider),
            "thread" => Ok(GroupBy::Thread),
            o => Err(format!("`{o}` is not one of day, model, provider, thread")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Day => "day",
            GroupBy::Model => "model",
            GroupBy::Provider => "provider",
            GroupBy::Thread => "thread",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Bucket {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    pub cost_usd: f64,
    pub turns: u64,
}

impl Bucket {
    fn add(&mut self, t: &TurnRecord) {
        self.input_tokens += t.usage.input_tokens;
        self.output_tokens += t.usage.output_tokens;
        self.cached_tokens += t.usage.cached_tokens;
        self.reasoning_tokens += t.usage.reasoning_tokens;
        // An unpriced model counts its tokens at 0.0.
        self.cost_usd += t.cost_usd.unwrap_or(0.0);
        self.turns += 1;
    }
}

pub fn parse_time(field: &str, s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("{field}: `{s}` is not an RFC 3339 timestamp ({e})"))
}

/// Totals and ascending buckets of the turns created within the inclusive
/// bounds.
pub fn aggregate(
    turns: &[TurnRecord],
    since: Option<OffsetDateTime>,
    until: Option<OffsetDateTime>,
    by: GroupBy,
) -> (Bucket, Vec<Bucket>) {
    let mut total = Bucket::default();
    let mut buckets: BTreeMap<String, Bucket> = BTreeMap::new();
    for t in turns {
        let Ok(at) = parse_time("created_at", &t.created_at) else {
            continue;
        };
        if since.is_some_and(|s| at < s) || until.is_some_and(|u| at > u) {
            continue;
        }
        let key = match by {
            GroupBy::Day => at.date().to_string(),
            GroupBy::Model => t
                .effective_model
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            GroupBy::Provider => t
                .effective_provider
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            GroupBy::Thread => t.thread_id.clone(),
        };
        total.add(t);
        let b = buckets.entry(key.clone()).or_default();
        b.key = key;
        b.add(t);
    }
    (total, buckets.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{TurnStatus, TurnUsage};

    fn turn(id: &str, at: &str, model: &str, cost: Option<f64>) -> TurnRecord {
        TurnRecord {
            id: id.into(),
            thread_id: "thr_a".into(),
            status: TurnStatus::Completed,
            effective_provider: Some("p".into()),
            effective_model: Some(model.into()),
            created_at: at.into(),
            started_at: None,
            completed_at: None,
            duration_ms: None,
            usage: TurnUsage {
                input_tokens: 10,
                output_tokens: 5,
                cached_tokens: 0,
                reasoning_tokens: 0,
            },
            error: None,
            session_id: None,
            cost_usd: cost,
        }
    }

    #[test]
    fn inclusive_bounds_ascending_keys_and_unpriced_at_zero() {
        let turns = vec![
            turn("a", "2026-04-30T23:59:59.000Z", "m2", Some(0.5)),
            turn("b", "2026-04-01T00:00:00.000Z", "m1", None),
            turn("c", "2026-05-01T00:00:00.000Z", "m1", Some(1.0)),
        ];
        let since = parse_time("since", "2026-04-01T00:00:00Z").ok();
        let until = parse_time("until", "2026-04-30T23:59:59Z").ok();
        let (tot, b) = aggregate(&turns, since, until, GroupBy::Day);
        assert_eq!(tot.turns, 2, "both bounds are inclusive; c is outside");
        assert_eq!(tot.cost_usd, 0.5);
        assert_eq!(tot.input_tokens, 20);
        assert_eq!(
            b.iter().map(|b| b.key.as_str()).collect::<Vec<_>>(),
            ["2026-04-01", "2026-04-30"]
        );
        let (_, b) = aggregate(&turns, None, None, GroupBy::Model);
        assert_eq!(b[0].key, "m1");
        assert_eq!(b[0].turns, 2);
        let empty = parse_time("since", "2030-01-01T00:00:00Z").ok();
        let (tot, b) = aggregate(&turns, empty, None, GroupBy::Thread);
        assert!(b.is_empty() && tot.turns == 0);
        assert!(GroupBy::parse(Some("week")).unwrap_err().contains("week"));
    }
}
