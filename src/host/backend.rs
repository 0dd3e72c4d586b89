//! Backend identity. The enum is the same on every OS: an unavailable
//! backend is a typed error at run time, never a compile error.

use serde::{Deserialize, Serialize};

/// A concrete backend that ran (or would run) a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// Linux: bubblewrap namespaces + in-sandbox no_new_privs, seccomp, Landlock.
    Bwrap,
    /// Linux: no_new_privs + Landlock + seccomp applied directly, no namespaces.
    Landlock,
    /// macOS: `/usr/bin/sandbox-exec` with a generated profile.
    Seatbelt,
    /// A remote OpenSandbox deployment over HTTP.
    Opensandbox,
    /// No sandbox (Windows, full access, or explicit `--allow-unsandboxed`).
    None,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Bwrap => "bwrap",
            BackendKind::Landlock => "landlock",
            BackendKind::Seatbelt => "seatbelt",
            BackendKind::Opensandbox => "opensandbox",
            BackendKind::None => "none",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user asked for (`--backend`, `[sandbox] backend`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum, Default,
)]
#[serde(rename_all = "kebab-case")]
#[clap(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// Linux: bwrap, then the landlock tier; macOS: seatbelt; Windows: none (flagged).
    #[default]
    Auto,
    Bwrap,
    Landlock,
    Seatbelt,
    Opensandbox,
    None,
}
