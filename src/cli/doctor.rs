//! `codewhale doctor [--json]`: environment checks and functional sandbox
//! probes (see `docs/DOCTOR.md`). Exit 0 when no row fails, 1 otherwise.

use crate::doctor::{self, Options};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON (stable field names, see docs/DOCTOR.md).
    #[arg(long)]
    pub json: bool,
    /// Workspace directory whose configuration is checked (default: the current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The in-sandbox half of the network probe: try ADDR, print the result.
    #[arg(long, value_name = "ADDR", hide = true)]
    pub connect_probe: Option<SocketAddr>,
    /// The in-sandbox half of the egress probe: connect to HOST:PORT
    /// through the SOCKS5 proxy named by `ALL_PROXY`, print the result.
    #[arg(long, value_name = "HOST:PORT", hide = true)]
    pub egress_probe: Option<String>,
}

/// Resolve the workspace and run doctor (shared with `setup --status`).
pub fn report(workspace: Option<PathBuf>) -> Result<doctor::Report, std::io::Error> {
    let workspace = match workspace {
        Some(w) => w,
        None => std::env::current_dir()?,
    };
    Ok(doctor::run(&Options {
        workspace,
        exe: None,
    }))
}

pub fn run(args: DoctorArgs) -> i32 {
    if let Some(addr) = args.connect_probe {
        #[cfg(target_os = "linux")]
        println!("{}", doctor::probes::connect_probe(addr));
        #[cfg(not(target_os = "linux"))]
        println!("unsupported: {addr}");
        return crate::exit::OK;
    }
    if let Some(target) = args.egress_probe {
        #[cfg(target_os = "linux")]
        println!("{}", doctor::probes::egress_probe(&target));
        #[cfg(not(target_os = "linux"))]
        println!("unsupported: {target}");
        return crate::exit::OK;
    }
    let report = match report(args.workspace) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("codewhale: doctor: reading the current directory: {e}");
            return crate::exit::FAILURE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("codewhale: doctor: encoding the report: {e}");
                return crate::exit::FAILURE;
            }
        }
    } else {
        print!("{}", report.render_text());
    }
    report.exit_code()
}
