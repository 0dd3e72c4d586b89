//! Finding skills: only the named folders are read, never a tree walk.
//!
//! Each root is listed once (`root/*/SKILL.md`); in root order the first
//! skill of a name wins and later ones are kept as shadowed duplicates
//! (`shadowed_by` names the winner's file). A workspace root, or a skill
//! in it, that resolves outside the workspace (a symlink out) is not read:
//! a repository cannot point the model at the user's files.

use super::manifest::{self, Manifest};
use crate::config::paths::ConfigPaths;
use serde::Serialize;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Bytes of a `SKILL.md` read to find its front matter.
pub const MANIFEST_READ_CAP: u64 = 64 * 1024;

/// Whose folder a root is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The user's own (`~/.codewhale/skills`, `~/.agents/skills`).
    User,
    /// The repository's (a workspace folder): text only, never configuration.
    Workspace,
}

/// One folder skills are discovered in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Root {
    /// The key `doctor --json` reports it under (`global`, `agents`, …).
    pub key: &'static str,
    pub path: PathBuf,
    pub scope: Scope,
}

/// The roots, in the order a name is looked up (first wins):
/// `~/.codewhale/skills` (`$CODEWHALE_HOME/skills`), `~/.agents/skills`,
/// then the workspace's `.agents/skills`, `skills`, `.codewhale/skills`,
/// `.claude/skills`, `.opencode/skills`.
pub fn roots(paths: &ConfigPaths, workspace: &Path) -> Vec<Root> {
    let mut v = vec![Root {
        key: "global",
        path: paths.codewhale_home.join("skills"),
        scope: Scope::User,
    }];
    if let Some(home) = &paths.home {
        v.push(Root {
            key: "agents_global",
            path: home.join(".agents").join("skills"),
            scope: Scope::User,
        });
    }
    for (key, rel) in [
        ("agents", ".agents/skills"),
        ("local", "skills"),
        ("codewhale", ".codewhale/skills"),
        ("claude", ".claude/skills"),
        ("opencode", ".opencode/skills"),
    ] {
        v.push(Root {
            key,
            path: workspace.join(rel),
            scope: Scope::Workspace,
        });
    }
    v
}

/// One discovered skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub allowed_tools: Option<Vec<String>>,
    /// The skill's folder.
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub file: PathBuf,
    /// The root's key.
    pub root: &'static str,
    pub scope: Scope,
    /// The `SKILL.md` of the earlier skill of the same name, when this
    /// one is a shadowed duplicate.
    pub shadowed_by: Option<PathBuf>,
}

/// A `SKILL.md` (or a folder) that was found and not used, with why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub path: PathBuf,
    pub error: String,
}

/// What one root held (`doctor --json`'s `{path, present, count}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RootReport {
    pub path: PathBuf,
    pub present: bool,
    /// Valid skills found in it (shadowed ones included).
    pub count: usize,
}

/// Everything discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Discovery {
    /// Every valid skill in root order; the winners have no `shadowed_by`.
    pub skills: Vec<Skill>,
    pub problems: Vec<Problem>,
    /// Per root, by key, in root order.
    pub roots: Vec<(&'static str, RootReport)>,
}

impl Discovery {
    /// The skills in effect (not shadowed), in root order.
    pub fn active(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|s| s.shadowed_by.is_none())
    }

    /// The skill in effect called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.active().find(|s| s.name == name)
    }
}

/// Discover the skills of `roots`. `workspace` bounds the workspace roots
/// (anything resolving outside it is refused).
pub fn discover(roots: &[Root], workspace: &Path) -> Discovery {
    let ws_real = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut d = Discovery::default();
    let mut winner: HashMap<String, PathBuf> = HashMap::new();
    for root in roots {
        let mut report = RootReport {
            path: root.path.clone(),
            present: root.path.is_dir(),
            count: 0,
        };
        let entries = match std::fs::read_dir(&root.path) {
            Ok(e) => e,
            Err(_) => {
                d.roots.push((root.key, report));
                continue;
            }
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()))
            .map(|e| e.path())
            .collect();
        // Stable order inside a root: by folder name.
        dirs.sort();
        for dir in dirs {
            let file = dir.join("SKILL.md");
            match read_one(root, &dir, &file, &ws_real) {
                Ok(None) => {}
                Ok(Some(m)) => {
                    report.count += 1;
                    let shadowed_by = winner.get(&m.name).cloned();
                    if shadowed_by.is_none() {
                        winner.insert(m.name.clone(), file.clone());
                    }
                    d.skills.push(Skill {
                        name: m.name,
                        description: m.description,
                        allowed_tools: m.allowed_tools,
                        dir,
                        file,
                        root: root.key,
                        scope: root.scope,
                        shadowed_by,
                    });
                }
                Err(error) => d.problems.push(Problem { path: file, error }),
            }
        }
        d.roots.push((root.key, report));
    }
    d
}

/// One folder's manifest (`None`: not a skill folder, no `SKILL.md`).
fn read_one(
    root: &Root,
    dir: &Path,
    file: &Path,
    ws_real: &Path,
) -> Result<Option<Manifest>, String> {
    if !file.is_file() {
        return Ok(None);
    }
    if root.scope == Scope::Workspace {
        let real = std::fs::canonicalize(file).map_err(|e| e.to_string())?;
        if !real.starts_with(ws_real) {
            return Err(format!(
                "resolves outside the workspace ({}); a repository's skill is not read from elsewhere",
                real.display()
            ));
        }
    }
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MANIFEST_READ_CAP).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    let (m, _) = manifest::parse(&text).map_err(|e| e.to_string())?;
    let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if folder != m.name {
        return Err(format!(
            "name `{}` does not match its folder `{folder}` (the Agent Skills format requires it)",
            m.name
        ));
    }
    Ok(Some(m))
}
