//! Slash commands: parsing only (the state machine decides what each does).

use crate::authz::Mode;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slash {
    Undo,
    Restore(u64),
    Trust(bool),
    Receipts {
        turn: Option<u32>,
        json: bool,
    },
    /// `/model [ID [EFFORT]]`: show the model, or use ID (and, with
    /// EFFORT, that reasoning effort) for the next turns.
    Model {
        id: String,
        effort: Option<crate::config::effort::ReasoningEffort>,
    },
    /// `/provider` opens the picker; `/provider ID` selects ID directly.
    Provider(Option<String>),
    /// `/mcp` (status) or `/mcp reload`.
    Mcp {
        reload: bool,
    },
    /// `/skills` (list), `/skills enable NAME`, `/skills disable NAME`.
    Skills(Option<(String, bool)>),
    /// `/memory` (show) or `/memory add TEXT` (append a line).
    Memory(Option<String>),
    /// `/import-claude`: show what `codewhale import claude` would propose.
    ImportClaude,
    Mode(Mode),
    Clear,
    Quit,
    Help,
}

/// Every command with its one-line help, in `/help` order.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "/undo",
        "revert the last request's file changes in one step",
    ),
    (
        "/restore N",
        "restore snapshot N (needs /trust on or Full Access)",
    ),
    ("/trust on|off", "allow /restore to jump to any snapshot"),
    (
        "/receipts [N] [json]",
        "what the last turn did (as `codewhale receipts`)",
    ),
    (
        "/model [ID|auto] [EFFORT]",
        "show or switch the model (and its reasoning effort: none…max)",
    ),
    (
        "/provider [ID]",
        "pick the provider (and enter its key, masked), or use ID",
    ),
    (
        "/mcp [reload]",
        "MCP servers' status; reload re-reads mcp.json and restarts them",
    ),
    (
        "/skills [enable|disable NAME]",
        "the skills found (docs/SKILLS.md), or switch one on or off",
    ),
    (
        "/memory [add TEXT]",
        "edit the memory file (docs/MEMORY.md) in $VISUAL/$EDITOR (shown when neither is set), or add a line to it",
    ),
    (
        "/import-claude",
        "what `codewhale import claude` proposes (nothing is written here)",
    ),
    ("/mode plan|work|operate", "switch the mode (Tab cycles it)"),
    (
        "/clear",
        "clear the transcript on screen (the session keeps it)",
    ),
    (
        "/quit",
        "leave (also Ctrl-D on an empty input, Ctrl-C twice)",
    ),
    ("/help", "this list"),
];

fn known() -> String {
    COMMANDS
        .iter()
        .map(|(c, _)| c.split(' ').next().unwrap_or(c))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn help() -> String {
    let mut s = String::from("commands:\n");
    for (c, h) in COMMANDS {
        s.push_str(&format!("  {c:<26} {h}\n"));
    }
    s.push_str(
        "keys: Tab mode · Shift+Tab permissions · Esc stop · Ctrl-C interrupt/quit · Ctrl-D quit",
    );
    s
}

/// Parse one `/command args` line; the error names what was wrong and
/// lists the known commands.
pub fn parse(line: &str) -> Result<Slash, String> {
    let mut words = line.split_whitespace();
    let cmd = words.next().unwrap_or("");
    let args: Vec<&str> = words.collect();
    let no_args = |s: Slash| {
        if args.is_empty() {
            Ok(s)
        } else {
            Err(format!("{cmd} takes no arguments"))
        }
    };
    match cmd {
        "/undo" => no_args(Slash::Undo),
        "/restore" => match args.as_slice() {
            [n] => n
                .parse()
                .map(Slash::Restore)
                .map_err(|_| format!("/restore N: `{n}` is not a snapshot number")),
            _ => Err("usage: /restore N".into()),
        },
        "/trust" => match args.as_slice() {
            ["on"] => Ok(Slash::Trust(true)),
            ["off"] => Ok(Slash::Trust(false)),
            _ => Err("usage: /trust on|off".into()),
        },
        "/receipts" => {
            let mut turn = None;
            let mut json = false;
            for a in &args {
                if *a == "json" {
                    json = true;
                } else if let Ok(n) = a.parse() {
                    turn = Some(n);
                } else {
                    return Err(format!("/receipts [N] [json]: `{a}` is neither"));
                }
            }
            Ok(Slash::Receipts { turn, json })
        }
        "/model" => match args.as_slice() {
            [] => Ok(Slash::Model {
                id: String::new(),
                effort: None,
            }),
            [m] => Ok(Slash::Model {
                id: m.to_string(),
                effort: None,
            }),
            [m, e] => e
                .parse()
                .map(|effort| Slash::Model {
                    id: m.to_string(),
                    effort: Some(effort),
                })
                .map_err(|why: String| format!("/model {m} {e}: {why}")),
            _ => Err("usage: /model [ID|auto] [EFFORT]".into()),
        },
        "/provider" => match args.as_slice() {
            [] => Ok(Slash::Provider(None)),
            [id] => Ok(Slash::Provider(Some(id.to_string()))),
            _ => Err("usage: /provider [ID]".into()),
        },
        "/mcp" => match args.as_slice() {
            [] => Ok(Slash::Mcp { reload: false }),
            ["reload"] => Ok(Slash::Mcp { reload: true }),
            _ => Err("usage: /mcp [reload]".into()),
        },
        "/skills" => match args.as_slice() {
            [] => Ok(Slash::Skills(None)),
            ["enable", n] => Ok(Slash::Skills(Some((n.to_string(), true)))),
            ["disable", n] => Ok(Slash::Skills(Some((n.to_string(), false)))),
            _ => Err("usage: /skills [enable|disable NAME]".into()),
        },
        "/memory" => match args.split_first() {
            None => Ok(Slash::Memory(None)),
            Some((&"add", rest)) if !rest.is_empty() => Ok(Slash::Memory(Some(rest.join(" ")))),
            _ => Err("usage: /memory [add TEXT]".into()),
        },
        "/import-claude" => no_args(Slash::ImportClaude),
        "/mode" => match args.as_slice() {
            ["plan"] => Ok(Slash::Mode(Mode::Plan)),
            ["work"] => Ok(Slash::Mode(Mode::Work)),
            ["operate"] => Ok(Slash::Mode(Mode::Operate)),
            _ => Err("usage: /mode plan|work|operate".into()),
        },
        "/clear" => no_args(Slash::Clear),
        "/quit" | "/exit" => no_args(Slash::Quit),
        "/help" => no_args(Slash::Help),
        other => Err(format!("unknown command {other}; known: {}", known())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_command() {
        assert_eq!(parse("/undo"), Ok(Slash::Undo));
        assert_eq!(parse("/restore 3"), Ok(Slash::Restore(3)));
        assert_eq!(parse("/trust on"), Ok(Slash::Trust(true)));
        assert_eq!(
            parse("/receipts 2 json"),
            Ok(Slash::Receipts {
                turn: Some(2),
                json: true
            })
        );
        assert_eq!(
            parse("/model auto"),
            Ok(Slash::Model {
                id: "auto".into(),
                effort: None
            })
        );
        assert_eq!(
            parse("/model gpt-5.6 high"),
            Ok(Slash::Model {
                id: "gpt-5.6".into(),
                effort: Some(crate::config::effort::ReasoningEffort::High)
            })
        );
        let e = parse("/model gpt-5.6 hard").unwrap_err();
        assert!(
            e.contains("/model gpt-5.6 hard")
                && e.contains("unknown reasoning effort `hard`")
                && e.contains("none, minimal, low, medium, high, xhigh, max"),
            "{e}"
        );
        assert_eq!(parse("/mode plan"), Ok(Slash::Mode(Mode::Plan)));
        assert_eq!(parse("/quit"), Ok(Slash::Quit));
        assert_eq!(parse("/mcp"), Ok(Slash::Mcp { reload: false }));
        assert_eq!(parse("/skills"), Ok(Slash::Skills(None)));
        assert_eq!(
            parse("/skills disable lint"),
            Ok(Slash::Skills(Some(("lint".into(), false))))
        );
        assert!(parse("/skills lint").is_err());
        assert_eq!(parse("/memory"), Ok(Slash::Memory(None)));
        assert_eq!(
            parse("/memory add use tabs"),
            Ok(Slash::Memory(Some("use tabs".into())))
        );
        assert!(parse("/memory add").is_err());
        assert_eq!(parse("/import-claude"), Ok(Slash::ImportClaude));
        assert_eq!(parse("/mcp reload"), Ok(Slash::Mcp { reload: true }));
        assert!(parse("/mcp restart").is_err());
        assert_eq!(parse("/provider"), Ok(Slash::Provider(None)));
        assert_eq!(
            parse("/provider ollama"),
            Ok(Slash::Provider(Some("ollama".into())))
        );
        assert!(parse("/provider a b")
            .unwrap_err()
            .contains("/provider [ID]"));
    }

    #[test]
    fn errors_name_the_problem_and_list_commands() {
        let e = parse("/frobnicate").unwrap_err();
        assert!(e.contains("unknown command /frobnicate"), "{e}");
        for c in [
            "/undo",
            "/restore",
            "/trust",
            "/receipts",
            "/model",
            "/provider",
            "/mode",
            "/clear",
            "/quit",
            "/help",
        ] {
            assert!(e.contains(c), "{c} missing from {e}");
        }
        assert!(parse("/restore x").unwrap_err().contains("`x`"));
        assert!(parse("/mode fast")
            .unwrap_err()
            .contains("plan|work|operate"));
        assert!(parse("/undo now").unwrap_err().contains("no arguments"));
    }
}
