//! The terminal in TUI mode: raw mode, the alternate screen, a hidden cursor and
//! (optionally) mouse reporting behind a guard that restores them — when dropped (on quit
//! and on error), and from the panic hook on a panic of the TUI's thread, before the panic
//! message is printed. Restoring twice does nothing the second time, so the hook and the
//! guard's drop during the unwinding that follows never fight, and neither can panic.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// The terminal the TUI draws on.
pub type Tui = Terminal<CrosstermBackend<io::Stdout>>;

/// What was changed on the terminal, so that restoring undoes exactly that, once.
#[derive(Debug, Default)]
struct Changes {
    /// Raw mode, the alternate screen and the hidden cursor are in effect.
    screen: AtomicBool,
    /// Mouse reporting is on.
    mouse: AtomicBool,
}

impl Changes {
    /// Undoes what is in effect; the second call finds nothing to undo. Errors are left
    /// unsaid: a terminal that is gone cannot be restored, and nothing here may panic.
    fn restore(&self) {
        let mut out = io::stdout();
        if self.mouse.swap(false, Ordering::SeqCst) {
            let _ = execute!(out, DisableMouseCapture);
        }
        if self.screen.swap(false, Ordering::SeqCst) {
            let _ = execute!(out, LeaveAlternateScreen, Show);
            let _ = disable_raw_mode();
        }
        let _ = out.flush();
    }
}

/// Owns the terminal while the TUI runs.
pub struct TerminalGuard {
    /// Dropped by hand: ratatui's own drop shows the cursor and prints an error when the
    /// terminal is gone.
    terminal: std::mem::ManuallyDrop<Tui>,
    changes: Arc<Changes>,
}

impl std::fmt::Debug for TerminalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalGuard")
            .field("changes", &self.changes)
            .finish()
    }
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen, and reports mouse events when `mouse`;
    /// a panic of this thread from here on restores the terminal before its message is
    /// printed. Another thread's panic (the recorder's is caught there and shown in the
    /// footer) leaves the screen alone and its message unprinted, which would only
    /// scribble over the screen.
    pub fn enter(mouse: bool) -> io::Result<TerminalGuard> {
        let changes = Arc::new(Changes::default());
        let previous = std::panic::take_hook();
        let tui_thread = std::thread::current().id();
        let on_panic = changes.clone();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().id() == tui_thread {
                on_panic.restore();
                previous(info);
            }
        }));
        // From here on a failure restores what was done: the guard exists before the
        // first change.
        let mut guard = TerminalGuard {
            terminal: std::mem::ManuallyDrop::new(Terminal::new(CrosstermBackend::new(
                io::stdout(),
            ))?),
            changes,
        };
        guard.changes.screen.store(true, Ordering::SeqCst);
        enable_raw_mode()?;
        execute!(io::stdout(), EnterAlternateScreen)?;
        if mouse {
            guard.changes.mouse.store(true, Ordering::SeqCst);
            execute!(io::stdout(), EnableMouseCapture)?;
        }
        guard.terminal.clear()?;
        Ok(guard)
    }

    /// The terminal to draw on.
    pub fn terminal(&mut self) -> &mut Tui {
        &mut self.terminal
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let shown = self.terminal.show_cursor().is_ok();
        self.changes.restore();
        if shown {
            // SAFETY: the terminal is dropped once, here, and not used again: the guard
            // that holds it is being dropped. A terminal whose cursor cannot be shown (it
            // is gone) is left undropped: its drop would only complain on stderr, and the
            // process is about to end.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.terminal) };
        }
        // The default hook back — but not while unwinding: `take_hook` panics on a
        // panicking thread, and a panic in a destructor during unwinding aborts. The hook
        // left in place then restores nothing (it already did) and prints as before.
        if !std::thread::panicking() {
            drop(std::panic::take_hook());
        }
    }
}
