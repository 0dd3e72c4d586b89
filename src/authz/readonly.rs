//! The read-only classifier: which shell commands run without asking in Ask.
//!
//! A command is read-only when *every* piece is: a known program from a
//! standard location, with no option that writes, executes or hands control
//! elsewhere (`find -exec`, `sort -o`, `sed -i`, `rg --pre`, `git -c`), no
//! redirection that writes a file, no privilege wrapper, no arguments read
//! from stdin, and nothing only known at run time. Anything else asks; the
//! classifier errs toward asking, never toward running.

use super::shell::{Analysis, Piece};

/// Programs that only read, whatever their (non-listed) options.
const ALWAYS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "printf",
    "true",
    "false",
    "which",
    "whereis",
    "type",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "cut",
    "tr",
    "diff",
    "cmp",
    "comm",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "whoami",
    "id",
    "uname",
    "test",
    "[",
    "nl",
    "od",
    "hexdump",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "jq",
    "grep",
    "egrep",
    "fgrep",
    "ag",
    "column",
    "fold",
    "expand",
    "rev",
    "tac",
    "seq",
    "sleep",
    "printenv",
    "env",
    "for",
    "[[",
    "cd",
    "pushd",
    "popd",
    "set",
    ":",
    "command",
    "wait",
    "groups",
    "locale",
    "nproc",
    "arch",
];

/// Options that make an otherwise read-only program write or execute.
const FORBIDDEN_OPTS: &[(&str, &[&str])] = &[
    (
        "find",
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
    ),
    ("sort", &["-o", "--output"]),
    ("rg", &["--pre", "--pre-glob"]),
    ("fd", &["-x", "--exec", "-X", "--exec-batch"]),
    ("date", &["-s", "--set"]),
    ("uniq", &[]),
    ("sed", &["-i", "--in-place", "-s", "--separate"]),
];

/// Environment prefixes that do not change what a program executes.
fn harmless_assignment(a: &str) -> bool {
    let name = a.split('=').next().unwrap_or("");
    name.starts_with("LC_")
        || matches!(
            name,
            "LANG"
                | "LANGUAGE"
                | "TZ"
                | "NO_COLOR"
                | "CLICOLOR"
                | "TERM"
                | "COLUMNS"
                | "LINES"
                | "RUST_BACKTRACE"
                | "RUST_LOG"
        )
}

/// Read-only `git` subcommands (with their own extra conditions below).
const GIT_READ: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "rev-parse",
    "ls-files",
    "ls-tree",
    "grep",
    "blame",
    "describe",
    "shortlog",
    "cat-file",
    "show-ref",
    "merge-base",
    "rev-list",
    "count-objects",
    "help",
    "version",
    "whatchanged",
    "name-rev",
    "for-each-ref",
    "check-ignore",
    "branch",
    "tag",
    "remote",
    "config",
    "reflog",
    "stash",
    "worktree",
];

/// Git global options that take a value as the next word.
const GIT_GLOBAL_ARG: &[&str] = &["-C", "-c", "--git-dir", "--work-tree", "--namespace"];

/// The subcommand of a git invocation and its index, skipping global options.
/// Returns `None` when there is none, and flags `-c`/`--exec-path`, which
/// can make git run arbitrary programs, through the bool.
pub fn git_subcommand(args: &[String]) -> (Option<(usize, &str)>, bool) {
    let mut risky = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if GIT_GLOBAL_ARG.contains(&a) {
            risky |= a == "-c";
            i += 2;
            continue;
        }
        if a.starts_with('-') {
            risky |= a.starts_with("--exec-path") || a.starts_with("--config-env");
            i += 1;
            continue;
        }
        return (Some((i, a)), risky);
    }
    (None, risky)
}

fn git_is_read_only(args: &[String]) -> bool {
    let (sub, risky) = git_subcommand(args);
    let Some((i, sub)) = sub else {
        return !risky; // `git` / `git --version`
    };
    if risky || !GIT_READ.contains(&sub) {
        return false;
    }
    let rest = &args[i + 1..];
    if rest
        .iter()
        .any(|a| a.starts_with("--output") || a == "--ext-diff")
    {
        return false;
    }
    let positional: Vec<&String> = rest.iter().filter(|a| !a.starts_with('-')).collect();
    match sub {
        "branch" => {
            positional.is_empty()
                && rest.iter().all(|a| {
                    matches!(
                        a.as_str(),
                        "-a" | "-r" | "-v" | "-vv" | "--list" | "-l" | "--show-current" | "--all"
                    )
                })
        }
        "tag" => rest.is_empty() || rest.iter().any(|a| a == "-l" || a == "--list"),
        "remote" => {
            positional.is_empty() || positional.first().is_some_and(|p| p.as_str() == "get-url")
        }
        "config" => rest.iter().any(|a| {
            matches!(
                a.as_str(),
                "--get" | "--get-all" | "--list" | "-l" | "--get-regexp"
            )
        }),
        "reflog" => positional.is_empty() || positional[0].as_str() == "show",
        "stash" | "worktree" => positional.first().is_some_and(|p| p.as_str() == "list"),
        _ => true,
    }
}

fn sed_is_read_only(args: &[String]) -> bool {
    // Scripts may write (`w`) or execute (`e`); accept only scripts without
    // those letters. Conservative: `s/hello/world/` asks.
    let mut i = 0;
    let mut script_seen = false;
    while i < args.len() {
        let a = &args[i];
        if a == "-e" || a == "--expression" {
            if args.get(i + 1).is_some_and(|s| s.contains(['w', 'W', 'e'])) {
                return false;
            }
            script_seen = true;
            i += 2;
            continue;
        }
        if a == "-f" || a.starts_with("--file") {
            return false; // a script file we cannot see
        }
        if !a.starts_with('-') && !script_seen {
            if a.contains(['w', 'W', 'e']) {
                return false;
            }
            script_seen = true;
        }
        i += 1;
    }
    true
}

/// Whether one piece only reads.
pub fn piece_is_read_only(p: &Piece) -> bool {
    if p.uncertain.is_some() || p.args_from_stdin || !p.program_is_standard() {
        return false;
    }
    if p.via
        .iter()
        .any(|v| v != "command" && v != "time" && v != "nice")
    {
        return false;
    }
    if p.redirects.iter().any(|r| r.writes_file()) {
        return false;
    }
    if !p.assignments.iter().all(|a| harmless_assignment(a)) {
        return false;
    }
    let prog = p.program();
    if prog.is_empty() {
        return true; // a bare input redirection or assignment
    }
    let args = p.args();
    if let Some((_, opts)) = FORBIDDEN_OPTS.iter().find(|(n, _)| *n == prog) {
        if args.iter().any(|a| {
            opts.iter()
                .any(|o| a == o || a.starts_with(&format!("{o}=")))
        }) {
            return false;
        }
    }
    match prog {
        "git" => git_is_read_only(args),
        "sed" => sed_is_read_only(args),
        "rg" | "fd" | "find" | "sort" => true,
        // `uniq IN OUT` writes OUT.
        "uniq" => args.iter().filter(|a| !a.starts_with('-')).count() <= 1,
        "date" => true,
        "hostname" => args.is_empty(),
        "command" => args.iter().any(|a| a == "-v" || a == "-V"),
        "env" | "printenv" => true,
        _ => ALWAYS.contains(&prog),
    }
}

/// Whether a whole analysed command only reads (every piece, nothing unknown).
pub fn is_read_only(a: &Analysis) -> bool {
    a.failure.is_none() && !a.pieces.is_empty() && a.pieces.iter().all(piece_is_read_only)
}

/// Build and test commands the deterministic Auto-Review layer approves
/// *when they run inside the OS sandbox* (no network, workspace-only writes):
/// they execute project code, but the sandbox bounds what that code can do.
pub fn piece_is_sandboxed_build(p: &Piece) -> bool {
    if p.uncertain.is_some() || p.args_from_stdin || !p.via.is_empty() {
        return false;
    }
    if p.redirects.iter().any(|r| r.writes_file()) {
        return false;
    }
    let args = p.args();
    let sub = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str);
    match p.program() {
        "cargo" => matches!(
            sub,
            Some("build" | "check" | "test" | "clippy" | "fmt" | "doc" | "bench" | "nextest")
        ),
        "npm" | "pnpm" | "yarn" => {
            matches!(sub, Some("test" | "run"))
                && args
                    .iter()
                    .filter(|a| !a.starts_with('-'))
                    .nth(1)
                    .is_none_or(|s| {
                        matches!(
                            s.as_str(),
                            "test" | "lint" | "build" | "check" | "typecheck"
                        )
                    })
        }
        "go" => matches!(sub, Some("build" | "test" | "vet")),
        "make" => true,
        "pytest" | "tsc" | "eslint" => true,
        "python" | "python3" => {
            args.first().is_some_and(|a| a == "-m") && args.get(1).is_some_and(|m| m == "pytest")
        }
        _ => false,
    }
}
