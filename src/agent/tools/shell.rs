//! `shell`: run a command through the execution host, never directly.
//!
//! The host applies the sandbox policy (and scrubs secret environment
//! variables); this tool only builds the request and reports the outcome.
//! A host that cannot set up the sandbox means the command did not run —
//! it is reported to the model, never retried unsandboxed.

use super::EnforcementLabel;
use super::{NetworkConnection, SandboxDenial, ShellEnforced, ToolContext, ToolOutput};
use crate::host::{ExecRequest, HostError};
use serde_json::Value;
use std::time::Duration;

/// Default and maximum command timeouts.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept per stream by the host.
const OUTPUT_CAP: usize = 256 * 1024;

/// Messages in a failed command's stderr that mean the OS sandbox said no.
const DENIAL_MARKERS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
];

/// The argv for a `command` argument: a string runs under `sh -c`, an
/// array is the argv itself.
pub fn argv(args: &Value) -> Result<Vec<String>, String> {
    match args.get("command") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            Ok(vec!["sh".into(), "-c".into(), s.clone()])
        }
        Some(Value::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| "`command` array must hold only strings".to_string())
            })
            .collect(),
        _ => Err("missing `command` (a non-empty string or argv array)".into()),
    }
}

pub async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let argv = match argv(args) {
        Ok(a) => a,
        Err(e) => return ToolOutput::error("bad_arguments", e),
    };
    let timeout = args
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(MAX_TIMEOUT);
    let mut req = ExecRequest::new(argv);
    req.cwd = Some(ctx.guard.workspace().to_path_buf());
    req.timeout = Some(timeout);
    req.output_cap = OUTPUT_CAP;
    req.cancel = Some(ctx.cancel.clone());
    match crate::host::run(&ctx.policy, &ctx.host, req).await {
        Ok(o) => {
            let stdout = o.stdout.text();
            let stderr = o.stderr.text();
            let mut out = report(
                &o,
                ctx,
                Some(timeout),
                &[("stdout", &stdout), ("stderr", &stderr)],
            );
            out.truncated |= o.stdout.truncated || o.stderr.truncated;
            out
        }
        Err(e) => host_error(e),
    }
}

/// A finished run as the tool's result: `exit code: N`, the `shown`
/// streams (name, text; empty ones left out), the sandbox's hints, the
/// enforcement and an inferred denial. Shared by foreground commands and
/// a background job's end ([`super::jobs`]).
pub(super) fn report(
    o: &crate::host::ExecOutcome,
    ctx: &ToolContext,
    timeout: Option<Duration>,
    shown: &[(&str, &str)],
) -> ToolOutput {
    let code = o.shell_code();
    let mut text = format!("exit code: {code}");
    if o.timed_out {
        let ms = timeout.map(|t| t.as_millis()).unwrap_or_default();
        text.push_str(&format!(" (timed out after {ms} ms)"));
    }
    for (name, s) in shown {
        if !s.is_empty() {
            text.push_str(&format!("\n{name}:\n{s}"));
        }
    }
    // What the sandbox did that the output does not say (reverts,
    // the network being off, a write outside the roots).
    for h in crate::host::hints::after_run(o, &ctx.policy, ctx.guard.workspace()) {
        text.push_str(&format!("\ncodewhale: {}", h.text()));
    }
    let mut out = if o.timed_out {
        ToolOutput::error("timeout", text)
    } else if code == 0 {
        ToolOutput::ok(text)
    } else {
        ToolOutput::error("exit_nonzero", text)
    };
    out.exit_code = Some(code);
    // The label, and apart from it the egress proxy's one-line
    // account under network = "allowlist" (typed to the end: only
    // stream-json's documented string joins them).
    out.enforcement = Some(Box::new(EnforcementLabel {
        label: o.enforcement.label.clone(),
        network: o.enforcement.egress.as_ref().map(|e| e.line.clone()),
    }));
    out.enforced = Some(Box::new(ShellEnforced {
        summary: o.enforcement.summary(),
        connections: o
            .enforcement
            .egress
            .as_ref()
            .map(|e| NetworkConnection::of_events(&e.events))
            .unwrap_or_default(),
    }));
    if code != 0 && o.enforcement.is_sandboxed() {
        // Errors are read where they are written: stderr (a background
        // job's merged output).
        let errors = shown
            .iter()
            .filter(|(n, _)| *n != "stdout")
            .map(|(_, s)| *s)
            .collect::<Vec<_>>()
            .join("\n");
        if let Some(m) = DENIAL_MARKERS.iter().find(|m| errors.contains(*m)) {
            out.sandbox_denied = Some(Box::new(SandboxDenial {
                path: None,
                reason: format!("the command failed with \"{m}\" under the sandbox"),
                inferred: true,
            }));
        }
    }
    out
}

/// A run the host could not make, as the tool's result.
pub(super) fn host_error(e: HostError) -> ToolOutput {
    let cat = match &e {
        HostError::Unavailable { .. } | HostError::NoBackend { .. } | HostError::Policy(_) => {
            "sandbox_unavailable"
        }
        HostError::Cancelled => "interrupted",
        HostError::NotFound(_) => "command_not_found",
        HostError::NotExecutable { .. } => "not_executable",
        HostError::Io { .. } | HostError::Remote(_) | HostError::RemoteTransient(_) => "host_error",
    };
    let mut out = ToolOutput::error(cat, format!("the command did not run: {e}"));
    out.exit_code = Some(e.exit_code());
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_runs_under_sh_array_is_argv() {
        assert_eq!(
            argv(&json!({"command": "test -f x && echo ok"})).unwrap(),
            vec!["sh", "-c", "test -f x && echo ok"]
        );
        assert_eq!(
            argv(&json!({"command": ["ls", "-l"]})).unwrap(),
            vec!["ls", "-l"]
        );
        assert!(argv(&json!({"command": ""})).is_err());
        assert!(argv(&json!({"command": [1]})).is_err());
        assert!(argv(&json!({})).is_err());
    }
}
