//! `codewhale import claude`: what Claude Code already knows, as a
//! proposal for codewhale's own files, applied only when a person says so.
//!
//! Read (formats as Claude Code documents them: "Settings", "Configure
//! permissions", "Connect Claude Code to tools via MCP"):
//! - `~/.claude/settings.json`: `model` → `config.toml`; `permissions.allow`,
//!   `ask` and `deny` → `permissions.toml` rules ([`rules`]); every other
//!   key is listed as not imported.
//! - `~/.claude.json`: `mcpServers` (user scope) and
//!   `projects[WORKSPACE].mcpServers` (local scope) → `mcp.json`;
//! - the workspace's `.mcp.json` (project scope, from the repository):
//!   proposed **disabled** and marked as coming from the repository;
//! - the workspace's `CLAUDE.md`: `project_instruction_imports`.
//!
//! A server's `env` value is never copied: it becomes `${KEY}` (expanded
//! from codewhale's environment at the server's start, docs/MCP.md) and
//! the proposal names the variable to set. Values that already are
//! `${VAR}` references stay as they are.

pub mod rules;

use crate::authz::rules::Action;
use crate::mcp::config::{self as mcp_config, McpFile, ServerEntry};
use rules::NewRule;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error(transparent)]
    Mcp(#[from] crate::mcp::config::McpConfigError),
}

/// Where the files are.
#[derive(Clone, Debug)]
pub struct Locations {
    /// The user's home (`~/.claude`, `~/.claude.json`).
    pub home: PathBuf,
    pub codewhale_home: PathBuf,
    pub workspace: PathBuf,
}

/// A key set in `config.toml`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigChange {
    pub key: &'static str,
    pub value: toml::Value,
    pub from: String,
}

/// One server to add to `mcp.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewServer {
    pub name: String,
    pub entry: ServerEntry,
    pub from: PathBuf,
    /// From the workspace's `.mcp.json`: proposed disabled.
    pub from_repository: bool,
    /// Env keys carried by reference (`${KEY}`): set them for codewhale.
    pub by_reference: Vec<String>,
}

/// The whole proposal.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proposal {
    pub config: Vec<ConfigChange>,
    pub rules: Vec<NewRule>,
    pub servers: Vec<NewServer>,
    /// `(what, why)`.
    pub not_imported: Vec<(String, String)>,
    /// The files read.
    pub read: Vec<PathBuf>,
}

fn read_json(path: &Path) -> Result<Option<Value>, ImportError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|source| ImportError::Json {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ImportError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Claude model aliases (not model ids codewhale's providers know).
const ALIASES: &[&str] = &[
    "default",
    "opus",
    "sonnet",
    "haiku",
    "opusplan",
    "sonnet[1m]",
];

/// Build the proposal from the files at `loc` (nothing is written).
pub fn propose(loc: &Locations) -> Result<Proposal, ImportError> {
    let mut p = Proposal::default();
    let settings_path = loc.home.join(".claude/settings.json");
    if let Some(s) = read_json(&settings_path)? {
        p.read.push(settings_path.clone());
        settings(&mut p, &s, &settings_path, &loc.home);
    }
    let user_path = loc.home.join(".claude.json");
    if let Some(u) = read_json(&user_path)? {
        p.read.push(user_path.clone());
        servers(&mut p, u.get("mcpServers"), &user_path, false, "user scope");
        let ws = loc.workspace.to_string_lossy().into_owned();
        let local = u
            .get("projects")
            .and_then(|v| v.get(&ws))
            .and_then(|v| v.get("mcpServers"));
        servers(&mut p, local, &user_path, false, "local scope");
    }
    let repo_path = loc.workspace.join(".mcp.json");
    if let Some(r) = read_json(&repo_path)? {
        p.read.push(repo_path.clone());
        servers(
            &mut p,
            r.get("mcpServers"),
            &repo_path,
            true,
            "project scope",
        );
    }
    let claude_md = loc.workspace.join("CLAUDE.md");
    if claude_md.is_file() {
        p.read.push(claude_md.clone());
        p.config.push(ConfigChange {
            key: "project_instruction_imports",
            value: toml::Value::Array(vec![toml::Value::String("CLAUDE.md".into())]),
            from: format!(
                "{} exists (read as text for the model, with its @path includes)",
                claude_md.display()
            ),
        });
    }
    Ok(p)
}

fn settings(p: &mut Proposal, s: &Value, path: &Path, home: &Path) {
    let Some(obj) = s.as_object() else {
        p.not_imported
            .push((path.display().to_string(), "not a JSON object".into()));
        return;
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    for (k, v) in obj {
        match (k.as_str(), v) {
            ("model", Value::String(m)) if ALIASES.contains(&m.as_str()) => p.not_imported.push((
                format!("settings.json `model` = \"{m}\""),
                "a Claude Code alias, not a model id".into(),
            )),
            ("model", Value::String(m)) => p.config.push(ConfigChange {
                key: "model",
                value: toml::Value::String(m.clone()),
                from: format!("{} `model`", path.display()),
            }),
            ("permissions", Value::Object(perms)) => {
                for (pk, pv) in perms {
                    let action = match pk.as_str() {
                        "allow" => Action::Allow,
                        "ask" => Action::Ask,
                        "deny" => Action::Deny,
                        other => {
                            p.not_imported.push((
                                format!("settings.json `permissions.{other}`"),
                                "no codewhale equivalent in permissions.toml".into(),
                            ));
                            continue;
                        }
                    };
                    for r in pv
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                    {
                        match rules::translate(r, action, pk, Some(home), dir) {
                            Ok(v) => p.rules.extend(v),
                            Err(why) => {
                                p.not_imported.push((format!("permissions.{pk}: {r}"), why))
                            }
                        }
                    }
                }
            }
            (other, _) => p.not_imported.push((
                format!("settings.json `{other}`"),
                "not imported (only `model` and `permissions.allow|ask|deny` are)".into(),
            )),
        }
    }
}

fn servers(p: &mut Proposal, v: Option<&Value>, from: &Path, from_repository: bool, scope: &str) {
    let Some(map) = v.and_then(Value::as_object) else {
        return;
    };
    for (name, s) in map {
        let what = format!("MCP server `{name}` ({scope}, {})", from.display());
        let transport = s.get("type").and_then(Value::as_str).unwrap_or("stdio");
        if transport != "stdio" {
            p.not_imported.push((
                what,
                format!("a `{transport}` server: codewhale runs stdio servers only"),
            ));
            continue;
        }
        if mcp_config::check_name(name).is_err() {
            p.not_imported
                .push((what, "its name is not a valid codewhale server name".into()));
            continue;
        }
        let Some(command) = s.get("command").and_then(Value::as_str) else {
            p.not_imported.push((what, "no `command`".into()));
            continue;
        };
        let args: Vec<String> = s
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        let mut entry = ServerEntry::new(command, args);
        let mut by_reference = Vec::new();
        for (k, val) in s
            .get("env")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let literal = val.as_str().unwrap_or_default();
            if literal.contains("${") {
                entry.env.insert(k.clone(), literal.to_string());
            } else {
                // The value is never copied: a reference to the same name.
                entry.env.insert(k.clone(), format!("${{{k}}}"));
                by_reference.push(k.clone());
            }
        }
        entry.enabled = !from_repository;
        if p.servers.iter().any(|x| x.name == *name) {
            p.not_imported.push((
                what,
                "a server of that name was already proposed (first wins)".into(),
            ));
            continue;
        }
        p.servers.push(NewServer {
            name: name.clone(),
            entry,
            from: from.to_path_buf(),
            from_repository,
            by_reference,
        });
    }
}

/// One of codewhale's files as the proposal would leave it.
#[derive(Clone, Debug, PartialEq)]
pub struct FileChange {
    pub path: PathBuf,
    /// Its text now (empty when it does not exist).
    pub old: String,
    /// Its text after `--apply`.
    pub new: String,
    /// What a person should know about the change (printed after its diff).
    pub notes: Vec<String>,
}

impl FileChange {
    fn read(path: PathBuf) -> Result<Self, ImportError> {
        let old = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(ImportError::Io { path, source }),
        };
        Ok(FileChange {
            new: old.clone(),
            path,
            old,
            notes: Vec::new(),
        })
    }
}

/// The text of `config.toml`, `permissions.toml` and `mcp.json` after the
/// proposal, computed from what they hold now: what [`render`] shows as
/// unified diffs and [`apply`] writes — the same bytes.
pub fn changes(p: &Proposal, loc: &Locations) -> Result<Vec<FileChange>, ImportError> {
    let mut cfg = FileChange::read(loc.codewhale_home.join("config.toml"))?;
    if !p.config.is_empty() {
        let toml_err = |e: toml_edit::TomlError| ImportError::Toml {
            path: cfg.path.clone(),
            message: e.to_string(),
        };
        let mut doc: toml_edit::DocumentMut = cfg.old.parse().map_err(toml_err)?;
        for c in &p.config {
            let v: toml_edit::Value = c.value.to_string().parse().map_err(toml_err)?;
            doc[c.key] = toml_edit::Item::Value(v);
            cfg.notes.push(format!("{} from {}", c.key, c.from));
        }
        cfg.new = doc.to_string();
    }
    let mut perms = FileChange::read(loc.codewhale_home.join("permissions.toml"))?;
    if !p.rules.is_empty() {
        if !perms.new.is_empty() && !perms.new.ends_with('\n') {
            perms.new.push('\n');
        }
        for r in &p.rules {
            perms.new.push('\n');
            perms.new.push_str(&r.toml());
        }
    }
    let mut mcp = FileChange::read(mcp_config::path(&loc.codewhale_home))?;
    if !p.servers.is_empty() {
        let mut doc = if mcp.old.is_empty() {
            McpFile::default()
        } else {
            mcp_config::parse(&mcp.path, &mcp.old)?
        };
        for sv in &p.servers {
            if doc.mcp_servers.contains_key(&sv.name) {
                mcp.notes
                    .push(format!("`{}` already there: kept as it is", sv.name));
                continue;
            }
            doc.mcp_servers.insert(sv.name.clone(), sv.entry.clone());
            if sv.from_repository {
                mcp.notes.push(format!(
                    "`{}` FROM THE REPOSITORY ({}): proposed disabled; read it before enabling (`\"enabled\": true`)",
                    sv.name,
                    sv.from.display()
                ));
            } else {
                mcp.notes
                    .push(format!("`{}` from {}", sv.name, sv.from.display()));
            }
            for k in &sv.by_reference {
                mcp.notes.push(format!(
                    "`{}` env {k}: carried by reference as ${{{k}}}; set {k} in codewhale's environment (the value was not copied)",
                    sv.name
                ));
            }
        }
        mcp.new = mcp_config::to_text(&mcp.path, &doc)?;
    }
    Ok(vec![cfg, perms, mcp])
}

/// The proposal as a unified diff per file (diffy; the one diff crate
/// already in the tree), then its notes and what is not imported. No
/// secret value appears: none was ever read into it.
pub fn render(p: &Proposal, loc: &Locations) -> Result<String, ImportError> {
    let mut s = String::from(
        "codewhale import claude: PROPOSAL (nothing written; `codewhale import claude --apply` writes it)\n",
    );
    for r in &p.read {
        s.push_str(&format!("read: {}\n", r.display()));
    }
    for c in changes(p, loc)? {
        let name = c.path.display().to_string();
        s.push('\n');
        if c.old == c.new {
            s.push_str(&format!("--- {name}\n  (no change)\n"));
        } else {
            let (from, to) = if c.old.is_empty() {
                ("/dev/null".to_string(), name.clone())
            } else {
                (name.clone(), name.clone())
            };
            let patch = diffy::DiffOptions::new()
                .set_original_filename(from)
                .set_modified_filename(to)
                .create_patch(&c.old, &c.new);
            s.push_str(&patch.to_string());
        }
        for n in &c.notes {
            s.push_str(&format!("# {n}\n"));
        }
    }
    if !p.not_imported.is_empty() {
        s.push_str("\nnot imported:\n");
        for (what, why) in &p.not_imported {
            s.push_str(&format!("- {what}: {why}\n"));
        }
    }
    Ok(s)
}

/// Write the proposal: exactly the files [`render`] showed, as it showed
/// them (keys set in `config.toml` keeping its other text, rules appended
/// to `permissions.toml`, servers added to `mcp.json` — one already there
/// is kept and named in the result).
pub fn apply(p: &Proposal, loc: &Locations) -> Result<Vec<String>, ImportError> {
    let mut done = Vec::new();
    std::fs::create_dir_all(&loc.codewhale_home).map_err(|source| ImportError::Io {
        path: loc.codewhale_home.clone(),
        source,
    })?;
    for c in changes(p, loc)? {
        if c.old != c.new {
            write_atomic(&c.path, c.new.as_bytes())?;
            done.push(format!("{}: written", c.path.display()));
        }
        for n in c.notes.iter().filter(|n| n.contains("already there")) {
            done.push(format!("{}: {n}", c.path.display()));
        }
    }
    Ok(done)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ImportError> {
    let io = |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}
