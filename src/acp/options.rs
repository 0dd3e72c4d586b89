//! The session configuration options this agent offers over ACP
//! (`configOptions`, `session/set_config_option`): today one, the
//! `auto_review` switch, so an editor can see Auto-Review's breaker pause
//! and select Auto-Review again, as Shift+Tab does in the TUI and
//! `POST /v1/threads/{id}/auto-review/resume` does over the runtime API.

use agent_client_protocol_schema::v1::{
    SessionConfigBoolean, SessionConfigKind, SessionConfigOption, SessionConfigOptionValue,
};

/// The option's id.
pub const AUTO_REVIEW: &str = "auto_review";

/// The `auto_review` option: on while Auto-Review's model reviewer
/// answers the session's ordinary questions, off while its breaker has
/// paused it (the session asks the editor instead).
pub fn auto_review(on: bool) -> SessionConfigOption {
    let mut o = SessionConfigOption::new(
        AUTO_REVIEW,
        "Auto-Review",
        SessionConfigKind::Boolean(SessionConfigBoolean::new(on)),
    );
    o.description = Some(
        "The model reviewer answers ordinary questions (approval_policy = \"auto-review\"). \
         It switches itself off after repeated denials or outages; switch it on to select \
         Auto-Review again."
            .into(),
    );
    o
}

/// What a `session/set_config_option` asks of this agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOption {
    /// Select Auto-Review again (the breaker starts afresh).
    ResumeAutoReview,
}

/// Read a `session/set_config_option` request's option and value, or the
/// error naming the field. `offered`: whether this session offers the
/// option (its configuration selects Auto-Review).
pub fn parse_set(
    config_id: &str,
    value: &SessionConfigOptionValue,
    offered: bool,
) -> Result<SetOption, String> {
    if config_id != AUTO_REVIEW || !offered {
        return Err(format!(
            "configId: `{config_id}` is not an option of this session{}",
            if offered {
                " (it offers `auto_review`)"
            } else {
                " (it offers none: approval_policy is not \"auto-review\")"
            }
        ));
    }
    match value {
        SessionConfigOptionValue::Boolean { value: true } => Ok(SetOption::ResumeAutoReview),
        SessionConfigOptionValue::Boolean { value: false } => Err(
            "value: Auto-Review is switched off only by its breaker; choose another approval_policy in config.toml to stop it"
                .into(),
        ),
        _ => Err("value: `auto_review` is a boolean option (type \"boolean\")".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_a_boolean_with_its_state() {
        let v = serde_json::to_value(auto_review(false)).unwrap();
        assert_eq!(v["id"], "auto_review");
        assert_eq!(v["type"], "boolean");
        assert_eq!(v["currentValue"], false);
    }

    #[test]
    fn only_switching_on_is_taken() {
        let on = SessionConfigOptionValue::Boolean { value: true };
        let off = SessionConfigOptionValue::Boolean { value: false };
        assert_eq!(
            parse_set("auto_review", &on, true),
            Ok(SetOption::ResumeAutoReview)
        );
        assert!(parse_set("auto_review", &off, true)
            .unwrap_err()
            .starts_with("value:"));
        assert!(parse_set("model", &on, true)
            .unwrap_err()
            .starts_with("configId:"));
        assert!(parse_set("auto_review", &on, false)
            .unwrap_err()
            .contains("approval_policy"));
    }
}
