//! The TUI's views: pure functions of the state into a frame.

pub mod flame;
