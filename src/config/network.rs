//! `[sandbox] network`: a bool (the old spelling: `true` = on), a mode
//! string (`"off" | "on" | "allowlist"`), or a table
//! `[sandbox.network]` with `mode`, `allow`, `deny` and the limits.
//! (TOML cannot have both `network = "allowlist"` and a
//! `[sandbox.network]` table, so the table carries the mode itself; a table
//! with an `allow` list and no `mode` means `allowlist`.)

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::net::{EgressSpec, NetworkMode};

/// The table form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkTable {
    #[serde(default)]
    pub mode: Option<NetworkMode>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub connections_per_second: Option<u32>,
    #[serde(default)]
    pub connection_burst: Option<u32>,
}

/// `[sandbox] network`, in whichever form it was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum NetworkSetting {
    Mode(NetworkMode),
    Table(NetworkTable),
}

impl NetworkSetting {
    pub fn mode(&self) -> NetworkMode {
        match self {
            NetworkSetting::Mode(m) => *m,
            NetworkSetting::Table(t) => t.mode.unwrap_or(if t.allow.is_empty() {
                NetworkMode::Off
            } else {
                NetworkMode::Allowlist
            }),
        }
    }

    /// The egress spec when the mode is `allowlist`.
    pub fn egress(&self) -> Option<EgressSpec> {
        if self.mode() != NetworkMode::Allowlist {
            return None;
        }
        let mut spec = EgressSpec::default();
        let d = EgressSpec::new(Vec::new(), Vec::new());
        spec.max_bytes = d.max_bytes;
        spec.per_second = d.per_second;
        spec.burst = d.burst;
        if let NetworkSetting::Table(t) = self {
            spec.allow = t.allow.clone();
            spec.deny = t.deny.clone();
            if let Some(b) = t.max_bytes {
                spec.max_bytes = b;
            }
            if let Some(r) = t.connections_per_second {
                spec.per_second = r;
            }
            if let Some(b) = t.connection_burst {
                spec.burst = b;
            }
        }
        Some(spec)
    }
}

impl<'de> Deserialize<'de> for NetworkSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NetworkSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "true/false, \"off\", \"on\", \"allowlist\", or a table with mode/allow/deny",
                )
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(NetworkSetting::Mode(if b {
                    NetworkMode::On
                } else {
                    NetworkMode::Off
                }))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                NetworkMode::parse(s)
                    .map(NetworkSetting::Mode)
                    .map_err(|e| E::custom(e.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let t = NetworkTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let setting = NetworkSetting::Table(t);
                if let Some(spec) = setting.egress() {
                    spec.policy()
                        .map_err(|e| de::Error::custom(e.to_string()))?;
                }
                Ok(setting)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    struct S {
        network: NetworkSetting,
    }

    fn parse(s: &str) -> Result<NetworkSetting, String> {
        toml::from_str::<S>(s)
            .map(|s| s.network)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_spelling() {
        assert_eq!(parse("network = true").unwrap().mode(), NetworkMode::On);
        assert_eq!(parse("network = false").unwrap().mode(), NetworkMode::Off);
        assert_eq!(
            parse("network = \"allowlist\"").unwrap().mode(),
            NetworkMode::Allowlist
        );
        let t = parse("[network]\nallow = [\"crates.io\", \"@registries\"]\ndeny = [\"evil.example\"]\nmax_bytes = 10").unwrap();
        assert_eq!(t.mode(), NetworkMode::Allowlist);
        let e = t.egress().unwrap();
        assert_eq!(e.allow, vec!["crates.io", "@registries"]);
        assert_eq!(e.max_bytes, 10);
        let off = parse("[network]\nmode = \"off\"\nallow = [\"crates.io\"]").unwrap();
        assert_eq!(off.egress(), None);
    }

    #[test]
    fn errors_name_the_line_and_the_value() {
        let e = parse("network = \"sometimes\"").unwrap_err();
        assert!(e.contains("line 1") && e.contains("sometimes"), "{e}");
        let e = parse("[network]\nallow = [\"a.*.example\"]").unwrap_err();
        assert!(e.contains("a.*.example"), "{e}");
        let e = parse("[network]\nallwo = []").unwrap_err();
        assert!(e.contains("allwo"), "{e}");
    }
}
