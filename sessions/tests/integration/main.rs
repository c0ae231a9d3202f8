//! Integration tests of benchtop-sessions: the session directory as other crates and tools
//! see it.

// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests only covers
// the test functions themselves.
#![allow(clippy::unwrap_used)]

mod compare;
mod compat;
mod corrupt;
mod firefox;
mod flame;
mod hlog;
mod hostile;
mod kinds;
mod monitors;
mod sequential;
mod store;
mod verdicts;

use std::collections::BTreeMap;

use benchtop_sessions::meta::{Figure, HostInfo, WorkloadInfo};
use benchtop_sessions::{Resources, SessionMeta, TimeseriesRow};
use hdrhistogram::Histogram;

/// Metadata of a `ring` run started 2024-05-01T12:00:00Z, with every section filled in.
pub fn meta(id: &str) -> SessionMeta {
    let params = BTreeMap::from([
        ("workers".to_owned(), serde_json::json!(4)),
        ("mode".to_owned(), serde_json::json!("ask")),
    ]);
    let mut host = HostInfo::default();
    host.hostname = "bench-1".into();
    host.cpu_model = "AMD EPYC 7B13".into();
    host.cores = 8;
    host.kernel = "6.8.0-45-generic".into();
    host.memory_bytes = 32 << 30;
    host.perf.paranoid = Some(2);
    host.perf.mlock_kb = Some(516);
    let mut m = SessionMeta::new(
        id,
        WorkloadInfo::new("ring", params),
        host,
        "2024-05-01T12:00:00.000Z",
    );
    m.command_line = vec!["benchtop".into(), "record".into(), "ring".into()];
    m.benchtop_version = "0.1.0".into();
    m.sampling.enabled = true;
    m.sampling.event = "cpu-clock".into();
    m.sampling.frequency_hz = 999;
    m.sampling.samples = 2_990;
    m.sampling.lost = 3;
    m.sampling.reason = Some("kernel frames need perf_event_paranoid <= 1".into());
    m.worker.pid = Some(4242);
    m.worker.exit = Some("exit code 0".into());
    m.worker.cpu_time_s = Some(2.5);
    m.summary = vec![
        Figure::new("messages/s", 1_250_000.0, "msg/s"),
        Figure::new("time taken", 3.2, "s"),
    ];
    m.warnings = vec!["the worker's stderr was not captured".into()];
    m
}

/// A row at `t_s` with `ops` done so far and the given memory and threads.
pub fn row(t_s: f64, ops: u64, rss_bytes: u64, threads: u32) -> TimeseriesRow {
    let mut row = TimeseriesRow::default();
    row.t_s = t_s;
    row.interval_s = 1.0;
    row.counters.insert("ops".into(), ops);
    row.rates.insert("ops".into(), ops as f64 / t_s);
    row.latency.insert(
        "rtt".into(),
        benchtop_sessions::Percentiles::of(&histogram(&[1_000, 2_000])),
    );
    let mut resources = Resources::default();
    resources.rss_bytes = rss_bytes;
    resources.peak_rss_bytes = rss_bytes;
    resources.threads = threads;
    resources.cpu_percent = 180.0;
    row.resources = Some(resources);
    row
}

/// A 3-digit histogram of `values` (nanoseconds).
pub fn histogram(values: &[u64]) -> Histogram<u64> {
    let mut h = Histogram::new(3).unwrap();
    for &v in values {
        h.record(v).unwrap();
    }
    h
}
