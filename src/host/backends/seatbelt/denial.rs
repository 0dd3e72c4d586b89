//! Recognising Seatbelt's own signals in a run's output.
//!
//! A plain `Operation not permitted` is *not* a Seatbelt denial: ordinary
//! EPERMs (unix permissions, SIP, a read-only volume) print the same text.
//! Only Seatbelt's own voices count: `sandbox-exec: …` lines on stderr
//! (it could not apply the profile or exec the command) and the kernel's
//! sandbox log lines `Sandbox: PROC(PID) deny(N) OPERATION TARGET`
//! (`log show --predicate 'sender == "Sandbox"'`). EPERM lines are attached
//! as evidence to a denial the log confirms, never counted alone.

use serde::Serialize;

/// One `deny(N)` line of the kernel's sandbox log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DenyRecord {
    pub process: String,
    pub pid: u32,
    /// The SBPL operation, e.g. `file-write-create`, `network-outbound`.
    pub operation: String,
    /// The path, address or service name, when the log gives one.
    pub target: Option<String>,
}

/// What Seatbelt said about a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SeatbeltSignal {
    /// `sandbox-exec` could not compile or apply the profile: the command
    /// never ran (exit 125).
    SetupFailed { message: String },
    /// The profile was applied but `sandbox-exec` could not exec the command.
    ExecFailed { program: String, reason: String },
    /// The sandbox refused operations (from the sandbox log).
    Denied {
        records: Vec<DenyRecord>,
        /// `Operation not permitted` lines of the command's stderr.
        eperm_lines: Vec<String>,
    },
}

const EPERM_TEXT: &str = "Operation not permitted";

/// Parse `Sandbox: PROC(PID) deny(N) OP [TARGET]` anywhere in a line
/// (`log show` prefixes timestamps and `kernel: (Sandbox)`).
pub fn parse_deny_line(line: &str) -> Option<DenyRecord> {
    let start = line.find("Sandbox: ")? + "Sandbox: ".len();
    let rest = &line[start..];
    let deny_at = rest.find(") deny(")?;
    let head = &rest[..deny_at];
    let open = head.rfind('(')?;
    let process = head[..open].to_string();
    let pid: u32 = head[open + 1..].parse().ok()?;
    let after = &rest[deny_at + ") deny(".len()..];
    let close = after.find(')')?;
    after[..close].parse::<u32>().ok()?;
    let mut parts = after[close + 1..].trim().splitn(2, ' ');
    let operation = parts.next().filter(|o| !o.is_empty())?.to_string();
    let target = parts
        .next()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    Some(DenyRecord {
        process,
        pid,
        operation,
        target,
    })
}

/// Classify a run from its stderr and, when collected, the sandbox log text
/// for the run's time window. `None` means Seatbelt said nothing: any EPERM
/// in the output is treated as an ordinary error.
///
/// `sandbox-exec` speaks before the command runs, so only the *first*
/// stderr line can be its voice; a command printing `sandbox-exec: …`
/// later cannot pass itself off as a setup failure.
pub fn classify(stderr: &str, sandbox_log: Option<&str>) -> Option<SeatbeltSignal> {
    if let Some(line) = stderr.lines().next() {
        if let Some(msg) = line.strip_prefix("sandbox-exec: ") {
            if let Some(rest) = msg.strip_prefix("execvp() of '") {
                if let Some((program, reason)) = rest.split_once("' failed: ") {
                    return Some(SeatbeltSignal::ExecFailed {
                        program: program.to_string(),
                        reason: reason.trim().to_string(),
                    });
                }
            }
            return Some(SeatbeltSignal::SetupFailed {
                message: msg.trim().to_string(),
            });
        }
    }
    let records: Vec<DenyRecord> = sandbox_log
        .unwrap_or_default()
        .lines()
        .filter_map(parse_deny_line)
        .collect();
    if records.is_empty() {
        return None;
    }
    let eperm_lines = stderr
        .lines()
        .filter(|l| l.contains(EPERM_TEXT))
        .map(str::to_string)
        .collect();
    Some(SeatbeltSignal::Denied {
        records,
        eperm_lines,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const LOG: &str = "2024-05-01 10:00:00.1 0x1 Error 0x0 0 0 kernel: (Sandbox) Sandbox: touch(4242) deny(1) file-write-create /Users/dev/outside.txt\n\
        2024-05-01 10:00:00.2 0x1 Error 0x0 0 0 kernel: (Sandbox) Sandbox: curl(4243) deny(1) network-outbound 1.2.3.4:443\n\
        2024-05-01 10:00:00.3 0x1 Default 0x0 0 0 kernel: unrelated line\n";

    #[test]
    fn plain_eperm_is_not_a_denial() {
        let stderr = "touch: /Users/dev/outside.txt: Operation not permitted\n";
        assert_eq!(classify(stderr, None), None);
        assert_eq!(classify(stderr, Some("kernel: unrelated\n")), None);
    }

    #[test]
    fn deny_log_makes_a_denial_with_eperm_evidence() {
        let stderr = "touch: /Users/dev/outside.txt: Operation not permitted\nother\n";
        let Some(SeatbeltSignal::Denied {
            records,
            eperm_lines,
        }) = classify(stderr, Some(LOG))
        else {
            panic!("expected a denial");
        };
        assert_eq!(records.len(), 2);
        assert_eq!(
            records[0],
            DenyRecord {
                process: "touch".into(),
                pid: 4242,
                operation: "file-write-create".into(),
                target: Some("/Users/dev/outside.txt".into()),
            }
        );
        assert_eq!(records[1].operation, "network-outbound");
        assert_eq!(
            eperm_lines,
            vec![stderr.lines().next().unwrap().to_string()]
        );
    }

    #[test]
    fn sandbox_exec_lines_are_setup_or_exec_failures() {
        assert_eq!(
            classify(
                "sandbox-exec: sandbox_apply: Operation not permitted\n",
                None
            ),
            Some(SeatbeltSignal::SetupFailed {
                message: "sandbox_apply: Operation not permitted".into()
            })
        );
        assert_eq!(
            classify(
                "sandbox-exec: execvp() of 'nosuch' failed: No such file or directory\n",
                None
            ),
            Some(SeatbeltSignal::ExecFailed {
                program: "nosuch".into(),
                reason: "No such file or directory".into()
            })
        );
    }

    #[test]
    fn only_the_first_line_speaks_for_sandbox_exec() {
        assert_eq!(
            classify(
                "hello\nsandbox-exec: sandbox_apply: Operation not permitted\n",
                None
            ),
            None
        );
    }

    #[test]
    fn deny_line_parsing_edges() {
        assert_eq!(
            parse_deny_line("Sandbox: Google Chrome H(77) deny(2) mach-lookup com.apple.x")
                .map(|r| (r.process, r.pid, r.target)),
            Some(("Google Chrome H".into(), 77, Some("com.apple.x".into())))
        );
        assert_eq!(
            parse_deny_line("Sandbox: sh(1) deny(1) sysctl-read").map(|r| r.target),
            Some(None)
        );
        assert_eq!(parse_deny_line("Sandbox: sh(x) deny(1) op"), None);
        assert_eq!(parse_deny_line("sandbox said deny(1)"), None);
        assert_eq!(parse_deny_line("Sandbox: sh(1) allow(1) op"), None);
    }
}
