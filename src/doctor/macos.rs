//! macOS: Seatbelt is `/usr/bin/sandbox-exec`, always by absolute path.

use super::report::{Row, Status};
use std::path::Path;

const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// `sandbox-exec` is present and a trivial profile runs `/usr/bin/true`.
pub fn checks() -> Vec<Row> {
    if !Path::new(SANDBOX_EXEC).exists() {
        return vec![Row::new(
            "seatbelt",
            "sandbox",
            Status::Fail,
            format!("{SANDBOX_EXEC} is missing"),
        )
        .fix("sandbox-exec ships with macOS; reinstall the OS or restore /usr/bin")];
    }
    let out = std::process::Command::new(SANDBOX_EXEC)
        .args(["-p", "(version 1)(allow default)", "/usr/bin/true"])
        .stdin(std::process::Stdio::null())
        .output();
    vec![match out {
        Ok(o) if o.status.success() => Row::new(
            "seatbelt",
            "sandbox",
            Status::Ok,
            format!("{SANDBOX_EXEC} ran /usr/bin/true under a trivial profile"),
        ),
        Ok(o) => Row::new(
            "seatbelt",
            "sandbox",
            Status::Fail,
            format!(
                "{SANDBOX_EXEC} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => Row::new(
            "seatbelt",
            "sandbox",
            Status::Fail,
            format!("{SANDBOX_EXEC} could not start: {e}"),
        ),
    }]
}
