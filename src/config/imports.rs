//! `project_instruction_imports` (user config only): `true` reads the
//! default list of other tools' instruction files, `false` none, or a list
//! of file names (relative to each directory from the repository root down
//! to the workspace, like `AGENTS.md`). A name is a relative path with no
//! `..`: anything else is refused when the config is read, naming the key.

use serde::{Deserialize, Serialize};

/// What `true` reads.
pub const DEFAULT_IMPORTS: &[&str] = &[
    "CLAUDE.md",
    ".cursorrules",
    ".github/copilot-instructions.md",
];

/// The key's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, try_from = "Raw")]
pub enum InstructionImports {
    Switch(bool),
    Files(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Switch(bool),
    Files(Vec<String>),
}

impl TryFrom<Raw> for InstructionImports {
    type Error = String;

    fn try_from(r: Raw) -> Result<Self, String> {
        match r {
            Raw::Switch(b) => Ok(InstructionImports::Switch(b)),
            Raw::Files(v) => {
                for n in &v {
                    check_name(n)?;
                }
                Ok(InstructionImports::Files(v))
            }
        }
    }
}

/// A file name the list may hold: relative, no `..`, not empty.
pub fn check_name(n: &str) -> Result<(), String> {
    let p = std::path::Path::new(n);
    if n.trim().is_empty() {
        return Err("project_instruction_imports: an empty file name".into());
    }
    if p.is_absolute() || n.starts_with('~') {
        return Err(format!(
            "project_instruction_imports: `{n}` must be relative to the workspace's directories"
        ));
    }
    if p.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "project_instruction_imports: `{n}` must not contain `..`"
        ));
    }
    Ok(())
}

impl InstructionImports {
    /// The file names to read.
    pub fn files(&self) -> Vec<String> {
        match self {
            InstructionImports::Switch(true) => {
                DEFAULT_IMPORTS.iter().map(|s| s.to_string()).collect()
            }
            InstructionImports::Switch(false) => Vec::new(),
            InstructionImports::Files(v) => v.clone(),
        }
    }
}

/// The names to read for an optional key (absent: none).
pub fn files(v: Option<&InstructionImports>) -> Vec<String> {
    v.map(InstructionImports::files).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        project_instruction_imports: InstructionImports,
    }

    fn parse(s: &str) -> Result<Vec<String>, String> {
        toml::from_str::<T>(s)
            .map(|t| t.project_instruction_imports.files())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn bool_or_list_and_bad_names_refused() {
        assert_eq!(
            parse("project_instruction_imports = true").unwrap().len(),
            3
        );
        assert!(parse("project_instruction_imports = false")
            .unwrap()
            .is_empty());
        assert_eq!(
            parse("project_instruction_imports = [\"CLAUDE.md\", \"docs/RULES.md\"]").unwrap(),
            vec!["CLAUDE.md", "docs/RULES.md"]
        );
        for bad in ["\"../x.md\"", "\"/etc/passwd\"", "\"\"", "\"~/x\""] {
            let e = parse(&format!("project_instruction_imports = [{bad}]")).unwrap_err();
            assert!(e.contains("project_instruction_imports"), "{e}");
        }
        assert!(parse("project_instruction_imports = 3").is_err());
    }
}
