//! A running worker told to stop ends promptly with a partial summary.

use std::time::Duration;

use benchtop_workloads::protocol::WorkerMessage;
use benchtop_workloads::ring::{RingMode, RingParams};
use benchtop_workloads::worker::Workload;

use crate::support::{RunningWorker, figure};

/// Far more hops than a test will wait for: only a stop ends it.
fn endless(mode: RingMode) -> Workload {
    Workload::Ring(RingParams {
        num_nodes: 100,
        num_rounds: 4_000_000_000,
        mode,
        runtime_threads: 2,
        ..RingParams::default()
    })
}

fn assert_partial_summary(reports: &[WorkerMessage], log: &str) {
    let kinds: Vec<_> = reports.iter().map(WorkerMessage::kind).collect();
    assert_eq!(kinds[..2], ["hello", "ready"]);
    assert_eq!(kinds.last(), Some(&"summary"), "{kinds:?}");
    assert!(
        // A worker that samples its allocations sends them before its ticks.
        kinds[2..kinds.len() - 1]
            .iter()
            .all(|k| *k == "tick" || *k == "alloc_samples"),
        "{kinds:?}"
    );
    let summary = reports.last().unwrap();
    let sum = figure(summary, "final_sum_after_ring_messaging");
    assert!(sum > 0.0 && sum < 400_000_000_000.0, "{sum}");
    assert_eq!(figure(summary, "num_ring_rounds"), 4_000_000_000.0);
    // The final tick has every hop made before the stop.
    let WorkerMessage::Tick(last_tick) = &reports[reports.len() - 2] else {
        panic!("no final tick");
    };
    assert!(last_tick.counters["messages"] > 0);
    assert!(log.contains("stopped early"), "{log}");
}

#[test]
fn a_worker_told_stop_mid_run_ends_promptly_with_a_partial_summary() {
    for mode in [RingMode::Tell, RingMode::Ask] {
        let mut worker = RunningWorker::start(endless(mode), Duration::from_millis(100));
        worker.wait_for_progress("messages", Duration::from_secs(60));
        worker.send("{\"type\":\"stop\"}");
        let reports = worker.reports.clone();
        let (result, log) = worker.wait(Duration::from_secs(60));
        result.unwrap();
        assert_partial_summary(&reports.messages(), &log);
    }
}

#[test]
fn a_worker_whose_conductor_goes_away_stops_too() {
    let mut worker = RunningWorker::start(endless(RingMode::Tell), Duration::from_millis(100));
    worker.wait_for_progress("messages", Duration::from_secs(60));
    drop(worker.conductor.take());
    let reports = worker.reports.clone();
    let (result, log) = worker.wait(Duration::from_secs(60));
    result.unwrap();
    assert_partial_summary(&reports.messages(), &log);
}
