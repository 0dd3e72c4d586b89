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

/// Give the terminal to another program for `f` (the user's editor):
/// leave the UI's screen, raw mode and bracketed paste, run `f`, then take
/// the terminal back, cleared, with the next frame drawn whole.
pub fn suspended<T>(guard: &mut TerminalGuard, f: impl FnOnce() -> T) -> T {
    use ratatui::crossterm::terminal::{enable_raw_mode, Clear, ClearType, EnterAlternateScreen};
    restore();
    let out = f();
    let _ = enable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        EnterAlternateScreen,
        EnableBracketedPaste,
        Clear(ClearType::All)
    );
    // `resize`, not `clear` (which asks the terminal where the cursor is):
    // fresh buffers, so the next draw repaints every cell.
    if let Ok(size) = guard.terminal.size() {
        let _ = guard
            .terminal
            .resize(ratatui::layout::Rect::new(0, 0, size.width, size.height));
    }
    out
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
