//! Shell command analysis: every simple command the shell would really run.
//!
//! [`analyze`] turns a command line into [`Piece`]s: one per simple command,
//! found through chains, pipelines, subshells, groups, command and process
//! substitution, here-document bodies, `sh -c`/`bash -c` payloads and
//! `eval` (recursively), with wrappers (`sudo`, `env`, `timeout`, `nohup`,
//! `nice`, `xargs`, `command`, `exec`, `time`, `stdbuf`, …) and `NAME=value`
//! prefixes peeled off and `/bin/rm` reduced to `rm`.
//!
//! Invariant: analysis never *loosens*. Anything it cannot model sets
//! [`Analysis::failure`] (the pipeline turns that into a hold), and a piece
//! whose program or payload is only known at run time is marked
//! [`Piece::uncertain`]. Bounds: [`parse::MAX_INPUT`] bytes,
//! [`parse::MAX_DEPTH`] nesting levels, [`parse::MAX_COMMANDS`] commands.

pub mod parse;
mod quote;
pub mod unwrap;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "roundtrip_tests.rs"]
mod roundtrip_tests;

use serde::Serialize;

/// One shell word after quote removal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Word {
    /// The text with quotes removed; expansions kept as written (`$HOME`,
    /// `${X}`) and substitutions as markers (`$(…)`, `` `…` ``, `<(…)`).
    pub text: String,
    /// Part of the value is only known at run time (an expansion).
    pub dynamic: bool,
    /// Some part was quoted or escaped (so it is not a reserved word).
    pub quoted: bool,
    /// Contains an unquoted glob character.
    pub glob: bool,
}

/// A redirection (`>`, `>>`, `<`, `<<`, `&>`, `2>&1`, …).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Redirect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fd: Option<String>,
    pub op: String,
    pub target: Word,
}

impl Redirect {
    /// Whether this redirection writes to a file (not an fd duplication).
    pub fn writes_file(&self) -> bool {
        let out = matches!(self.op.as_str(), ">" | ">>" | ">|" | "&>" | "&>>" | "<>");
        let dup = self.op == ">&" || self.op == "<&";
        (out || (dup && !is_fd_target(&self.target.text))) && self.target.text != "/dev/null"
    }

    /// Whether this redirection reads a file into the command.
    pub fn reads_file(&self) -> bool {
        matches!(self.op.as_str(), "<" | "<>")
    }
}

fn is_fd_target(t: &str) -> bool {
    t == "-" || (!t.is_empty() && t.chars().all(|c| c.is_ascii_digit()))
}

/// A simple command as parsed, before wrappers are peeled.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawCommand {
    pub assignments: Vec<Word>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    pub background: bool,
    pub pipeline: usize,
    pub pipe_index: usize,
    pub depth: usize,
}

/// One command the shell would run, with wrappers peeled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Piece {
    /// `argv[0]` reduced to its base name (`/bin/rm` → `rm`), then the arguments.
    pub argv: Vec<String>,
    /// `argv[0]` as written (to tell `cat` from `./cat`).
    pub program_as_written: String,
    /// Which arguments (same indices as `argv`) contain run-time expansions.
    pub dynamic: Vec<bool>,
    /// Arguments with unquoted globs (same indices as `argv`).
    pub glob: Vec<bool>,
    pub redirects: Vec<Redirect>,
    /// `NAME=value` prefixes (including those given to `env`).
    pub assignments: Vec<String>,
    /// Wrappers peeled to reach this piece, outermost first (`sudo`, `sh -c`, …).
    pub via: Vec<String>,
    /// Started with `&` (runs in the background).
    pub background: bool,
    /// Which pipeline it belongs to, and its position in it.
    pub pipeline: usize,
    pub pipe_index: usize,
    /// Reads further arguments from stdin (`xargs`).
    pub args_from_stdin: bool,
    /// Why analysis cannot know what this piece really runs, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncertain: Option<String>,
    /// Nesting depth (0 = top level).
    pub depth: usize,
}

impl Piece {
    /// The program's base name (empty for a bare assignment or redirection).
    pub fn program(&self) -> &str {
        self.argv.first().map(String::as_str).unwrap_or("")
    }

    /// Arguments after the program.
    pub fn args(&self) -> &[String] {
        self.argv.get(1..).unwrap_or(&[])
    }

    /// The piece as one display string.
    pub fn display(&self) -> String {
        let mut s = self.argv.join(" ");
        for r in &self.redirects {
            s.push(' ');
            if let Some(fd) = &r.fd {
                s.push_str(fd);
            }
            s.push_str(&r.op);
            s.push_str(&r.target.text);
        }
        s
    }

    /// Whether `argv[0]` was a bare name or a path in a standard system
    /// directory (so `cat` is the real `cat`, not `./cat`).
    pub fn program_is_standard(&self) -> bool {
        let w = &self.program_as_written;
        if !w.contains('/') {
            return true;
        }
        const DIRS: &[&str] = &[
            "/bin/",
            "/usr/bin/",
            "/usr/local/bin/",
            "/sbin/",
            "/usr/sbin/",
            "/opt/homebrew/bin/",
        ];
        DIRS.iter()
            .any(|d| w.strip_prefix(d).is_some_and(|rest| !rest.contains('/')))
    }
}

/// The result of analysing one command line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Analysis {
    pub pieces: Vec<Piece>,
    /// Why the line could not be fully analysed (a hold), if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Analysis {
    /// Whether every piece is fully known.
    pub fn is_certain(&self) -> bool {
        self.failure.is_none() && self.pieces.iter().all(|p| p.uncertain.is_none())
    }
}

/// Analyse a command line. Never panics; what it cannot model is reported
/// in [`Analysis::failure`] alongside every piece it did find.
pub fn analyze(command: &str) -> Analysis {
    let mut analysis = Analysis::default();
    let mut col = parse::Collector::default();
    if let Err(e) = parse::parse_into(command, 0, &mut col) {
        analysis.failure = Some(e);
    }
    let mut budget = parse::MAX_COMMANDS;
    for raw in col.commands {
        if let Err(e) = unwrap::expand(raw, Vec::new(), &mut analysis.pieces, &mut budget) {
            analysis.failure.get_or_insert(e);
        }
    }
    analysis
}

/// The base name of a program path (`/usr/bin/rm` → `rm`).
pub fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}
