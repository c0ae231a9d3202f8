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
        let terminal = ratatui::try_init()?;
        // ratatui's hook leaves raw mode and the alternate screen, for a panic on any
        // thread. Only a panic of the TUI's own thread ends the screen: another thread's
        // (the recorder's) is caught there and shown in the footer.
        let ratatui_hook = std::panic::take_hook();
        let tui_thread = std::thread::current().id();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().id() == tui_thread {
                let _ = execute!(io::stdout(), DisableMouseCapture);
                ratatui_hook(info);
            }
        }));
        let mut guard = TerminalGuard {
            terminal,
            mouse: false,
        };
        if mouse {
            execute!(io::stdout(), EnableMouseCapture)?;
            guard.mouse = true;
        }
        Ok(guard)
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
        // Show the cursor again, leave the alternate screen, leave raw mode, and give
        // panics their default hook back.
        let _ = self.terminal.show_cursor();
        ratatui::restore();
        drop(std::panic::take_hook());
        let _ = io::stdout().flush();
    }
}
