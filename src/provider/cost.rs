//! Cost arithmetic: a turn's tokens times the model's price. A price that
//! is unknown, or a token kind the price does not cover, makes the cost
//! unknown (`None`), never 0.

use super::catalogue::ListPrice;
use super::Usage;
use serde::Serialize;

/// USD per million tokens.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Price {
    pub input_per_mtok: f64,
    /// `None`: cached input tokens have no known price.
    pub cached_input_per_mtok: Option<f64>,
    /// `None`: cache writes have no known price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    pub output_per_mtok: f64,
    /// Prompts above this many input tokens are billed at a long-context
    /// rate this price does not carry: the cost of such a turn is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up_to_prompt_tokens: Option<u64>,
    /// Where the price came from (`config`, or the catalogue's source).
    pub source: String,
    /// When it was read (catalogue prices), if known.
    pub date: Option<String>,
}

impl Price {
    pub fn from_list(p: &ListPrice) -> Self {
        Price {
            input_per_mtok: p.input,
            cached_input_per_mtok: p.cached_input,
            cache_write_per_mtok: p.cache_write,
            output_per_mtok: p.output,
            up_to_prompt_tokens: p.up_to_prompt_tokens,
            source: p.source.to_string(),
            date: Some(p.date.to_string()),
        }
    }

    /// The cost of one turn. `input_tokens` includes the cached ones
    /// (normalised by the wire parsers); they are billed at the cached
    /// rate, and cache writes (a subset too, Anthropic) at the write rate;
    /// either without a known rate makes the cost unknown. Reasoning
    /// tokens are part of `output_tokens` on every wire format we parse,
    /// so they are not billed twice. A prompt above the price's
    /// long-context threshold is unknown too. A turn
    /// that made several requests is judged on its summed input, which can
    /// only over-report `unknown`, never under-price a long request.
    pub fn cost(&self, u: &Usage) -> Option<f64> {
        if self
            .up_to_prompt_tokens
            .is_some_and(|limit| u.input_tokens > limit)
        {
            return None;
        }
        let cached = u.cached_input_tokens.min(u.input_tokens);
        let written = u.cache_write_tokens.min(u.input_tokens - cached);
        let fresh = u.input_tokens - cached - written;
        let at = |n: u64, rate: Option<f64>| match (n, rate) {
            (0, _) => Some(0.0),
            (n, Some(p)) => Some(n as f64 * p),
            (_, None) => None,
        };
        let cached_cost = at(cached, self.cached_input_per_mtok)?;
        let write_cost = at(written, self.cache_write_per_mtok)?;
        Some(
            (fresh as f64 * self.input_per_mtok
                + cached_cost
                + write_cost
                + u.output_tokens as f64 * self.output_per_mtok)
                / 1_000_000.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::catalogue;

    fn usage(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            ..Usage::default()
        }
    }

    #[test]
    fn every_catalogue_price_table_computes_by_hand() {
        // For each priced model: 100k fresh input + 100k output costs a
        // tenth of input + output; cached tokens cost the cached rate or
        // make it unknown. (Prompts stay at or under 200k tokens, the
        // lowest long-context threshold in the table.)
        let mut seen = 0;
        for e in catalogue::all() {
            for m in e.models {
                let Some(lp) = m.price else { continue };
                seen += 1;
                let p = Price::from_list(&lp);
                let c = p.cost(&usage(100_000, 0, 100_000)).unwrap();
                assert!(
                    (c - 0.1 * (lp.input + lp.output)).abs() < 1e-9,
                    "{} {}",
                    e.id,
                    m.id
                );
                let c = p.cost(&usage(200_000, 50_000, 0));
                match lp.cached_input {
                    Some(ci) => {
                        let want = 0.15 * lp.input + 0.05 * ci;
                        assert!((c.unwrap() - want).abs() < 1e-9, "{} {}", e.id, m.id);
                    }
                    None => assert_eq!(c, None, "{} {}", e.id, m.id),
                }
                if let Some(limit) = lp.up_to_prompt_tokens {
                    assert!(p.cost(&usage(limit, 0, 10)).is_some(), "{} {}", e.id, m.id);
                    assert_eq!(p.cost(&usage(limit + 1, 0, 10)), None, "{} {}", e.id, m.id);
                }
            }
        }
        assert!(seen >= 3, "the catalogue lost its priced models");
    }

    #[test]
    fn grok_4_6_by_hand_and_unknown_past_its_long_context_threshold() {
        let p = Price::from_list(&catalogue::price("xai", "grok-4.6").unwrap());
        // 150k input, 5k output: 150_000*2 + 5_000*6 = 300_000 + 30_000 µ$.
        let c = p.cost(&usage(150_000, 0, 5_000)).unwrap();
        assert!((c - 0.33).abs() < 1e-12, "{c}");
        // 200,001 prompt tokens: the long-context rate is not in the table.
        assert_eq!(p.cost(&usage(200_001, 0, 5_000)), None);
        // Cached input has no confirmed rate: unknown, never 0.
        assert_eq!(p.cost(&usage(150_000, 1, 5_000)), None);
    }

    #[test]
    fn gpt_4o_mini_turn_by_hand() {
        let p = Price::from_list(&catalogue::price("openai", "gpt-4o-mini").unwrap());
        // 10k input of which 4k cached, 2k output:
        // 6000*0.15 + 4000*0.075 + 2000*0.60 = 900 + 300 + 1200 = 2400 µ$.
        let c = p.cost(&usage(10_000, 4_000, 2_000)).unwrap();
        assert!((c - 0.0024).abs() < 1e-12, "{c}");
    }

    #[test]
    fn glm_4_6_turn_with_cache_hits_by_hand() {
        let p = Price::from_list(&catalogue::price("zai", "glm-4.6").unwrap());
        // 10k input of which 4k cached, 2k output:
        // 6000*0.60 + 4000*0.11 + 2000*2.20 = 3600 + 440 + 4400 = 8440 µ$.
        let c = p.cost(&usage(10_000, 4_000, 2_000)).unwrap();
        assert!((c - 0.00844).abs() < 1e-12, "{c}");
        // The China endpoint bills in CNY: no price there.
        assert!(catalogue::price("zhipu", "glm-4.6").is_none());
    }

    #[test]
    fn cache_writes_and_unknown_prices_are_unknown_not_zero() {
        let p = Price::from_list(&catalogue::price("anthropic", "claude-sonnet-5-5").unwrap());
        let mut u = usage(100, 0, 10);
        assert!(p.cost(&u).is_some());
        // Writes at $2.50, the rest at $2 input / $10 output:
        // 95*2 + 5*2.5 + 10*10 = 190 + 12.5 + 100 = 302.5 µ$.
        u.cache_write_tokens = 5;
        assert!((p.cost(&u).unwrap() - 302.5e-6).abs() < 1e-12);
        // Its cache-read rate is unknown (two sources disagree).
        u.cached_input_tokens = 50;
        assert_eq!(p.cost(&u), None);
        // A price without a write rate: a write makes the turn unknown.
        let p = Price::from_list(&catalogue::price("openai", "gpt-4o").unwrap());
        let u = Usage {
            cache_write_tokens: 1,
            ..usage(100, 0, 10)
        };
        assert_eq!(p.cost(&u), None);
        assert!(catalogue::price("openai", "gpt-5.6").is_none());
    }
}
