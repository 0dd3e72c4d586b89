//! `reasoning_effort`: one setting (user config, project override, the
//! TUI's `/model`, `exec --reasoning-effort`) mapped onto each wire format
//! by the model's catalogue data ([`ReasoningControl`]). Unset: nothing is
//! sent and the provider's default applies.

use serde::Serialize;

pub use crate::config::effort::ReasoningEffort;

/// Thinking budgets (tokens) per effort, for Anthropic's
/// `thinking.budget_tokens`. `none` turns thinking off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Budgets {
    pub minimal: u32,
    pub low: u32,
    pub medium: u32,
    pub high: u32,
    pub xhigh: u32,
    pub max: u32,
}

impl Budgets {
    pub fn of(&self, e: ReasoningEffort) -> Option<u32> {
        match e {
            ReasoningEffort::None => None,
            ReasoningEffort::Minimal => Some(self.minimal),
            ReasoningEffort::Low => Some(self.low),
            ReasoningEffort::Medium => Some(self.medium),
            ReasoningEffort::High => Some(self.high),
            ReasoningEffort::Xhigh => Some(self.xhigh),
            ReasoningEffort::Max => Some(self.max),
        }
    }
}

/// Anthropic's extended-thinking budgets. The API's floor is 1,024 tokens
/// and the budget must stay below `max_tokens`
/// (<https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking>,
/// "budget_tokens", read 2026-12-02); the guide's examples use 10,000 and
/// it suggests batch processing above 32K. The steps between are
/// codewhale's choice (dated 2026-12-02), used for catalogue models with
/// thinking and custom providers with `thinking = true`.
pub const ANTHROPIC_BUDGETS: Budgets = Budgets {
    minimal: 1_024,
    low: 4_096,
    medium: 10_000,
    high: 16_000,
    xhigh: 24_000,
    max: 32_000,
};

/// How a model takes reasoning control (catalogue data).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "style", rename_all = "snake_case")]
pub enum ReasoningControl {
    /// OpenAI's `reasoning_effort` (Chat Completions), the effort as named.
    OpenAiEffort,
    /// DeepSeek: `thinking: {"type": "enabled"|"disabled"}` and
    /// `reasoning_effort` `low`/`high`/`max`.
    DeepSeek,
    /// Anthropic's manual extended thinking:
    /// `thinking: {"type": "enabled", "budget_tokens": N}` (`none`: no
    /// `thinking` field, the API's default of off).
    AnthropicThinking { budgets: Budgets },
    /// Anthropic's adaptive thinking (Claude 5.x, on by default):
    /// `output_config.effort` `low`…`max`; `none` sends
    /// `thinking: {"type": "between_tools"}`, the lowest setting (such
    /// models answer 400 to `"enabled"` budgets and to `"disabled"`).
    AnthropicAdaptive,
}

/// Which models reason and how, with the date and page it was read from
/// (catalogue data).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ModelReasoning {
    pub control: ReasoningControl,
    pub date: &'static str,
    pub source: &'static str,
}

/// What one request carries for reasoning: typed, put into the body by
/// each wire format's builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireReasoning {
    /// Nothing: the provider's default.
    Default,
    /// `reasoning_effort: <value>` (OpenAI).
    Effort(&'static str),
    /// DeepSeek's switch, and the effort when enabled.
    DeepSeek {
        enabled: bool,
        effort: Option<&'static str>,
    },
    /// Anthropic `thinking` with this budget (`None`: no field, off).
    AnthropicBudget(Option<u32>),
    /// Anthropic adaptive thinking: `output_config.effort`, or (`None`)
    /// `thinking: {"type": "between_tools"}`.
    AnthropicAdaptive(Option<&'static str>),
}

/// The request fields for `effort` on a model with `control`.
pub fn map(control: Option<ReasoningControl>, effort: Option<ReasoningEffort>) -> WireReasoning {
    let (Some(control), Some(effort)) = (control, effort) else {
        return WireReasoning::Default;
    };
    match control {
        ReasoningControl::OpenAiEffort => WireReasoning::Effort(effort.as_str()),
        // DeepSeek's thinking-mode guide, "Thinking Mode Toggle and Effort
        // Control" (read 2026-12-02): minimal and low map to low; medium,
        // high and xhigh to high; max to max.
        ReasoningControl::DeepSeek => match effort {
            ReasoningEffort::None => WireReasoning::DeepSeek {
                enabled: false,
                effort: None,
            },
            ReasoningEffort::Minimal | ReasoningEffort::Low => WireReasoning::DeepSeek {
                enabled: true,
                effort: Some("low"),
            },
            ReasoningEffort::Medium | ReasoningEffort::High | ReasoningEffort::Xhigh => {
                WireReasoning::DeepSeek {
                    enabled: true,
                    effort: Some("high"),
                }
            }
            ReasoningEffort::Max => WireReasoning::DeepSeek {
                enabled: true,
                effort: Some("max"),
            },
        },
        ReasoningControl::AnthropicThinking { budgets } => {
            WireReasoning::AnthropicBudget(budgets.of(effort))
        }
        // The Sonnet 5.5 migration page ("Turn off up-front thinking",
        // read 2026-12-02): efforts low, medium, high, xhigh, max;
        // `between_tools` is the lowest thinking setting.
        ReasoningControl::AnthropicAdaptive => WireReasoning::AnthropicAdaptive(match effort {
            ReasoningEffort::None => None,
            ReasoningEffort::Minimal | ReasoningEffort::Low => Some("low"),
            ReasoningEffort::Medium => Some("medium"),
            ReasoningEffort::High => Some("high"),
            ReasoningEffort::Xhigh => Some("xhigh"),
            ReasoningEffort::Max => Some("max"),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_name_and_names_the_choices_on_error() {
        for e in ReasoningEffort::ALL {
            assert_eq!(e.as_str().parse::<ReasoningEffort>(), Ok(e));
        }
        let err = "hgh".parse::<ReasoningEffort>().unwrap_err();
        assert!(
            err.contains("`hgh`") && err.contains("minimal, low"),
            "{err}"
        );
    }

    #[test]
    fn maps_per_wire() {
        use ReasoningEffort::*;
        assert_eq!(map(Option::None, Some(High)), WireReasoning::Default);
        assert_eq!(
            map(Some(ReasoningControl::OpenAiEffort), Option::None),
            WireReasoning::Default
        );
        assert_eq!(
            map(Some(ReasoningControl::OpenAiEffort), Some(Xhigh)),
            WireReasoning::Effort("xhigh")
        );
        let ds = |e| map(Some(ReasoningControl::DeepSeek), Some(e));
        assert_eq!(
            ds(None),
            WireReasoning::DeepSeek {
                enabled: false,
                effort: Option::None
            }
        );
        assert_eq!(
            ds(Minimal),
            WireReasoning::DeepSeek {
                enabled: true,
                effort: Some("low")
            }
        );
        assert_eq!(
            ds(Medium),
            WireReasoning::DeepSeek {
                enabled: true,
                effort: Some("high")
            }
        );
        assert_eq!(
            ds(Max),
            WireReasoning::DeepSeek {
                enabled: true,
                effort: Some("max")
            }
        );
        let an = |e| {
            map(
                Some(ReasoningControl::AnthropicThinking {
                    budgets: ANTHROPIC_BUDGETS,
                }),
                Some(e),
            )
        };
        assert_eq!(an(None), WireReasoning::AnthropicBudget(Option::None));
        assert_eq!(an(Minimal), WireReasoning::AnthropicBudget(Some(1_024)));
        assert_eq!(an(Medium), WireReasoning::AnthropicBudget(Some(10_000)));
        let ad = |e| map(Some(ReasoningControl::AnthropicAdaptive), Some(e));
        assert_eq!(ad(None), WireReasoning::AnthropicAdaptive(Option::None));
        assert_eq!(ad(Minimal), WireReasoning::AnthropicAdaptive(Some("low")));
        assert_eq!(ad(Max), WireReasoning::AnthropicAdaptive(Some("max")));
    }
}
