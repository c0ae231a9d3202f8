//! benchtop's profilers: a perf-event stack sampler with batched symbolization, and
//! /proc monitors. They collect live data into the profile model's types
//! (`benchtop-profile`); this crate knows nothing of workloads or the session store and
//! never prints.
//!
//! ```no_run
//! use benchtop_profile::Kind;
//! use benchtop_profilers::{Sampler, SamplerOptions, TreeMonitor};
//!
//! # fn main() -> Result<(), benchtop_profilers::ProfilerError> {
//! let opts = SamplerOptions::default();
//! Sampler::check(&opts)?; // bad options or no perf events: refused before a worker runs
//! let pid = 4242; // a worker waiting for its start message
//! let sampler = Sampler::start(pid, &opts)?;
//! let mut monitor = TreeMonitor::new(pid);
//! // … start the worker; every interval: …
//! let resources = monitor.sample()?.resources;
//! let progress = sampler.stats();
//! # let _ = (resources, progress);
//! // … at the end:
//! let profile = sampler.finish()?;
//! let folded = profile.profiles[Kind::Cpu].to_folded();
//! # let _ = folded;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod allocations;
pub mod counting;
mod error;
pub mod host;
mod ksyms;
pub mod lifetimes;
pub mod monitor;
pub mod procfs;
pub mod reaper;
mod records;
pub mod sampler;
mod symbolize;
pub mod unwind;

pub use error::ProfilerError;
pub use host::host_info;
pub use monitor::{
    Discovery, ProcessSample, ThreadSample, TreeMonitor, TreeMonitorOptions, TreeSample,
};
pub use procfs::{process_exited_unreaped, process_start_ticks};
pub use sampler::{
    DEFAULT_MEM_PERIOD, Profile, SampleEvent, Sampler, SamplerOptions, SamplerStats, Snapshot,
    probe_access,
};
pub use symbolize::SymbolDetail;
pub use unwind::{UnwindCounts, UnwindMode};
