//! The TUI's state: plain data updated by events, no terminal and no I/O.

pub mod flame;
