//! Integration tests of benchtop-profilers against real processes.
//!
//! Sampling tests need perf_event_open (paranoid <= 2 for user stacks of our own
//! children); without it they fail and say what is missing.

mod fixture;
mod host;
mod jit;
mod lifetimes;
mod mem;
mod monitor;
mod names;
mod offcpu;
mod reaper;
mod rounds;
mod sampler;
mod stripped;
mod timeline;
mod tree_monitor;
mod unprivileged;
mod unwind;
mod waits;
