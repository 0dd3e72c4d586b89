//! `read_file`, `list_dir`, `search`, `write_file`, `edit_file`: in-process,
//! every path checked by the guard first.

use super::guard::{FsGuard, OpenError, Opened, WriteOpen};
use super::{arg_str, ToolOutput};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Largest file `read_file` and `search` open.
const MAX_READ: u64 = 4 * 1024 * 1024;
/// Matches `search` returns.
const MAX_MATCHES: usize = 200;

type R = Result<ToolOutput, ToolOutput>;

fn io_err(path: &Path, e: std::io::Error) -> ToolOutput {
    super::io_error(path, e)
}

/// The whole text of an opened file (size-capped, UTF-8).
fn read_text(o: &mut Opened) -> Result<String, ToolOutput> {
    let path = o.path.clone();
    let meta = o.file.metadata().map_err(|e| io_err(&path, e))?;
    if meta.len() > MAX_READ {
        return Err(ToolOutput::error(
            "too_large",
            format!(
                "{}: {} bytes is over the {MAX_READ}-byte limit",
                path.display(),
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    (&mut o.file)
        .take(MAX_READ + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(&path, e))?;
    String::from_utf8(bytes)
        .map_err(|_| ToolOutput::error("binary", format!("{}: not UTF-8 text", path.display())))
}

/// Replace an opened file's contents (the open never truncates: see
/// [`WriteOpen`]).
fn replace_contents(o: &mut Opened, content: &str) -> Result<(), ToolOutput> {
    let path = o.path.clone();
    o.file.set_len(0).map_err(|e| io_err(&path, e))?;
    o.file
        .seek(SeekFrom::Start(0))
        .map_err(|e| io_err(&path, e))?;
    o.file
        .write_all(content.as_bytes())
        .map_err(|e| io_err(&path, e))
}

pub fn read_file(args: &Value, g: &FsGuard) -> R {
    let raw = arg_str(args, "path")?;
    let mut opened = g.open_read(raw)?;
    let text = read_text(&mut opened)?;
    let offset = args
        .get("offset")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1) as usize;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map(|l| l as usize);
    if offset == 1 && limit.is_none() {
        return Ok(ToolOutput::ok(text));
    }
    let lines = text.lines().skip(offset - 1);
    let out: Vec<&str> = match limit {
        Some(l) => lines.take(l).collect(),
        None => lines.collect(),
    };
    Ok(ToolOutput::ok(out.join("\n")))
}

pub fn list_dir(args: &Value, g: &FsGuard) -> R {
    let raw = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let path = g.check_read(raw)?;
    let rd = std::fs::read_dir(&path).map_err(|e| io_err(&path, e))?;
    let mut names: Vec<String> = rd
        .flatten()
        .map(|d| {
            let mut n = d.file_name().to_string_lossy().into_owned();
            if d.file_type().is_ok_and(|t| t.is_dir()) {
                n.push('/');
            }
            n
        })
        .collect();
    names.sort();
    Ok(ToolOutput::ok(names.join("\n")))
}

pub fn search(args: &Value, g: &FsGuard) -> R {
    let pattern = arg_str(args, "pattern")?;
    let re = regex::Regex::new(pattern)
        .map_err(|e| ToolOutput::error("bad_arguments", format!("pattern: {e}")))?;
    let root_raw = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let root = g.check_read(root_raw)?;
    let mut walk = ignore::WalkBuilder::new(&root);
    if let Some(glob) = args.get("glob").and_then(Value::as_str) {
        let mut ob = ignore::overrides::OverrideBuilder::new(&root);
        ob.add(glob)
            .map_err(|e| ToolOutput::error("bad_arguments", format!("glob: {e}")))?;
        let ov = ob
            .build()
            .map_err(|e| ToolOutput::error("bad_arguments", format!("glob: {e}")))?;
        walk.overrides(ov);
    }
    let mut out = String::new();
    let mut matches = 0usize;
    let mut withheld = 0usize;
    'files: for entry in walk.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(p) = entry.path().to_str() else {
            continue;
        };
        // The same read policy as read_file: denied files are skipped.
        let mut opened = match g.open_read(p) {
            Ok(o) => o,
            Err(OpenError::Denied(_)) => {
                withheld += 1;
                continue;
            }
            Err(OpenError::Io { .. }) => continue,
        };
        let Ok(text) = read_text(&mut opened) else {
            continue;
        };
        let shown = entry
            .path()
            .strip_prefix(g.workspace())
            .unwrap_or(entry.path());
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                let _ = writeln!(out, "{}:{}:{}", shown.display(), i + 1, line);
                matches += 1;
                if matches >= MAX_MATCHES {
                    let _ = writeln!(out, "[… stopped at {MAX_MATCHES} matches]");
                    break 'files;
                }
            }
        }
    }
    if withheld > 0 {
        let _ = writeln!(
            out,
            "[{withheld} file(s) skipped: unreadable under the sandbox policy]"
        );
    }
    if matches == 0 && withheld == 0 {
        out.push_str("no matches");
    }
    Ok(ToolOutput::ok(out))
}

/// How the diff names a file: relative to the workspace when inside it.
pub(super) fn shown_path(g: &FsGuard, p: &Path) -> String {
    p.strip_prefix(g.workspace())
        .unwrap_or(p)
        .display()
        .to_string()
}

pub fn write_file(args: &Value, g: &FsGuard) -> R {
    let raw = arg_str(args, "path")?;
    let content = arg_str(args, "content")?;
    let mut opened = g.open_write(raw, WriteOpen::Create)?;
    // The text it had (empty: new, or it was empty), for the diff; a file
    // too large or not text gets no diff.
    let before = read_text(&mut opened).ok();
    replace_contents(&mut opened, content)?;
    let diff = before.map(|b| {
        let old = (!b.is_empty()).then_some(b.as_str());
        super::edit_diff::file_diff(&shown_path(g, &opened.path), old, Some(content))
    });
    Ok(
        ToolOutput::ok(format!("wrote {} bytes to {raw}", content.len()))
            .with_diff(diff)
            .touched(opened.path),
    )
}

pub fn edit_file(args: &Value, g: &FsGuard) -> R {
    let raw = arg_str(args, "path")?;
    let old = arg_str(args, "old_string")?;
    let new = arg_str(args, "new_string")?;
    if old.is_empty() {
        return Err(ToolOutput::error(
            "bad_arguments",
            "old_string is empty; use write_file to create a file".into(),
        ));
    }
    // One handle for both: the text edited is the text of the file written
    // (the write rules include the read rules).
    let mut opened = g.open_write(raw, WriteOpen::Edit)?;
    let text = read_text(&mut opened)?;
    match text.matches(old).count() {
        0 => Err(ToolOutput::error(
            "no_match",
            format!("{raw}: old_string not found; nothing changed (read the file and copy the text exactly)"),
        )),
        1 => {
            let after = text.replacen(old, new, 1);
            replace_contents(&mut opened, &after)?;
            let diff = super::edit_diff::file_diff(
                &shown_path(g, &opened.path),
                Some(&text),
                Some(&after),
            );
            Ok(ToolOutput::ok(format!("edited {raw}"))
                .with_diff(Some(diff))
                .touched(opened.path))
        }
        n => Err(ToolOutput::error(
            "multiple_matches",
            format!("{raw}: old_string occurs {n} times; nothing changed (include more surrounding text so it is unique)"),
        )),
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "files_tests.rs"]
mod tests;

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "race_tests.rs"]
mod race_tests;
