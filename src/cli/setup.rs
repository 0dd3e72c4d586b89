//! `codewhale setup --status`: a short summary of what doctor proves —
//! sandbox kind and enforcement level, config path, provider key presence.
//! Exit codes as `doctor` (1 when any row fails).

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Print the short status summary (the only mode in this build).
    #[arg(long, required = true)]
    pub status: bool,
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn run(args: SetupArgs) -> i32 {
    let r = match super::doctor::report(args.workspace) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("codewhale: setup: reading the current directory: {e}");
            return crate::exit::FAILURE;
        }
    };
    let sb = &r.sandbox;
    if sb.available {
        println!(
            "sandbox:  {} (backend {}, level {})",
            sb.kind, sb.backend, sb.level
        );
    } else {
        println!("sandbox:  NOT available — {}", sb.reason);
    }
    let failed: Vec<&str> = r
        .rows()
        .filter(|row| row.status == crate::doctor::Status::Fail)
        .map(|row| row.id.as_str())
        .collect();
    if !failed.is_empty() {
        println!(
            "failing:  {} (run `codewhale doctor` for details)",
            failed.join(", ")
        );
    }
    println!(
        "config:   {} ({})",
        r.config_path.display(),
        if r.config_present {
            "present"
        } else {
            "absent"
        }
    );
    match &r.api_key {
        Some(k) => println!(
            "provider: {} key {}{}",
            k.provider,
            if k.present { "present" } else { "missing" },
            k.env_var
                .as_deref()
                .map(|v| format!(" (from {v})"))
                .unwrap_or_else(|| format!(" ({})", k.source))
        ),
        None => println!("provider: unknown (see `codewhale doctor`)"),
    }
    r.exit_code()
}
