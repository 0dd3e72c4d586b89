//! The documented exit codes (see `docs/SANDBOX.md`, `docs/EXEC.md`,
//! `docs/REVIEW.md` and `--help`).

/// Success.
pub const OK: i32 = 0;
/// A generic failure (doctor found a failing check, bad input).
pub const FAILURE: i32 = 1;
/// Bad command-line usage (clap's own code).
pub const USAGE: i32 = 2;
/// `codewhale review post`: the review file no longer matches the pull
/// request (its head SHA or diff fingerprint changed; docs/REVIEW.md).
pub const REVIEW_STALE: i32 = 3;
/// `codewhale review`: the reviewer's answer failed the schema after its
/// one retry, or `review post` was given a file that is not a review.
pub const REVIEW_MALFORMED: i32 = 4;
/// `codewhale review`: a GitHub API failure (an error answer, a rate limit
/// resetting more than a minute away, an unreachable API).
pub const GITHUB: i32 = 5;
/// `codewhale review`: the reviewer's model run failed (not transient:
/// those are [`TEMPFAIL`]).
pub const REVIEW_MODEL: i32 = 6;
/// A configuration error: an invalid config file, project override or
/// `permissions.toml` (the message names file, line and key) (EX_CONFIG).
pub const CONFIG: i32 = 78;
/// A transient network or timeout failure talking to a provider/remote (EX_TEMPFAIL).
pub const TEMPFAIL: i32 = 75;
/// The command timed out.
pub const TIMEOUT: i32 = 124;
/// The sandbox could not be set up; the command did not run.
pub const SANDBOX_SETUP: i32 = 125;
/// The command was found but could not be executed.
pub const NOT_EXECUTABLE: i32 = 126;
/// The command was not found.
pub const NOT_FOUND: i32 = 127;
/// Interrupted (Ctrl-C, a cancelled run): 128 + SIGINT.
pub const INTERRUPTED: i32 = 130;

/// Print an error chain to stderr in one consistent format (every front
/// end reports a failed command this way before exiting with [`FAILURE`]).
pub fn report_error(err: &anyhow::Error) {
    eprintln!("codewhale: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}
