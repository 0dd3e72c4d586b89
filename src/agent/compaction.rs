//! Automatic compaction: before a model request that would pass a share
//! of the model's context window (`[compaction] threshold`, default 0.85),
//! the conversation so far is summarised by the model (no tools) and the
//! request goes out with the summary in place of what it covers — keeping
//! the latest user request and the tool calls whose results the model has
//! not answered yet verbatim (their reasoning too: DeepSeek and Anthropic
//! refuse a tool loop without it). A model whose window is unknown is
//! compacted on the provider's context-length error and the request is
//! retried once; the size that failed is then its window
//! ([`WindowMemory`]), so no later request passes it.
//!
//! Sizes are estimated as bytes / 4 of what a request carries (system,
//! messages, tool schemas), scaled by what the provider last reported for
//! a request of known estimate (its `input_tokens` ÷ the estimate; never
//! below 1), so the estimate follows the provider's own tokenizer.
//!
//! The pure parts ([`split`], [`fit`], [`compacted`], [`estimate`]) are
//! shared with the runtime's history replay, which rebuilds a compacted
//! conversation from the session file the same way.

use crate::provider::{ChatRequest, Completion, Message, Provider, ProviderError, ToolSpec};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The instruction a compaction sends after the history.
pub const COMPACT_PROMPT: &str = "Summarise the conversation so far for your own later use: \
the user's goals and constraints, decisions made, files and commands involved with their \
outcomes, and what is still open. Be complete but concise; answer with the summary only.";

/// The system prompt of a summary request.
pub const SUMMARY_SYSTEM: &str = "You write summaries of coding-agent conversations.";

/// The prefix of a compaction summary sent in place of what it covers.
pub const SUMMARY_PREFIX: &str =
    "Summary of the earlier conversation in this thread (written by compaction):\n\n";

/// What the loop compacts by.
#[derive(Clone, Debug)]
pub struct CompactionOptions {
    /// Share of the window in (0, 1] (validated with the config).
    pub threshold: f64,
    /// Windows learned from errors and the estimate's scale, per model;
    /// shared by the turns of one thread (the runtime keeps one per
    /// process, `exec` one per run).
    pub memory: WindowMemory,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            threshold: crate::config::compaction::DEFAULT_THRESHOLD,
            memory: WindowMemory::default(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Learned {
    window: Option<u64>,
    scale: f64,
}

/// Per model (`provider/model`): the window a context-length error
/// taught, and the estimate's scale.
#[derive(Clone, Debug, Default)]
pub struct WindowMemory(Arc<Mutex<HashMap<String, Learned>>>);

impl WindowMemory {
    fn with<R>(&self, key: &str, f: impl FnOnce(&mut Learned) -> R) -> R {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let l = m.entry(key.to_string()).or_insert(Learned {
            window: None,
            scale: 1.0,
        });
        f(l)
    }

    /// The window learned for `key`, if any.
    pub fn window(&self, key: &str) -> Option<u64> {
        self.with(key, |l| l.window)
    }

    /// A request of `tokens` was refused as too long: the window is at
    /// most that (the smallest refusal wins).
    pub fn learn_window(&self, key: &str, tokens: u64) {
        self.with(key, |l| {
            l.window = Some(l.window.map_or(tokens, |w| w.min(tokens)));
        });
    }

    pub fn scale(&self, key: &str) -> f64 {
        self.with(key, |l| l.scale)
    }

    /// The provider counted `reported` tokens for a request estimated at
    /// `estimated` (raw bytes / 4).
    pub fn calibrate(&self, key: &str, estimated: u64, reported: u64) {
        if estimated == 0 || reported == 0 {
            return;
        }
        let s = (reported as f64 / estimated as f64).clamp(1.0, 4.0);
        self.with(key, |l| l.scale = s);
    }
}

/// The raw estimate of a request in tokens: bytes / 4 of the system
/// prompt, the messages and the tool schemas.
pub fn estimate(system: &str, messages: &[Message], tools: &[ToolSpec]) -> u64 {
    let tools: usize = tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    let bytes = system.len() + tools + messages.iter().map(Message::approx_bytes).sum::<usize>();
    (bytes / 4) as u64
}

/// A conversation cut for compaction: `older` goes to the summary;
/// `kept` (in order) is sent verbatim after it.
#[derive(Debug, PartialEq)]
pub struct Split {
    pub older: Vec<Message>,
    pub kept: Vec<Message>,
}

/// Keep the latest user message and the trailing tool calls still
/// pending (the last assistant message with calls, when only its results
/// follow it); everything else is `older`.
pub fn split(messages: &[Message]) -> Split {
    let mut keep = vec![false; messages.len()];
    if let Some(u) = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
    {
        keep[u] = true;
    }
    // The trailing results, then the assistant message that asked for them.
    let mut i = messages.len();
    while i > 0 && matches!(messages[i - 1], Message::ToolResult { .. }) {
        i -= 1;
    }
    if i < messages.len() && i > 0 {
        if let Message::Assistant { tool_calls, .. } = &messages[i - 1] {
            if !tool_calls.is_empty() {
                keep[i - 1..].iter_mut().for_each(|k| *k = true);
            }
        }
    }
    let (mut older, mut kept) = (Vec::new(), Vec::new());
    for (m, k) in messages.iter().zip(keep) {
        if k {
            kept.push(m.clone());
        } else {
            older.push(m.clone());
        }
    }
    Split { older, kept }
}

/// `older` cut from the front until a summary request of it fits in
/// `budget` tokens (raw estimate); it starts with a user message (the
/// providers require one first) and never with an orphan tool result.
pub fn fit(mut older: Vec<Message>, budget: u64) -> Vec<Message> {
    let overhead = estimate(SUMMARY_SYSTEM, &[], &[]) + (COMPACT_PROMPT.len() / 4) as u64;
    while older.len() > 1 && estimate("", &older, &[]) + overhead > budget {
        older.remove(0);
    }
    while older
        .first()
        .is_some_and(|m| !matches!(m, Message::User { .. }))
    {
        older.remove(0);
    }
    older
}

/// The conversation after a compaction: the summary, then what was kept.
pub fn compacted(summary: &str, kept: Vec<Message>) -> Vec<Message> {
    let mut out = vec![Message::User {
        text: format!("{SUMMARY_PREFIX}{summary}"),
    }];
    out.extend(kept);
    out
}

/// One summary request (no tools) of `history`.
pub async fn summarise(
    provider: &Provider,
    history: &[Message],
) -> Result<Completion, ProviderError> {
    let mut messages = history.to_vec();
    messages.push(Message::User {
        text: COMPACT_PROMPT.into(),
    });
    let req = ChatRequest {
        system: SUMMARY_SYSTEM,
        messages: &messages,
        tools: &[],
    };
    provider.complete(req, &mut |_| {}).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

    fn user(t: &str) -> Message {
        Message::User { text: t.into() }
    }
    fn asst(t: &str, calls: &[&str]) -> Message {
        Message::Assistant {
            text: t.into(),
            tool_calls: calls
                .iter()
                .map(|c| ToolCall {
                    id: c.to_string(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            reasoning: Vec::new(),
        }
    }
    fn res(id: &str) -> Message {
        Message::ToolResult {
            call_id: id.into(),
            content: "out".into(),
            is_error: false,
        }
    }

    #[test]
    fn keeps_the_latest_user_request_and_pending_calls() {
        let m = vec![
            user("a"),
            asst("x", &[]),
            user("b"),
            asst("", &["1"]),
            res("1"),
            asst("", &["2", "3"]),
            res("2"),
            res("3"),
        ];
        let s = split(&m);
        assert_eq!(
            s.kept,
            vec![user("b"), asst("", &["2", "3"]), res("2"), res("3")]
        );
        assert_eq!(
            s.older,
            vec![user("a"), asst("x", &[]), asst("", &["1"]), res("1")]
        );
    }

    #[test]
    fn nothing_pending_after_a_final_answer() {
        let m = vec![user("a"), asst("x", &[]), user("b")];
        let s = split(&m);
        assert_eq!(s.kept, vec![user("b")]);
        assert_eq!(s.older, vec![user("a"), asst("x", &[])]);
    }

    #[test]
    fn fit_drops_from_the_front_and_starts_with_a_user_message() {
        let big = "y".repeat(4000);
        let m = vec![
            user(&big),
            asst("", &["1"]),
            res("1"),
            user("small"),
            asst("ok", &[]),
        ];
        let f = fit(m, 200);
        assert_eq!(f, vec![user("small"), asst("ok", &[])]);
    }

    #[test]
    fn memory_keeps_the_smallest_refusal_and_a_scale_of_at_least_one() {
        let w = WindowMemory::default();
        assert_eq!(w.window("p/m"), None);
        w.learn_window("p/m", 900);
        w.learn_window("p/m", 1200);
        assert_eq!(w.window("p/m"), Some(900));
        w.calibrate("p/m", 100, 50);
        assert_eq!(w.scale("p/m"), 1.0);
        w.calibrate("p/m", 100, 130);
        assert!((w.scale("p/m") - 1.3).abs() < 1e-9);
    }
}
