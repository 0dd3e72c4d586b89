//! Loading one skill for the model: the body of its `SKILL.md` (after the
//! front matter) and the list of the files beside it.
//!
//! The caller reads the file (the agent reads it through its file guard,
//! so a `SKILL.md` swapped for a link to a secret is refused); this module
//! only shapes the answer and lists the folder, bounded.

use super::{manifest, Skill};
use std::path::{Path, PathBuf};

/// Files listed for one skill, at most.
pub const FILES_CAP: usize = 200;
/// Folder depth listed below the skill's folder.
pub const DEPTH_CAP: usize = 4;

/// The files of a skill's folder, relative to it, sorted; `SKILL.md`
/// excluded; symlinks listed but not followed; whether the list was cut.
pub fn files(dir: &Path) -> (Vec<PathBuf>, bool) {
    let mut out = Vec::new();
    let mut cut = false;
    walk(dir, dir, 0, &mut out, &mut cut);
    out.sort();
    (out, cut)
}

fn walk(base: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>, cut: &mut bool) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if out.len() >= FILES_CAP {
            *cut = true;
            return;
        }
        let p = e.path();
        let Ok(rel) = p.strip_prefix(base) else {
            continue;
        };
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            if depth + 1 < DEPTH_CAP {
                walk(base, &p, depth + 1, out, cut);
            } else {
                *cut = true;
            }
        } else if rel != Path::new("SKILL.md") {
            out.push(rel.to_path_buf());
        }
    }
}

/// The text the `skill` tool returns: the instructions, where the files
/// are, and (when it lists `allowed-tools`) that a skill never widens
/// this run's tools.
pub fn answer(skill: &Skill, skill_md: &str) -> String {
    let body = manifest::split(skill_md)
        .map(|(_, b)| b)
        .unwrap_or(skill_md);
    let (files, cut) = files(&skill.dir);
    let mut s = format!(
        "# Skill `{}`\n\nFolder: {}\n\n{}",
        skill.name,
        skill.dir.display(),
        body.trim()
    );
    if let Some(tools) = &skill.allowed_tools {
        s.push_str(&format!(
            "\n\n[codewhale: this skill lists `allowed-tools` {}; a skill never widens this run's \
tools: only the tools offered to you can be used]",
            tools.join(", ")
        ));
    }
    if files.is_empty() {
        s.push_str("\n\nFiles: none besides SKILL.md.");
    } else {
        s.push_str(
            "\n\nFiles (relative to the folder; read them with the file tools when needed):",
        );
        for f in &files {
            s.push_str(&format!("\n- {}", f.display()));
        }
        if cut {
            s.push_str(&format!(
                "\n[codewhale: list cut at {FILES_CAP} files or depth {DEPTH_CAP}]"
            ));
        }
    }
    s
}
