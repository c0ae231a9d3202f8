//! The counts of one instance that its per-second lines read, and the metrics they feed.

use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::report::{Counter, IntervalHistogram};

/// Counts of one instance, for its per-second lines, and the metrics they feed.
#[derive(Debug)]
pub struct Tally {
    received: Counter,
    bytes: Counter,
    latency_sum_ns: Counter,
    messages_metrics: Vec<Arc<Counter>>,
    bytes_metrics: Vec<Arc<Counter>>,
    latency_metrics: Vec<Arc<IntervalHistogram>>,
}

impl Tally {
    /// A tally feeding nothing but itself.
    pub fn new() -> Tally {
        Tally {
            received: Counter::default(),
            bytes: Counter::default(),
            latency_sum_ns: Counter::default(),
            messages_metrics: Vec::new(),
            bytes_metrics: Vec::new(),
            latency_metrics: Vec::new(),
        }
    }

    /// A tally that also feeds each of `messages`, `bytes` and `latency`.
    pub(super) fn feeding(
        messages: Vec<Arc<Counter>>,
        bytes: Vec<Arc<Counter>>,
        latency: Vec<Arc<IntervalHistogram>>,
    ) -> Tally {
        Tally {
            messages_metrics: messages,
            bytes_metrics: bytes,
            latency_metrics: latency,
            ..Tally::new()
        }
    }

    /// Adds `messages` answers of `bytes` bytes, their latencies summing to `sum_ns` and
    /// recorded in `latency`.
    pub fn add(&self, messages: u64, bytes: u64, sum_ns: u64, latency: &Histogram<u64>) {
        if messages == 0 {
            return;
        }
        self.received.add(messages);
        self.bytes.add(bytes);
        self.latency_sum_ns.add(sum_ns);
        for c in &self.messages_metrics {
            c.add(messages);
        }
        for c in &self.bytes_metrics {
            c.add(bytes);
        }
        for h in &self.latency_metrics {
            h.add(latency);
        }
    }

    /// Answers, bytes and latency sum so far.
    pub fn totals(&self) -> (u64, u64, u64) {
        (
            self.received.get(),
            self.bytes.get(),
            self.latency_sum_ns.get(),
        )
    }
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}
