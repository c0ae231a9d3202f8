//! The cost of judging two series of 30 runs each (`compare_runs`): every figure judged
//! across runs on the log ratio (each run's value read once, the latency percentiles from
//! each run's merged histogram), with the runs set aside and the runs needed worked out.
//! The goal is no slower than the two-stage bootstrap it replaced (484 ms in a release
//! build on a 2-vCPU VM); run both builds in one sitting on a quiet machine to compare.
//!
//! `cargo bench -p benchtop-sessions --bench compare`. Each run has 20 intervals of one
//! second: a rate, RSS, threads and CPU, and a latency histogram of 2 000 values spread
//! over two decades, written and loaded back as recorded sessions are.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

use benchtop_sessions::compare::{CompareOptions, compare_runs};
use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
use benchtop_sessions::timeseries::Resources;
use benchtop_sessions::{Session, SessionMeta, SessionWriter, Status, TimeseriesRow};
use criterion::{Criterion, criterion_group, criterion_main};
use hdrhistogram::Histogram;

const RUNS: usize = 30;
const INTERVALS: usize = 20;

fn run(dir: &Path, seed: u64) -> Session {
    let meta = SessionMeta::new(
        "run",
        WorkloadInfo::new("ring", BTreeMap::new()),
        HostInfo::default(),
        "2026-11-24T12:00:00Z",
    );
    let mut w = SessionWriter::create(dir, meta).expect("a new session");
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1000) as f64 / 1000.0
    };
    for i in 0..INTERVALS {
        let mut row = TimeseriesRow::default();
        row.t_s = (i + 1) as f64;
        row.interval_s = 1.0;
        row.rates
            .insert("messages".into(), 1e7 * (1.0 + 0.02 * next()));
        let mut resources = Resources::default();
        resources.rss_bytes = (8e6 * (1.0 + 0.1 * next())) as u64;
        resources.threads = 4;
        resources.cpu_percent = 90.0 + 10.0 * next();
        row.resources = Some(resources);
        w.append_row(&row).expect("a row");
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        for _ in 0..2000 {
            h.record((10_000.0 * 100f64.powf(next())) as u64)
                .expect("in range");
        }
        w.append_latency("lap", i as f64, 1.0, &h)
            .expect("an interval");
    }
    let dir = w
        .finish(Status::Complete, "2026-11-24T12:00:20Z".into())
        .expect("finished");
    Session::load(&dir).expect("loads")
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let a: Vec<Session> = (0..RUNS)
        .map(|i| run(&tmp.path().join(format!("a{i}")), i as u64 + 1))
        .collect();
    let b: Vec<Session> = (0..RUNS)
        .map(|i| run(&tmp.path().join(format!("b{i}")), i as u64 + 101))
        .collect();
    let (a, b): (Vec<&Session>, Vec<&Session>) = (a.iter().collect(), b.iter().collect());
    let opts = CompareOptions::default();
    let mut group = c.benchmark_group("compare");
    group.sample_size(10);
    group.bench_function("two series of 30 runs", |bench| {
        bench.iter(|| black_box(compare_runs(&a, &b, &opts)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
