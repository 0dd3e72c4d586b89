//! Claude Code permission rules (`permissions.allow|ask|deny` in
//! `settings.json`) as codewhale `permissions.toml` rules.
//!
//! The rule syntax is Claude Code's ("Configure permissions", Permission
//! rule syntax: `Tool` or `Tool(specifier)`; `Bash(npm run test:*)` and
//! `Bash(npm run *)` prefixes; `Read(./src/**)`, `//abs`, `~/home`, and
//! `/relative-to-the-settings-file` paths; `mcp__server__tool`). Only what
//! codewhale's rules can say the same way is translated: a command prefix
//! or exact command, a path glob, a whole tool. Anything else is listed as
//! not imported, with why; nothing is approximated.

use crate::authz::rules::Action;
use std::path::Path;

/// What a translated rule matches besides its tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    Any,
    Command(String),
    CommandExact(String),
    Path(String),
}

/// One `[[rules]]` entry to add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRule {
    pub tool: String,
    pub matcher: Match,
    pub action: Action,
    /// The Claude rule it came from (`allow: Bash(npm test)`).
    pub from: String,
}

impl NewRule {
    /// The TOML text of the entry (with a comment naming its source).
    pub fn toml(&self) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut s = format!(
            "# imported from Claude Code: {}\n[[rules]]\ntool = {}\n",
            self.from,
            q(&self.tool)
        );
        match &self.matcher {
            Match::Any => {}
            Match::Command(c) => s.push_str(&format!("command = {}\n", q(c))),
            Match::CommandExact(c) => s.push_str(&format!("command_exact = {}\n", q(c))),
            Match::Path(p) => s.push_str(&format!("path = {}\n", q(p))),
        }
        let a = match self.action {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        };
        s.push_str(&format!("action = \"{a}\"\n"));
        s
    }
}

/// `Tool` / `Tool(spec)`.
fn split(rule: &str) -> (&str, Option<&str>) {
    match rule.find('(') {
        Some(i) if rule.ends_with(')') => (&rule[..i], Some(&rule[i + 1..rule.len() - 1])),
        _ => (rule, None),
    }
}

/// A Claude path specifier as a codewhale path glob: `//abs` → `/abs`,
/// `~/x` → under `home`, `/x` → under the settings file's directory,
/// `./x` and `x` → relative to the workspace.
fn path_glob(spec: &str, home: Option<&Path>, settings_dir: &Path) -> Result<String, String> {
    if let Some(abs) = spec.strip_prefix("//") {
        return Ok(format!("/{abs}"));
    }
    if let Some(rest) = spec.strip_prefix("~/") {
        return match home {
            Some(h) => Ok(h.join(rest).to_string_lossy().into_owned()),
            None => Err("`~/` with no home directory".into()),
        };
    }
    if let Some(rest) = spec.strip_prefix('/') {
        return Ok(settings_dir.join(rest).to_string_lossy().into_owned());
    }
    Ok(spec.strip_prefix("./").unwrap_or(spec).to_string())
}

/// Translate one Claude rule; `Err(why)` when codewhale cannot say it.
pub fn translate(
    rule: &str,
    action: Action,
    list: &str,
    home: Option<&Path>,
    settings_dir: &Path,
) -> Result<Vec<NewRule>, String> {
    let from = format!("permissions.{list}: {rule}");
    let one = |tool: &str, matcher: Match| NewRule {
        tool: tool.to_string(),
        matcher,
        action,
        from: from.clone(),
    };
    let (tool, spec) = split(rule.trim());
    match (tool, spec) {
        ("Bash", None) => Ok(vec![one("shell", Match::Any)]),
        ("Bash", Some(s)) => {
            let s = s.trim();
            let prefix = s
                .strip_suffix(":*")
                .or_else(|| s.strip_suffix(" *"))
                .map(str::trim);
            match prefix {
                Some(p) if !p.contains('*') && !p.is_empty() => {
                    Ok(vec![one("shell", Match::Command(p.to_string()))])
                }
                None if !s.contains('*') && !s.is_empty() => {
                    Ok(vec![one("shell", Match::CommandExact(s.to_string()))])
                }
                _ => Err("a `*` other than at the end: codewhale matches command prefixes or exact commands".into()),
            }
        }
        ("Read", s) => Ok(vec![match s {
            None => one("read_file", Match::Any),
            Some(p) => one("read_file", Match::Path(path_glob(p, home, settings_dir)?)),
        }]),
        ("Edit" | "Write" | "MultiEdit", s) => {
            let m = match s {
                None => Match::Any,
                Some(p) => Match::Path(path_glob(p, home, settings_dir)?),
            };
            Ok(vec![one("edit_file", m.clone()), one("write_file", m)])
        }
        ("Grep", None) => Ok(vec![one("search", Match::Any)]),
        ("LS", None) => Ok(vec![one("list_dir", Match::Any)]),
        (t, None) if t.starts_with("mcp__") => {
            let name = if t.matches("__").count() >= 2 {
                t.to_string()
            } else {
                format!("{t}__*")
            };
            Ok(vec![one(&name, Match::Any)])
        }
        (t, _) => Err(format!(
            "codewhale has no rule for Claude Code's `{t}` in this form"
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn t(rule: &str) -> Result<Vec<NewRule>, String> {
        translate(
            rule,
            Action::Allow,
            "allow",
            Some(Path::new("/h")),
            Path::new("/h/.claude"),
        )
    }

    #[test]
    fn translates_what_codewhale_can_say_and_refuses_the_rest() {
        assert_eq!(
            t("Bash(npm run test:*)").unwrap()[0].matcher,
            Match::Command("npm run test".into())
        );
        assert_eq!(
            t("Bash(git log *)").unwrap()[0].matcher,
            Match::Command("git log".into())
        );
        assert_eq!(
            t("Bash(npm test)").unwrap()[0].matcher,
            Match::CommandExact("npm test".into())
        );
        assert_eq!(t("Bash").unwrap()[0].matcher, Match::Any);
        assert!(t("Bash(git * main)").is_err());
        assert_eq!(
            t("Read(./.env)").unwrap()[0].matcher,
            Match::Path(".env".into())
        );
        assert_eq!(
            t("Read(//etc/hosts)").unwrap()[0].matcher,
            Match::Path("/etc/hosts".into())
        );
        assert_eq!(
            t("Read(~/.ssh/**)").unwrap()[0].matcher,
            Match::Path("/h/.ssh/**".into())
        );
        assert_eq!(
            t("Edit(/src/**)").unwrap()[0].matcher,
            Match::Path("/h/.claude/src/**".into())
        );
        assert_eq!(t("Edit(src/**)").unwrap().len(), 2);
        assert_eq!(t("mcp__github").unwrap()[0].tool, "mcp__github__*");
        assert_eq!(
            t("mcp__github__get_issue").unwrap()[0].tool,
            "mcp__github__get_issue"
        );
        assert!(t("WebFetch(domain:example.com)").is_err());
        let toml_text = t("Bash(npm run test:*)").unwrap()[0].toml();
        assert!(
            toml_text.contains("command = \"npm run test\"\naction = \"allow\""),
            "{toml_text}"
        );
    }
}
