//! The terminal in TUI mode: raw mode and the alternate screen behind a guard that
//! restores them when dropped — on quit, on error, and (through ratatui's panic hook) on
//! panic.

use std::io;

use ratatui::DefaultTerminal;

/// Owns the terminal while the TUI runs.
pub struct TerminalGuard {
    terminal: DefaultTerminal,
}

impl std::fmt::Debug for TerminalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TerminalGuard")
    }
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen; a panic from here on restores the
    /// terminal before its message is printed.
    pub fn enter() -> io::Result<TerminalGuard> {
        let terminal = ratatui::try_init()?;
        Ok(TerminalGuard { terminal })
    }

    /// The terminal to draw on.
    pub fn terminal(&mut self) -> &mut DefaultTerminal {
        &mut self.terminal
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        // Show the cursor again, leave the alternate screen, leave raw mode.
        let _ = self.terminal.show_cursor();
        ratatui::restore();
    }
}
