//! `GET /v1/usage`: tokens and cost over turns, bucketed by day, model,
//! provider or thread. Pure over the turn records.
//!
//! A routed turn may be answered by several models: grouped by model or
//! provider, each model's share ([`TurnRecord::by_model`]) goes to its own
//! bucket. Cost: `cost_usd` sums the known prices (the contract's number:
//! an unpriced model adds 0.0 there), and every bucket also says how many
//! of its parts had no price (`unpriced`) and labels the cost `unknown`
//! when none had one, or `at least …` when some had none — an unknown
//! price is never reported as a cost of 0.

use crate::runtime::model::ModelUsage;
use crate::runtime::{TurnRecord, TurnUsage};
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
    /// Turns (or, for a routed turn grouped by model, its models' shares)
    /// whose price or usage was unknown: their cost is not in `cost_usd`.
    pub unpriced: u64,
    /// `N.NNNNNN USD`, `at least N.NNNNNN USD` (some parts unpriced) or
    /// `unknown` (no part priced).
    pub cost: String,
    /// Parts with a known cost (for the label).
    #[serde(skip)]
    priced: u64,
}

impl Bucket {
    fn add_part(&mut self, u: &TurnUsage, cost: Option<f64>) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.cached_tokens += u.cached_tokens;
        self.reasoning_tokens += u.reasoning_tokens;
        match cost {
            Some(c) => {
                self.cost_usd += c;
                self.priced += 1;
            }
            None => self.unpriced += 1,
        }
    }

    fn add(&mut self, t: &TurnRecord) {
        self.add_part(&t.usage, t.cost_usd);
        self.turns += 1;
    }

    fn label(&mut self) {
        self.cost = if self.unpriced == 0 {
            format!("{:.6} USD", self.cost_usd)
        } else if self.priced > 0 {
            format!("at least {:.6} USD", self.cost_usd)
        } else {
            "unknown".into()
        };
    }
}

/// The parts a turn adds to model/provider buckets: its per-model shares,
/// or the whole turn under its effective model.
fn parts(t: &TurnRecord) -> Vec<ModelUsage> {
    if !t.by_model.is_empty() {
        return t.by_model.clone();
    }
    vec![ModelUsage {
        provider: t
            .effective_provider
            .clone()
            .unwrap_or_else(|| "unknown".into()),
        model: t
            .effective_model
            .clone()
            .unwrap_or_else(|| "unknown".into()),
        usage: t.usage,
        cost_usd: t.cost_usd,
        requests: 1,
    }]
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
        total.add(t);
        match by {
            GroupBy::Day | GroupBy::Thread => {
                let key = match by {
                    GroupBy::Day => at.date().to_string(),
                    _ => t.thread_id.clone(),
                };
                let b = buckets.entry(key.clone()).or_default();
                b.key = key;
                b.add(t);
            }
            GroupBy::Model | GroupBy::Provider => {
                let mut seen: Vec<String> = Vec::new();
                for p in parts(t) {
                    let key = match by {
                        GroupBy::Model => p.model.clone(),
                        _ => p.provider.clone(),
                    };
                    let b = buckets.entry(key.clone()).or_default();
                    b.key = key.clone();
                    b.add_part(&p.usage, p.cost_usd);
                    if !seen.contains(&key) {
                        b.turns += 1;
                        seen.push(key);
                    }
                }
            }
        }
    }
    total.label();
    for b in buckets.values_mut() {
        b.label();
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
                cache_write_tokens: 0,
                reasoning_tokens: 0,
            },
            error: None,
            session_id: None,
            cost_usd: cost,
            by_model: Vec::new(),
            routing: Vec::new(),
            context_tokens: None,
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
        assert_eq!(
            (tot.unpriced, tot.cost.as_str()),
            (1, "at least 0.500000 USD")
        );
        assert_eq!(tot.input_tokens, 20);
        assert_eq!(
            b.iter().map(|b| b.key.as_str()).collect::<Vec<_>>(),
            ["2026-04-01", "2026-04-30"]
        );
        let (_, b) = aggregate(&turns, None, None, GroupBy::Model);
        assert_eq!(b[0].key, "m1");
        assert_eq!(b[0].turns, 2);
        assert_eq!(b[1].cost, "0.500000 USD");
        let only_unpriced = vec![turn("d", "2026-04-02T00:00:00.000Z", "m3", None)];
        let (tot, _) = aggregate(&only_unpriced, None, None, GroupBy::Day);
        assert_eq!(
            (tot.cost_usd, tot.cost.as_str()),
            (0.0, "unknown"),
            "never a cost of 0"
        );
        let empty = parse_time("since", "2030-01-01T00:00:00Z").ok();
        let (tot, b) = aggregate(&turns, empty, None, GroupBy::Thread);
        assert!(b.is_empty() && tot.turns == 0);
        assert!(GroupBy::parse(Some("week")).unwrap_err().contains("week"));
    }

    #[test]
    fn a_routed_turn_splits_by_model_and_provider() {
        let mut t = turn("r", "2026-04-02T00:00:00.000Z", "auto", None);
        let share = |p: &str, m: &str, input, cost| ModelUsage {
            provider: p.into(),
            model: m.into(),
            usage: TurnUsage {
                input_tokens: input,
                ..TurnUsage::default()
            },
            cost_usd: cost,
            requests: 1,
        };
        t.by_model = vec![
            share("a", "cheap", 7, Some(0.25)),
            share("b", "strong", 3, None),
        ];
        let (tot, b) = aggregate(&[t.clone()], None, None, GroupBy::Model);
        assert_eq!(tot.turns, 1);
        let keys: Vec<_> = b
            .iter()
            .map(|b| (b.key.as_str(), b.input_tokens, b.cost.as_str()))
            .collect();
        assert_eq!(
            keys,
            [("cheap", 7, "0.250000 USD"), ("strong", 3, "unknown")]
        );
        let (_, b) = aggregate(&[t], None, None, GroupBy::Provider);
        assert_eq!(
            b.iter().map(|b| b.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(b.iter().all(|b| b.turns == 1));
    }
}
