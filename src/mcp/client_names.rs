//! The names MCP tools get in front of the model: `mcp__<server>__<tool>`.
//!
//! Providers accept tool names of `[A-Za-z0-9_-]` up to 64 (OpenAI) or
//! 128 characters; codewhale keeps them within 128. Anything else in a
//! server's tool name becomes `_`; a name that would be too long is cut and
//! given a short hash of the original, so two long names stay distinct.
//! Rules and admission lists see exactly this name (`mcp__github__*`).

use sha2::{Digest, Sha256};

/// The prefix of every MCP tool name (receipts count these as MCP calls).
pub const PREFIX: &str = "mcp__";
/// The longest tool name offered.
pub const MAX_TOOL_NAME: usize = 128;

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The offered name of `tool` on `server` (the server name is already
/// checked by the config: letters, digits, `-`, `_`, no `__`).
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool));
    if full.len() <= MAX_TOOL_NAME {
        return full;
    }
    let hash = hex::encode(&Sha256::digest(tool.as_bytes())[..4]);
    // ASCII only after sanitising, so any byte index is a char boundary.
    let keep = MAX_TOOL_NAME - hash.len() - 1;
    format!("{}_{hash}", &full[..keep])
}

/// Whether `name` is an MCP tool name.
pub fn is_mcp(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// Whether `name` matches an admission entry: exact, or `prefix*`.
pub fn matches(entry: &str, name: &str) -> bool {
    match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_sanitised_and_bounded() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(tool_name("gh", "get.issue/x ü"), "mcp__gh__get_issue_x__");
        let long = "t".repeat(300);
        let a = tool_name("srv", &long);
        let b = tool_name("srv", &format!("{long}x"));
        assert_eq!(a.len(), MAX_TOOL_NAME);
        assert_ne!(a, b);
        assert!(a.starts_with("mcp__srv__ttt"));
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        assert!(is_mcp(&a) && !is_mcp("shell"));
    }

    #[test]
    fn admission_entries_match_exactly_or_by_prefix() {
        assert!(matches("mcp__github__*", "mcp__github__create_issue"));
        assert!(matches("mcp__*", "mcp__x__y"));
        assert!(!matches("mcp__github__*", "mcp__gitlab__x"));
        assert!(matches("mcp__a__b", "mcp__a__b"));
        assert!(!matches("mcp__a__b", "mcp__a__bc"));
    }
}
