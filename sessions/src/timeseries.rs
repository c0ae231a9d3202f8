//! timeseries.jsonl: one row per interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// One interval of a run: the workload's counters and latencies, and the monitors.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TimeseriesRow {
    /// End of the interval, seconds since the worker started measured work.
    #[serde(deserialize_with = "f64_or_nan")]
    pub t_s: f64,
    /// Length of the interval, seconds.
    #[serde(deserialize_with = "f64_or_nan")]
    pub interval_s: f64,
    /// Cumulative workload counters.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// Counter rates over the interval, per second.
    #[serde(default, deserialize_with = "f64_map_or_nan")]
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
    #[serde(deserialize_with = "f64_or_nan")]
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
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_percent: f64,
    /// CPU time used so far, user + system, seconds.
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_time_s: f64,
}

/// serde_json writes a non-finite float as `null`; read `null` back as NaN so that such a
/// value cannot make a recorded session unreadable.
pub(crate) fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// [`f64_or_nan`] for the values of a map.
fn f64_map_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    let map = BTreeMap::<String, Option<f64>>::deserialize(d)?;
    Ok(map
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or(f64::NAN)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_floats_written_as_null_read_back_as_nan() {
        let mut row = TimeseriesRow {
            t_s: 1.0,
            interval_s: f64::INFINITY,
            ..TimeseriesRow::default()
        };
        row.rates.insert("ops".into(), f64::NAN);
        let json = serde_json::to_string(&row).unwrap();
        let back: TimeseriesRow = serde_json::from_str(&json).unwrap();
        assert_eq!(back.t_s, 1.0);
        assert!(back.interval_s.is_nan());
        assert!(back.rates["ops"].is_nan());
    }
}
