//! `permissions.toml`: the user's rules file (gate 5), plus the agent and
//! built-in layers.
//!
//! ```toml
//! [[rules]]
//! tool = "shell"
//! command = "git push"      # token prefix, arity-aware for git's global options
//! action = "deny"           # deny | ask | allow
//!
//! [[rules]]
//! tool = "shell"
//! command_exact = "cargo test"
//! workspace = "~/src/app"   # only in this workspace
//! action = "allow"
//!
//! [[rules]]
//! tool = "write_file"
//! path = "docs/**"          # glob, relative to the workspace (or absolute)
//! action = "allow"
//! ```
//!
//! Precedence: layer first (user, then agent, then built-in), action second
//! (deny > ask > allow within the deciding layer). Every piece of a shell
//! command is matched separately; the chain's result is the strictest piece,
//! and an allow covers the chain only when *every* piece is allowed. A deny
//! from the user or built-in layer matching *any* piece is hard: nothing
//! overrides it. There is no project copy of this file.

use super::floor;
use super::readonly::git_subcommand;
use super::shell::{Analysis, Piece};
use super::verdict::Decision;
use crate::toml_file::{self as cerr, FileError};
use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a rule comes from; the derive order is the precedence order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    User,
    Agent,
    BuiltIn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    pub fn decision(self) -> Decision {
        match self {
            Action::Allow => Decision::Allow,
            Action::Ask => Decision::Ask,
            Action::Deny => Decision::Deny,
        }
    }
}

/// What a rule matches besides the tool name.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// Every call of the tool.
    Any,
    /// A shell piece whose (canonical) argv starts with these tokens.
    Prefix(Vec<String>),
    /// A shell piece whose canonical argv is exactly these tokens.
    Exact(Vec<String>),
    /// A file tool whose path matches this glob.
    Path(String, GlobMatcher),
    /// Built-in: catastrophic commands (see [`floor::catastrophic`]).
    Catastrophic,
}

#[derive(Clone, Debug)]
pub struct Rule {
    /// Tool name; `*` matches any tool, `prefix*` a family (`mcp__*`).
    pub tool: String,
    pub matcher: Matcher,
    /// Only applies when the call's workspace is (under) this directory.
    pub workspace: Option<PathBuf>,
    pub action: Action,
    pub layer: Layer,
    /// The file it came from (or `built-in` / `agent`), and the line.
    pub source: String,
    pub line: Option<usize>,
}

impl Rule {
    /// One-line description for traces and `permissions list`.
    pub fn describe(&self) -> String {
        let what = match &self.matcher {
            Matcher::Any => String::new(),
            Matcher::Prefix(t) => format!(" command=\"{}\"", t.join(" ")),
            Matcher::Exact(t) => format!(" command_exact=\"{}\"", t.join(" ")),
            Matcher::Path(p, _) => format!(" path=\"{p}\""),
            Matcher::Catastrophic => {
                " catastrophic commands (rm -rf /, mkfs, dd onto a disk…)".into()
            }
        };
        let ws = self
            .workspace
            .as_ref()
            .map(|w| format!(" workspace=\"{}\"", w.display()))
            .unwrap_or_default();
        let at = match self.line {
            Some(l) => format!("{}:{l}", self.source),
            None => self.source.clone(),
        };
        format!(
            "{:?} {} tool={}{what}{ws} ({at})",
            self.action,
            self.layer_name(),
            self.tool
        )
        .to_lowercase_first()
    }

    fn layer_name(&self) -> &'static str {
        match self.layer {
            Layer::User => "[user]",
            Layer::Agent => "[agent]",
            Layer::BuiltIn => "[built-in]",
        }
    }

    fn tool_matches(&self, tool: &str) -> bool {
        self.tool == "*"
            || self.tool == tool
            || self
                .tool
                .strip_suffix('*')
                .is_some_and(|p| tool.starts_with(p))
    }

    fn workspace_matches(&self, ws: &Path) -> bool {
        self.workspace.as_ref().is_none_or(|w| ws.starts_with(w))
    }

    fn piece_matches(&self, p: &Piece) -> bool {
        match &self.matcher {
            Matcher::Any => true,
            Matcher::Prefix(t) => {
                let c = canonical_argv(p);
                c.len() >= t.len() && c.iter().zip(t).all(|(a, b)| a == b)
            }
            Matcher::Exact(t) => canonical_argv(p) == *t,
            Matcher::Path(..) => false,
            Matcher::Catastrophic => floor::catastrophic(p).is_some(),
        }
    }
}

trait LowerFirst {
    fn to_lowercase_first(self) -> String;
}

impl LowerFirst for String {
    fn to_lowercase_first(self) -> String {
        let mut c = self.chars();
        match c.next() {
            Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
            None => self,
        }
    }
}

/// A piece's argv for rule matching: git's global options dropped
/// (`git -C x push` ≡ `git push`), everything else as analysed.
pub fn canonical_argv(p: &Piece) -> Vec<String> {
    if p.program() == "git" {
        if let (Some((i, _)), _) = git_subcommand(p.args()) {
            let mut v = vec!["git".to_string()];
            v.extend(p.args()[i..].iter().cloned());
            return v;
        }
    }
    p.argv.clone()
}

/// All rules in force, every layer.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
}

/// What gate 5 concluded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleOutcome {
    /// `None`: no rule speaks for (every piece of) this call.
    pub decision: Option<Decision>,
    /// A user-layer or built-in deny matched: nothing may override it.
    pub hard: bool,
    /// The deciding rule(s), described.
    pub because: String,
}

/// The call as gate 5 sees it.
pub struct RuleQuery<'a> {
    pub tool: &'a str,
    pub workspace: &'a Path,
    /// For shell calls: the analysis.
    pub shell: Option<&'a Analysis>,
    /// For file tools: the target paths (as given).
    pub paths: &'a [String],
}

impl RuleSet {
    /// Only the built-in layer.
    pub fn builtin() -> Self {
        RuleSet {
            rules: vec![Rule {
                tool: "*".into(),
                matcher: Matcher::Catastrophic,
                workspace: None,
                action: Action::Deny,
                layer: Layer::BuiltIn,
                source: "built-in".into(),
                line: None,
            }],
        }
    }

    /// Add rules of another layer (user rules from a file, agent rules).
    pub fn extend(&mut self, rules: impl IntoIterator<Item = Rule>) {
        self.rules.extend(rules);
        self.rules.sort_by_key(|r| r.layer);
    }

    /// Evaluate gate 5 for one call.
    pub fn evaluate(&self, q: &RuleQuery<'_>) -> RuleOutcome {
        let applicable: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.tool_matches(q.tool) && r.workspace_matches(q.workspace))
            .collect();
        let mut out = RuleOutcome::default();
        match q.shell {
            Some(a) => {
                let mut all_allowed = !a.pieces.is_empty();
                let mut worst: Option<Decision> = None;
                let mut because = Vec::new();
                for p in &a.pieces {
                    // Hard denies first: any user or built-in deny on any piece.
                    if let Some(r) = applicable.iter().find(|r| {
                        r.action == Action::Deny && r.layer != Layer::Agent && r.piece_matches(p)
                    }) {
                        return RuleOutcome {
                            decision: Some(Decision::Deny),
                            hard: true,
                            because: format!("`{}` matches {}", p.display(), r.describe()),
                        };
                    }
                    match decide_piece(&applicable, p) {
                        Some((d, r)) => {
                            if d != Decision::Allow {
                                all_allowed = false;
                            }
                            if worst.is_none_or(|w| d > w) {
                                worst = Some(d);
                            }
                            because.push(format!("`{}` → {}", p.display(), r.describe()));
                        }
                        None => all_allowed = false,
                    }
                }
                out.decision = match worst {
                    Some(Decision::Allow) if !all_allowed => None,
                    w => w,
                };
                out.because = because.join("; ");
            }
            None => {
                let decided = if q.paths.is_empty() {
                    decide(&applicable, |r| matches!(r.matcher, Matcher::Any))
                } else {
                    // Every path must be covered for an allow; strictest wins.
                    let mut worst: Option<(Decision, &Rule)> = None;
                    let mut covered = true;
                    for path in q.paths {
                        match decide(&applicable, |r| path_matches(r, path, q.workspace)) {
                            Some((d, r)) => {
                                if worst.is_none_or(|(w, _)| d > w) {
                                    worst = Some((d, r));
                                }
                            }
                            None => covered = false,
                        }
                    }
                    match worst {
                        Some((Decision::Allow, _)) if !covered => None,
                        w => w,
                    }
                };
                if let Some((d, r)) = decided {
                    out.decision = Some(d);
                    out.hard = d == Decision::Deny && r.layer != Layer::Agent;
                    out.because = r.describe();
                }
            }
        }
        out
    }
}

fn path_matches(r: &Rule, path: &str, ws: &Path) -> bool {
    match &r.matcher {
        Matcher::Any => true,
        Matcher::Path(_, g) => {
            let p = Path::new(path);
            g.is_match(p)
                || p.strip_prefix(ws).is_ok_and(|rel| g.is_match(rel))
                || (!p.is_absolute() && g.is_match(ws.join(p)))
        }
        _ => false,
    }
}

/// The deciding layer's strictest matching rule for one piece.
fn decide_piece<'r>(rules: &[&'r Rule], p: &Piece) -> Option<(Decision, &'r Rule)> {
    decide(rules, |r| r.piece_matches(p))
}

fn decide<'r>(rules: &[&'r Rule], hit: impl Fn(&Rule) -> bool) -> Option<(Decision, &'r Rule)> {
    for layer in [Layer::User, Layer::Agent, Layer::BuiltIn] {
        let best = rules
            .iter()
            .filter(|r| r.layer == layer && hit(r))
            .max_by_key(|r| r.action);
        if let Some(r) = best {
            return Some((r.action.decision(), r));
        }
    }
    None
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rules: Vec<toml::Spanned<RawRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: String,
    command: Option<String>,
    command_exact: Option<String>,
    path: Option<String>,
    workspace: Option<String>,
    action: Action,
}

/// Parse a rules file's text into rules of `layer`. Errors name the file,
/// line and key (`rules[2].path`).
pub fn parse_rules(
    file: &Path,
    text: &str,
    layer: Layer,
    home: Option<&Path>,
) -> Result<Vec<Rule>, FileError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| cerr::from_toml(file, text, &e))?;
    let mut rules = Vec::new();
    for (i, spanned) in raw.rules.iter().enumerate() {
        let start = spanned.span().start;
        let r = spanned.get_ref();
        let err =
            |key: &str, msg: &str| cerr::at(file, text, start, &format!("rules[{i}].{key}"), msg);
        let set = [
            r.command.is_some(),
            r.command_exact.is_some(),
            r.path.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if set > 1 {
            return Err(err(
                "command",
                "use only one of `command`, `command_exact`, `path`",
            ));
        }
        if r.tool.trim().is_empty() {
            return Err(err("tool", "empty tool name"));
        }
        let tokens = |s: &str, key: &str| -> Result<Vec<String>, FileError> {
            let t = shlex::split(s).ok_or_else(|| err(key, "unbalanced quotes"))?;
            if t.is_empty() {
                return Err(err(key, "empty command"));
            }
            let mut t = t;
            t[0] = super::shell::base_name(&t[0]).to_string();
            Ok(t)
        };
        let matcher = if let Some(c) = &r.command {
            Matcher::Prefix(tokens(c, "command")?)
        } else if let Some(c) = &r.command_exact {
            Matcher::Exact(tokens(c, "command_exact")?)
        } else if let Some(p) = &r.path {
            let g = Glob::new(p).map_err(|e| err("path", &format!("bad glob: {e}")))?;
            Matcher::Path(p.clone(), g.compile_matcher())
        } else {
            Matcher::Any
        };
        let workspace = r
            .workspace
            .as_ref()
            .map(|w| match (w.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => PathBuf::from(w),
            });
        rules.push(Rule {
            tool: r.tool.clone(),
            matcher,
            workspace,
            action: r.action,
            layer,
            source: file.display().to_string(),
            line: Some(cerr::line_col(text, start).0),
        });
    }
    Ok(rules)
}

/// Load the user's `permissions.toml` (absent file = no rules).
pub fn load_user_rules(file: &Path, home: Option<&Path>) -> Result<Vec<Rule>, FileError> {
    match std::fs::read_to_string(file) {
        Ok(text) => parse_rules(file, &text, Layer::User, home),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(FileError::Read {
            file: file.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "rules_tests.rs"]
mod tests;
