//! The metadata of a tool call's runtime item, typed on both sides: the
//! tap writes it from the loop's typed events, and every client in this
//! crate (the TUI, ACP) reads it back into the same types instead of
//! looking keys up. Remote clients see its serde form, documented in
//! docs/RUNTIME_API.md.
//!
//! An item's metadata is written twice: [`ToolItemStart`] when the call
//! starts, then [`ToolItemResult`] merged in when it ends (the store
//! extends the object), so the two never share a key. [`ToolItemMeta`]
//! reads either stage.

use super::preview::OutputPreview;
use crate::host::enforcement::EnforcementLevel;
use crate::host::BackendKind;
use crate::session::record::McpCall;
use crate::session::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The payload of `approval.required`: written by the runtime's approver,
/// read back by the TUI and ACP. The store adds `approval_id` and
/// `request_id` when it opens the request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalAsk {
    /// Empty when the approver writes it: the store names the request.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub approval_id: String,
    pub tool: String,
    pub tool_call_id: String,
    pub command: Option<String>,
    pub reason: String,
    /// Which layer asked (`gate`, `rule`, `posture`, …), or the sub-agent
    /// (`agent:<id>`) whose call it is.
    pub asked_by: Option<String>,
    /// The asking sub-agent's role (`None`: the thread's own agent).
    pub agent_role: Option<String>,
    pub gate: u8,
    /// A floor hold: answering yes approves this call only.
    pub hold: bool,
    /// The rule that caused the question (explanatory only).
    pub matched_rule: Option<String>,
    pub timeout_ms: u64,
}

/// Written when the call starts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolItemStart {
    #[serde(default)]
    pub call_id: String,
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub args: Value,
    /// For an MCP tool: the server and the tool's own name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpCall>,
    /// The sub-agent that made the call (`None`: the turn's own agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// The verdict the gates reached, as the item carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ItemApproval {
    #[serde(flatten)]
    pub verdict: Verdict,
    /// A floor hold (`a` approved this call only).
    #[serde(default)]
    pub hold: bool,
}

/// What a command really ran under, briefly (the shortfalls themselves
/// stay in the session file and the receipt).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnforcedBrief {
    pub backend: BackendKind,
    pub level: EnforcementLevel,
    /// How many `partial` items the host reported.
    #[serde(default)]
    pub partial_items: usize,
}

/// Merged in when the call ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolItemResult {
    /// `ok`, `error`, `denied`, `not_run`.
    pub status: String,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub files_touched: Vec<PathBuf>,
    pub error_category: Option<String>,
    /// The enforcement label as stream-json documents it (`label` or
    /// `label; network: …`): shown, never parsed.
    pub enforcement: Option<String>,
    pub truncated: bool,
    /// Bytes of the output the model got (the output itself stays in the
    /// session file).
    pub output_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ItemApproval>,
    /// A file edit's real unified diff (bounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforced: Option<EnforcedBrief>,
    /// The output's head and tail (built-in and MCP tools only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_preview: Option<OutputPreview>,
}

/// A tool item's metadata at either stage, as a client reads it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ToolItemMeta {
    #[serde(flatten)]
    pub start: ToolItemStart,
    #[serde(flatten)]
    pub result: ToolItemResult,
}

impl ToolItemMeta {
    /// The metadata of an item (an item that is not a tool call, or one
    /// written by an older version with other shapes, reads as empty
    /// fields rather than failing the client).
    pub fn of(metadata: &Value) -> ToolItemMeta {
        serde_json::from_value(metadata.clone()).unwrap_or_default()
    }
}

/// The metadata of a `context_compaction` item, typed on both sides as
/// a tool item's is: the manual route (`POST …/compact`) and the loop's
/// automatic compactions write it, the TUI and the history replay read
/// it. Every field is optional (each writer sets what it knows; a stage
/// never repeats another's key).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactionMeta {
    /// `true`: the loop compacted on its own inside a turn.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub auto: bool,
    /// `threshold` or `context_length` (automatic); absent: manual.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// Messages replaced by the summary, and kept verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summarised: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<u64>,
    /// The manual route: how many messages the history had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl CompactionMeta {
    pub fn of(metadata: &Value) -> CompactionMeta {
        serde_json::from_value(metadata.clone()).unwrap_or_default()
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The two stages merged as the store merges them read back whole.
    #[test]
    fn start_then_result_merged_read_back_as_one() {
        let start = ToolItemStart {
            call_id: "c1".into(),
            tool: "shell".into(),
            args: serde_json::json!({"command": "true"}),
            mcp: None,
            agent_id: None,
        };
        let result = ToolItemResult {
            status: "ok".into(),
            exit_code: Some(0),
            duration_ms: Some(3),
            enforcement: Some("sandboxed: bwrap".into()),
            approval: Some(ItemApproval {
                verdict: Verdict {
                    decision: "ask".into(),
                    outcome: "allow".into(),
                    decided_by: "you".into(),
                    asked_by: Some("posture".into()),
                    gate: Some(8),
                    reason: "not read-only".into(),
                },
                hold: false,
            }),
            enforced: Some(EnforcedBrief {
                backend: BackendKind::Bwrap,
                level: EnforcementLevel::Partial,
                partial_items: 1,
            }),
            ..Default::default()
        };
        let mut v = serde_json::to_value(&start).unwrap();
        let r = serde_json::to_value(&result).unwrap();
        let (Some(dst), Value::Object(src)) = (v.as_object_mut(), r) else {
            panic!()
        };
        for k in src.keys() {
            assert!(!dst.contains_key(k), "the stages share {k}");
        }
        dst.extend(src);
        let m = ToolItemMeta::of(&v);
        assert_eq!(m.start, start);
        assert_eq!(m.result, result);
        assert_eq!(v["enforced"]["backend"], "bwrap");
        assert_eq!(v["approval"]["decided_by"], "you");
        // The start alone reads with an empty result.
        let m = ToolItemMeta::of(&serde_json::to_value(&start).unwrap());
        assert_eq!(m.result, ToolItemResult::default());
    }
}
