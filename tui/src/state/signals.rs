//! The signals that end the TUI, and why it left other than by a key.

/// The signals that end the TUI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: asked to terminate.
    Term,
    /// SIGHUP: the terminal hung up.
    Hup,
    /// SIGINT: an interrupt (Ctrl-C typed outside raw mode, or `kill -INT`).
    Int,
    /// SIGQUIT: asked to quit.
    Quit,
}

impl Signal {
    /// Every signal the TUI watches for.
    pub const ALL: [Signal; 4] = [Signal::Term, Signal::Hup, Signal::Int, Signal::Quit];

    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Hup => libc::SIGHUP,
            Signal::Int => libc::SIGINT,
            Signal::Quit => libc::SIGQUIT,
        }
    }

    /// The signal of this number, if the TUI watches for it.
    pub fn from_number(number: i32) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.number() == number)
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signal::Term => "SIGTERM",
            Signal::Hup => "SIGHUP",
            Signal::Int => "SIGINT",
            Signal::Quit => "SIGQUIT",
        })
    }
}

/// Why the TUI left other than by a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A signal.
    Signal(Signal),
    /// The terminal went away.
    TerminalGone,
}
