//! benchtop's data model and session directory format.
//!
//! A session is a directory of files other tools already read: `session.json`
//! ([`SessionMeta`]), `timeseries.jsonl` ([`TimeseriesRow`]), `latency.hlog` (an
//! HdrHistogram interval log), `cpu.folded` ([`StackTree`]) and its flamegraph, and
//! `worker.log`. This crate owns those types and formats; it runs no processes and
//! touches no terminal. docs/session-format.md is the specification.
#![deny(missing_docs)]

mod error;
pub mod meta;
pub mod stacks;
pub mod timeseries;

pub use error::SessionError;
pub use meta::{SessionMeta, Status};
pub use stacks::{FrameId, NodeId, StackTree};
pub use timeseries::{Percentiles, Resources, TimeseriesRow};

/// Version of the session directory format this build writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;
