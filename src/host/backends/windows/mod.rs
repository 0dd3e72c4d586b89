//! Windows: no OS sandbox, flagged and never silent.
//!
//! codewhale has no sandbox backend on Windows. What to do there is the
//! host's pure selection (`host::select`, tested for every OS):
//! `read-only` / `workspace-write` refuse with exit 125 unless the user
//! passed `--allow-unsandboxed`, and every run that goes ahead is labelled
//! `unsandboxed`. Only the spawn step (`spawn.rs`) is Windows-only.
//!
//! The environment is still scrubbed of secrets: that protection does not
//! need an OS sandbox.

#[cfg(windows)]
mod spawn;
#[cfg(windows)]
pub use spawn::run;

/// What `doctor` (and every refusal) says about Windows.
pub const NO_SANDBOX_NOTICE: &str =
    "no OS sandbox on Windows: commands are protected only by approval prompts and repository rules";

/// The prefix that switches `cmd.exe`'s code page to UTF-8 for the command.
pub const CMD_UTF8_PREFIX: &str = "chcp 65001>nul & ";
/// The prefix that makes PowerShell read and write UTF-8.
pub const POWERSHELL_UTF8_PREFIX: &str =
    "[Console]::OutputEncoding=[System.Text.Encoding]::UTF8; $OutputEncoding=[System.Text.Encoding]::UTF8; ";

/// Which shell an argv starts, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WinShell {
    Cmd,
    PowerShell,
}

fn program_stem(p: &str) -> String {
    let name = p
        .rsplit(['\\', '/'])
        .next()
        .unwrap_or(p)
        .to_ascii_lowercase();
    name.strip_suffix(".exe").unwrap_or(&name).to_string()
}

/// A command prepared for Windows: `args` are quoted normally; `raw_tail`,
/// when present, is appended verbatim (cmd.exe parses its own command line,
/// and Rust's MSVC-style quoting would garble it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WinCommand {
    pub program: String,
    pub args: Vec<String>,
    pub raw_tail: Option<String>,
    pub shell: Option<WinShell>,
}

/// Add a UTF-8 prefix where a shell would otherwise use the legacy code
/// page: `cmd /c …` and `powershell|pwsh -Command …`. Other programs run
/// unchanged (they write bytes; codewhale decodes output as UTF-8).
pub fn utf8_command(argv: &[String]) -> Option<WinCommand> {
    let (program, rest) = argv.split_first()?;
    let stem = program_stem(program);
    let plain = || WinCommand {
        program: program.clone(),
        args: rest.to_vec(),
        raw_tail: None,
        shell: None,
    };
    if stem == "cmd" {
        let Some(i) = rest
            .iter()
            .position(|a| a.eq_ignore_ascii_case("/c") || a.eq_ignore_ascii_case("/k"))
        else {
            return Some(plain());
        };
        return Some(WinCommand {
            program: program.clone(),
            args: rest[..=i].to_vec(),
            raw_tail: Some(format!("{CMD_UTF8_PREFIX}{}", rest[i + 1..].join(" "))),
            shell: Some(WinShell::Cmd),
        });
    }
    if stem == "powershell" || stem == "pwsh" {
        let Some(i) = rest.iter().position(|a| {
            let a = a.to_ascii_lowercase();
            a == "-command" || a == "-c"
        }) else {
            return Some(plain());
        };
        let mut args = rest[..=i].to_vec();
        args.push(format!(
            "{POWERSHELL_UTF8_PREFIX}{}",
            rest[i + 1..].join(" ")
        ));
        return Some(WinCommand {
            program: program.clone(),
            args,
            raw_tail: None,
            shell: Some(WinShell::PowerShell),
        });
    }
    Some(plain())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cmd_gets_a_raw_utf8_tail() {
        let c = utf8_command(&v(&[
            "C:\\Windows\\System32\\CMD.EXE",
            "/d",
            "/C",
            "echo",
            "h\u{e9}",
        ]))
        .expect("cmd");
        assert_eq!(c.shell, Some(WinShell::Cmd));
        assert_eq!(c.args, v(&["/d", "/C"]));
        assert_eq!(c.raw_tail.as_deref(), Some("chcp 65001>nul & echo h\u{e9}"));
    }

    #[test]
    fn powershell_gets_an_encoding_prefix() {
        let c =
            utf8_command(&v(&["pwsh", "-NoProfile", "-Command", "Write-Output", "x"])).expect("ps");
        assert_eq!(c.shell, Some(WinShell::PowerShell));
        assert_eq!(c.args[..2], v(&["-NoProfile", "-Command"])[..]);
        assert!(c.args[2].starts_with(POWERSHELL_UTF8_PREFIX));
        assert!(c.args[2].ends_with("Write-Output x"));
        assert_eq!(c.raw_tail, None);
    }

    #[test]
    fn other_programs_and_bare_shells_are_unchanged() {
        let c = utf8_command(&v(&["git", "status"])).expect("git");
        assert_eq!((c.args, c.raw_tail, c.shell), (v(&["status"]), None, None));
        let c = utf8_command(&v(&["cmd"])).expect("cmd");
        assert_eq!(c.raw_tail, None);
        assert!(utf8_command(&[]).is_none());
    }
}
