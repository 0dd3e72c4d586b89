//! `codewhale auth set|list|remove`: the local key store. Keys are read
//! from stdin (without echo on a terminal) and never printed.

use crate::config::{self, ConfigPaths, LoadOptions};
use crate::provider::auth::AuthStore;
use crate::provider::catalogue;
use crate::provider::config::ExecConfig;
use crate::provider::registry::{find_key, KeySource};
use anyhow::{bail, Context};
use clap::Subcommand;
use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Store a key for a provider (read from stdin; never echoed or printed).
    Set {
        #[arg(long)]
        provider: String,
    },
    /// Show which providers have a key and where it comes from (never the key).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a stored key.
    Remove {
        #[arg(long)]
        provider: String,
    },
}

pub fn run(cmd: AuthCommand) -> i32 {
    match run_inner(cmd) {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            super::report_error(&e);
            crate::exit::FAILURE
        }
    }
}

fn run_inner(cmd: AuthCommand) -> anyhow::Result<()> {
    // The same home `exec` uses (`$CODEWHALE_HOME`, else `~/.codewhale`).
    let paths = ConfigPaths::from_env();
    if paths.home.is_none() && std::env::var_os("CODEWHALE_HOME").is_none() {
        bail!("no CODEWHALE_HOME and no HOME: cannot find ~/.codewhale");
    }
    let home = paths.codewhale_home.clone();
    let store = AuthStore::new(&home);
    match cmd {
        AuthCommand::Set { provider } => {
            crate::provider::auth::valid_id(&provider)?;
            let key = read_secret(&format!("key for {provider}: "))?;
            store.store_key(&provider, &key)?;
            eprintln!("stored a key for {provider} in {}", store.path().display());
        }
        AuthCommand::Remove { provider } => {
            if store.remove(&provider)? {
                eprintln!("removed the stored key for {provider}");
            } else {
                eprintln!("no stored key for {provider}");
            }
        }
        AuthCommand::List { json } => {
            // Provider definitions come only from the user config, so the
            // project override is not consulted.
            let mut o = LoadOptions::new(std::env::current_dir().unwrap_or_else(|_| home.clone()));
            o.paths = paths;
            o.no_project_config = true;
            let cfg = ExecConfig::from_settings(&config::load(&o)?)?;
            let mut ids: BTreeSet<String> = catalogue::ids().map(str::to_string).collect();
            ids.extend(cfg.providers.keys().cloned());
            ids.extend(store.ids()?);
            let env = |n: &str| std::env::var(n).ok();
            let mut rows = Vec::new();
            for id in ids {
                let (key, source) = find_key(&id, cfg.providers.get(&id), &store, &env)?;
                rows.push((id, key.is_some(), source));
            }
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|(id, present, source)| {
                        serde_json::json!({"provider": id, "key_present": present, "source": source})
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(v));
            } else {
                for (id, present, source) in rows {
                    let src = match source {
                        KeySource::Env(v) => format!("env {v}"),
                        KeySource::AuthStore => "auth store".into(),
                        KeySource::Config => "config".into(),
                        KeySource::NotNeeded => "not needed (local)".into(),
                        KeySource::Missing => "-".into(),
                    };
                    let mark = if present { "set" } else { "missing" };
                    let mark = if matches!(src.as_str(), "not needed (local)") {
                        "n/a"
                    } else {
                        mark
                    };
                    println!("{id:<18} {mark:<8} {src}");
                }
            }
        }
    }
    Ok(())
}

/// Read one line from stdin, with terminal echo off when it is a terminal.
fn read_secret(prompt: &str) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    if tty {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
    }
    let _guard = if tty { EchoOff::new() } else { None };
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .context("reading the key from stdin")?;
    if tty {
        eprintln!();
    }
    Ok(line.trim().to_string())
}

/// Restores terminal echo on drop.
struct EchoOff {
    #[cfg(unix)]
    saved: nix::sys::termios::Termios,
}

impl EchoOff {
    #[cfg(unix)]
    fn new() -> Option<Self> {
        use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
        let fd = std::io::stdin();
        let saved = tcgetattr(&fd).ok()?;
        let mut t = saved.clone();
        t.local_flags.remove(LocalFlags::ECHO);
        tcsetattr(&fd, SetArg::TCSANOW, &t).ok()?;
        Some(EchoOff { saved })
    }
    #[cfg(not(unix))]
    fn new() -> Option<Self> {
        None
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                &self.saved,
            );
        }
    }
}
