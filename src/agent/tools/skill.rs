//! The `skill` tool: load one skill's instructions and the list of its
//! files (docs/SKILLS.md). A repository's skill is read through the file
//! guard (a `SKILL.md` swapped for a link to a secret is refused); a
//! user's own skill (`~/.codewhale/skills`, `~/.agents/skills`) is read
//! directly, since codewhale's home is deny-read for the guard.

use super::{arg_str, ToolContext, ToolOutput};
use crate::skills::{load, Scope};
use serde_json::Value;
use std::io::Read;

/// Bytes of a `SKILL.md` read.
pub const SKILL_READ_CAP: u64 = 256 * 1024;

/// Run the tool: `{"name": "..."}`.
pub fn run(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let name = arg_str(args, "name")?;
    let Some(skills) = &ctx.skills else {
        return Err(ToolOutput::error(
            "not_found",
            "no skills in this run".to_string(),
        ));
    };
    let Some(skill) = skills.get(name) else {
        let names: Vec<&str> = skills.usable().map(|s| s.name.as_str()).collect();
        return Err(ToolOutput::error(
            "not_found",
            format!(
                "no enabled skill `{name}`; the skills are: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        ));
    };
    let mut text = String::new();
    let read = match skill.scope {
        Scope::Workspace => {
            let raw = skill.file.to_string_lossy();
            let opened = ctx.guard.open_read(&raw)?;
            opened.file.take(SKILL_READ_CAP).read_to_string(&mut text)
        }
        Scope::User => std::fs::File::open(&skill.file)
            .and_then(|f| f.take(SKILL_READ_CAP).read_to_string(&mut text)),
    };
    read.map_err(|e| super::io_error(&skill.file, e))?;
    Ok(ToolOutput::ok(load::answer(skill, &text)))
}
