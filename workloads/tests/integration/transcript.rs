//! The checked-in protocol transcript: what a version-1 worker wrote, parsed by today's
//! reader. A change that breaks it breaks every conductor that reads version 1.
//!
//! Re-bless (after an intended, compatible change) with
//! `BENCHTOP_BLESS=1 cargo test -p benchtop-workloads --test integration transcript`.

use std::path::PathBuf;
use std::time::Duration;

use benchtop_workloads::protocol::{
    Better, MetricKind, PROTOCOL_VERSION, ReportReader, WorkerMessage,
};
use benchtop_workloads::ring::RingParams;
use benchtop_workloads::worker::Workload;

use crate::support::{RunningWorker, decode_trusted};

fn transcript_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/protocol/ring-v1.jsonl")
}

/// What the transcript was captured from: long enough for a periodic tick or two.
fn captured_workload() -> Workload {
    Workload::Ring(RingParams {
        num_nodes: 100,
        num_rounds: 3000,
        mode: benchtop_workloads::ring::RingMode::Tell,
        runtime_threads: 1,
        ..RingParams::default()
    })
}

fn run_fresh(workload: Workload) -> (Vec<u8>, Vec<WorkerMessage>) {
    let mut worker = RunningWorker::start(workload, Duration::from_millis(100));
    let reports = worker.reports.clone();
    // Keep stdin open until the worker ends: end of input would mean "stop".
    let conductor = worker.conductor.take();
    let (result, _log) = worker.wait(Duration::from_secs(120));
    drop(conductor);
    result.unwrap();
    (reports.bytes(), reports.messages())
}

fn checked_in() -> Vec<WorkerMessage> {
    if std::env::var_os("BENCHTOP_BLESS").is_some() {
        let (bytes, _) = run_fresh(captured_workload());
        std::fs::write(transcript_path(), bytes).unwrap();
    }
    let bytes = std::fs::read(transcript_path()).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; capture it with BENCHTOP_BLESS=1",
            transcript_path().display()
        )
    });
    let mut reader = ReportReader::new(&bytes[..]);
    std::iter::from_fn(|| reader.next_message())
        .enumerate()
        .map(|(i, m)| m.unwrap_or_else(|e| panic!("transcript message {}: {e}", i + 1)))
        .collect()
}

#[test]
fn the_checked_in_transcript_reads_as_hello_ready_ticks_summary() {
    let messages = checked_in();
    let kinds: Vec<_> = messages.iter().map(WorkerMessage::kind).collect();
    assert_eq!(kinds[..2], ["hello", "ready"], "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"summary"), "{kinds:?}");
    let ticks = &messages[2..messages.len() - 1];
    assert!(!ticks.is_empty());

    let WorkerMessage::Hello(hello) = &messages[0] else {
        unreachable!()
    };
    // Written by a version-1 worker, and still spoken.
    assert_eq!(hello.protocol, 1);
    assert!(benchtop_protocol::SUPPORTED_VERSIONS.contains(&hello.protocol));
    const { assert!(PROTOCOL_VERSION >= 2) };
    assert_eq!(hello.workload, "ring");
    assert_eq!(hello.params["num-nodes"], 100);
    assert_eq!(hello.params["num-rounds"], 3000);
    assert_eq!(hello.params["mode"], "tell");
    let metrics: Vec<_> = hello
        .metrics
        .iter()
        .map(|m| (m.name.as_str(), m.kind, m.unit.as_str()))
        .collect();
    assert_eq!(
        metrics,
        [
            ("messages", MetricKind::Counter, "messages"),
            ("lap", MetricKind::Histogram, "ns"),
        ]
    );

    let mut last = (0, 0);
    let mut laps = 0;
    for tick in ticks {
        let WorkerMessage::Tick(tick) = tick else {
            panic!("not a tick: {tick:?}");
        };
        let messages = tick.counters["messages"];
        assert!(tick.t_ns > last.0 && messages >= last.1, "{tick:?}");
        last = (tick.t_ns, messages);
        let lap = decode_trusted(&tick.histograms["lap"]);
        // A lap of 100 hops takes microseconds, not the few nanoseconds a histogram
        // clamped to its initial range would show.
        assert!(
            lap.is_empty() || lap.min() >= 1_000,
            "lap min {} ns",
            lap.min()
        );
        laps += lap.len();
    }
    assert_eq!(last.1, 300_000, "the final tick has every hop");
    assert_eq!(laps, 3000, "one lap per round, each in exactly one tick");

    let WorkerMessage::Summary(summary) = messages.last().unwrap() else {
        unreachable!()
    };
    let figures: Vec<_> = summary
        .figures
        .iter()
        .map(|f| (f.name.as_str(), f.unit.as_str(), f.better))
        .collect();
    assert_eq!(
        figures,
        [
            ("num_ring_rounds", "", None),
            ("num_nodes", "", None),
            ("time_taken_for_node_creation", "s", Some(Better::Lower)),
            ("final_sum_after_ring_messaging", "", None),
            ("time_taken_for_ring_messaging", "s", Some(Better::Lower)),
            ("messages_per_second", "messages/s", Some(Better::Higher)),
        ]
    );
    let values: Vec<_> = summary.figures.iter().map(|f| f.value).collect();
    assert_eq!(values[0], 3000.0);
    assert_eq!(values[1], 100.0);
    assert_eq!(values[3], 300_000.0);
    assert!(values[2] > 0.0 && values[4] > 0.0 && values[5] > 0.0);
    assert_eq!(summary.lines[0], "num_ring_rounds: 3000");
    assert_eq!(summary.lines[3], "final_sum_after_ring_messaging: 300000");
    assert_eq!(summary.lines.last().map(String::as_str), Some("mode: tell"));
}

#[test]
fn a_fresh_run_speaks_exactly_as_the_transcript_does() {
    let old = checked_in();
    let WorkerMessage::Hello(hello) = &old[0] else {
        unreachable!()
    };
    let params: RingParams =
        serde_json::from_value(serde_json::to_value(&hello.params).unwrap()).unwrap();
    let (_, new) = run_fresh(Workload::Ring(params));

    // The same hello but for its version: a fresh worker speaks version 2.
    let WorkerMessage::Hello(mut fresh) = new[0].clone() else {
        panic!("not a hello: {:?}", new[0]);
    };
    assert_eq!(fresh.protocol, PROTOCOL_VERSION);
    fresh.protocol = hello.protocol;
    assert_eq!(WorkerMessage::Hello(fresh), old[0], "hello");
    assert_eq!(new[1], old[1], "ready");
    let shape = |messages: &[WorkerMessage]| -> Vec<&'static str> {
        let mut kinds: Vec<_> = messages.iter().map(WorkerMessage::kind).collect();
        kinds.dedup();
        kinds
    };
    assert_eq!(shape(&new), shape(&old));
    let (WorkerMessage::Summary(a), WorkerMessage::Summary(b)) =
        (old.last().unwrap(), new.last().unwrap())
    else {
        unreachable!()
    };
    assert_eq!(a.figures.len(), b.figures.len());
    for (a, b) in a.figures.iter().zip(&b.figures) {
        assert_eq!((&a.name, &a.unit, a.better), (&b.name, &b.unit, b.better));
        if !a.name.starts_with("time_taken") && a.name != "messages_per_second" {
            assert_eq!(a.value, b.value, "{}", a.name);
        }
    }
}
