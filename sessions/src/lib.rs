//! benchtop's data model and session directory format.
//!
//! A session is a directory of files other tools already read: `session.json`
//! ([`SessionMeta`]), `timeseries.jsonl` ([`TimeseriesRow`]), `latency.hlog` (an
//! HdrHistogram interval log, [`hlog`]), `cpu.folded` ([`StackTree`]) and its flamegraph
//! ([`flame`]), `threads.csv` (every thread the monitors saw, [`ThreadSummary`]), and
//! `worker.log`. [`SessionWriter`] records one incrementally while a run goes
//! on; [`Session::load`] reads one back and checks it. [`histogram::decode_histogram`]
//! decodes the base64 histograms of latency.hlog and of worker reports without trusting the
//! sizes inside them, and [`units`] formats durations and sizes for people. This crate owns
//! those types and formats; it runs no processes and touches no terminal.
//! docs/session-format.md is the specification.
//!
//! ```
//! use std::time::SystemTime;
//!
//! use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
//! use benchtop_sessions::{
//!     Session, SessionMeta, SessionWriter, Kind, StackTree, Status, TimeseriesRow,
//! };
//!
//! let now = SystemTime::now();
//! let id = benchtop_sessions::new_session_id("ring", now);
//! let meta = SessionMeta::new(
//!     &id,
//!     WorkloadInfo::new("ring", Default::default()),
//!     HostInfo::default(),
//!     benchtop_sessions::rfc3339(now),
//! );
//! let root = tempfile::tempdir()?;
//! let mut writer = SessionWriter::create(&root.path().join(&id), meta)?;
//!
//! let mut row = TimeseriesRow::default();
//! row.t_s = 1.0;
//! row.interval_s = 1.0;
//! writer.append_row(&row)?;
//!
//! let mut latency = hdrhistogram::Histogram::<u64>::new(3)?;
//! latency.record(1_500)?;
//! writer.append_latency("rtt", 0.0, 1.0, &latency)?;
//!
//! let mut stacks = StackTree::new();
//! stacks.add_names(["main", "ring::hop"], 10);
//! writer.write_stacks(Kind::Cpu, &stacks, "ring: on-CPU")?;
//!
//! let dir = writer.finish(Status::Complete, benchtop_sessions::rfc3339(SystemTime::now()))?;
//! let session = Session::load(&dir)?;
//! assert_eq!(session.meta.status, Status::Complete);
//! assert_eq!(session.rows.len(), 1);
//! assert_eq!(session.latency[0].histogram.len(), 1);
//! assert!(session.summary_text().contains("ring::hop"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod compare;
pub mod curves;
pub mod digest;
pub mod dir;
mod error;
pub mod export;
pub mod firefox;
pub mod flame;
pub mod history;
pub mod hlog;
pub mod memory;
pub mod meta;
pub mod plot;
pub mod pprof;
pub mod range;
mod rows;
pub mod series;
pub mod store;
pub mod summary;
pub mod synthetic;
pub mod threads_csv;

pub use benchtop_profile::{
    ByKind, Kind, KindSet, ProfileError, escape, histogram, intervals, kinds, limits, lines, names,
    sparse, stacks, timeseries, units, waits,
};
pub use error::SessionError;
pub use hlog::{Hlog, HlogInterval, HlogWriter, read_hlog};
pub use meta::{EndedBy, Failure, FailureKind, SessionMeta, Status, ended_words, status_words};
pub use stacks::{Children, FrameId, NodeId, StackTree};
pub use store::{
    AllocTotals, RowSummary, Session, SessionFiles, SessionWriter, new_session_id, rfc3339,
};
pub use timeseries::{
    Aggregated, ContextSwitches, IoCounters, Percentiles, Resources, ThreadCpu, ThreadSummary,
    TimeseriesRow, TreeCounts,
};

/// Version of the session directory format this build writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 2;
