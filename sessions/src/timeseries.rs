//! timeseries.jsonl: one row per interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One interval of a run: the workload's counters and latencies, and the monitors.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TimeseriesRow {
    /// End of the interval, seconds since the worker started measured work.
    pub t_s: f64,
    /// Length of the interval, seconds.
    pub interval_s: f64,
    /// Cumulative workload counters.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// Counter rates over the interval, per second.
    #[serde(default)]
    pub rates: BTreeMap<String, f64>,
    /// Latency percentiles of the interval, per histogram metric.
    #[serde(default)]
    pub latency: BTreeMap<String, Percentiles>,
    /// Resource monitors at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// Percentiles of one histogram, in its unit (nanoseconds for latencies).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Smallest value.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// Percentiles of a histogram; all zero when it is empty.
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: histogram.len(),
            min: histogram.min(),
            p50: histogram.value_at_quantile(0.50),
            p90: histogram.value_at_quantile(0.90),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
            mean: histogram.mean(),
        }
    }
}

/// Resource use of the worker (and, where noted, its process tree).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Resources {
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// Peak resident set size so far, bytes.
    pub peak_rss_bytes: u64,
    /// Threads.
    pub threads: u32,
    /// CPU use over the interval, percent of one core (200 = two cores busy).
    pub cpu_percent: f64,
    /// CPU time used so far, user + system, seconds.
    pub cpu_time_s: f64,
}
