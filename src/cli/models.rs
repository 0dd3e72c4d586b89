//! `codewhale models list [--provider ID] [--json]`: the provider catalogue.

use crate::provider::catalogue::{self, Entry};
use clap::Subcommand;
use serde_json::json;

pub const SCHEMA: &str = "codewhale.models";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// List the built-in providers (or one, with its known models and prices).
    List {
        /// Only this provider id.
        #[arg(long)]
        provider: Option<String>,
        /// One JSON object (`codewhale.models`, version 1).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ModelsCommand) -> i32 {
    let ModelsCommand::List { provider, json } = cmd;
    let entries: Vec<&Entry> = match provider.as_deref() {
        Some(id) => match catalogue::get(id) {
            Some(e) => vec![e],
            None => {
                eprintln!(
                    "codewhale: --provider {id:?}: not a built-in id (run `codewhale models list` for all {})",
                    catalogue::all().len()
                );
                return crate::exit::USAGE;
            }
        },
        None => catalogue::all().iter().collect(),
    };
    if json {
        println!(
            "{}",
            json!({"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "providers": entries})
        );
        return crate::exit::OK;
    }
    let detail = provider.is_some();
    for e in entries {
        let key = e.key_env.unwrap_or("(none: local)");
        let model = if e.default_model.is_empty() {
            "(first model the server lists)"
        } else {
            e.default_model
        };
        println!(
            "{:<18} {:<17} {:<6} {model}  key {key}  {}",
            e.id,
            e.wire.as_str(),
            if e.local { "local" } else { "hosted" },
            e.base_url
        );
        if detail {
            println!("  {}", e.name);
            if let Some(v) = e.base_url_env {
                println!("  base URL from {v} (or base_url in [providers.{}])", e.id);
            }
            println!("  source: {}", e.source);
            for m in e.models {
                let ctx = m
                    .context_window
                    .map(|c| format!("{c} tokens"))
                    .unwrap_or_else(|| "context unknown".into());
                let price = match m.price {
                    Some(p) => format!(
                        "${}/M in, {} cached, ${}/M out (read {}; {})",
                        p.input,
                        p.cached_input
                            .map(|c| format!("${c}/M"))
                            .unwrap_or_else(|| "unknown".into()),
                        p.output,
                        p.date,
                        p.source
                    ),
                    None => "price unknown".into(),
                };
                println!("  - {}: {ctx}; {price}", m.id);
            }
        }
    }
    crate::exit::OK
}
