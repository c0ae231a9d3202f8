//! The metrics a worker reports: cumulative counters and interval histograms.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::WorkloadError;
use crate::protocol::{Metric, MetricKind, new_latency_histogram};

/// A cumulative count since `start` (reported as is in every tick).
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` (one relaxed atomic add).
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    #[inline]
    pub fn increment(&self) {
        self.add(1);
    }

    /// The count so far.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the count: one relaxed store, no read-modify-write.
    ///
    /// For a count kept by one writer at a time, where each write happens after the
    /// previous one (the ring hands its single message from task to task through
    /// mailboxes, which orders the hops). The value must never decrease: counters are
    /// cumulative on the wire (the one exception is the allocator's `live_bytes`).
    #[inline]
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

/// A histogram of the current interval only, swapped out by the ticker each tick.
///
/// Values are nanoseconds, with [`crate::protocol::HISTOGRAM_SIGFIG`] significant digits,
/// auto-resizing. Recording takes an uncontended mutex (the ticker holds it only for a
/// swap), so record at a modest rate — per lap, per request — not per instruction.
#[derive(Debug)]
pub struct IntervalHistogram(Mutex<Histogram<u64>>);

impl Default for IntervalHistogram {
    fn default() -> Self {
        IntervalHistogram(Mutex::new(new_latency_histogram()))
    }
}

impl IntervalHistogram {
    /// Records `ns` nanoseconds (saturating at the histogram's range).
    #[inline]
    pub fn record(&self, ns: u64) {
        let mut histogram = self.lock();
        // `record` grows an auto-resizing histogram; `saturating_record` would clamp every
        // value to the current (initially tiny) range instead.
        if histogram.record(ns).is_err() {
            histogram.saturating_record(ns);
        }
    }

    /// Records a duration in nanoseconds.
    #[inline]
    pub fn record_duration(&self, duration: Duration) {
        self.record(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Adds every value of `values`: for a hot loop that records into a histogram of its
    /// own and hands it over now and then, one lock per batch.
    pub fn add(&self, values: &Histogram<u64>) {
        let mut histogram = self.lock();
        if histogram.add(values).is_err() {
            // Beyond the range even after resizing: clamp, as `record` does.
            for v in values.iter_recorded() {
                histogram.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// Swaps the current interval's histogram with `spare` (which should be empty):
    /// `spare` then holds the interval just ended.
    pub fn swap(&self, spare: &mut Histogram<u64>) {
        std::mem::swap(&mut *self.lock(), spare);
    }

    fn lock(&self) -> MutexGuard<'_, Histogram<u64>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The registry of a worker's metrics: what its `hello` announces and its ticks carry.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Vec<(Metric, Arc<Counter>)>,
    histograms: Vec<(Metric, Arc<IntervalHistogram>)>,
    alloc: Option<AllocCounters>,
}

/// The counting allocator's counters among a worker's metrics, refreshed from
/// [`crate::alloc::snapshot`] just before each tick reads them.
#[derive(Debug, Clone)]
pub(crate) struct AllocCounters {
    alloc_bytes: Arc<Counter>,
    free_bytes: Arc<Counter>,
    live_bytes: Arc<Counter>,
    allocs: Arc<Counter>,
    frees: Arc<Counter>,
}

impl AllocCounters {
    /// Copies the allocator's counters in (all from one snapshot, so that
    /// `alloc_bytes - free_bytes == live_bytes` in every tick).
    pub(crate) fn refresh(&self) {
        if let Some(counts) = crate::alloc::snapshot() {
            self.alloc_bytes.set(counts.alloc_bytes);
            self.free_bytes.set(counts.free_bytes);
            self.live_bytes.set(counts.live_bytes());
            self.allocs.set(counts.allocs);
            self.frees.set(counts.frees);
        }
    }
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a counter; `unit` names one count (e.g. `messages`).
    pub fn counter(
        &mut self,
        name: &str,
        unit: &str,
        description: &str,
    ) -> Result<Arc<Counter>, WorkloadError> {
        let metric = self.new_metric(name, MetricKind::Counter, unit, description)?;
        let counter = Arc::new(Counter::default());
        self.counters.push((metric, counter.clone()));
        Ok(counter)
    }

    /// Registers the counting allocator's counters (`alloc_bytes`, `free_bytes`,
    /// `live_bytes`, `allocs`, `frees`), which the ticker refreshes from
    /// [`crate::alloc::snapshot`] every tick. Call when [`crate::alloc::is_enabled`].
    pub fn alloc_counters(&mut self) -> Result<(), WorkloadError> {
        use crate::alloc::{ALLOC_BYTES, ALLOCS, FREE_BYTES, FREES, LIVE_BYTES};
        let counters = AllocCounters {
            alloc_bytes: self.counter(
                ALLOC_BYTES,
                "bytes",
                "bytes allocated since the worker started (cumulative)",
            )?,
            free_bytes: self.counter(
                FREE_BYTES,
                "bytes",
                "bytes freed since the worker started (cumulative)",
            )?,
            live_bytes: self.counter(
                LIVE_BYTES,
                "bytes",
                "bytes allocated and not yet freed (a level, not cumulative)",
            )?,
            allocs: self.counter(ALLOCS, "calls", "allocation calls (cumulative)")?,
            frees: self.counter(FREES, "calls", "free calls (cumulative)")?,
        };
        counters.refresh();
        self.alloc = Some(counters);
        Ok(())
    }

    /// Registers an interval histogram of nanoseconds.
    pub fn histogram(
        &mut self,
        name: &str,
        description: &str,
    ) -> Result<Arc<IntervalHistogram>, WorkloadError> {
        let metric = self.new_metric(name, MetricKind::Histogram, "ns", description)?;
        let histogram = Arc::new(IntervalHistogram::default());
        self.histograms.push((metric, histogram.clone()));
        Ok(histogram)
    }

    fn new_metric(
        &self,
        name: &str,
        kind: MetricKind,
        unit: &str,
        description: &str,
    ) -> Result<Metric, WorkloadError> {
        let taken = self
            .counters
            .iter()
            .map(|(m, _)| m)
            .chain(self.histograms.iter().map(|(m, _)| m))
            .any(|m| m.name == name);
        if taken {
            return Err(WorkloadError::DuplicateMetric {
                name: name.to_owned(),
            });
        }
        Ok(Metric {
            name: name.to_owned(),
            kind,
            unit: unit.to_owned(),
            description: description.to_owned(),
        })
    }

    /// The metrics as `hello` announces them: counters, then histograms, each in the
    /// order registered.
    pub fn describe(&self) -> Vec<Metric> {
        self.counters
            .iter()
            .map(|(m, _)| m.clone())
            .chain(self.histograms.iter().map(|(m, _)| m.clone()))
            .collect()
    }

    pub(crate) fn counters(&self) -> impl Iterator<Item = (&str, &Arc<Counter>)> {
        self.counters.iter().map(|(m, c)| (m.name.as_str(), c))
    }

    pub(crate) fn histograms(&self) -> impl Iterator<Item = (&str, &Arc<IntervalHistogram>)> {
        self.histograms.iter().map(|(m, h)| (m.name.as_str(), h))
    }

    pub(crate) fn alloc(&self) -> Option<&AllocCounters> {
        self.alloc.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_name_is_registered_once() {
        let mut metrics = Metrics::new();
        metrics.counter("messages", "messages", "").unwrap();
        let err = metrics.histogram("messages", "").unwrap_err().to_string();
        assert!(err.contains("\"messages\""), "{err}");
    }

    #[test]
    fn hello_describes_counters_then_histograms_with_units() {
        let mut metrics = Metrics::new();
        metrics.histogram("lap", "per lap").unwrap();
        metrics.counter("messages", "messages", "hops").unwrap();
        let described = metrics.describe();
        assert_eq!(described[0].name, "messages");
        assert_eq!(described[0].kind, MetricKind::Counter);
        assert_eq!(described[1].name, "lap");
        assert_eq!(described[1].unit, "ns");
    }

    #[test]
    fn swapping_takes_the_interval_and_leaves_an_empty_histogram() {
        let h = IntervalHistogram::default();
        h.record(1_000);
        h.record_duration(Duration::from_micros(2));
        let mut spare = new_latency_histogram();
        h.swap(&mut spare);
        assert_eq!(spare.len(), 2);
        assert_eq!(spare.max(), spare.highest_equivalent(2_000));
        spare.reset();
        h.swap(&mut spare);
        assert_eq!(spare.len(), 0);
    }

    #[test]
    fn a_batch_recorded_elsewhere_is_added_whole() {
        let h = IntervalHistogram::default();
        h.record(5);
        let mut batch = new_latency_histogram();
        batch.record(1_000).unwrap();
        batch.record_n(3_000_000_000, 2).unwrap();
        h.add(&batch);
        let mut spare = new_latency_histogram();
        h.swap(&mut spare);
        assert_eq!(spare.len(), 4);
        assert_eq!(spare.max(), spare.highest_equivalent(3_000_000_000));
    }

    #[test]
    fn counters_add_and_set() {
        let c = Counter::default();
        c.increment();
        c.add(4);
        assert_eq!(c.get(), 5);
        c.set(9);
        assert_eq!(c.get(), 9);
    }
}
