//! The interactive terminal UI (`codewhale` with no subcommand, in a
//! terminal): an in-process client of the runtime ([`crate::runtime`]).
//! Its turns are runtime turns started through the same
//! [`crate::runtime::driver::Driver`] the app-server uses, so what the TUI
//! does appears in `receipts`, `undo`, the event log and the server's API
//! exactly as a remote client's would. See docs/TUI.md.
//!
//! Modules: [`state`] (the pure state machine: keys, modes, permissions,
//! the approval card), [`render`] (state → frame), [`markdown`],
//! [`stream_md`] and [`transcript`] (what a frame keeps for the next:
//! a streaming message is parsed once per closed block, rows per cell),
//! [`sanitize`] (no escape sequence from outside reaches the terminal),
//! [`slash`] (command parsing), [`draft`] (the draft's view after a
//! resize), [`app`] (the event loop and effects),
//! [`terminal`] (raw mode and its restoration), [`first_run`] (no usable
//! key: the local-Ollama question asked once, the remembered answer),
//! [`provider_picker`] (`/provider` and its masked key field) and
//! [`picker_render`] (how those two are drawn), [`handoff`] (Plan's
//! "carry it out?" card).

pub mod app;
pub mod draft;
pub mod editor;
pub mod first_run;
pub mod handoff;
pub mod markdown;
pub mod picker_render;
pub mod provider_picker;
pub mod render;
pub mod sanitize;
pub mod slash;
pub mod state;
pub mod stream_md;
pub mod terminal;
#[cfg(test)]
mod test_support;
pub mod todo;
pub mod tokens;
pub mod transcript;

use std::io::IsTerminal;

/// Open the UI in the current directory; without a terminal on stdin and
/// stdout, say so and exit 2 (scripts want `codewhale exec`).
pub fn run() -> i32 {
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        eprintln!(
            "codewhale: the interactive UI needs a terminal on stdin and stdout; \
             for scripts use `codewhale exec` (see `codewhale --help`)"
        );
        return crate::exit::USAGE;
    }
    let res = app::setup(None).and_then(app::run);
    match res {
        Ok(code) => code,
        Err(e) => {
            crate::exit::report_error(&e);
            crate::exit::FAILURE
        }
    }
}
