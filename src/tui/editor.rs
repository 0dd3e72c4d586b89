//! The user's editor for a file the UI offers to edit (`/memory`):
//! `$VISUAL`, else `$EDITOR`, split like a shell word list (`code -w`),
//! given the file's path as its last argument and the terminal while it
//! runs. It is the user's own program started at their request, like
//! git's editor: not a tool call and not sandboxed.

use std::path::Path;

/// The editor command, if the environment names one.
pub fn command() -> Option<String> {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
}

/// Run the editor on `path` (its directory created first) and wait.
pub fn edit(path: &Path) -> Result<(), String> {
    let cmd = command().ok_or("neither $VISUAL nor $EDITOR is set")?;
    let argv = shlex::split(&cmd)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| format!("the editor command `{cmd}` cannot be split into words"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .arg(path)
        .status()
        .map_err(|e| format!("starting the editor `{cmd}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the editor `{cmd}` exited with {status}"))
    }
}
