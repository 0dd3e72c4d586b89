//! The terminal while the UI runs: raw mode, the alternate screen and
//! bracketed paste on entry; all three undone on every way out — normal
//! return and error (the guard's `Drop`), panic (a hook that restores
//! before the panic message prints), and SIGTERM (the event loop turns it
//! into a normal return). ratatui's `init`/`restore` do the raw mode and
//! screen; this adds bracketed paste.

use ratatui::crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use ratatui::crossterm::execute;
use ratatui::DefaultTerminal;

/// The exit code after SIGTERM (128 + 15, as a shell reports it).
pub const SIGTERM_EXIT: i32 = 143;

pub struct TerminalGuard {
    pub terminal: DefaultTerminal,
}

fn restore() {
    let _ = execute!(std::io::stdout(), DisableBracketedPaste);
    ratatui::restore();
}

impl TerminalGuard {
    pub fn enter() -> std::io::Result<Self> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        let terminal = ratatui::try_init()?;
        if let Err(e) = execute!(std::io::stdout(), EnableBracketedPaste) {
            restore();
            return Err(e);
        }
        Ok(TerminalGuard { terminal })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// SIGTERM as an awaitable stream (never fires where there is none).
pub struct Term {
    #[cfg(unix)]
    sig: tokio::signal::unix::Signal,
}

impl Term {
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        {
            self.sig.recv().await;
        }
        #[cfg(not(unix))]
        {
            std::future::pending::<()>().await;
        }
    }
}

pub fn sigterm() -> std::io::Result<Term> {
    Ok(Term {
        #[cfg(unix)]
        sig: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?,
    })
}
