//! One `SKILL.md`: YAML front matter between `---` lines, then the body.
//!
//! The fields follow the open Agent Skills format (agentskills.io,
//! "Specification"): `name` (1–64 characters, lowercase letters, digits
//! and hyphens, no leading, trailing or doubled hyphen; it should match
//! the folder's name), `description` (1–1024 characters) and the optional,
//! experimental `allowed-tools` (a space-delimited string; Claude Code
//! also writes a comma-separated string or a YAML list, accepted too).
//! Other keys (`license`, `compatibility`, `metadata`, …) are allowed and
//! ignored. Nothing here is configuration: a skill is text for the model.

use serde::Deserialize;

/// Longest `name` the format allows.
pub const NAME_MAX: usize = 64;
/// Longest `description` the format allows.
pub const DESCRIPTION_MAX: usize = 1024;

/// Why a `SKILL.md` is not a usable skill.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ManifestError {
    #[error(
        "no YAML front matter (the file must start with a `---` line and close it with another)"
    )]
    NoFrontMatter,
    #[error("front matter is not valid YAML: {0}")]
    Yaml(String),
    #[error("front matter key `{key}`: {why}")]
    Field { key: &'static str, why: String },
}

/// The front matter's fields codewhale reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub description: String,
    /// `allowed-tools`: the tools the skill says it needs. It can only
    /// narrow what a session may do, never widen it.
    pub allowed_tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolList {
    Text(String),
    List(Vec<String>),
}

#[derive(Deserialize)]
struct Raw {
    name: Option<String>,
    description: Option<String>,
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<ToolList>,
}

/// The front matter's text and the body after it.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut pos = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..pos], &rest[pos + line.len()..]));
        }
        pos += line.len();
    }
    // A closing `---` on the last line without a newline.
    (rest[pos..].trim_end() == "---").then(|| (&rest[..pos], ""))
}

/// Whether `name` is a valid skill name in the format's words.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= NAME_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Parse a `SKILL.md`: its manifest and its body.
pub fn parse(text: &str) -> Result<(Manifest, &str), ManifestError> {
    let (front, body) = split(text).ok_or(ManifestError::NoFrontMatter)?;
    let raw: Raw = serde_yaml::from_str(front).map_err(|e| ManifestError::Yaml(e.to_string()))?;
    let name = raw.name.ok_or(ManifestError::Field {
        key: "name",
        why: "missing".into(),
    })?;
    if !valid_name(&name) {
        return Err(ManifestError::Field {
            key: "name",
            why: format!(
                "`{name}` is not 1–{NAME_MAX} lowercase letters, digits and single hyphens"
            ),
        });
    }
    let description = raw.description.unwrap_or_default().trim().to_string();
    if description.is_empty() {
        return Err(ManifestError::Field {
            key: "description",
            why: "missing or empty".into(),
        });
    }
    if description.chars().count() > DESCRIPTION_MAX {
        return Err(ManifestError::Field {
            key: "description",
            why: format!("longer than {DESCRIPTION_MAX} characters"),
        });
    }
    let allowed_tools = raw.allowed_tools.map(|t| match t {
        ToolList::Text(s) => s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect(),
        ToolList::List(v) => v.into_iter().map(|s| s.trim().to_string()).collect(),
    });
    Ok((
        Manifest {
            name,
            description,
            allowed_tools,
        },
        body,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_and_the_body() {
        let (m, body) = parse(
            "---\nname: pdf-tools\ndescription: Fill PDF forms. Use for PDFs.\nallowed-tools: read_file shell\nlicense: MIT\n---\n# PDF\nSteps.\n",
        )
        .unwrap();
        assert_eq!(m.name, "pdf-tools");
        assert_eq!(m.description, "Fill PDF forms. Use for PDFs.");
        assert_eq!(
            m.allowed_tools,
            Some(vec!["read_file".into(), "shell".into()])
        );
        assert_eq!(body, "# PDF\nSteps.\n");
    }

    #[test]
    fn allowed_tools_as_comma_text_or_list() {
        let (m, _) =
            parse("---\nname: a\ndescription: d\nallowed-tools: Read, Grep\n---\n").unwrap();
        assert_eq!(m.allowed_tools, Some(vec!["Read".into(), "Grep".into()]));
        let (m, _) =
            parse("---\nname: a\ndescription: d\nallowed-tools: [read_file]\n---").unwrap();
        assert_eq!(m.allowed_tools, Some(vec!["read_file".into()]));
        let (m, _) = parse("---\nname: a\ndescription: d\n---\n").unwrap();
        assert_eq!(m.allowed_tools, None);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        assert_eq!(
            parse("# no front matter"),
            Err(ManifestError::NoFrontMatter)
        );
        assert_eq!(
            parse("---\nname: a\n"),
            Err(ManifestError::NoFrontMatter),
            "unclosed"
        );
        assert!(matches!(
            parse("---\nname: [\n---\n"),
            Err(ManifestError::Yaml(_))
        ));
        for (text, key) in [
            ("---\ndescription: d\n---\n", "name"),
            ("---\nname: Bad_Name\ndescription: d\n---\n", "name"),
            ("---\nname: a--b\ndescription: d\n---\n", "name"),
            ("---\nname: a\n---\n", "description"),
        ] {
            match parse(text) {
                Err(ManifestError::Field { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let long = "x".repeat(DESCRIPTION_MAX + 1);
        assert!(parse(&format!("---\nname: a\ndescription: {long}\n---\n")).is_err());
    }
}
