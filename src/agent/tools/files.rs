//! `read_file`, `list_dir`, `search`, `write_file`, `edit_file`: in-process,
//! every path checked by the guard first.

use super::guard::FsGuard;
use super::{arg_str, ToolOutput};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// Largest file `read_file` and `search` open.
const MAX_READ: u64 = 4 * 1024 * 1024;
/// Matches `search` returns.
const MAX_MATCHES: usize = 200;

type R = Result<ToolOutput, ToolOutput>;

fn io_err(path: &Path, e: std::io::Error) -> ToolOutput {
    let cat = match e.kind() {
        std::io::ErrorKind::NotFound => "not_found",
        std::io::ErrorKind::PermissionDenied => "permission_denied",
        _ => "io",
    };
    ToolOutput::error(cat, format!("{}: {e}", path.display()))
}

fn read_text(path: &Path) -> Result<String, ToolOutput> {
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
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
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    String::from_utf8(bytes)
        .map_err(|_| ToolOutput::error("binary", format!("{}: not UTF-8 text", path.display())))
}

pub fn read_file(args: &Value, g: &FsGuard) -> R {
    let raw = arg_str(args, "path")?;
    let path = g.check_read(raw)?;
    let text = read_text(&path)?;
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
        let Ok(real) = g.check_read(p) else {
            withheld += 1;
            continue;
        };
        let Ok(text) = read_text(&real) else {
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

fn write_all(path: &Path, content: &str) -> Result<(), ToolOutput> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    std::fs::write(path, content).map_err(|e| io_err(path, e))
}

pub fn write_file(args: &Value, g: &FsGuard) -> R {
    let raw = arg_str(args, "path")?;
    let content = arg_str(args, "content")?;
    let path = g.check_write(raw)?;
    write_all(&path, content)?;
    Ok(ToolOutput::ok(format!("wrote {} bytes to {raw}", content.len())).touched(path))
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
    // Both checks: editing needs to read the file and to write it.
    g.check_read(raw)?;
    let path = g.check_write(raw)?;
    let text = read_text(&path)?;
    match text.matches(old).count() {
        0 => Err(ToolOutput::error(
            "no_match",
            format!("{raw}: old_string not found; nothing changed (read the file and copy the text exactly)"),
        )),
        1 => {
            write_all(&path, &text.replacen(old, new, 1))?;
            Ok(ToolOutput::ok(format!("edited {raw}")).touched(path))
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
