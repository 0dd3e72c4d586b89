//! `[auto_review]` in the user config: which model reviews Auto-Review's
//! ordinary questions, and how long a review may take.
//!
//! User config only (a project override cannot choose who reviews its own
//! calls). Defaults: the session's own provider and model, 90 s.

use serde::{Deserialize, Deserializer, Serialize};

/// How long one review may take by default.
pub const DEFAULT_TIMEOUT_S: u64 = 90;
/// The longest a review may be configured to take.
pub const MAX_TIMEOUT_S: u64 = 600;

/// `[auto_review]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoReviewSection {
    /// A `[providers.NAME]` id or built-in provider (default: the session's).
    pub provider: Option<String>,
    /// The reviewer model (default: the session's model when the provider
    /// is the session's, else the provider's own default model).
    pub model: Option<String>,
    /// Seconds one review may take, 1–600 (default 90).
    pub timeout_s: Option<TimeoutSecs>,
}

impl AutoReviewSection {
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_s.map_or(DEFAULT_TIMEOUT_S, |t| t.0))
    }
}

/// A timeout in whole seconds, 1–600; anything else is refused when the
/// config is read (the error names the file, the line and the key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TimeoutSecs(u64);

impl TimeoutSecs {
    pub fn new(v: i64) -> Result<Self, String> {
        if (1..=MAX_TIMEOUT_S as i64).contains(&v) {
            Ok(TimeoutSecs(v as u64))
        } else {
            Err(format!(
                "timeout_s = {v}: expected whole seconds from 1 to {MAX_TIMEOUT_S}, e.g. {DEFAULT_TIMEOUT_S}"
            ))
        }
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for TimeoutSecs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        TimeoutSecs::new(v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::config::load_user_config_text as load_with;

    #[test]
    fn defaults_and_configured_values() {
        let s = load_with("model = \"m\"\n").unwrap();
        assert_eq!(s.user.auto_review.timeout().as_secs(), 90);
        assert_eq!(s.user.auto_review.provider, None);
        let s =
            load_with("[auto_review]\nprovider = \"openai\"\nmodel = \"gpt-x\"\ntimeout_s = 30\n")
                .unwrap();
        assert_eq!(s.user.auto_review.timeout().as_secs(), 30);
        assert_eq!(s.user.auto_review.provider.as_deref(), Some("openai"));
        assert_eq!(s.user.auto_review.model.as_deref(), Some("gpt-x"));
    }

    #[test]
    fn bad_values_name_file_line_and_key() {
        for bad in ["0", "601", "-3", "\"90\"", "1.5"] {
            let e = load_with(&format!(
                "model = \"m\"\n[auto_review]\ntimeout_s = {bad}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains("config.toml"), "{e}");
            assert!(e.contains("line 3"), "{e}");
            assert!(e.contains("timeout_s"), "{e}");
        }
        let e = load_with("[auto_review]\ntimeout = 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("timeout"), "{e}");
    }
}
