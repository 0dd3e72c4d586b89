//! Peeling wrappers and re-parsing payloads: from a parsed simple command to
//! the [`Piece`]s that really run.
//!
//! `sudo -u x env A=1 timeout 5 nice -n 3 /bin/rm -rf /` is one piece whose
//! program is `rm`; `bash -lc 'a; b'` and `eval "a; b"` are two pieces each
//! (parsed recursively); `find . -exec rm {} +` yields `find` *and* `rm`.

use super::parse::{self, Collector};
use super::{base_name, Piece, RawCommand};

/// How one wrapper's options are shaped.
struct WrapperSpec {
    name: &'static str,
    /// Short options (single letters) that take a value.
    short_arg: &'static str,
    /// Long options that take a value as the next word (`--x=v` is handled generally).
    long_arg: &'static [&'static str],
    /// Positional words between the options and the wrapped command.
    positional: usize,
}

const WRAPPERS: &[WrapperSpec] = &[
    WrapperSpec {
        name: "sudo",
        short_arg: "ugCDhprtUTR",
        long_arg: &[
            "--user",
            "--group",
            "--close-from",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
        ],
        positional: 0,
    },
    WrapperSpec {
        name: "doas",
        short_arg: "uC",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "env",
        short_arg: "uCP",
        long_arg: &["--unset", "--chdir"],
        positional: 0,
    },
    WrapperSpec {
        name: "timeout",
        short_arg: "sk",
        long_arg: &["--signal", "--kill-after"],
        positional: 1,
    },
    WrapperSpec {
        name: "nice",
        short_arg: "n",
        long_arg: &["--adjustment"],
        positional: 0,
    },
    WrapperSpec {
        name: "nohup",
        short_arg: "",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "time",
        short_arg: "fo",
        long_arg: &["--format", "--output"],
        positional: 0,
    },
    WrapperSpec {
        name: "command",
        short_arg: "",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "builtin",
        short_arg: "",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "exec",
        short_arg: "a",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "stdbuf",
        short_arg: "ioe",
        long_arg: &["--input", "--output", "--error"],
        positional: 0,
    },
    WrapperSpec {
        name: "ionice",
        short_arg: "cnpPu",
        long_arg: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
        positional: 0,
    },
    WrapperSpec {
        name: "setsid",
        short_arg: "",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "chronic",
        short_arg: "",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "unbuffer",
        short_arg: "",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "caffeinate",
        short_arg: "tw",
        long_arg: &[],
        positional: 0,
    },
    WrapperSpec {
        name: "xargs",
        short_arg: "adEILnPs",
        long_arg: &[
            "--arg-file",
            "--delimiter",
            "--eof",
            "--replace",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        positional: 0,
    },
];

/// Shells whose `-c` payload is parsed as a command line.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "rbash",
];

/// Expand one parsed command into pieces (recursively), appending to `out`.
pub(crate) fn expand(
    raw: RawCommand,
    via: Vec<String>,
    out: &mut Vec<Piece>,
    budget: &mut usize,
) -> Result<(), String> {
    if *budget == 0 {
        return Err(format!("more than {} commands", parse::MAX_COMMANDS));
    }
    *budget -= 1;
    let mut piece = Piece {
        argv: raw.words.iter().map(|w| w.text.clone()).collect(),
        dynamic: raw.words.iter().map(|w| w.dynamic).collect(),
        glob: raw.words.iter().map(|w| w.glob).collect(),
        redirects: raw.redirects,
        assignments: raw.assignments.iter().map(|w| w.text.clone()).collect(),
        via,
        background: raw.background,
        pipeline: raw.pipeline,
        pipe_index: raw.pipe_index,
        depth: raw.depth,
        ..Piece::default()
    };
    peel(&mut piece, out, budget)
}

/// Drop the first `n` words of `piece`.
fn drop_front(piece: &mut Piece, n: usize) {
    let n = n.min(piece.argv.len());
    piece.argv.drain(..n);
    piece.dynamic.drain(..n);
    piece.glob.drain(..n);
}

fn peel(piece: &mut Piece, out: &mut Vec<Piece>, budget: &mut usize) -> Result<(), String> {
    // Bounded: every iteration removes at least one word.
    loop {
        let Some(first) = piece.argv.first().cloned() else {
            out.push(std::mem::take(piece));
            return Ok(());
        };
        if piece.dynamic.first().copied().unwrap_or(false) {
            piece.uncertain = Some(format!("the program `{first}` is only known at run time"));
        }
        let name = base_name(&first).to_string();
        if name == "busybox" && piece.argv.len() > 1 {
            piece.via.push("busybox".into());
            drop_front(piece, 1);
            continue;
        }
        if SHELLS.contains(&name.as_str()) {
            if let Some(payload_idx) = shell_payload(&piece.argv)? {
                let payload = piece.argv[payload_idx].clone();
                let dynamic = piece.dynamic[payload_idx];
                return reparse(piece, &format!("{name} -c"), &payload, dynamic, out, budget);
            }
        }
        if SHELLS.contains(&name.as_str())
            && (piece.pipe_index > 0 || piece.redirects.iter().any(|r| r.op.starts_with("<<")))
            && piece.args().iter().all(|a| a.starts_with('-'))
        {
            piece.uncertain = Some(format!("`{name}` runs commands read from stdin"));
        }
        if name == "git"
            && piece
                .argv
                .windows(2)
                .any(|w| w[0] == "-c" && w[1].to_ascii_lowercase().starts_with("alias."))
        {
            piece.uncertain = Some("a git alias defined on the command line".into());
        }
        if name == "eval" {
            let payload = piece.args().join(" ");
            let dynamic = piece.dynamic.iter().skip(1).any(|d| *d);
            return reparse(piece, "eval", &payload, dynamic, out, budget);
        }
        if name == "watch" {
            if let Some(i) = skip_options(&piece.argv, "ngd", &["--interval"], 0) {
                let payload = piece.argv[i..].join(" ");
                let dynamic = piece.dynamic[i..].iter().any(|d| *d);
                return reparse(piece, "watch", &payload, dynamic, out, budget);
            }
        }
        if name == "find" {
            find_exec(piece, out, budget)?;
        }
        if name == "command" && piece.args().iter().any(|a| a == "-v" || a == "-V") {
            break; // a query, not a run
        }
        if name == "env" {
            if let Some(pos) = piece
                .argv
                .iter()
                .position(|a| a == "-S" || a.starts_with("--split-string"))
            {
                let mut rest: Vec<String> = piece.argv[pos + 1..].to_vec();
                if let Some(v) = piece.argv[pos].strip_prefix("--split-string=") {
                    rest.insert(0, v.to_string());
                }
                let dynamic = piece.dynamic.iter().any(|d| *d);
                return reparse(piece, "env -S", &rest.join(" "), dynamic, out, budget);
            }
        }
        let Some(spec) = WRAPPERS.iter().find(|w| w.name == name) else {
            break;
        };
        let Some(mut start) =
            skip_options(&piece.argv, spec.short_arg, spec.long_arg, spec.positional)
        else {
            break; // the wrapper alone (`env`, `sudo -i`, `xargs` reading stdin)
        };
        if name == "env" {
            while start < piece.argv.len() && parse::is_assignment(&piece.argv[start]) {
                piece.assignments.push(piece.argv[start].clone());
                start += 1;
            }
            if start >= piece.argv.len() {
                break;
            }
        }
        if name == "xargs" {
            piece.args_from_stdin = true;
        }
        piece.via.push(name);
        drop_front(piece, start);
    }
    if let Some(first) = piece.argv.first_mut() {
        piece.program_as_written = first.clone();
        *first = base_name(first).to_string();
    }
    out.push(std::mem::take(piece));
    Ok(())
}

/// Parse `payload` as a command line nested under `wrapper`.
fn reparse(
    piece: &mut Piece,
    wrapper: &str,
    payload: &str,
    dynamic: bool,
    out: &mut Vec<Piece>,
    budget: &mut usize,
) -> Result<(), String> {
    let mut via = piece.via.clone();
    via.push(wrapper.to_string());
    if !piece.redirects.is_empty() || dynamic {
        // Keep the wrapper's own redirections (they write files) and record
        // that the payload is only partly known.
        out.push(Piece {
            argv: Vec::new(),
            redirects: std::mem::take(&mut piece.redirects),
            via: via.clone(),
            background: piece.background,
            pipeline: piece.pipeline,
            pipe_index: piece.pipe_index,
            depth: piece.depth,
            uncertain: dynamic
                .then(|| format!("the `{wrapper}` payload is only known at run time")),
            ..Piece::default()
        });
    }
    let mut col = Collector::default();
    let result = parse::parse_into(payload, piece.depth + 1, &mut col);
    for mut raw in col.commands {
        raw.background |= piece.background;
        raw.pipeline = piece.pipeline;
        raw.pipe_index = piece.pipe_index;
        let mut inner_via = via.clone();
        inner_via.shrink_to_fit();
        expand(raw, inner_via, out, budget)?;
    }
    result.map_err(|e| format!("in the `{wrapper}` payload: {e}"))
}

/// For a shell invocation, the index of its `-c` payload (None: not `-c`).
fn shell_payload(argv: &[String]) -> Result<Option<usize>, String> {
    let mut has_c = false;
    let mut i = 1;
    while i < argv.len() {
        let a = &argv[i];
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file"
        {
            i += 2;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            if a.starts_with('-') && a.contains('c') {
                has_c = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    if !has_c {
        return Ok(None);
    }
    if i < argv.len() {
        Ok(Some(i))
    } else {
        Err(format!("`{} -c` without a command string", argv[0]))
    }
}

/// Index of the wrapped command after a wrapper's options, if any.
fn skip_options(
    argv: &[String],
    short_arg: &str,
    long_arg: &[&str],
    positional: usize,
) -> Option<usize> {
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let takes = !long.contains('=') && long_arg.contains(&a);
            i += if takes { 2 } else { 1 };
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let cluster: Vec<char> = a[1..].chars().collect();
            let mut consumed_next = false;
            for (k, c) in cluster.iter().enumerate() {
                if short_arg.contains(*c) {
                    consumed_next = k + 1 == cluster.len();
                    break;
                }
            }
            i += if consumed_next { 2 } else { 1 };
            continue;
        }
        break;
    }
    let start = i + positional;
    (start < argv.len()).then_some(start)
}

/// `find … -exec CMD … ;` / `+`: the nested command is a piece of its own.
fn find_exec(piece: &Piece, out: &mut Vec<Piece>, budget: &mut usize) -> Result<(), String> {
    let mut i = 1;
    while i < piece.argv.len() {
        let a = piece.argv[i].as_str();
        if matches!(a, "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < piece.argv.len() && piece.argv[end] != ";" && piece.argv[end] != "+" {
                end += 1;
            }
            if start < end {
                if *budget == 0 {
                    return Err(format!("more than {} commands", parse::MAX_COMMANDS));
                }
                *budget -= 1;
                let mut via = piece.via.clone();
                via.push(format!("find {a}"));
                let mut inner = Piece {
                    argv: piece.argv[start..end].to_vec(),
                    dynamic: piece.dynamic[start..end].to_vec(),
                    glob: piece.glob[start..end].to_vec(),
                    via,
                    background: piece.background,
                    pipeline: piece.pipeline,
                    pipe_index: piece.pipe_index,
                    depth: piece.depth + 1,
                    // `{}` stands for whatever find finds.
                    args_from_stdin: true,
                    ..Piece::default()
                };
                peel(&mut inner, out, budget)?;
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "unwrap_tests.rs"]
mod tests;
