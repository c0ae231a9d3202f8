//! Long synthetic sessions, written through [`SessionWriter`] as the recorder writes them:
//! for the tests and benchmarks that load an hour of intervals (`show`, `compare` and
//! `open` of a session of 36,000 intervals of 100 ms).
//!
//! Each interval has a latency histogram of [`SyntheticSession::values_per_interval`]
//! values (a body around `body_ns` and a 1 % tail around ten times it, spread so that
//! most values fall in buckets of their own, as a real workload's do) and a timeseries
//! row with a rate and the resources of the tree. The generator is deterministic in its
//! seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use crate::meta::{Figure, HostInfo, WorkloadInfo};
use crate::{
    Percentiles, Resources, SessionError, SessionMeta, SessionWriter, Status, TimeseriesRow,
};

/// What to write.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SyntheticSession {
    /// Intervals (timeseries rows and latency.hlog lines).
    pub intervals: usize,
    /// Length of an interval, seconds.
    pub interval_s: f64,
    /// Latency values recorded in each interval.
    pub values_per_interval: u64,
    /// Where the latencies' body lies, ns.
    pub body_ns: u64,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for SyntheticSession {
    /// An hour at 100 ms: 36,000 intervals of 1,000 values around 50 µs.
    fn default() -> Self {
        SyntheticSession {
            intervals: 36_000,
            interval_s: 0.1,
            values_per_interval: 1_000,
            body_ns: 50_000,
            seed: 1,
        }
    }
}

impl SyntheticSession {
    /// Writes the session into `dir` (fresh or empty, as [`SessionWriter::create`] wants),
    /// finished `complete`; returns its directory.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, SessionError> {
        let mut meta = SessionMeta::new(
            dir.file_name().map_or_else(
                || "synthetic".to_owned(),
                |n| n.to_string_lossy().into_owned(),
            ),
            WorkloadInfo::new(
                "ring",
                BTreeMap::from([("num-nodes".to_owned(), serde_json::json!(1000))]),
            ),
            HostInfo::default(),
            "2026-11-24T12:00:00Z",
        );
        meta.summary = vec![Figure::new("laps/s", 20_000.0, "/s")];
        let mut writer = SessionWriter::create(dir, meta)?;
        let mut rng = self.seed.max(1);
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Sized to the values (the tail reaches twenty times the body), as the workloads'
        // histograms grow to theirs.
        let mut h =
            Histogram::<u64>::new_with_bounds(1, self.body_ns.max(1) * 20, 3).map_err(|e| {
                SessionError::BadHistogram {
                    reason: e.to_string(),
                }
            })?;
        h.auto(true);
        for i in 0..self.intervals {
            h.reset();
            for v in 0..self.values_per_interval {
                let base = if v % 100 == 0 {
                    self.body_ns * 10
                } else {
                    self.body_ns
                };
                // Up to twice the base, in steps finer than the histogram's buckets.
                let value = base + base * (next() % 1_000_000) / 1_000_000;
                // Within the range by construction; a value past it is left out.
                let _ = h.record(value);
            }
            let t = (i + 1) as f64 * self.interval_s;
            let start = i as f64 * self.interval_s;
            writer.append_latency("lap", start, self.interval_s, &h)?;
            let mut row = TimeseriesRow {
                t_s: t,
                interval_s: self.interval_s,
                ..TimeseriesRow::default()
            };
            let laps = (i as u64 + 1) * 2_000;
            row.counters.insert("laps".into(), laps);
            row.rates.insert(
                "laps".into(),
                20_000.0 * (1.0 + (next() % 100) as f64 / 10_000.0),
            );
            row.latency.insert("lap".into(), Percentiles::of(&h));
            row.resources = Some(Resources {
                rss_bytes: 50 << 20,
                peak_rss_bytes: 50 << 20,
                threads: 4,
                cpu_percent: 100.0 + (next() % 100) as f64 / 10.0,
                ..Resources::default()
            });
            writer.append_row(&row)?;
        }
        let ended_at = "2026-11-24T13:00:00Z".to_owned();
        writer.finish(Status::Complete, ended_at)
    }
}
