//! The interrupts a recording hears: a count shared between whoever hears the user
//! (a signal handler of the binary, a test) and the recordings that stop on it.
//!
//! The conductor installs no signal handler of its own and keeps no process-wide state:
//! each recording is given an [`Interrupts`] in its options and stops its worker on the
//! first interrupt raised after it began, and kills it on the second. A program that
//! records several runs (a series) shares one [`Interrupts`] across them and reads
//! [`Interrupts::count`] between runs to stop when the user asked while none was running.
//!
//! ```
//! let heard = benchtop_record::Interrupts::new();
//! let seen_by_a_run = heard.clone();
//! heard.raise();
//! assert_eq!(seen_by_a_run.count(), 1);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A count of interrupts, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct Interrupts(Arc<AtomicUsize>);

impl Interrupts {
    /// None raised yet.
    pub fn new() -> Self {
        Interrupts::default()
    }

    /// Interrupts raised so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Raises one; returns how many there have been, this one included. Only an atomic
    /// increment: safe to call from a signal handler.
    pub fn raise(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst).saturating_add(1)
    }
}
