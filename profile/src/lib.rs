//! benchtop's profile model: what every crate that records, stores, shows or exports a
//! profile reads.
//!
//! The one table of profile kinds ([`kinds::KINDS`]: name, units per file, collector,
//! files, exports); stacks as an interned tree with their folded format ([`StackTree`]);
//! stacks over time, stacks.jsonl ([`intervals`]); sparse histograms ([`sparse`]) and the
//! workers' histogram wire format ([`histogram`]); frame names for display ([`names`]),
//! source lines ([`lines`]), units ([`units`]), escaping ([`escape`]); the monitors' rows
//! ([`timeseries`]); the loaders' limits ([`limits`]); and how a run was sampled
//! ([`sampling`]). It reads and writes only its own formats: the session directory is
//! `benchtop-sessions`'s.
//!
//! ```
//! use benchtop_profile::StackTree;
//! use benchtop_profile::kinds::Kind;
//!
//! let mut stacks = StackTree::new();
//! stacks.add_names(["main", "ring::hop"], 10);
//! stacks.add_names(["main", "ring::wait"], 5);
//! let mut folded = Vec::new();
//! stacks.write_folded(&mut folded)?;
//! assert_eq!(String::from_utf8(folded)?, "main;ring::hop 10\nmain;ring::wait 5\n");
//! assert_eq!(Kind::Cpu.folded_file(), "cpu.folded");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod by_kind;
mod error;
pub mod escape;
pub mod histogram;
pub mod intervals;
pub mod kinds;
pub mod limits;
pub mod lines;
pub mod names;
pub mod sampling;
pub mod sparse;
pub mod stacks;
pub mod timeseries;
pub mod units;
pub mod waits;

pub use by_kind::ByKind;
pub use error::ProfileError;
pub use kinds::{Kind, KindSet, KindSpec};
pub use stacks::{Children, FoldedLimits, FrameId, NodeId, StackTree};
pub use timeseries::{
    Aggregated, ContextSwitches, IoCounters, Percentiles, Resources, ThreadCpu, ThreadSummary,
    TimeseriesRow, TreeCounts,
};
