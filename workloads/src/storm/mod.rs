//! `storm`: node processes storm the main node with messages, after the `factor` actor
//! framework's `example_ipc_remote_storm`.
//!
//! The main node (the worker) starts `num_nodes` node processes, each joined to it by a
//! Unix stream socket of its own (see [`crate::ipc`]), waits until every one has said
//! hello (`time_taken_to_spawn_worker_nodes`), tells each to begin
//! (`time_taken_to_schedule_storm`), and sums what arrives. Each node sends `num_msgs`
//! messages, each carrying the sum the node expects the main node to have reached from it
//! so far; the main node checks that value (a lost, repeated or reordered message is an
//! error) and adds one.
//!
//! - **ask** (the original's pattern, the default): each message waits for the main
//!   node's answer — the new sum — before the next is sent.
//! - **tell**: a node sends its messages one after another without waiting.
//!
//! A node times its own storm, from the main node's go to its last message sent (tell) or
//! answered (ask), and reports it with its final sum: the per-node lines
//! `time_taken_to_storm_from_node_id_<id>_` and `final_sum_from_node_id_<id>_`, in the
//! order the nodes finished, as the original printed them. Every node's sum must be
//! `num_msgs` and the total `num_nodes × num_msgs`.
//!
//! Metrics: counter `messages` (messages the main node has received) and histogram
//! `arrival` — for every message, the nanoseconds from the node's send to the main node's
//! read (both on CLOCK_MONOTONIC): how long messages queue on their way in, which grows
//! with the number of nodes storming one reader.

mod main_node;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::WorkloadError;
use crate::ipc::MAX_NODES;
use crate::protocol::{Better, Figure, Summary};
use crate::report::{Counter, IntervalHistogram, Metrics, StopSignal};
use crate::ring::RingMode;

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "storm";

/// Parameters of the storm, with the original benchmark's names.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct StormParams {
    /// Node processes storming the main node.
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_NODES)))]
    pub num_nodes: u32,
    /// Messages from each node.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_msgs: u32,
    /// How a node sends: ask waits for the main node's answer to each message (the
    /// original), tell does not; `--send-ask 1|0` is the same choice
    #[arg(long, visible_alias = "send-ask", value_enum, default_value_t = RingMode::Ask)]
    pub mode: RingMode,
    /// Fault injection: the main node panics after receiving this many messages, leaving
    /// its node processes behind (for the reaper)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_after: Option<u64>,
}

impl Default for StormParams {
    fn default() -> Self {
        StormParams {
            num_nodes: 100,
            num_msgs: 10_000,
            mode: RingMode::Ask,
            crash_after: None,
        }
    }
}

impl StormParams {
    /// The command-line arguments that parse back into these parameters, derived from
    /// the clap definition and the serde form ([`crate::params::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::params::args_of(self)
    }

    /// The parameters for `hello`, keyed by their command-line names: the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::params::json_of(self)
    }

    /// Messages of a complete run, `num_nodes × num_msgs`: the expected total sum.
    pub fn total_messages(&self) -> u64 {
        u64::from(self.num_nodes) * u64::from(self.num_msgs)
    }

    /// Checks what clap checks, for parameters built in code.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if !(1..=MAX_NODES).contains(&self.num_nodes) {
            return Err(WorkloadError::BadParam {
                name: "num-nodes",
                value: self.num_nodes.to_string(),
                reason: "a storm needs 1 to 1000 node processes",
            });
        }
        if self.num_msgs == 0 {
            return Err(WorkloadError::BadParam {
                name: "num-msgs",
                value: "0".to_owned(),
                reason: "must be at least 1",
            });
        }
        if self.crash_after == Some(0) {
            return Err(WorkloadError::BadParam {
                name: "crash-after",
                value: "0".to_owned(),
                reason: "must be at least 1",
            });
        }
        Ok(())
    }
}

/// The storm's metrics, registered in a worker's [`Metrics`].
#[derive(Debug, Clone)]
pub struct StormMetrics {
    /// `messages`: messages the main node has received.
    pub messages: Arc<Counter>,
    /// `arrival`: nanoseconds from a node's send to the main node's read, per message.
    pub arrival: Arc<IntervalHistogram>,
}

impl StormMetrics {
    /// Registers `messages` and `arrival`.
    pub fn register(metrics: &mut Metrics) -> Result<Self, WorkloadError> {
        Ok(StormMetrics {
            messages: metrics.counter(
                "messages",
                "messages",
                "messages the main node has received from its node processes so far",
            )?,
            arrival: metrics.histogram(
                "arrival",
                "time from a node's send of a message to the main node's read of it",
            )?,
        })
    }
}

/// One node's storm, as the node reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStorm {
    /// The node's id, 1 … num_nodes.
    pub node_id: u32,
    /// From the main node's go to the node's last message sent (tell) or answered (ask),
    /// on the node's clock.
    pub storm_time: Duration,
    /// The node's final sum: `num_msgs`.
    pub final_sum: u64,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters run.
    pub params: StormParams,
    /// From the first spawn until every node had said hello.
    pub spawn: Duration,
    /// Telling every node to begin.
    pub schedule: Duration,
    /// The nodes that finished, in the order they did.
    pub nodes: Vec<NodeStorm>,
    /// From the first go to the last node's end (or to the stop), on the main node.
    pub storm: Duration,
    /// The main node's sum over every node: `num_nodes × num_msgs` for a complete run.
    pub final_sum: u64,
    /// Whether the run was stopped before it completed.
    pub stopped: bool,
}

impl Outcome {
    /// Messages per second received by the main node during the storm.
    pub fn messages_per_second(&self) -> f64 {
        let secs = self.storm.as_secs_f64();
        if secs > 0.0 {
            self.final_sum as f64 / secs
        } else {
            0.0
        }
    }

    fn slowest(&self) -> Duration {
        self.nodes
            .iter()
            .map(|n| n.storm_time)
            .max()
            .unwrap_or_default()
    }

    fn fastest(&self) -> Duration {
        self.nodes
            .iter()
            .map(|n| n.storm_time)
            .min()
            .unwrap_or_default()
    }

    /// The summary figures: the original's (per-node times and sums summed up as the
    /// slowest and fastest node and the total), then `messages_per_second`.
    pub fn figures(&self) -> Vec<Figure> {
        vec![
            Figure::new("num_msgs", f64::from(self.params.num_msgs), ""),
            Figure::new("num_nodes", f64::from(self.params.num_nodes), ""),
            Figure::new(
                "time_taken_to_spawn_worker_nodes",
                self.spawn.as_secs_f64(),
                "s",
            )
            .better(Better::Lower),
            Figure::new(
                "time_taken_to_schedule_storm",
                self.schedule.as_secs_f64(),
                "s",
            )
            .better(Better::Lower),
            Figure::new(
                "time_taken_to_storm_slowest_node",
                self.slowest().as_secs_f64(),
                "s",
            )
            .better(Better::Lower),
            Figure::new(
                "time_taken_to_storm_fastest_node",
                self.fastest().as_secs_f64(),
                "s",
            )
            .better(Better::Lower),
            Figure::new("final_sum_from_all_nodes", self.final_sum as f64, ""),
            Figure::new(
                "time_taken_for_storm_to_complete",
                self.storm.as_secs_f64(),
                "s",
            )
            .better(Better::Lower),
            Figure::new(
                "messages_per_second",
                self.messages_per_second(),
                "messages/s",
            )
            .better(Better::Higher),
        ]
    }
}

/// The protocol summary of a run.
pub fn summary(outcome: &Outcome) -> Summary {
    Summary {
        figures: outcome.figures(),
        lines: summary_lines(outcome),
    }
}

/// The summary as the original printed it — `send_ask`, the counts, the spawn and
/// schedule times, then each node's time and sum in the order they finished — followed
/// by the totals.
pub fn summary_lines(outcome: &Outcome) -> Vec<String> {
    let send_ask = u8::from(outcome.params.mode == RingMode::Ask);
    let mut lines = vec![
        format!("send_ask: {send_ask}"),
        format!("num_msgs: {}", outcome.params.num_msgs),
        format!("num_nodes: {}", outcome.params.num_nodes),
        format!("time_taken_to_spawn_worker_nodes: {:?}", outcome.spawn),
        format!("time_taken_to_schedule_storm: {:?}", outcome.schedule),
    ];
    for node in &outcome.nodes {
        lines.push(format!(
            "time_taken_to_storm_from_node_id_{}_: {:?}",
            node.node_id, node.storm_time
        ));
        lines.push(format!(
            "final_sum_from_node_id_{}_: {}",
            node.node_id, node.final_sum
        ));
    }
    lines.extend([
        format!("time_taken_to_storm_slowest_node: {:?}", outcome.slowest()),
        format!("time_taken_to_storm_fastest_node: {:?}", outcome.fastest()),
        format!("final_sum_from_all_nodes: {}", outcome.final_sum),
        format!("time_taken_for_storm_to_complete: {:?}", outcome.storm),
        format!("messages_per_second: {:.0}", outcome.messages_per_second()),
    ]);
    lines
}

/// Runs the storm: starts the nodes (after `start`, so the sampler follows them), storms,
/// checks every sum, and ends the nodes. A stopped run returns its partial outcome.
///
/// The nodes run this program (`current_exe`) as `worker ipc-node`: call it from a
/// program that dispatches `worker <workload>` to [`crate::worker::run_worker`], on a
/// thread that lives as long as the run (PR_SET_PDEATHSIG follows the thread that started
/// a node).
pub fn run(
    params: &StormParams,
    metrics: &StormMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    params.validate()?;
    main_node::run(params, metrics, stop)
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parse(args: &[&str]) -> Result<StormParams, String> {
        crate::test_support::parse_params("storm", args)
    }

    #[test]
    fn defaults_are_the_originals_run() {
        let params = parse(&[]).unwrap();
        assert_eq!(params, StormParams::default());
        assert_eq!((params.num_nodes, params.num_msgs), (100, 10_000));
        assert_eq!(params.mode, RingMode::Ask);
    }

    #[test]
    fn send_ask_is_the_originals_spelling_of_the_mode() {
        assert_eq!(parse(&["--send-ask", "0"]).unwrap().mode, RingMode::Tell);
        assert_eq!(parse(&["--send-ask", "1"]).unwrap().mode, RingMode::Ask);
        assert_eq!(parse(&["--mode", "tell"]).unwrap().mode, RingMode::Tell);
        let err = parse(&["--send-ask", "2"]).unwrap_err();
        assert!(err.contains("possible values"), "{err}");
    }

    #[test]
    fn to_args_and_params_json_round_trip() {
        for params in [
            StormParams::default(),
            StormParams {
                num_nodes: 3,
                num_msgs: 7,
                mode: RingMode::Tell,
                crash_after: Some(5),
            },
        ] {
            let args = params.to_args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(parse(&args).unwrap(), params);
            let json = params.params_json();
            let via_serde: BTreeMap<String, serde_json::Value> =
                serde_json::from_value(serde_json::to_value(&params).unwrap()).unwrap();
            assert_eq!(json, via_serde);
            let back: StormParams =
                serde_json::from_value(serde_json::to_value(&json).unwrap()).unwrap();
            assert_eq!(back, params);
        }
    }

    #[test]
    fn bad_counts_are_refused_clearly() {
        let err = parse(&["--num-nodes", "0"]).unwrap_err();
        assert!(
            err.contains("--num-nodes") && err.contains("1..=1000"),
            "{err}"
        );
        let err = parse(&["--num-nodes", "5000"]).unwrap_err();
        assert!(err.contains("5000 is not in 1..=1000"), "{err}");
        let err = parse(&["--num-msgs", "0"]).unwrap_err();
        assert!(err.contains("--num-msgs"), "{err}");
        let err = parse(&["--crash-after", "0"]).unwrap_err();
        assert!(err.contains("--crash-after"), "{err}");
        let err = StormParams {
            num_nodes: 0,
            ..StormParams::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert_eq!(err, "--num-nodes 0: a storm needs 1 to 1000 node processes");
    }

    #[test]
    fn summary_lines_read_as_the_original_printed_them() {
        let outcome = Outcome {
            params: StormParams {
                num_nodes: 2,
                num_msgs: 10_000,
                ..StormParams::default()
            },
            spawn: Duration::from_micros(3_500),
            schedule: Duration::from_micros(40),
            nodes: vec![
                NodeStorm {
                    node_id: 2,
                    storm_time: Duration::from_millis(900),
                    final_sum: 10_000,
                },
                NodeStorm {
                    node_id: 1,
                    storm_time: Duration::from_millis(1_000),
                    final_sum: 10_000,
                },
            ],
            storm: Duration::from_secs(1),
            final_sum: 20_000,
            stopped: false,
        };
        assert_eq!(
            summary_lines(&outcome),
            [
                "send_ask: 1",
                "num_msgs: 10000",
                "num_nodes: 2",
                "time_taken_to_spawn_worker_nodes: 3.5ms",
                "time_taken_to_schedule_storm: 40µs",
                "time_taken_to_storm_from_node_id_2_: 900ms",
                "final_sum_from_node_id_2_: 10000",
                "time_taken_to_storm_from_node_id_1_: 1s",
                "final_sum_from_node_id_1_: 10000",
                "time_taken_to_storm_slowest_node: 1s",
                "time_taken_to_storm_fastest_node: 900ms",
                "final_sum_from_all_nodes: 20000",
                "time_taken_for_storm_to_complete: 1s",
                "messages_per_second: 20000",
            ]
        );
        // Every figure has its line.
        let lines = summary_lines(&outcome);
        for figure in outcome.figures() {
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("{}: ", figure.name))),
                "{}",
                figure.name
            );
        }
    }
}
