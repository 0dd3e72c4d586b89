//! A scripted model server: real HTTP on 127.0.0.1 speaking the
//! OpenAI-compatible Chat Completions SSE stream and the Anthropic Messages
//! stream, playing back a fixed list of steps (one per request) and
//! recording every request it received.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
    /// OpenAI's Responses API (`POST /v1/responses`).
    Responses,
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Step {
    /// A complete streamed response: optional text, then tool calls
    /// `(id, name, raw arguments text)`.
    Reply {
        text: String,
        calls: Vec<(String, String, String)>,
    },
    /// An HTTP error status (with an optional `Retry-After` in seconds).
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// Stream `text` partially, then break the connection.
    Cut { text: String },
    /// Stream `text` partially, then stay silent forever.
    Hang { text: String },
    /// A complete text reply whose usage object is exactly `usage`: the
    /// final usage chunk (OpenAI) or `message_start.message.usage`
    /// (Anthropic; `output_tokens` also goes into `message_delta`).
    ReplyWithUsage { text: String, usage: Value },
    /// A complete text reply streamed slowly: `chunks` text deltas, one
    /// every `every`, then the normal end of the stream (a model still
    /// answering while the person at the keyboard acts).
    Trickle {
        chunks: Vec<String>,
        every: std::time::Duration,
    },
    /// A reply from a reasoning model: the reasoning first, then text and
    /// tool calls. OpenAI wire: DeepSeek's thinking-mode stream, where
    /// `delta.reasoning_content` chunks come before `delta.content`
    /// (<https://api-docs.deepseek.com/guides/thinking_mode>, "API
    /// Example", streaming).
    Thinking {
        reasoning: String,
        text: String,
        calls: Vec<(String, String, String)>,
    },
    /// `step`, answered after `delay` (the request stays in flight: what
    /// the lanes' peak in-flight counts measure).
    Slow {
        delay: std::time::Duration,
        step: Box<Step>,
    },
}

/// `step` answered after `delay`.
pub fn slow(delay: std::time::Duration, step: Step) -> Step {
    Step::Slow {
        delay,
        step: Box::new(step),
    }
}

/// One script among several: the requests whose *first* user message
/// contains `marker` (a sub-agent's prompt carries it) take this lane's
/// steps; the lane without a marker takes the rest (the parent). Every
/// request is recorded with its lane, and each lane counts its peak of
/// requests in flight at once.
#[derive(Clone, Debug)]
pub struct Lane {
    pub name: String,
    pub marker: Option<String>,
    pub steps: Vec<Step>,
}

/// A lane named `name` for first user messages containing `marker`
/// (`None`: the default lane).
pub fn lane(name: &str, marker: Option<&str>, steps: Vec<Step>) -> Lane {
    Lane {
        name: name.into(),
        marker: marker.map(str::to_string),
        steps,
    }
}

struct LaneState {
    name: String,
    marker: Option<String>,
    steps: VecDeque<Step>,
    in_flight: usize,
    peak: usize,
}

/// The text of a request's first user message (any wire).
fn first_user_text(body: &Value) -> String {
    let list = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array);
    let Some(first) = list.and_then(|l| l.iter().find(|m| m["role"] == "user")) else {
        return String::new();
    };
    let c = &first["content"];
    c.as_str().map(str::to_string).unwrap_or_else(|| {
        c.as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    })
}

/// Leaves its lane's in-flight count when the request is answered.
struct InFlight {
    shared: Arc<Shared>,
    lane: usize,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut l) = self.shared.lanes.lock() {
            if let Some(l) = l.get_mut(self.lane) {
                l.in_flight -= 1;
            }
        }
    }
}

/// One scripted answer of the reviewer lane: a request with `"stream":
/// false` and no tools (Auto-Review's reviewer; its user message is the
/// review document) is answered from this list, apart from the worker's
/// [`Step`]s. The bodies are each API's documented non-streaming
/// response: Chat Completions (`choices[].message.content`,
/// `finish_reason` `stop`/`length`, OpenAI API reference "The chat
/// completion object"), Anthropic Messages (`content[]` text blocks,
/// `stop_reason` `end_turn`/`max_tokens`, "Messages" reference) and
/// Responses (`output[]` message items, `status` `completed`/`incomplete`
/// with `incomplete_details.reason: "max_output_tokens"`).
#[derive(Clone, Debug)]
pub enum Review {
    /// A complete answer with this text; `clipped`: marked as cut by the
    /// output budget.
    Answer { text: String, clipped: bool },
    /// An HTTP error status with this body.
    Status { code: u16, body: String },
    /// The response starts, then the connection breaks mid-body.
    Cut,
    /// The server never answers.
    Hang,
}

/// A reviewer answer `{"risk", "decision", "reason"}`.
pub fn verdict(risk: &str, decision: &str, reason: &str) -> Review {
    Review::Answer {
        text: json!({"risk": risk, "decision": decision, "reason": reason}).to_string(),
        clipped: false,
    }
}

/// A reviewer answer with exactly this text.
pub fn review_text(text: &str) -> Review {
    Review::Answer {
        text: text.into(),
        clipped: false,
    }
}

/// Whether a request belongs to the reviewer lane: not streamed, no tools.
pub fn is_review_request(body: &Value) -> bool {
    body["stream"] == false && body.get("tools").is_none()
}

/// A thinking-mode tool call: `reasoning`, then the call.
pub fn think_call(reasoning: &str, id: &str, name: &str, args: Value) -> Step {
    Step::Thinking {
        reasoning: reasoning.into(),
        text: String::new(),
        calls: vec![(id.into(), name.into(), args.to_string())],
    }
}

/// A thinking-mode final answer: `reasoning`, then `text`.
pub fn think_reply(reasoning: &str, text: &str) -> Step {
    Step::Thinking {
        reasoning: reasoning.into(),
        text: text.into(),
        calls: Vec::new(),
    }
}

/// Behaviours of one real provider the server can hold requests to.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faithful {
    /// DeepSeek's thinking mode: an assistant message with `tool_calls`
    /// but no `reasoning_content` is refused with 400.
    pub deepseek_thinking: bool,
    /// Anthropic with thinking on: a thinking block whose signature is not
    /// the one the server issued for its text, or a tool-use loop whose
    /// last assistant message does not start with its thinking block, is
    /// refused with 400.
    pub anthropic_thinking: bool,
    /// Anthropic's prompt cache, simulated ([`anthropic_cache_bill`]):
    /// each reply's usage is what the API would bill for that request.
    pub anthropic_cache: bool,
    /// OpenAI Responses with `store: false`: a request must say
    /// `store: false` and ask for `reasoning.encrypted_content`, and a
    /// `function_call` the server issued with reasoning must come after
    /// that `reasoning` item, its encrypted content unchanged.
    pub responses_reasoning: bool,
    /// A context window in tokens (counted as [`request_tokens`]): a
    /// request over it is refused with the real API's context-length
    /// error for the wire ([`context_length_error`]); the others report
    /// their counted size as the usage's input tokens. A summary request
    /// (its last user message is codewhale's compaction prompt) is
    /// answered with a summary without taking a scripted step, so a
    /// script need not know when compaction happens.
    pub context_window: Option<u64>,
}

/// The size of a request in "tokens" as this server counts them: the JSON
/// body's bytes / 4 (a stand-in for a tokenizer: English prose runs about
/// four bytes a token).
pub fn request_tokens(body: &Value) -> u64 {
    (body.to_string().len() / 4) as u64
}

/// The beginning of codewhale's compaction prompt
/// (`agent::compaction::COMPACT_PROMPT`).
const COMPACT_PROMPT_START: &str = "Summarise the conversation so far";

/// Whether `body` is a summary request: its last user message's text (any
/// wire) starts with the compaction prompt.
fn is_summary_request(body: &Value) -> bool {
    let list = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array);
    let Some(last) = list.and_then(|l| l.iter().rev().find(|m| m["role"] == "user")) else {
        return false;
    };
    let c = &last["content"];
    let text = c.as_str().map(str::to_string).unwrap_or_else(|| {
        c.as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    });
    text.starts_with(COMPACT_PROMPT_START)
}

/// The context-length refusal as each API gives it (HTTP 400):
/// OpenAI Chat Completions `code: "context_length_exceeded"` with "This
/// model's maximum context length is N tokens. However, your messages
/// resulted in M tokens." (crewAIInc/crewAI-examples#121); the Responses
/// API the same code with "Your input exceeds the context window of this
/// model." (no number); Anthropic `invalid_request_error` "prompt is too
/// long: M tokens > N maximum" (anthropics/claude-code#12186).
pub fn context_length_error(wire: Wire, window: u64, tokens: u64) -> String {
    match wire {
        Wire::OpenAi => json!({"error": {"message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        Wire::Responses => json!({"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}),
        Wire::Anthropic => json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": format!("prompt is too long: {tokens} tokens > {window} maximum")}}),
    }
    .to_string()
}

/// What the server saw of request sizes under a context window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// The largest request it answered (tokens, [`request_tokens`]).
    pub peak: u64,
    /// Requests refused as too long.
    pub refused: u64,
    /// Summary requests answered.
    pub summaries: u64,
    /// Requests answered (summaries included).
    pub answered: u64,
}

/// OpenAI's reasoning guide ("Encrypted reasoning items", read
/// 2026-12-02): with `store: false` the reasoning items of a tool-calling
/// response must be passed back in `input`; the API refuses a
/// `function_call` item without its reasoning item (error text as the API
/// gives it: "Item '…' of type 'function_call' was provided without its
/// required 'reasoning' item: '…'.").
fn responses_reasoning_error(body: &Value) -> Option<String> {
    let err = |m: String| {
        Some(json!({"error": {"message": m, "type": "invalid_request_error", "param": "input", "code": null}}).to_string())
    };
    if body["store"] != json!(false)
        || !body["include"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("reasoning.encrypted_content")))
    {
        return err("this scripted model expects store: false and include: [\"reasoning.encrypted_content\"]".into());
    }
    let input = body["input"].as_array()?;
    let mut seen_reasoning: Vec<&str> = Vec::new();
    for it in input {
        match it["type"].as_str() {
            Some("reasoning") => {
                let summary = it["summary"][0]["text"].as_str().unwrap_or("");
                if it["encrypted_content"].as_str() != Some(&encrypted(summary)) {
                    return err(format!(
                        "The encrypted content for item {} could not be verified.",
                        it["id"]
                    ));
                }
                seen_reasoning.extend(it["id"].as_str());
            }
            Some("function_call") => {
                let call = it["call_id"].as_str().unwrap_or("");
                if let Some(rs) = call.strip_prefix("r-") {
                    let want = format!("rs_{rs}");
                    if !seen_reasoning.contains(&want.as_str()) {
                        return err(format!("Item 'fc_{call}' of type 'function_call' was provided without its required 'reasoning' item: '{want}'."));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// A plain reply's usage on the Responses wire (as the other wires': 100
/// in, 20 out).
static RESPONSES_USAGE: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}})
});

/// The "encrypted" reasoning the scripted Responses server issues for a
/// reasoning text (OpenAI's is opaque; a digest detects any change).
pub fn encrypted(reasoning: &str) -> String {
    format!("enc:{}", signature(reasoning))
}

/// A Responses stream: an optional reasoning item (id `rs_<call id>` when
/// there are calls), text deltas, function calls with argument deltas,
/// then `response.completed` with usage (cached and reasoning tokens).
/// Event shapes from OpenAI's streaming reference (`response.output_item.added`
/// / `.done`, `response.output_text.delta`,
/// `response.function_call_arguments.delta`, `response.completed`).
/// A call that follows reasoning gets the call id `r-<id>` so the server
/// can tell which reasoning item (`rs_<id>`) it needs.
fn responses_stream(
    reasoning: Option<&str>,
    text: &str,
    calls: &[(String, String, String)],
    usage: Value,
) -> String {
    let ev = |v: Value| {
        let kind = v["type"].as_str().unwrap_or("").to_string();
        named(&kind, v)
    };
    let mut out = ev(json!({"type": "response.created", "response": {"status": "in_progress"}}));
    let mut idx = 0;
    let first = calls
        .first()
        .map(|c| c.0.clone())
        .unwrap_or_else(|| "reply".into());
    if let Some(r) = reasoning {
        let item = json!({"type": "reasoning", "id": format!("rs_{first}"),
                          "summary": [{"type": "summary_text", "text": r}],
                          "encrypted_content": encrypted(r)});
        out += &ev(
            json!({"type": "response.output_item.added", "output_index": idx,
                          "item": {"type": "reasoning", "id": format!("rs_{first}"), "summary": []}}),
        );
        out += &ev(json!({"type": "response.output_item.done", "output_index": idx, "item": item}));
        idx += 1;
    }
    if !text.is_empty() {
        out += &ev(
            json!({"type": "response.output_item.added", "output_index": idx,
                          "item": {"type": "message", "role": "assistant", "content": []}}),
        );
        let (a, b) = halves(text);
        for part in [a, b] {
            out += &ev(
                json!({"type": "response.output_text.delta", "output_index": idx,
                              "content_index": 0, "delta": part}),
            );
        }
        idx += 1;
    }
    for (id, name, args) in calls {
        // A thinking step has one call: its id names the reasoning item
        // (`r-<id>` needs `rs_<id>`).
        let call_id = if reasoning.is_some() {
            format!("r-{id}")
        } else {
            id.clone()
        };
        out += &ev(
            json!({"type": "response.output_item.added", "output_index": idx,
                          "item": {"type": "function_call", "id": format!("fc_{id}"), "call_id": call_id,
                                   "name": name, "arguments": ""}}),
        );
        let (a, b) = halves(args);
        for part in [a, b] {
            out += &ev(
                json!({"type": "response.function_call_arguments.delta", "output_index": idx, "delta": part}),
            );
        }
        out += &ev(
            json!({"type": "response.output_item.done", "output_index": idx,
                          "item": {"type": "function_call", "id": format!("fc_{id}"), "call_id": call_id,
                                   "name": name, "arguments": args}}),
        );
        idx += 1;
    }
    out += &ev(
        json!({"type": "response.completed", "response": {"status": "completed", "usage": usage}}),
    );
    out
}

/// What one request was billed under the cache simulation (tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheBill {
    /// `input_tokens`: after the last breakpoint, or not cached.
    pub fresh: u64,
    /// `cache_read_input_tokens`.
    pub read: u64,
    /// `cache_creation_input_tokens`.
    pub write: u64,
}

impl CacheBill {
    pub fn total(&self) -> u64 {
        self.fresh + self.read + self.write
    }
}

/// Anthropic's prompt-caching guide
/// (<https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>):
/// the cache holds prefixes in the order tools, system, messages; a block
/// with `cache_control` marks a breakpoint (at most 4 per request, else
/// 400); a request reads the longest prefix written earlier that ends at
/// one of its breakpoints or at most 20 blocks before one ("the system
/// automatically checks for cache hits at previous block boundaries, up to
/// about 20 blocks before your explicit breakpoint"); it writes the prefix
/// up to its last breakpoint, billed as `cache_creation_input_tokens` from
/// the end of the hit; the rest is `input_tokens`. Prompts shorter than the
/// minimum cacheable length (1,024 tokens for Sonnet and Opus models) are
/// not cached. Tokens are estimated as serialised bytes / 4 (the
/// `cache_control` fields themselves excluded).
pub const LOOKBACK_BLOCKS: usize = 20;
pub const MIN_CACHEABLE_TOKENS: u64 = 1024;

fn cache_blocks(body: &Value) -> Vec<(Value, bool)> {
    let strip = |b: &Value| {
        let mut b = b.clone();
        let mark = b
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        (b, mark)
    };
    let mut out: Vec<(Value, bool)> = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        out.push(strip(t));
    }
    match &body["system"] {
        Value::String(s) => out.push((json!({"type": "text", "text": s}), false)),
        Value::Array(a) => out.extend(a.iter().map(strip)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::String(s) => out.push((json!({"role": m["role"], "text": s}), false)),
            Value::Array(a) => out.extend(a.iter().map(|b| {
                let (mut v, mark) = strip(b);
                v["role"] = m["role"].clone();
                (v, mark)
            })),
            _ => {}
        }
    }
    out
}

/// Bill one request against (and update) the simulated cache.
fn anthropic_cache_bill(
    body: &Value,
    cache: &mut std::collections::HashSet<String>,
) -> Result<CacheBill, String> {
    use sha2::Digest;
    let blocks = cache_blocks(body);
    let marks: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].1).collect();
    if marks.len() > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {}.",
            marks.len()
        ));
    }
    let mut hasher = sha2::Sha256::new();
    let mut cum = Vec::with_capacity(blocks.len());
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut total = 0u64;
    for (b, _) in &blocks {
        let text = b.to_string();
        total += (text.len() as u64 / 4).max(1);
        hasher.update(text.as_bytes());
        cum.push(total);
        hashes.push(hex::encode(hasher.clone().finalize()));
    }
    let read = marks
        .iter()
        .flat_map(|&m| m.saturating_sub(LOOKBACK_BLOCKS)..=m)
        .filter(|&j| cache.contains(&hashes[j]))
        .map(|j| cum[j])
        .max()
        .unwrap_or(0);
    let last = marks.last().map(|&m| cum[m]).unwrap_or(0);
    let write = if last > read && last >= MIN_CACHEABLE_TOKENS {
        for &m in &marks {
            if cum[m] >= MIN_CACHEABLE_TOKENS {
                cache.insert(hashes[m].clone());
            }
        }
        last - read
    } else {
        0
    };
    Ok(CacheBill {
        fresh: total - read - write,
        read,
        write,
    })
}

/// The signature the server issues for a thinking text (Anthropic's is an
/// opaque encrypted value; a digest is enough to detect any change).
pub fn signature(thinking: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(format!(
        "scripted-signature:{thinking}"
    )))
}

/// Anthropic's extended-thinking guide
/// (<https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking>,
/// "Preserving thinking blocks"): during tool use the last assistant
/// message's thinking blocks must be passed back unmodified; the API
/// checks each block's signature. The error bodies follow the API's error
/// shape (`{"type":"error","error":{"type":"invalid_request_error",…}}`,
/// "Errors" page) with the messages the API is reported to give.
fn anthropic_thinking_error(body: &Value) -> Option<String> {
    let err = |m: String| {
        Some(
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": m}})
                .to_string(),
        )
    };
    let msgs = body["messages"].as_array()?;
    for (i, m) in msgs.iter().enumerate() {
        for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
            if b["type"] == "thinking"
                && b["signature"].as_str() != Some(&signature(b["thinking"].as_str().unwrap_or("")))
            {
                return err(format!(
                    "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                ));
            }
        }
    }
    // In a tool-use loop (the request ends with tool results), the last
    // assistant message must start with a thinking block.
    let in_loop = msgs.last().is_some_and(|m| {
        m["role"] == "user" && m["content"][0]["type"].as_str() == Some("tool_result")
    });
    let (i, last) = msgs
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| m["role"] == "assistant")?;
    let first = last["content"][0]["type"].as_str().unwrap_or("");
    if in_loop && first != "thinking" && first != "redacted_thinking" {
        return err(format!(
            "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."
        ));
    }
    None
}

/// DeepSeek's thinking-mode guide ("Input and Output Parameters"): between
/// two user messages, if the model made tool calls, the intermediate
/// assistant messages' `reasoning_content` "must be passed back to the API
/// in all subsequent requests"; otherwise "the API will return a 400
/// error". The error body is the one the API returns, as quoted in
/// <https://github.com/anomalyco/opencode/issues/24083>.
fn deepseek_thinking_error(body: &Value) -> Option<String> {
    let msgs = body["messages"].as_array()?;
    let missing = msgs.iter().any(|m| {
        m["role"] == "assistant"
            && m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
            && !m["reasoning_content"].is_string()
    });
    missing.then(|| {
        json!({"error": {"message": "The reasoning_content in the thinking mode must be passed back to the API.",
                         "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}})
        .to_string()
    })
}

/// `text` as `n` deltas (split on char boundaries), streamed one every
/// `every`.
pub fn trickle(text: &str, n: usize, every: std::time::Duration) -> Step {
    let chars: Vec<char> = text.chars().collect();
    let per = chars.len().div_ceil(n.max(1)).max(1);
    Step::Trickle {
        chunks: chars.chunks(per).map(|c| c.iter().collect()).collect(),
        every,
    }
}

pub fn reply_with_usage(text: &str, usage: Value) -> Step {
    Step::ReplyWithUsage {
        text: text.into(),
        usage,
    }
}

pub fn reply(text: &str) -> Step {
    Step::Reply {
        text: text.into(),
        calls: Vec::new(),
    }
}

pub fn call(id: &str, name: &str, args: Value) -> Step {
    Step::Reply {
        text: String::new(),
        calls: vec![(id.into(), name.into(), args.to_string())],
    }
}

pub fn raw_call(id: &str, name: &str, raw: &str) -> Step {
    Step::Reply {
        text: String::new(),
        calls: vec![(id.into(), name.into(), raw.into())],
    }
}

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    /// The query string (Azure's `api-version`).
    pub query: Option<String>,
    pub body: Value,
    pub authorization: Option<String>,
    pub x_api_key: Option<String>,
    /// Azure's key header.
    pub api_key: Option<String>,
    pub at: std::time::Instant,
    /// The lane that answered (scripts with lanes only).
    pub lane: Option<String>,
}

struct Shared {
    wire: Wire,
    faithful: Faithful,
    cache: Mutex<std::collections::HashSet<String>>,
    bills: Mutex<Vec<CacheBill>>,
    steps: Mutex<VecDeque<Step>>,
    reviews: Mutex<VecDeque<Review>>,
    seen: Mutex<Vec<Seen>>,
    window: Mutex<WindowStats>,
    lanes: Mutex<Vec<LaneState>>,
}

pub struct ScriptedModel {
    pub port: u16,
    pub wire: Wire,
    shared: Arc<Shared>,
}

impl ScriptedModel {
    /// Start on an ephemeral loopback port, in a background thread.
    pub fn start(wire: Wire, steps: Vec<Step>) -> Self {
        Self::start_faithful(wire, steps, Faithful::default())
    }

    /// Start, holding requests to the real provider's rules in `faithful`.
    /// Start with one script per lane ([`Lane`]).
    pub fn start_lanes(wire: Wire, lanes: Vec<Lane>) -> Self {
        let m = Self::start(wire, Vec::new());
        *m.shared.lanes.lock().unwrap() = lanes
            .into_iter()
            .map(|l| LaneState {
                name: l.name,
                marker: l.marker,
                steps: l.steps.into(),
                in_flight: 0,
                peak: 0,
            })
            .collect();
        m
    }

    /// The most requests of lane `name` that were in flight at once.
    pub fn peak_in_flight(&self, name: &str) -> usize {
        let l = self.shared.lanes.lock().unwrap();
        l.iter().find(|l| l.name == name).map_or(0, |l| l.peak)
    }

    /// Steps lane `name` has not played.
    pub fn lane_left(&self, name: &str) -> usize {
        let l = self.shared.lanes.lock().unwrap();
        l.iter()
            .find(|l| l.name == name)
            .map_or(0, |l| l.steps.len())
    }

    pub fn start_faithful(wire: Wire, steps: Vec<Step>, faithful: Faithful) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(Shared {
            wire,
            faithful,
            cache: Mutex::new(Default::default()),
            bills: Mutex::new(Vec::new()),
            steps: Mutex::new(steps.into()),
            reviews: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
            window: Mutex::new(WindowStats::default()),
            lanes: Mutex::new(Vec::new()),
        });
        let s2 = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let app = Router::new()
                    .route("/v1/chat/completions", post(handle))
                    .route("/v1/messages", post(handle))
                    .route("/v1/responses", post(handle))
                    // Azure OpenAI's deployment URL (same stream as OpenAI).
                    .route(
                        "/openai/deployments/{deployment}/chat/completions",
                        post(handle),
                    )
                    // Anthropic-compatible bases with a path prefix
                    // (`https://api.minimax.io/anthropic` → `/anthropic/v1/messages`).
                    .route("/anthropic/v1/messages", post(handle))
                    .route("/api/tags", axum::routing::get(tags))
                    .route("/v1/models", axum::routing::get(models))
                    .with_state(s2);
                let _ = axum::serve(l, app).await;
            });
        });
        ScriptedModel { port, wire, shared }
    }

    /// The `base_url` to configure for this wire format.
    pub fn base_url(&self) -> String {
        match self.wire {
            Wire::OpenAi | Wire::Responses => format!("http://127.0.0.1:{}/v1", self.port),
            Wire::Anthropic => format!("http://127.0.0.1:{}", self.port),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self.wire {
            Wire::OpenAi => "openai-compatible",
            Wire::Responses => "openai-responses",
            Wire::Anthropic => "anthropic",
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Each request's bill under the cache simulation, in order.
    pub fn cache_bills(&self) -> Vec<CacheBill> {
        self.shared.bills.lock().unwrap().clone()
    }

    /// Request sizes under [`Faithful::context_window`].
    pub fn window_stats(&self) -> WindowStats {
        *self.shared.window.lock().unwrap()
    }

    pub fn steps_left(&self) -> usize {
        self.shared.steps.lock().unwrap().len()
    }

    /// Script the reviewer lane (answers are taken in order).
    pub fn reviews(&self, answers: Vec<Review>) {
        self.shared.reviews.lock().unwrap().extend(answers);
    }

    /// The reviewer lane's requests, in order.
    pub fn review_requests(&self) -> Vec<Seen> {
        self.requests()
            .into_iter()
            .filter(|r| is_review_request(&r.body))
            .collect()
    }

    /// The worker's requests (everything but the reviewer lane), in order.
    pub fn worker_requests(&self) -> Vec<Seen> {
        self.requests()
            .into_iter()
            .filter(|r| !is_review_request(&r.body))
            .collect()
    }

    pub fn reviews_left(&self) -> usize {
        self.shared.reviews.lock().unwrap().len()
    }
}

/// The reviewer lane's next answer (see [`Review`]).
async fn review_response(s: &Shared) -> Response {
    let next = s.reviews.lock().unwrap().pop_front();
    let json_response = |v: Value| {
        Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(v.to_string()))
            .unwrap()
    };
    match next {
        None => Response::builder()
            .status(500)
            .body(Body::from("scripted model: reviewer script exhausted"))
            .unwrap(),
        Some(Review::Status { code, body }) => Response::builder()
            .status(StatusCode::from_u16(code).unwrap())
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap(),
        Some(Review::Hang) => {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            Response::builder().status(504).body(Body::empty()).unwrap()
        }
        Some(Review::Cut) => {
            // The head and the first bytes go out (flushed before the
            // pause); then the connection breaks mid-body.
            let head: Result<Bytes, std::io::Error> = Ok(Bytes::from_static(
                b"{\"choices\": [{\"message\": {\"content\": \"{\\\"risk",
            ));
            let tail = futures_util::stream::once(async {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                Err::<Bytes, _>(std::io::Error::other(
                    "connection cut by the scripted model",
                ))
            });
            let body = futures_util::stream::iter([head]).chain(tail);
            Response::builder()
                .header("content-type", "application/json")
                .header("content-length", "4096")
                .body(Body::from_stream(body))
                .unwrap()
        }
        Some(Review::Answer { text, clipped }) => json_response(match s.wire {
            Wire::OpenAi => json!({
                "id": "chatcmpl-review", "object": "chat.completion", "created": 1764547200,
                "model": "scripted",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": if clipped { "length" } else { "stop" }}],
                "usage": {"prompt_tokens": 300, "completion_tokens": 25, "total_tokens": 325}
            }),
            Wire::Anthropic => json!({
                "id": "msg_review", "type": "message", "role": "assistant", "model": "scripted",
                "content": [{"type": "text", "text": text}],
                "stop_reason": if clipped { "max_tokens" } else { "end_turn" },
                "stop_sequence": null,
                "usage": {"input_tokens": 300, "output_tokens": 25}
            }),
            Wire::Responses => json!({
                "id": "resp_review", "object": "response", "model": "scripted",
                "status": if clipped { "incomplete" } else { "completed" },
                "incomplete_details": if clipped { json!({"reason": "max_output_tokens"}) } else { Value::Null },
                "output": [{"type": "message", "id": "msg_r", "status": "completed", "role": "assistant",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": 300, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 25, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 325}
            }),
        }),
    }
}

/// Ollama's model list, for the no-configuration fallback. Shape of
/// `GET /api/tags` from Ollama's `docs/api.md` ("List Local Models"): name,
/// model, modified_at, size, digest, details{format, family, families,
/// parameter_size, quantization_level}. The embedding model comes first so
/// the client must skip it.
async fn tags() -> axum::Json<Value> {
    let model = |name: &str, family: &str| {
        json!({"name": name, "model": name, "modified_at": "2026-11-30T12:00:00Z",
               "size": 274302450u64, "digest": "0a109f422b47e3a30ba2b10eca18548e944e8a23073ee3f3e947efcf3c45e59f",
               "details": {"parent_model": "", "format": "gguf", "family": family,
                           "families": [family], "parameter_size": "137M", "quantization_level": "F16"}})
    };
    axum::Json(json!({"models": [
        model("nomic-embed-text:latest", "nomic-bert"),
        model("scripted-llama:latest", "llama"),
    ]}))
}

/// `GET /v1/models` as OpenAI's API reference ("List models") and vLLM's
/// OpenAI-compatible server answer it: `{"object":"list","data":[{"id",
/// "object":"model","created","owned_by"}]}`.
async fn models() -> axum::Json<Value> {
    axum::Json(json!({"object": "list", "data": [
        {"id": "scripted-served", "object": "model", "created": 1764547200, "owned_by": "scripted"}
    ]}))
}

async fn handle(
    State(s): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let h = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.seen.lock().unwrap().push(Seen {
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        body,
        authorization: h("authorization"),
        x_api_key: h("x-api-key"),
        api_key: h("api-key"),
        at: std::time::Instant::now(),
        lane: None,
    });
    let seen = s.seen.lock().unwrap().last().map(|r| r.body.clone());
    if seen.as_ref().is_some_and(is_review_request) {
        return review_response(&s).await;
    }
    let refused = match (s.faithful, seen.as_ref()) {
        (f, Some(b)) if f.deepseek_thinking => deepseek_thinking_error(b),
        (f, Some(b)) if f.anthropic_thinking => anthropic_thinking_error(b),
        (f, Some(b)) if f.responses_reasoning => responses_reasoning_error(b),
        _ => None,
    };
    if let Some(err) = refused {
        return Response::builder()
            .status(400)
            .header("content-type", "application/json")
            .body(Body::from(err))
            .unwrap();
    }
    let mut window_usage = None;
    let mut summary = None;
    if let (Some(window), Some(b)) = (s.faithful.context_window, seen.as_ref()) {
        let tokens = request_tokens(b);
        let mut w = s.window.lock().unwrap();
        if tokens > window {
            w.refused += 1;
            return Response::builder()
                .status(400)
                .header("content-type", "application/json")
                .body(Body::from(context_length_error(s.wire, window, tokens)))
                .unwrap();
        }
        w.peak = w.peak.max(tokens);
        w.answered += 1;
        if is_summary_request(b) {
            w.summaries += 1;
            summary = Some((w.summaries, tokens));
        }
        window_usage = Some(tokens);
    }
    let mut cache_usage = None;
    if let (true, Some(b)) = (s.faithful.anthropic_cache, seen.as_ref()) {
        match anthropic_cache_bill(b, &mut s.cache.lock().unwrap()) {
            Ok(bill) => {
                s.bills.lock().unwrap().push(bill);
                cache_usage = Some(json!({"input_tokens": bill.fresh,
                    "cache_read_input_tokens": bill.read,
                    "cache_creation_input_tokens": bill.write,
                    "output_tokens": 20}));
            }
            Err(m) => {
                return Response::builder()
                    .status(400)
                    .header("content-type", "application/json")
                    .body(Body::from(
                        json!({"type": "error", "error": {"type": "invalid_request_error", "message": m}})
                            .to_string(),
                    ))
                    .unwrap()
            }
        }
    }
    // A summary request is answered here, after the cache bill (it is a
    // request like any other for the bill) and without taking a step.
    if let Some((n, tokens)) = summary {
        let text = format!("summary #{n} of the conversation so far");
        let body = match s.wire {
            Wire::OpenAi => openai_stream_usage(
                &text,
                &[],
                json!({"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}),
            ),
            Wire::Responses => responses_stream(
                None,
                &text,
                &[],
                json!({"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}}),
            ),
            Wire::Anthropic => anthropic_stream_usage(
                &text,
                &[],
                cache_usage.unwrap_or_else(|| json!({"input_tokens": tokens, "output_tokens": 20})),
            ),
        };
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(body))
            .unwrap();
    }
    let mut _in_flight = None;
    let step = {
        let mut lanes = s.lanes.lock().unwrap();
        if lanes.is_empty() {
            s.steps.lock().unwrap().pop_front()
        } else {
            let first = seen.as_ref().map(first_user_text).unwrap_or_default();
            let i = lanes
                .iter()
                .position(|l| {
                    l.marker
                        .as_ref()
                        .is_some_and(|m| first.contains(m.as_str()))
                })
                .or_else(|| lanes.iter().position(|l| l.marker.is_none()));
            match i {
                Some(i) => {
                    let l = &mut lanes[i];
                    l.in_flight += 1;
                    l.peak = l.peak.max(l.in_flight);
                    if let Some(last) = s.seen.lock().unwrap().last_mut() {
                        last.lane = Some(l.name.clone());
                    }
                    _in_flight = Some(InFlight {
                        shared: s.clone(),
                        lane: i,
                    });
                    l.steps.pop_front()
                }
                None => None,
            }
        }
    };
    let mut step = step;
    while let Some(Step::Slow { delay, step: inner }) = step {
        tokio::time::sleep(delay).await;
        step = Some(*inner);
    }
    let Some(step) = step else {
        return Response::builder()
            .status(500)
            .body(Body::from("scripted model: script exhausted"))
            .unwrap();
    };
    let sse = |text: String| {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(text))
            .unwrap()
    };
    match step {
        Step::Status {
            code,
            retry_after,
            body,
        } => {
            let mut r = Response::builder().status(StatusCode::from_u16(code).unwrap());
            if let Some(a) = retry_after {
                r = r.header("retry-after", a.to_string());
            }
            r.body(Body::from(body)).unwrap()
        }
        Step::Reply { text, calls } if window_usage.is_some() && cache_usage.is_none() => {
            let tokens = window_usage.unwrap_or(0);
            sse(match s.wire {
                Wire::OpenAi => openai_stream_usage(
                    &text,
                    &calls,
                    json!({"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}),
                ),
                Wire::Responses => responses_stream(
                    None,
                    &text,
                    &calls,
                    json!({"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}}),
                ),
                Wire::Anthropic => anthropic_stream_usage(
                    &text,
                    &calls,
                    json!({"input_tokens": tokens, "output_tokens": 20}),
                ),
            })
        }
        Step::Reply { text, calls } => sse(match (s.wire, cache_usage) {
            (Wire::OpenAi, _) => openai_stream(&text, &calls),
            (Wire::Responses, _) => responses_stream(None, &text, &calls, RESPONSES_USAGE.clone()),
            (Wire::Anthropic, Some(u)) => anthropic_stream_usage(&text, &calls, u),
            (Wire::Anthropic, None) => anthropic_stream(&text, &calls),
        }),
        Step::Thinking {
            reasoning,
            text,
            calls,
        } => sse(match s.wire {
            Wire::OpenAi => deepseek_thinking_stream(&reasoning, &text, &calls),
            Wire::Responses => responses_stream(
                Some(&reasoning),
                &text,
                &calls,
                json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60},
                       "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 20}}),
            ),
            Wire::Anthropic => anthropic_stream_full(
                Some(&reasoning),
                &text,
                &calls,
                json!({"input_tokens":100,"output_tokens":40}),
            ),
        }),
        Step::ReplyWithUsage { text, usage } => sse(match s.wire {
            Wire::OpenAi => openai_stream_usage(&text, &[], usage),
            Wire::Responses => responses_stream(None, &text, &[], usage),
            Wire::Anthropic => anthropic_stream_usage(&text, &[], usage),
        }),
        Step::Cut { text } => {
            let head = partial(s.wire, &text);
            // The pause makes sure headers and the first bytes are on the
            // wire before the connection breaks (a real mid-stream cut).
            let stream = futures_util::stream::once(async move {
                Ok::<Bytes, std::io::Error>(Bytes::from(head))
            })
            .chain(futures_util::stream::once(async {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                Err(std::io::Error::other("scripted cut"))
            }));
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Step::Trickle { chunks, every } => {
            let events = trickle_events(s.wire, &chunks);
            let stream = futures_util::stream::iter(events).then(move |e| async move {
                tokio::time::sleep(every).await;
                Ok::<Bytes, std::io::Error>(Bytes::from(e))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Step::Hang { text } => {
            let head = partial(s.wire, &text);
            let stream =
                futures_util::stream::iter(vec![Ok::<Bytes, std::io::Error>(Bytes::from(head))])
                    .chain(futures_util::stream::pending());
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Step::Slow { .. } => unreachable!("unwrapped above"),
    }
}

fn data(v: Value) -> String {
    format!("data: {v}\n\n")
}

fn named(event: &str, v: Value) -> String {
    format!("event: {event}\ndata: {v}\n\n")
}

fn halves(s: &str) -> (String, String) {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid -= 1;
    }
    (s[..mid].to_string(), s[mid..].to_string())
}

/// The start of a stream with some text and no end.
fn partial(wire: Wire, text: &str) -> String {
    match wire {
        Wire::OpenAi => data(json!({"choices":[{"index":0,"delta":{"content":text}}]})),
        Wire::Responses => named(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": text}),
        ),
        Wire::Anthropic => {
            named(
                "message_start",
                json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
            ) + &named(
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ) + &named(
                "content_block_delta",
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
            )
        }
    }
}

/// The events of a complete text reply whose text comes in `chunks`, one
/// SSE event per element (same shapes as [`openai_stream`] and
/// [`anthropic_stream`]).
fn trickle_events(wire: Wire, chunks: &[String]) -> Vec<String> {
    match wire {
        Wire::Responses => vec![responses_stream(None, &chunks.concat(), &[], RESPONSES_USAGE.clone())],
        Wire::OpenAi => chunks
            .iter()
            .map(|c| data(json!({"choices":[{"index":0,"delta":{"content":c}}]})))
            .chain([
                data(json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})),
                data(json!({"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20}})),
                "data: [DONE]\n\n".to_string(),
            ])
            .collect(),
        Wire::Anthropic => [
            named(
                "message_start",
                json!({"type":"message_start","message":{"usage":{"input_tokens":100,"output_tokens":1}}}),
            ),
            named(
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
        ]
        .into_iter()
        .chain(chunks.iter().map(|c| {
            named(
                "content_block_delta",
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":c}}),
            )
        }))
        .chain([
            named("content_block_stop", json!({"type":"content_block_stop","index":0})),
            named(
                "message_delta",
                json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20}}),
            ),
            named("message_stop", json!({"type":"message_stop"})),
        ])
        .collect(),
    }
}

fn openai_stream(text: &str, calls: &[(String, String, String)]) -> String {
    openai_stream_usage(
        text,
        calls,
        json!({"prompt_tokens":100,"completion_tokens":20}),
    )
}

fn openai_stream_usage(text: &str, calls: &[(String, String, String)], usage: Value) -> String {
    let mut out = String::new();
    if !text.is_empty() {
        let (a, b) = halves(text);
        for part in [a, b] {
            out += &data(json!({"choices":[{"index":0,"delta":{"content":part}}]}));
        }
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let (a, b) = halves(args);
        out += &data(json!({"choices":[{"index":0,"delta":{"tool_calls":[
            {"index":i,"id":id,"type":"function","function":{"name":name,"arguments":a}}]}}]}));
        out += &data(json!({"choices":[{"index":0,"delta":{"tool_calls":[
            {"index":i,"function":{"arguments":b}}]}}]}));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out += &data(json!({"choices":[{"index":0,"delta":{},"finish_reason":finish}]}));
    out += &data(json!({"choices":[],"usage":usage}));
    out += "data: [DONE]\n\n";
    out
}

/// DeepSeek's thinking-mode stream: the first chunk has the role and an
/// empty `reasoning_content`, reasoning chunks carry `"content": null`,
/// answer chunks `"reasoning_content": null`; the usage chunk reports
/// `completion_tokens_details.reasoning_tokens` (DeepSeek's API reference,
/// "Create Chat Completion", streaming response).
fn deepseek_thinking_stream(
    reasoning: &str,
    text: &str,
    calls: &[(String, String, String)],
) -> String {
    let mut out = data(
        json!({"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""}}]}),
    );
    let (a, b) = halves(reasoning);
    for part in [a, b] {
        out += &data(
            json!({"choices":[{"index":0,"delta":{"content":null,"reasoning_content":part}}]}),
        );
    }
    out + &openai_stream_usage(
        text,
        calls,
        json!({"prompt_tokens":100,"completion_tokens":40,
               "completion_tokens_details":{"reasoning_tokens":20}}),
    )
}

fn anthropic_stream(text: &str, calls: &[(String, String, String)]) -> String {
    anthropic_stream_usage(text, calls, json!({"input_tokens":100,"output_tokens":20}))
}

fn anthropic_stream_usage(text: &str, calls: &[(String, String, String)], usage: Value) -> String {
    anthropic_stream_full(None, text, calls, usage)
}

/// The Messages stream, with a thinking block first when `thinking` is
/// given: `content_block_start` (`{"type":"thinking","thinking":""}`),
/// `thinking_delta`s, one `signature_delta`, `content_block_stop`
/// (extended-thinking guide, "Streaming thinking").
fn anthropic_stream_full(
    thinking: Option<&str>,
    text: &str,
    calls: &[(String, String, String)],
    usage: Value,
) -> String {
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let out_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
    let mut out = named(
        "message_start",
        json!({"type":"message_start","message":{"usage":start_usage}}),
    );
    let mut idx = 0;
    if let Some(t) = thinking {
        out += &named(
            "content_block_start",
            json!({"type":"content_block_start","index":idx,"content_block":{"type":"thinking","thinking":""}}),
        );
        let (a, b) = halves(t);
        for part in [a, b] {
            out += &named(
                "content_block_delta",
                json!({"type":"content_block_delta","index":idx,"delta":{"type":"thinking_delta","thinking":part}}),
            );
        }
        out += &named(
            "content_block_delta",
            json!({"type":"content_block_delta","index":idx,"delta":{"type":"signature_delta","signature":signature(t)}}),
        );
        out += &named(
            "content_block_stop",
            json!({"type":"content_block_stop","index":idx}),
        );
        idx += 1;
    }
    if !text.is_empty() {
        out += &named(
            "content_block_start",
            json!({"type":"content_block_start","index":idx,"content_block":{"type":"text","text":""}}),
        );
        let (a, b) = halves(text);
        for part in [a, b] {
            out += &named(
                "content_block_delta",
                json!({"type":"content_block_delta","index":idx,"delta":{"type":"text_delta","text":part}}),
            );
        }
        out += &named(
            "content_block_stop",
            json!({"type":"content_block_stop","index":idx}),
        );
        idx += 1;
    }
    for (id, name, args) in calls {
        out += &named(
            "content_block_start",
            json!({"type":"content_block_start","index":idx,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
        );
        let (a, b) = halves(args);
        for part in [a, b] {
            out += &named(
                "content_block_delta",
                json!({"type":"content_block_delta","index":idx,"delta":{"type":"input_json_delta","partial_json":part}}),
            );
        }
        out += &named(
            "content_block_stop",
            json!({"type":"content_block_stop","index":idx}),
        );
        idx += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out += &named(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":stop},"usage":{"output_tokens":out_tokens}}),
    );
    out += &named("message_stop", json!({"type":"message_stop"}));
    out
}
