//! The terminal in TUI mode: raw mode, the alternate screen and (optionally) mouse
//! reporting behind a guard that restores them when dropped — on quit, on error, and
//! (through the panic hook) on panic.

use std::io::{self, Write};

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;

/// Owns the terminal while the TUI runs.
pub struct TerminalGuard {
    terminal: DefaultTerminal,
    mouse: bool,
}

impl std::fmt::Debug for TerminalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalGuard")
            .field("mouse", &self.mouse)
            .finish()
    }
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen, and reports mouse events when `mouse`;
    /// a panic from here on restores the terminal before its message is printed.
    pub fn enter(mouse: bool) -> io::Result<TerminalGuard> {
        // ratatui's hook leaves raw mode and the alternate screen; this one, run first,
        // also stops mouse reporting.
        let terminal = ratatui::try_init()?;
        if mouse {
            let ratatui_hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let _ = execute!(io::stdout(), DisableMouseCapture);
                ratatui_hook(info);
            }));
            execute!(io::stdout(), EnableMouseCapture)?;
        }
        Ok(TerminalGuard { terminal, mouse })
    }

    /// The terminal to draw on.
    pub fn terminal(&mut self) -> &mut DefaultTerminal {
        &mut self.terminal
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if self.mouse {
            let _ = execute!(io::stdout(), DisableMouseCapture);
        }
        // Show the cursor again, leave the alternate screen, leave raw mode.
        let _ = self.terminal.show_cursor();
        ratatui::restore();
        let _ = io::stdout().flush();
    }
}
