//! Somewhere else a run's intervals go as they are written: an OTLP exporter streaming
//! them to a collector. The recorder hands it copies on its own thread and goes on: an
//! implementation queues them and returns at once, so a slow or absent receiver never
//! slows the run or loses local data.

use std::time::SystemTime;

use benchtop_sessions::intervals::StacksChunk;
use benchtop_sessions::{SessionMeta, TimeseriesRow};
use hdrhistogram::Histogram;

/// A receiver of a run's intervals as they are written.
pub trait IntervalStream: Send + Sync + std::fmt::Debug {
    /// Measured work began at `start` (wall clock; rows' and stacks' times count from
    /// it); `meta` is the session as it stands (id, workload, parameters, host, pid).
    fn began(&self, meta: &SessionMeta, start: SystemTime);
    /// A row as written to timeseries.jsonl, with its interval's histograms.
    fn row(&self, row: &TimeseriesRow, histograms: &[(String, Histogram<u64>)]);
    /// Stacks as appended to stacks.jsonl (new definitions, then interval weights).
    fn stacks(&self, chunk: &StacksChunk);
    /// The run ended: what is still queued may be sent for a bounded time; what the
    /// stream has to say (warnings, what it sent) goes into the session's metadata.
    fn finish(&self, meta: &mut SessionMeta);
}
