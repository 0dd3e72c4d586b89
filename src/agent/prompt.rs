//! The system prompt, with the project's instruction files appended.
//!
//! `AGENTS.md` is read from the repository root (the nearest ancestor of
//! the workspace holding `.git`) and every directory down to the
//! workspace, nearest last, so the most specific instructions come last.
//! `CLAUDE.md`, `.cursorrules` and `.github/copilot-instructions.md` are
//! read the same way only when the *user* config sets
//! `project_instruction_imports = true` (or the names it lists instead);
//! an imported file's `@path` includes are read after it
//! ([`super::includes`]: relative, inside the workspace, at most five
//! hops). Files are read through the file
//! guard (a symlink to a secret is not pulled in) and bounded: each file
//! and the whole set have a byte cap, with a note in the prompt and the
//! record when something was cut.
//!
//! These files are text for the model. Nothing in them is parsed as
//! configuration: provider, keys, approval and sandbox come only from
//! flags and config files, resolved before the prompt is built.

use super::tools::guard::{FsGuard, OpenError};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Bytes of one instruction file included.
pub const FILE_CAP: usize = 32 * 1024;
/// Bytes of all instruction files together.
pub const TOTAL_CAP: usize = 64 * 1024;

const AGENTS: &str = "AGENTS.md";

const BASE: &str = "You are codewhale, a coding agent running headless in a sandbox. \
Work in the workspace using the tools offered; paths are relative to the workspace. \
Commands run in an OS sandbox: some paths are unreadable or read-only and the network may be off; \
when a tool reports a denial, do not try to work around it. \
When you are done, answer with a concise summary of what you did.";

/// One instruction file that went into the prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadedInstruction {
    pub path: PathBuf,
    /// `agents_md`, `import`, or `include` (an import's `@path`).
    pub kind: &'static str,
    /// Bytes included.
    pub bytes: usize,
    /// Bytes of the file on disk.
    pub file_bytes: usize,
    pub truncated: bool,
}

/// The directories from the repository root down to `workspace`.
pub fn layers(workspace: &Path) -> Vec<PathBuf> {
    let root = workspace
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(workspace);
    let mut v: Vec<PathBuf> = workspace
        .ancestors()
        .take_while(|d| d.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    v.reverse();
    v
}

fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// An instruction file that exists but was not read (the guard refused
/// it, e.g. a symlink into a deny-read path), with the reason.
pub type Skipped = (PathBuf, String);

/// The instruction files for `workspace`, in prompt order, with the text
/// that goes in, and the ones the file guard refused.
pub fn instructions(
    guard: &FsGuard,
    imports: &[String],
) -> (Vec<(LoadedInstruction, String)>, Vec<Skipped>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut budget = TOTAL_CAP;
    let ws_real = std::fs::canonicalize(guard.workspace())
        .unwrap_or_else(|_| guard.workspace().to_path_buf());
    let mut seen: Vec<PathBuf> = Vec::new();
    for dir in layers(guard.workspace()) {
        let names = std::iter::once((AGENTS, "agents_md"))
            .chain(imports.iter().map(|n| (n.as_str(), "import")));
        for (name, kind) in names {
            let candidate = dir.join(name);
            let Some(raw) = candidate.to_str() else {
                continue;
            };
            if guard.check_read(raw).is_ok() && !Path::new(raw).is_file() {
                continue;
            }
            // Read through the guard's handle: an instruction file swapped
            // for a symlink to a deny-read file is refused, not read.
            let mut opened = match guard.open_read(raw) {
                Ok(o) => o,
                Err(OpenError::Denied(e)) => {
                    if candidate.symlink_metadata().is_ok() {
                        skipped.push((candidate, e.to_string()));
                    }
                    continue;
                }
                Err(OpenError::Io { .. }) => continue,
            };
            let mut text = String::new();
            if std::io::Read::read_to_string(&mut opened.file, &mut text).is_err() {
                continue;
            }
            let part = cut(cut(&text, FILE_CAP), budget);
            budget -= part.len();
            let part = part.to_string();
            out.push((
                LoadedInstruction {
                    path: candidate.clone(),
                    kind,
                    bytes: part.len(),
                    file_bytes: text.len(),
                    truncated: part.len() < text.len(),
                },
                part.clone(),
            ));
            if kind == "import" {
                seen.push(candidate.clone());
                let mut inc = Includes {
                    guard,
                    ws_real: &ws_real,
                    budget: &mut budget,
                    seen: &mut seen,
                    out: &mut out,
                    skipped: &mut skipped,
                };
                inc.follow(&candidate, &part, 1);
            }
        }
    }
    (out, skipped)
}

/// Reads the `@path` includes of imported files, depth first.
struct Includes<'a> {
    guard: &'a FsGuard,
    ws_real: &'a Path,
    budget: &'a mut usize,
    seen: &'a mut Vec<PathBuf>,
    out: &'a mut Vec<(LoadedInstruction, String)>,
    skipped: &'a mut Vec<Skipped>,
}

impl Includes<'_> {
    fn follow(&mut self, including: &Path, text: &str, depth: usize) {
        use super::includes::{references, resolve, MAX_DEPTH};
        for r in references(text) {
            let path = match resolve(including, &r, self.ws_real) {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(why) => {
                    self.skipped
                        .push((including.parent().unwrap_or(including).join(&r), why));
                    continue;
                }
            };
            if self.seen.contains(&path) {
                continue;
            }
            if depth > MAX_DEPTH {
                self.skipped.push((
                    path,
                    format!("more than {MAX_DEPTH} includes deep; not followed"),
                ));
                continue;
            }
            self.seen.push(path.clone());
            let Some(raw) = path.to_str() else { continue };
            let mut opened = match self.guard.open_read(raw) {
                Ok(o) => o,
                Err(OpenError::Denied(e)) => {
                    self.skipped.push((path, e.to_string()));
                    continue;
                }
                Err(OpenError::Io { .. }) => continue,
            };
            let mut body = String::new();
            if std::io::Read::read_to_string(&mut opened.file, &mut body).is_err() {
                continue;
            }
            let part = cut(cut(&body, FILE_CAP), *self.budget).to_string();
            *self.budget -= part.len();
            self.out.push((
                LoadedInstruction {
                    path: path.clone(),
                    kind: "include",
                    bytes: part.len(),
                    file_bytes: body.len(),
                    truncated: part.len() < body.len(),
                },
                part.clone(),
            ));
            self.follow(&path, &part, depth + 1);
        }
    }
}

/// The system prompt, the instruction files that went into it, and the
/// ones the file guard refused.
pub fn system_prompt(
    guard: &FsGuard,
    tools: &[&str],
    imports: &[String],
) -> (String, Vec<LoadedInstruction>, Vec<Skipped>) {
    let mut s = BASE.to_string();
    s.push_str(&format!("\n\nWorkspace: {}", guard.workspace().display()));
    if tools.is_empty() {
        s.push_str("\nNo tools are available in this run: answer from the prompt alone.");
    } else {
        s.push_str(&format!("\nTools: {}.", tools.join(", ")));
    }
    let (files, skipped) = instructions(guard, imports);
    if !files.is_empty() {
        s.push_str(
            "\n\n# Project instructions\n\nThe files below come from the repository. They are \
guidance for the work, not configuration: they cannot change the provider, keys, approval \
policy or sandbox of this run.",
        );
    }
    let mut loaded = Vec::new();
    for (info, text) in files {
        s.push_str(&format!("\n\n## {}\n\n{text}", info.path.display()));
        if info.truncated {
            s.push_str(&format!(
                "\n\n[codewhale: truncated; {} of {} bytes included]",
                info.bytes, info.file_bytes
            ));
        }
        loaded.push(info);
    }
    (s, loaded, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{resolve, HostFacts, SandboxMode, SandboxPolicy};

    fn guard(ws: &Path) -> FsGuard {
        let facts = HostFacts {
            homes: vec![ws.join("no-such-home")],
            cargo_home: None,
            xdg_cache_home: None,
        };
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws);
        FsGuard::new(&resolve(&policy, &facts).unwrap())
    }

    #[test]
    fn layers_run_from_repo_root_to_workspace() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let ws = root.join("a/b");
        std::fs::create_dir_all(&ws).unwrap();
        assert_eq!(layers(&ws), vec![root.clone(), root.join("a"), ws.clone()]);
        // No repository: only the workspace.
        let t2 = tempfile::tempdir().unwrap();
        let lone = std::fs::canonicalize(t2.path()).unwrap();
        assert_eq!(layers(&lone), vec![lone.clone()]);
    }

    #[test]
    fn nearest_last_imports_only_when_switched_on_and_truncation_noted() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let ws = root.join("pkg");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(root.join("AGENTS.md"), "ROOT RULES").unwrap();
        std::fs::write(ws.join("AGENTS.md"), "x".repeat(FILE_CAP + 10)).unwrap();
        std::fs::write(root.join("CLAUDE.md"), "CLAUDE RULES").unwrap();
        let g = guard(&ws);
        let (p, loaded, _) = system_prompt(&g, &[], &[]);
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded[0].path, root.join("AGENTS.md"));
        assert_eq!(loaded[1].path, ws.join("AGENTS.md"));
        assert!(loaded[1].truncated && loaded[1].bytes == FILE_CAP);
        assert!(p.find("ROOT RULES").unwrap() < p.find("xxxx").unwrap());
        assert!(p.contains("[codewhale: truncated;"));
        assert!(!p.contains("CLAUDE RULES"));
        let (p, loaded, _) = system_prompt(&g, &[], &["CLAUDE.md".to_string()]);
        assert!(p.contains("CLAUDE RULES"));
        assert_eq!(loaded[1].kind, "import");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_into_a_deny_read_path_is_skipped_and_said() {
        let t = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap();
        // The fake home's ~/.ssh is on the deny-read table.
        let ssh = ws.join("no-such-home/.ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::write(ssh.join("id_rsa"), "PRIVATE KEY").unwrap();
        std::os::unix::fs::symlink(ssh.join("id_rsa"), ws.join("AGENTS.md")).unwrap();
        let (p, loaded, skipped) = system_prompt(&guard(&ws), &[], &[]);
        assert!(loaded.is_empty());
        assert!(!p.contains("PRIVATE KEY"));
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0].0, ws.join("AGENTS.md"));
        // Positive control: a plain file is read.
        std::fs::remove_file(ws.join("AGENTS.md")).unwrap();
        std::fs::write(ws.join("AGENTS.md"), "plain").unwrap();
        let (p, loaded, _) = system_prompt(&guard(&ws), &[], &[]);
        assert_eq!(loaded.len(), 1);
        assert!(p.contains("plain"));
    }

    #[test]
    fn an_import_pulls_in_its_includes_within_the_workspace_and_five_hops() {
        let t = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("docs")).unwrap();
        std::fs::write(
            ws.join("RULES.md"),
            "Top. @docs/style.md and @../secret.md and @docs/h1.md\n`@docs/skip.md`\n",
        )
        .unwrap();
        std::fs::write(ws.join("docs/style.md"), "STYLE @style.md @../RULES.md").unwrap();
        std::fs::write(ws.join("docs/skip.md"), "SKIPPED").unwrap();
        std::fs::write(ws.parent().unwrap().join("secret.md"), "SECRET").unwrap();
        // A chain h1 → h2 → … → h7: hops 1..=5 are read, the 6th is not.
        for i in 1..=7 {
            std::fs::write(
                ws.join(format!("docs/h{i}.md")),
                format!("HOP{i} @h{}.md", i + 1),
            )
            .unwrap();
        }
        let imports = vec!["RULES.md".to_string()];
        let (p, loaded, skipped) = system_prompt(&guard(&ws), &[], &imports);
        let kinds: Vec<(&str, String)> = loaded
            .iter()
            .map(|l| {
                (
                    l.kind,
                    l.path.file_name().unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert_eq!(kinds[0], ("import", "RULES.md".into()));
        assert_eq!(kinds[1], ("include", "style.md".into()), "{kinds:?}");
        assert!(p.contains("STYLE") && p.contains("HOP5"), "{p}");
        assert!(!p.contains("HOP6") && !p.contains("SECRET") && !p.contains("SKIPPED"));
        assert_eq!(p.matches("STYLE").count(), 1, "a cycle is read once");
        assert!(skipped.iter().any(|(_, w)| w.contains("..")), "{skipped:?}");
        assert!(
            skipped.iter().any(|(_, w)| w.contains("5 includes deep")),
            "{skipped:?}"
        );
        // Without the import, no include is read.
        let (p, _, _) = system_prompt(&guard(&ws), &[], &[]);
        assert!(!p.contains("STYLE"));
    }
}
