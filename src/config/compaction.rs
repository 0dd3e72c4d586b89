//! `[compaction]` in the user config: when a conversation is compacted
//! automatically (the loop does it; see `agent::compaction`).

use serde::{Deserialize, Deserializer, Serialize};

/// The share of the model's context window a request may reach before
/// the conversation is compacted first (default 0.85).
pub const DEFAULT_THRESHOLD: f64 = 0.85;

/// `[compaction]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionSection {
    /// A number in (0, 1]: compact when the next request would pass this
    /// share of the window.
    pub threshold: Option<Threshold>,
}

impl CompactionSection {
    pub fn threshold(&self) -> f64 {
        self.threshold.map_or(DEFAULT_THRESHOLD, |t| t.0)
    }
}

/// A share of the window in (0, 1]; anything else is refused when the
/// config is read (the error names the file, the line and the key).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Threshold(f64);

impl Threshold {
    pub fn new(v: f64) -> Result<Self, String> {
        if v > 0.0 && v <= 1.0 {
            Ok(Threshold(v))
        } else {
            Err(format!(
                "threshold = {v}: expected a share of the context window in (0, 1], e.g. 0.85"
            ))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        Threshold::new(v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::config::load_user_config_text as load_with;

    #[test]
    fn default_and_configured_thresholds() {
        let s = load_with("model = \"m\"\n").unwrap();
        assert_eq!(s.user.compaction.threshold(), 0.85);
        let s = load_with("[compaction]\nthreshold = 0.5\n").unwrap();
        assert_eq!(s.user.compaction.threshold(), 0.5);
        let s = load_with("[compaction]\nthreshold = 1\n").unwrap();
        assert_eq!(s.user.compaction.threshold(), 1.0);
    }

    #[test]
    fn a_threshold_out_of_range_names_file_line_and_key() {
        for bad in ["0", "1.5", "-0.2"] {
            let e = load_with(&format!("model = \"m\"\n[compaction]\nthreshold = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("config.toml"), "{e}");
            assert!(e.contains("line 3"), "{e}");
            assert!(e.contains("threshold"), "{e}");
            assert!(e.contains("(0, 1]"), "{e}");
        }
        let e = load_with("[compaction]\nthreshhold = 0.5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("threshhold"), "{e}");
    }
}
