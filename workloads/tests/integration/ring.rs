//! The ring gives the original's final sum in every mode, on every runtime, and times one
//! lap a round in every mode.

use benchtop_workloads::report::{Metrics, StopSignal};
use benchtop_workloads::ring::{self, RingMetrics, RingMode, RingParams};

#[test]
fn final_sum_is_nodes_times_rounds_for_tell_and_ask_on_any_runtime() {
    for mode in [RingMode::Tell, RingMode::Ask] {
        for runtime_threads in [1, 2, 4] {
            for (num_nodes, num_rounds) in [(1, 1), (50, 20), (7, 300), (1000, 2)] {
                let params = RingParams {
                    num_nodes,
                    num_rounds,
                    mode,
                    runtime_threads,
                    ..RingParams::default()
                };
                let metrics = RingMetrics::register(&mut Metrics::new()).unwrap();
                let outcome = ring::run(&params, &metrics, &StopSignal::new()).unwrap();
                let hops = u64::from(num_nodes) * u64::from(num_rounds);
                assert_eq!(outcome.final_sum, hops, "{params:?}");
                assert!(!outcome.stopped, "{params:?}");
                let messages = if mode == RingMode::Ask {
                    2 * hops
                } else {
                    hops
                };
                assert_eq!(outcome.messages, messages, "{params:?}");
                assert_eq!(metrics.messages.get(), messages, "{params:?}");
                // A lap is one round forward in both modes: the same count.
                let mut laps = benchtop_workloads::protocol::new_latency_histogram();
                metrics.lap.swap(&mut laps);
                assert_eq!(laps.len(), u64::from(num_rounds), "{params:?}");
            }
        }
    }
}

#[test]
fn parameters_built_in_code_are_validated_too() {
    let params = RingParams {
        num_rounds: 0,
        ..RingParams::default()
    };
    let metrics = RingMetrics::register(&mut Metrics::new()).unwrap();
    let err = ring::run(&params, &metrics, &StopSignal::new())
        .unwrap_err()
        .to_string();
    assert_eq!(err, "--num-rounds 0: must be at least 1");
}
