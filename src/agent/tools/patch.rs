//! `apply_patch`: a unified diff over one or more files, parsed and applied
//! with `diffy`. Every target path is checked before anything is written,
//! and nothing is written unless every hunk of every file applies.

use super::edit_diff::file_diff;
use super::guard::{FsGuard, WriteOpen};
use super::{arg_str, ToolOutput};
use serde_json::Value;
use std::io::{Read, Write};

type R = Result<ToolOutput, ToolOutput>;

/// One file's section of a multi-file diff.
struct Section {
    old: Option<String>,
    new: Option<String>,
    text: String,
}

fn header_path(line: &str, prefix: &str) -> Option<String> {
    let rest = line.strip_prefix(prefix)?.trim_end();
    let rest = rest.split('\t').next().unwrap_or(rest);
    if rest == "/dev/null" {
        return None;
    }
    Some(
        rest.strip_prefix("a/")
            .or_else(|| rest.strip_prefix("b/"))
            .unwrap_or(rest)
            .to_string(),
    )
}

fn split(patch: &str) -> Result<Vec<Section>, String> {
    let lines: Vec<&str> = patch.lines().collect();
    let mut out: Vec<Section> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ ")) {
            out.push(Section {
                old: header_path(l, "--- "),
                new: header_path(lines[i + 1], "+++ "),
                text: format!("{l}\n{}\n", lines[i + 1]),
            });
            i += 2;
            continue;
        }
        let git_meta = [
            "diff --git ",
            "index ",
            "new file mode",
            "deleted file mode",
        ];
        if git_meta.iter().any(|m| l.starts_with(m)) {
            i += 1;
            continue;
        }
        match out.last_mut() {
            Some(s) => {
                s.text.push_str(l);
                s.text.push('\n');
            }
            None if l.trim().is_empty() => {}
            None => {
                return Err(format!(
                    "line {}: text before the first `---`/`+++` header",
                    i + 1
                ))
            }
        }
        i += 1;
    }
    if out.is_empty() {
        return Err("no `---`/`+++` file headers found".into());
    }
    Ok(out)
}

enum Change {
    /// Target, new text, old text (`None`: created).
    Write(String, String, Option<String>),
    /// Target, old text.
    Delete(String, String),
}

pub fn apply_patch(args: &Value, g: &FsGuard) -> R {
    let patch = arg_str(args, "patch")?;
    let sections =
        split(patch).map_err(|e| ToolOutput::error("bad_patch", format!("patch: {e}")))?;
    let mut changes = Vec::new();
    for s in &sections {
        let target = s.new.as_ref().or(s.old.as_ref()).ok_or_else(|| {
            ToolOutput::error("bad_patch", "a file section names /dev/null twice".into())
        })?;
        // Every target is checked before anything is written; each open
        // below is checked again.
        g.check_write(target)?;
        let before = match &s.old {
            Some(old) => {
                let mut o = g.open_read(old)?;
                let mut text = String::new();
                o.file
                    .read_to_string(&mut text)
                    .map_err(|e| ToolOutput::error("not_found", format!("{old}: {e}")))?;
                Some(text)
            }
            None => None,
        };
        let base = before.clone().unwrap_or_default();
        let parsed = diffy::Patch::from_str(&s.text)
            .map_err(|e| ToolOutput::error("bad_patch", format!("{target}: {e}")))?;
        let applied = diffy::apply(&base, &parsed).map_err(|e| {
            ToolOutput::error(
                "patch_does_not_apply",
                format!("{target}: {e}; nothing was changed"),
            )
        })?;
        changes.push(if s.new.is_none() {
            Change::Delete(target.clone(), base)
        } else {
            Change::Write(target.clone(), applied, before)
        });
    }
    let mut out = ToolOutput::ok(String::new());
    let mut summary = Vec::new();
    let mut diffs = Vec::new();
    for c in changes {
        match c {
            Change::Write(target, text, before) => {
                let mut o = g.open_write(&target, WriteOpen::Create)?;
                let p = o.path.clone();
                let io =
                    |e: std::io::Error| ToolOutput::error("io", format!("{}: {e}", p.display()));
                o.file.set_len(0).map_err(io)?;
                o.file.write_all(text.as_bytes()).map_err(io)?;
                summary.push(format!("patched {}", p.display()));
                let shown = super::files::shown_path(g, &p);
                diffs.push(file_diff(&shown, before.as_deref(), Some(&text)));
                out = out.touched(o.path);
            }
            Change::Delete(target, before) => {
                let p = g.remove(&target)?;
                summary.push(format!("deleted {}", p.display()));
                diffs.push(file_diff(
                    &super::files::shown_path(g, &p),
                    Some(&before),
                    None,
                ));
                out = out.touched(p);
            }
        }
    }
    out.diff = Some(Box::new(diffs.concat()));
    out.content = summary.join("\n");
    Ok(out)
}
