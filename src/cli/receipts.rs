//! `codewhale receipts`: print what a session did and did not do, built
//! read-only from its session file (see docs/RECEIPTS.md).

use crate::config::ConfigPaths;
use crate::receipt;
use crate::session::sessions_dir;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ReceiptFormat {
    /// Markdown for people.
    #[default]
    Md,
    /// `codewhale.receipt/v3` JSON (docs/receipt.schema.json).
    Json,
}

#[derive(Debug, Args)]
pub struct ReceiptsArgs {
    /// Session id (the thread id, as shown by `exec`), or a path to a
    /// session `.jsonl` file. Default: the most recent session.
    #[arg(value_name = "SESSION_ID", conflicts_with = "last")]
    pub session: Option<String>,
    /// The most recent session (the default).
    #[arg(long)]
    pub last: bool,
    /// Only this turn.
    #[arg(long, value_name = "N")]
    pub turn: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReceiptFormat::Md)]
    pub format: ReceiptFormat,
}

pub fn run(args: ReceiptsArgs) -> i32 {
    match run_inner(args) {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            super::report_error(&e);
            crate::exit::FAILURE
        }
    }
}

fn run_inner(args: ReceiptsArgs) -> anyhow::Result<()> {
    let paths = ConfigPaths::from_env();
    if paths.home.is_none() && std::env::var_os("CODEWHALE_HOME").is_none() {
        anyhow::bail!("no CODEWHALE_HOME and no HOME: cannot find ~/.codewhale");
    }
    let home = paths.codewhale_home;
    let dir = sessions_dir(&home);
    let path = match &args.session {
        Some(id) => receipt::find_session(&dir, id)?,
        None => receipt::last_session(&dir)?,
    };
    let r = receipt::from_file(&path, args.turn)?;
    match args.format {
        ReceiptFormat::Md => print!("{}", receipt::render_markdown(&r)),
        ReceiptFormat::Json => println!("{}", serde_json::to_string_pretty(&r)?),
    }
    Ok(())
}
