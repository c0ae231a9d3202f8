//! Somewhere else a run's intervals go as they are written: an OTLP exporter streaming
//! them to a collector. The recorder hands it copies on its own thread and goes on: an
//! implementation queues them and returns at once, so a slow or absent receiver never
//! slows the run or loses local data. What it drops it counts ([`StreamDrops`]), and the
//! recorder tells the live consumer ([`crate::Notice::StreamDropped`]).

use std::time::SystemTime;

use benchtop_profilers::allocations::AllocInterval;
use benchtop_sessions::intervals::StacksChunk;
use benchtop_sessions::{SessionMeta, TimeseriesRow};
use hdrhistogram::Histogram;

/// How often at most the recorder tells of a stream's rising drops (the first drop is told
/// at once): an outage of minutes is a handful of notices, not one an interval.
pub const STREAM_NOTICE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// A receiver of a run's intervals as they are written.
pub trait IntervalStream: Send + Sync + std::fmt::Debug {
    /// Measured work began at `start` (wall clock; rows' and stacks' times count from
    /// it); `meta` is the session as it stands (id, workload, parameters, host, pid).
    fn began(&self, meta: &SessionMeta, start: SystemTime);
    /// A row as written to timeseries.jsonl, with its interval's histograms.
    fn row(&self, row: &TimeseriesRow, histograms: &[(String, Histogram<u64>)]);
    /// Stacks as appended to stacks.jsonl (new definitions, then interval weights).
    fn stacks(&self, chunk: &StacksChunk);
    /// A built-in worker's sampled allocations of one interval (bytes allocated in it and
    /// live at its end, per stack), at each row and once more at the end of the run.
    fn allocs(&self, interval: &AllocInterval) {
        let _ = interval;
    }
    /// The run's measured work is over and the recorder is about to write what it holds
    /// (and may wait for work the stream does on its behalf, such as naming stacks): a
    /// stream that works at a lower priority than the recorder takes its priority back.
    fn ending(&self) {}
    /// The run ended: what is still queued may be sent for a bounded time; what the
    /// stream has to say (warnings, what it sent) goes into the session's metadata.
    fn finish(&self, meta: &mut SessionMeta);
    /// What it dropped so far (asked once an interval; cheap).
    fn drops(&self) -> StreamDrops {
        StreamDrops::default()
    }
}

/// Batches a stream dropped so far, by reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StreamDrops {
    /// Where the stream sends (its endpoint).
    pub to: String,
    /// Batches that failed every attempt: the receiver is away or refuses.
    pub failed: u64,
    /// Batches that found the queue full: the receiver is slow or hangs.
    pub queue_full: u64,
    /// The last error a send met.
    pub last_error: Option<String>,
}

impl StreamDrops {
    /// Drops of a stream to `to`.
    pub fn new(to: &str, failed: u64, queue_full: u64, last_error: Option<String>) -> Self {
        StreamDrops {
            to: to.to_owned(),
            failed,
            queue_full,
            last_error,
        }
    }

    /// Batches dropped in all.
    pub fn dropped(&self) -> u64 {
        self.failed.saturating_add(self.queue_full)
    }

    /// Why, in a word or two: `unreachable`, `queue full`, or both.
    pub fn reason(&self) -> &'static str {
        match (self.failed > 0, self.queue_full > 0) {
            (true, true) => "unreachable, queue full",
            (false, true) => "queue full",
            _ => "unreachable",
        }
    }
}

impl std::fmt::Display for StreamDrops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "streaming to {}: {} batches dropped",
            self.to,
            self.dropped()
        )?;
        let mut why = Vec::new();
        if self.failed > 0 {
            why.push(match &self.last_error {
                Some(e) => format!("{} unreachable: {e}", self.failed),
                None => format!("{} unreachable", self.failed),
            });
        }
        if self.queue_full > 0 {
            why.push(format!("{} with the queue full", self.queue_full));
        }
        if !why.is_empty() {
            write!(f, " ({})", why.join("; "))?;
        }
        f.write_str("; the session keeps everything")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_say_how_many_and_why() {
        let d = StreamDrops::new(
            "http://127.0.0.1:4317",
            3,
            2,
            Some("connection refused".into()),
        );
        assert_eq!(d.dropped(), 5);
        assert_eq!(d.reason(), "unreachable, queue full");
        assert_eq!(
            d.to_string(),
            "streaming to http://127.0.0.1:4317: 5 batches dropped (3 unreachable: \
             connection refused; 2 with the queue full); the session keeps everything"
        );
        assert_eq!(
            StreamDrops::new("x", 0, 1, None).to_string(),
            "streaming to x: 1 batches dropped (1 with the queue full); the session keeps \
             everything"
        );
    }
}
